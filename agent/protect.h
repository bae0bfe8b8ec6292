/* SPDX-License-Identifier: MIT */
/*
 * Policy 2 (issue 17, seed 004): dynamic memory.low for a victim that reclaim steals from.
 * protect.c is the decision, pure (the unit tests drive it with fixtures); protector.c runs it
 * against the cgroup files, keeps the requests' lease and restores memory.low when they expire.
 */
#ifndef TA_PROTECT_H
#define TA_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TA_PROTECT_MAX	8    /* --protect cgroups */
#define TA_PROTECT_PAGE 4096 /* memory.low's unit: the kernel keeps it in pages */

struct ta_protect_cfg {
	uint64_t fall_rate;	 /* bytes/s: usage falling this fast is being stolen from */
	uint64_t headroom_min;	 /* bytes requested above the usage followed, at least */
	unsigned headroom_shift; /* and at least usage >> shift */
	uint64_t hold_ns;	 /* after a fall, the peak is held this long */
	uint64_t decay_ns;	 /* then the gap between peak and usage halves every decay_ns */
	uint64_t step;		 /* writes smaller than this are skipped (decay only) */
};
extern const struct ta_protect_cfg ta_protect_default_cfg;

/* Why a value is written (the log's and the counters' words). */
enum ta_protect_why {
	TA_PROTECT_NONE = 0, /* nothing to write */
	TA_PROTECT_GROW,     /* usage (plus headroom) passed what is requested */
	TA_PROTECT_DECAY,    /* the victim shrank on its own: the request follows it down */
	TA_PROTECT_NWHY
};

struct ta_protect_state {
	uint64_t original;	/* memory.low before the agent raised it: never gone below */
	uint64_t written;	/* what memory.low holds now, as far as the policy knows */
	uint64_t peak;		/* the usage protection follows (held after a fall, decays) */
	uint64_t last_usage;	/* the previous sample */
	uint64_t last_ns;	/* its time (0: none yet) */
	uint64_t hold_until_ns; /* the peak is held until then (a fall was seen) */
	uint64_t decayed_ns;	/* when the gap last halved */
	/* Counters. */
	uint64_t samples, falls, capped, writes[TA_PROTECT_NWHY];
	uint64_t steals; /* times the kernel said reclaim took its pages (ta_protect_stolen) */
};

/* A fresh state for a victim whose memory.low is `original` now. */
void ta_protect_init(struct ta_protect_state *s, uint64_t original);

/* One sample of the victim's memory.current at now_ns, with cap the most the parent affords
 * (ta_protect_cap): the memory.low to write in *value and why, or TA_PROTECT_NONE. Never below
 * the original, never above the cap (unless the original is). s->written is updated as if the
 * write succeeded. */
enum ta_protect_why ta_protect_sample(const struct ta_protect_cfg *cfg, struct ta_protect_state *s,
				      uint64_t usage, uint64_t cap, uint64_t now_ns,
				      uint64_t *value);

/* The kernel saw reclaim take pages from the victim's own lists at now_ns (the BPF source,
 * steals.c): stealing, whatever the rate of the fall, so the peak is held as after a fast fall.
 * A slow steal would otherwise pass for the victim's own shrinking and the protection decay. */
void ta_protect_stolen(const struct ta_protect_cfg *cfg, struct ta_protect_state *s,
		       uint64_t now_ns);

/* The most a child may claim within its parent's budget: the parent's protection (the larger of
 * its memory.low and memory.min; UINT64_MAX for the root cgroup, which has neither, or "max")
 * less what the siblings claim (each the smaller of its memory.low and usage, as the kernel's
 * effective protection counts them). */
uint64_t ta_protect_cap(uint64_t parent_budget, const uint64_t *sibling_claims, unsigned n);

#endif
