/* SPDX-License-Identifier: MIT */
/*
 * Charging and steering (quota/charge.c): what the allocator asks of the quotas. One owner for the
 * process's per-tier charges and limits, the threads' stocks of pre-charged bytes, the cgroup's
 * counters in the shared segment, and the choice of a tier for an allocation. The allocator
 * includes this header and nothing of the segment.
 */
#ifndef TA_CHARGE_H
#define TA_CHARGE_H

#include "base/base.h" /* and TA_LIMIT_HIGH, TA_LIMIT_MAX: the levels a charge is asked at */

/* This process's books of one tier. charged and limit are read on every charge, so they share a
 * line; the others have theirs. */
struct ta_tier_charge {
	/* runs cut (small objects, in use or free) + large objects + kept large pages + every
	 * thread's stock + what the process held at start (startup.c) + the resident pages of
	 * the program's own mappings at the last sample (ta_charge_mapped) */
	_Atomic uint64_t charged __attribute__((aligned(64)));
	_Atomic uint64_t limit; /* TIERALLOC_PROCESS_LIMIT or ctl "tier.<t>.limit"; UINT64_MAX */
	_Atomic uint64_t peak __attribute__((aligned(64)));
	_Atomic uint64_t exhausted;  /* charges refused at a limit: steered away from the tier */
	_Atomic uint64_t overflowed; /* every tier full: placed in this, the last, anyway */
};
extern struct ta_tier_charge ta_charges[TA_MAX_TIERS];

void ta_charge_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS]);
/* Charge bytes to the tier: this process's limit, then the cgroup's limit of this level in the
 * shared segment. False when either would be passed, unless force. */
bool ta_charge(unsigned tier, uint64_t bytes, int level, bool force);
void ta_uncharge(unsigned tier, uint64_t bytes);
/* After an allocation succeeded: raise the tier's peak to its charge. Not done when charging, so
 * that a request that then fails (a huge size) leaves no trace. */
void ta_charge_note_peak(unsigned tier);
/* Demotion moved bytes of this process's charge from one tier to another (both counters, this
 * process's and the cgroup's). */
void ta_charge_move(unsigned from, unsigned to, uint64_t bytes);
/* In a forked child: what it holds now is its parent's (copy-on-write), charged in the parent's
 * slot; what it gives back of it must not leave the segment (charge.c, inherited). */
void ta_charge_fork_inherit(void);
/* The worker's sample of the program's own mappings found resident[t] bytes in tier t: the
 * charge for them follows, by the difference from the last sample (docs/runtimes.md, step 2).
 * One caller at a time (the sampler's). */
void ta_charge_mapped(const uint64_t resident[TA_MAX_TIERS], unsigned ntiers);
/* Whether the tier takes more at this level now (a charge of nothing), and whether charges go to
 * a segment the processes of the cgroup share (a quota). */
bool ta_charge_room(unsigned tier, int level);
/* How many bytes the tier takes at this level now: the least of this process's limit and the
 * cgroup's share (with the agent's loan or yield), less what is charged and untracked there. */
uint64_t ta_charge_room_bytes(unsigned tier, int level);
bool ta_charge_shared(void);
/* What the last sample charged to the tier for those mappings. */
uint64_t ta_charge_mapped_now(unsigned tier);
/* Resident pages of the recorded mappings moved from tier from to tier to by this process: their
 * charge goes with them (ta_charge_move), and the figure the next sample is compared with. */
void ta_charge_mapped_moved(unsigned from, unsigned to, uint64_t bytes);

/* What the enforcement worker is asked to look at. enforce_wanted: under a real quota a tier
 * reached half its high share, this process holds 16 MiB there, or a tier was found full.
 * limits_wanted: the cgroup's limits went unread for two periods (ta_charge_note_limits, from
 * the allocation slow paths; the worker re-reads them and clears it). */
extern _Atomic bool ta_enforce_wanted;
extern _Atomic bool ta_limits_wanted;
void ta_charge_note_limits(void);
/* Wake this process's worker (one futex wake until it starts a pass; none when no worker runs
 * and nobody waits on the word). */
void ta_charge_kick(void);
/* The worker, starting a pass: kicks from now on wake it again. */
void ta_charge_kick_taken(void);

/*
 * A thread's stock: bytes of each tier charged in advance (TIERALLOC_CHARGE_BATCH at a time), as
 * the kernel's per-cpu memcg stock, so that most large allocations touch no shared line. At most
 * `high` (2 x batch) unused per tier; the rest goes back.
 */
struct ta_stock {
	int64_t bytes[TA_MAX_TIERS];
	int64_t high;
};
void ta_stock_init(struct ta_stock *s);
/* Charge bytes from s (refilled as needed); s NULL: straight to the tier. */
bool ta_stock_charge(struct ta_stock *s, unsigned tier, uint64_t bytes, int level, bool force);
void ta_stock_uncharge(struct ta_stock *s, unsigned tier, uint64_t bytes);
/* Everything in s back to the tiers (a thread's exit, ctl "thread.flush"). */
void ta_stock_return(struct ta_stock *s);
/* In a forked child, another thread's stock: that thread is gone, its stock with it. */
void ta_stock_forget(struct ta_stock *s);

/*
 * Steering: the fastest tier whose charge for the allocation stays within its high share, then
 * within its max share; when every tier is at its max, the last tier anyway (counted as
 * overflowed) unless TIERALLOC_ON_FULL=enomem. An explicit tier is charged where it lands.
 * place() tries tier t at a level: charges (forced if force) and allocates, returning the object,
 * or NULL with *refused set when the charge was refused (the tier is full: counted and the
 * worker kicked here) and clear when the memory itself could not be had.
 */
typedef void *(*ta_place_fn)(unsigned tier, int level, bool force, bool *refused, void *ctx);
struct ta_placed {
	unsigned tier;
	unsigned
	    how; /* 0: the preferred tier, 1: steered in (a faster tier was full), 2: explicit */
};
void *ta_steer(int want_tier, ta_place_fn place, void *ctx, struct ta_placed *out);

#endif /* TA_CHARGE_H */
