/* SPDX-License-Identifier: MIT */
/*
 * The per-cgroup shared segment (shm.c, with its loans: loan.c, and charges: charge.c) and the
 * per-tier quota configuration (quota.c): the
 * quota layer's own (and the tools' that read segments), never the allocator's.
 */
#ifndef TA_SHM_H
#define TA_SHM_H

#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"
#include "tieralloc/shm_abi.h"

struct ta_shm {
	_Atomic bool active; /* attached and charging; false: local accounting only */
	bool created;
	struct ta_shm_header *hdr;
	struct ta_shm_tier *tiers;
	struct ta_shm_slot *slots;
	struct ta_shm_slot *mine;
	struct ta_shm_agent *agent;   /* NULL in a segment made before ABI minor 2 */
	struct ta_shm_access *access; /* NULL in a segment made before ABI minor 3 */
	struct ta_shm_lend *lend;     /* NULL in a segment made before ABI minor 5 */
	size_t size;
	/* Copied from the header once it is validated: every walk and every computed address is
	 * bounded by these, never by the live header, which any process of the user may rewrite. */
	unsigned nslots;	   /* max_slots, at most TA_SHM_MAX_SLOTS */
	uint32_t slot_size;	   /* at least sizeof(struct ta_shm_slot) */
	unsigned ntiers;	   /* the topology's, which the segment's ntiers matched */
	uint32_t mine_pid;	   /* what our slot's pid must say */
	struct ta_shm_header snap; /* the header as validated: its fixed fields are re-checked */
	_Atomic uint64_t reclaimed_ns; /* when this process last looked for dead slots */
	/* One thread of the process walks the slots at a time (the worker, or an allocating
	 * thread in inline mode): marked_since is that walker's alone. */
	_Atomic bool reclaiming;
	/* When this process first saw each slot held by the reclaim marker (0: not marked). */
	uint64_t marked_since[TA_SHM_MAX_SLOTS];
	char name[160];
	struct ta_cgroup cg;
};

extern struct ta_shm ta_shm;

/* ---- shm.c ---- */
/* From the text of /proc/<pid>/stat: the state letter (field 3) and the start time (field 22, in
 * clock ticks since boot); false when the text is not such a line. A slot is its process's while
 * both pid and start time match (shm_abi.c: the library, the agent and tieralloc-stat read it). */
bool ta_proc_stat_parse(const char *text, char *state, uint64_t *start_time);
/* Check a mapped segment's header against its size: 0, or -EINVAL with a reason. */
int ta_shm_validate(const void *seg, size_t size, const char **why);
/* A validated segment's agent block; NULL when it has none (made before minor 2) or a bad one. */
struct ta_shm_agent *ta_shm_agent_block(const struct ta_shm_header *h, size_t size);
/* This process's bytes by heat at its last access sample, per tier (access block, minor 3). */
void ta_shm_publish_heat(const uint64_t hot[], const uint64_t cold[], unsigned n);
/* The exchange moved bytes up into tier and down out of it. */
void ta_shm_count_exchange(unsigned tier, uint64_t up, uint64_t down);
/* "hot", "cold" (summed over live slots), "promoted", "exchanged_down"; -ENOENT without. */
int ta_shm_access_field(const struct ta_shm *shm, unsigned tier, const char *field, uint64_t *out);
/* The access block of a validated header, or NULL (before minor 3, or out of bounds). */
struct ta_shm_access *ta_shm_access_block(const struct ta_shm_header *h, size_t size);
/* The lending block of a validated header, or NULL (before minor 5, or out of bounds). */
struct ta_shm_lend *ta_shm_lend_block(const struct ta_shm_header *h, size_t size);
/* "/tieralloc-v1-<cgroup key>-t<tiers fingerprint>", or the override. */
void ta_shm_name(const struct ta_cgroup *cg, const struct ta_topology *topo, const char *override,
		 char *buf, size_t n);
/* Create or attach, claim a slot. On failure: one warning, ta_shm stays inactive. */
int ta_shm_attach(const char *name, const struct ta_cgroup *cg, const struct ta_topology *topo);
/* Take back the charges of slots whose process is gone, and of slots that a reclaimer left
 * marked for more than 2 s; repair tier counters that no process could hold (a wrapped or
 * forged charge). Returns how many slots were taken back. */
unsigned ta_shm_reclaim_dead(struct ta_shm *shm);
/* Is the segment still as it was validated (not truncated, header fields unchanged, our slot
 * ours)? If not, give it up: one warning, local accounting, the mapping replaced by private
 * memory. At most every 200 ms unless now. Returns whether the process still uses it. */
bool ta_shm_check(bool now);

/* ---- loan.c: the agent's loans and yields ---- */
/* The lending round's terms for tier t of this process's segment now: the loan and what the
 * cgroup yielded (minor 6); both 0 without a segment or block, or once expired. Whether either
 * is not 0. */
bool ta_shm_lend_terms(unsigned t, uint64_t *loan, uint64_t *yielded);
/* A tier's high or max under the terms: raised by the loan (without wrapping), lowered by the
 * yield but never by it below floor. */
uint64_t ta_shm_lend_limit(uint64_t limit, uint64_t loan, uint64_t yielded, uint64_t floor);
/* The floor a yield stops at: the larger of the tier's low and min. */
uint64_t ta_shm_lend_floor(const uint64_t limit[TA_NLIMITS]);

/* ---- charge.c: the cgroup's counters ---- */
/* Charge the cgroup's tier against its limit of this level (TA_LIMIT_HIGH or TA_LIMIT_MAX). */
bool ta_shm_charge(unsigned tier, uint64_t bytes, int level, bool force);
void ta_shm_uncharge(unsigned tier, uint64_t bytes);

/* ---- quota.c: TIERALLOC_TIER_LIMITS, TIERALLOC_SPLIT ---- */
int ta_quota_init(const struct ta_topology *topo, struct ta_options *opts);
/* A fixed value for tier t's limit kind k from TIERALLOC_TIER_LIMITS: true and *out, or false. */
bool ta_quota_override(unsigned t, unsigned k, uint64_t *out);
/* The share used to split the cgroup's limits: TIERALLOC_SPLIT or the tier's capacity share. */
uint32_t ta_quota_share(unsigned t);
/* This process's options set tier limits or shares of its own. */
bool ta_quota_customised(void);

#endif /* TA_SHM_H */
