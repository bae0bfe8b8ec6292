/* SPDX-License-Identifier: MIT */
/*
 * The enforcement layer (src/enforce/): the worker thread, the planner, the cold ranking,
 * demotion and the promotion gate. It may call the allocator (ranges, chunks, large objects) and
 * the quota layer's functions (quota/quota.h), never touch the segment itself.
 */
#ifndef TA_ENFORCE_H
#define TA_ENFORCE_H

#include "alloc/alloc.h"
#include "base/base.h"
#include "quota/quota.h"

/* ---- access.c: which ranges were written lately (soft-dirty bits) ---- */
#define TA_HEAT_HOT  501u /* heat above it: more than half the range written lately */
#define TA_HEAT_COLD 301u /* heat below it: cold enough to make room for hotter memory */
#define TA_HEAT_MAX  1001u
/* Moved by us since the last sample: a migration can leave pages soft-dirty (a huge page split on
 * the way sets the bit on every part), so the next sample says nothing; unknown after it. */
#define TA_HEAT_MOVED 0xffffu
_Static_assert(TA_HEAT_MOVED == TA_MAPS_HEAT_MOVED, "maps.c marks moved windows the same");
struct ta_access_tier {
	_Atomic uint64_t hot, cold;	 /* present bytes by heat, at the last sample */
	_Atomic uint64_t unknown;	 /* ... of ranges new or moved since the sample before */
	_Atomic uint64_t promoted;	 /* bytes moved up into this tier, hottest first */
	_Atomic uint64_t exchanged_down; /* bytes moved down out of it to make that room */
};
extern struct ta_access_tier ta_access_tiers[TA_MAX_TIERS];
extern _Atomic uint64_t ta_access_samples;
extern _Atomic uint64_t ta_access_sample_ns;
extern _Atomic uint64_t ta_access_period_ns;
/* Present and soft-dirty pages among pagemap entries. */
void ta_access_count(const uint64_t *entries, size_t n, uint64_t *present, uint64_t *written);
/* A range's heat after one sample (prev 0: unknown). */
uint32_t ta_access_heat(uint32_t prev, uint64_t present, uint64_t written);
/* The same from a part already in per mille (0..1000). */
uint32_t ta_access_heat_part(uint32_t prev, uint32_t part);
/* The same from the agent's file: up at once, down by half a file (access.c). */
uint32_t ta_access_heat_agent(uint32_t prev, uint32_t part);
/* Whether a heat is known (a sample of pages that existed at the clear before it). */
static inline bool ta_heat_known(uint32_t heat)
{
	return heat != 0 && heat <= TA_HEAT_MAX;
}
bool ta_access_is_hot(uint32_t heat);
/* From the worker: sample every range when a period has passed; true when it did. */
bool ta_access_tick(void);
/* Whether heats mean something (the source works and one period was sampled). */
bool ta_access_active(void);
/* "soft-dirty", "age", "age (why soft-dirty is not there)", or with TIERALLOC_ACCESS=agent
 * "agent (damon, with soft-dirty)" or "soft-dirty (agent: why its file is not used)". */
const char *ta_access_source(void);
void ta_access_fork_child(void);

/* ---- cold.c: the order in which memory is demoted and promoted ---- */
/*
 * The policy ranks ranges: heat first (access.c; unsampled ranges as hottest), then age, older
 * colder. With no access source every heat is unknown and age alone decides.
 */
struct ta_cold_policy {
	const char *name;
	uint64_t (*score)(const struct ta_cold_range *r);
};
extern const struct ta_cold_policy *ta_cold_policy;
/* Up to max ranges of the tier, coldest first (hottest first if hottest). Large objects returned
 * are marked busy and must be handed back with ta_cold_release. */
unsigned ta_cold_collect(unsigned tier, struct ta_cold_range *out, unsigned max, bool hottest);
/* Done with a large range: moved_to >= 0 when its pages now sit on that tier; relaxed 1 or 0
 * when the gate relaxed or bound it, -1 unchanged. Frees it if it was freed meanwhile. */
void ta_cold_release(struct ta_cold_range *r, int moved_to, int relaxed);
/* Large objects of the tier on record (for the promotion gate). Marked busy, like collect. */
unsigned ta_cold_large_all(unsigned tier, struct ta_cold_range *out, unsigned max);

/* ---- demote.c ---- */
/* Demote up to bytes of this process's memory from tier from to tier to, coldest first;
 * returns the bytes of charge moved. */
uint64_t ta_demote(unsigned from, unsigned to, uint64_t bytes);
/* Move one collected range from tier from to tier to, charge and statistics with it, and release
 * it; the charge moved, 0 when it could not be moved. */
uint64_t ta_move_range(struct ta_cold_range *r, unsigned from, unsigned to);

/* ---- exchange.c: hot memory of lower tiers up, within the faster tier's share ---- */
/* When heats mean something and a quota applies: ta_exchange_tiers. */
uint64_t ta_exchange(void);
/* Every tier in turn from the fastest: the bytes promoted into it. */
uint64_t ta_exchange_tiers(void);

/* ---- fill.c: the program's own mapped pages up into a faster tier with room ---- */
/* Room left below a share when filling (fill.c says why). */
#define TA_FILL_SLACK ((uint64_t)4 << 20)
/* Under a quota, for a program with mappings of its own: ta_fill_tiers. */
uint64_t ta_fill(void);
/* Every tier in turn from the fastest: the bytes moved up into it. */
uint64_t ta_fill_tiers(void);

/* ---- enforce.c: reconcile with the kernel, demote, reclaim, gate (issue 5) ---- */
struct ta_enforce_plan {
	uint64_t demote[TA_MAX_TIERS][TA_MAX_TIERS]; /* this process's bytes from a to b */
	uint64_t reclaim[TA_MAX_TIERS];		     /* its bytes for memory.reclaim, per tier */
	uint64_t reclaim_total;			     /* ... for the cgroup's total */
	/* Promotions into the tier must stop: it is within half a gate margin (ta_shm_gate_margin)
	 * of its high share (and reopens only below the whole margin, so the gate does not flap).
	 */
	bool gate[TA_MAX_TIERS];
};
/* What this process should do, from a reading: pure, unit-tested. */
void ta_enforce_plan(const struct ta_enforce_in *in, struct ta_enforce_plan *out);
/* One pass: observe (one process per period and cgroup), plan, act. Returns false when there
 * was nothing to act on (no new reading, no quotas). */
bool ta_enforce_pass(void);
/* From the allocation slow paths, with no allocator lock held: start the worker, or run a pass
 * inline (TIERALLOC_ENFORCE=inline), as the mode says. */
void ta_enforce_poke(void);
/* Whether the worker runs whole passes (or only keeps the limits fresh), as the mode and the
 * need say. */
bool ta_enforce_worker_passes(void);
void ta_enforce_fork_child(void);

/* ---- gate.c: the promotion gate (TIERALLOC_PROMOTION) ---- */
/* gate[t]: promotions into tier t must stop. Returns true when a gate closed (and took back
 * what the kernel had promoted). */
bool ta_gate_update(const bool gate[TA_MAX_TIERS]);

/* ---- worker.c: the per-process enforcement thread ---- */
void ta_worker_start(void);
void ta_worker_fork_child(void);

#endif /* TA_ENFORCE_H */
