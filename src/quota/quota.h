/* SPDX-License-Identifier: MIT */
/*
 * The quota layer (src/quota/) as the layers above it see it: joining the cgroup's segment, the
 * limits' refresh, the worker's wake word, what enforcement learns of the cgroup and tells it,
 * the start-up charge. The allocator needs only quota/charge.h; the segment's own structures are
 * quota/shm.h's, for this layer alone (and the tools that read segments).
 */
#ifndef TA_QUOTA_H
#define TA_QUOTA_H

#include "base/base.h"
#include "quota/charge.h"

/* The period of the cgroup's readings (one process per cgroup) and of the worker's passes. */
#define TA_ENFORCE_PERIOD_NS (200 * 1000 * 1000ull)

/* ---- quota.c: joining the cgroup's segment ---- */
/* Join the cgroup's shared segment (unless TIERALLOC_SHM_NAME=off) after reading the quota
 * options; on failure one warning, and the process keeps its own accounting. */
void ta_quota_attach(void);

/* ---- shm.c: the cgroup's segment ---- */
/* The word this process's enforcement worker sleeps on: its slot's (a shared futex, so that the
 * cgroup's other processes and the agent can wake it), or a private one without a segment. */
_Atomic uint32_t *ta_shm_wake_word(int *futex_flags);
/* Wake the enforcement workers of the cgroup's other processes (their slots' futex words). */
void ta_shm_wake_others(void);
/* fork: the child takes a slot of its own, empty. */
void ta_shm_fork_child(void);

/* ---- limits.c: the cgroup's limits in the segment ---- */
/* Re-read the cgroup's limits at most once a second per cgroup (now: unconditionally). Only at
 * start-up and from the enforcement pass (the worker's, or inline when TIERALLOC_ENFORCE=inline
 * asks for that): never on a program thread's allocation otherwise. */
void ta_shm_refresh_limits(bool now);
/* No process of the cgroup re-read the limits for two periods: this one's worker should (a load
 * and a clock read; what allocation slow paths ask). */
bool ta_shm_limits_stale(void);
/* Re-readings of the limits made by the calling thread (the tests check that malloc makes none). */
unsigned ta_shm_limit_reads_here(void);

/* ---- observe.c: what the enforcement pass learns of the cgroup, and tells it ---- */
/* Whether this process is to write a configuration line: false when another process of its
 * cgroup wrote the same one within TA_SHM_SAID_WINDOW_S (ta_config_release's filter). */
bool ta_quota_first_to_say(const char *line, size_t len);
/* What the planner works from (enforce/enforce.c, ta_enforce_plan). */
struct ta_enforce_in {
	unsigned ntiers;
	uint64_t observed[TA_MAX_TIERS];   /* the cgroup's bytes on each tier's nodes */
	uint64_t limit[TA_MAX_TIERS][4];   /* TA_LIMIT_* per tier; high and max with the terms */
	uint64_t loan[TA_MAX_TIERS];	   /* the agent's live loan, included in limit[] */
	uint64_t yielded[TA_MAX_TIERS];	   /* the live yield, taken from limit[] (to its floor) */
	uint64_t cg_charged[TA_MAX_TIERS]; /* every process's charge */
	uint64_t my_charged[TA_MAX_TIERS]; /* this process's */
	uint64_t current;		   /* memory.current, UINT64_MAX: unknown */
	bool gated[TA_MAX_TIERS];	   /* the gate of the last pass (hysteresis) */
	/* The agent saw the kernel promote into the tier since the last pass. */
	bool promoting[TA_MAX_TIERS];
	uint64_t cg_high; /* min(memory.high, memory.max), UINT64_MAX: none */
};

/* Whether this process charges a shared segment (false: its own accounting). */
bool ta_quota_active(void);
/* The cgroup's readings so far: a new one to act on when it changed. */
uint64_t ta_quota_observe_gen(void);
/* The agent's alarm, if it is new: one process of the cgroup takes each. */
bool ta_quota_take_alarm(void);
/* One process per period reads the cgroup's usage per tier and publishes it (or whoever took an
 * alarm, at once); false when another one has the turn. */
bool ta_quota_observe(bool now_please);
/* Write bytes to the cgroup's memory.reclaim, counted on tier's record: 0, or -errno (-ENOENT:
 * no memory.reclaim, said once per cgroup). */
int ta_quota_reclaim(uint64_t bytes, unsigned tier);
/* The figures the planner works from: the last reading, limits, charges, the agent's news. */
void ta_quota_view(struct ta_enforce_in *in);
/* Which tiers' promotions are stopped, for tieralloc-stat. */
void ta_quota_publish_gated(const bool gated[TA_MAX_TIERS]);
/* This process's bytes by heat at its last access sample, for tieralloc-stat (zeroed with its
 * slot); and what its exchange moved up into a tier and down out of it. */
void ta_quota_publish_heat(const uint64_t hot[TA_MAX_TIERS], const uint64_t cold[TA_MAX_TIERS]);
void ta_quota_count_exchange(unsigned tier, uint64_t up, uint64_t down);
/* Alarms this process took. */
extern _Atomic uint64_t ta_agent_alarms;
/* The container's figure `field` of tier t (ctl "cgroup.tier.<t>.<field>": a limit, a counter,
 * or the agent's "agent.promoted" and the like): 0, or -ENOENT (unknown, no segment, no agent). */
int ta_quota_tier_field(unsigned t, const char *field, uint64_t *out);

/* ---- startup.c: the memory a process holds when tieralloc starts, charged to its tier ---- */
/* Charge it (forced) to the tier its pages sit on; returns the bytes. Once, at the end of init. */
uint64_t ta_startup_charge(void);
uint64_t ta_startup_bytes(unsigned tier);
/* Around memkind's late start (one thread, once): what it faulted in is charged the same way,
 * at most 2 MiB and within the tier's max; returns the bytes. */
void ta_startup_late_begin(void);
uint64_t ta_startup_late_end(void);
/* Anonymous resident bytes from /proc/<pid>/statm's text (resident - shared), 0 if malformed. */
uint64_t ta_statm_anon(const char *statm, uint64_t page_size);

/* /proc/<pid>/stat start time (clock ticks since boot), 0 if unreadable: what a slot, or the
 * agent's access file, names a process by beside its pid (shm.c). */
uint64_t ta_proc_start_time(int pid);

#endif /* TA_QUOTA_H */
