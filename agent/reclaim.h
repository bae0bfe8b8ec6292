/* SPDX-License-Identifier: MIT */
/*
 * Policy 1, reclaim for priority (--reclaim-for-priority, seed 001): pressure.c decides (pure,
 * tested on fixtures), reclaim.c samples the cgroups and writes memory.reclaim and the caps.
 */
#ifndef TA_AGENT_RECLAIM_H
#define TA_AGENT_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h" /* struct ta_agent_priorities */

/* ---- pressure.c: reclaim for priority (--reclaim-for-priority, seed 001), pure ---- */
#define TA_PRESS_MAX	     256	   /* cgroups in one plan */
#define TA_PRESS_CAP_MARGIN  (16ull << 20) /* a cap's distance above a floor (pressure.c) */
#define TA_PRESS_CAP_DESCENT (4ull << 20)  /* a cap lowered at most this much a write */
/* What one cgroup's control files said at one round; cumulative counters except current, low
 * and min. */
struct ta_press_sample {
	uint64_t current;  /* memory.current */
	uint64_t low, min; /* memory.low, memory.min: the floor reclaim never goes below */
	uint64_t high;	   /* memory.high (UINT64_MAX: max) */
	uint64_t psi_us;   /* memory.pressure "some" total, microseconds stalled */
	uint64_t events;   /* memory.events high + max */
	uint64_t refaults; /* memory.stat workingset_refault_anon + _file, pages */
	uint64_t steered;  /* times its segment steered away from the fast tier (0 without one) */
};
enum {
	TA_PRESS_PSI = 1u << 0,	    /* stalled at least psi_us this round */
	TA_PRESS_EVENTS = 1u << 1,  /* hit memory.high or memory.max */
	TA_PRESS_REFAULT = 1u << 2, /* refaulted at least `refaults` pages */
	TA_PRESS_STEERED = 1u << 3, /* its allocations were steered below the fast tier */
	TA_PRESS_LINGER = 1u << 4,  /* none of those now, but one within the last `hold` rounds */
	TA_PRESS_GROWING =
	    1u << 5, /* growing into its parent's limit: full within `ahead` rounds */
};
struct ta_press_cg {
	/* In. */
	uint32_t group;	   /* siblings (children of one parent) share a group */
	uint32_t priority; /* higher first */
	bool have_prev;	   /* prev holds the last round's sample */
	uint64_t room;	   /* its parent's limit (memory.max, memory.high) less its usage;
			    * UINT64_MAX: none or unknown */
	unsigned calm;	   /* in and out: rounds since it was last pressured (0: this one) */
	struct ta_press_sample prev, now;
	uint64_t cap;	    /* the memory.high the agent holds it at (UINT64_MAX: none) */
	uint64_t high_orig; /* its memory.high before the agent's cap (UINT64_MAX: max) */
	/* Out. */
	unsigned why;	  /* TA_PRESS_* when it is pressured, 0 otherwise */
	uint64_t reclaim; /* bytes to take from it this round */
	int for_whom;	  /* the pressured cgroup it is reclaimed for (index), -1: none */
	uint64_t cap_to;  /* the cap from now on: == cap unchanged, UINT64_MAX: lift it */
};
struct ta_press_config {
	uint64_t psi_us;   /* stall per round that counts as pressure */
	uint64_t refaults; /* refaulted pages per round that count as pressure */
	uint64_t step;	   /* bytes reclaimed at most per round and pressured group */
	unsigned hold;	   /* rounds a cgroup stays pressured after its last signal */
	/* Ahead of pressure: a cgroup that grew at least grow_min bytes this round, at a pace that
	 * fills its parent's room within `ahead` rounds, is pressured (0: off). */
	uint64_t grow_min;
	unsigned ahead;
	/* Caps: a cgroup reclaimed is held at memory.high = its usage less what it gives, so that
	 * it cannot fault back at once what it gave; the cap rises again as the parent has room
	 * beyond a step, once no higher priority of its group is pressured. */
	bool cap;
};
/* One round: which cgroups are pressured, and how much to reclaim of which lower-priority
 * siblings: within each group, for its highest-priority pressured cgroup, at most step bytes,
 * lowest priority first (then the one with the most above its floor), none below
 * max(low, min); with caps, what each cap becomes. Returns the number of cgroups to reclaim
 * from. */
unsigned ta_press_plan(struct ta_press_cg *cg, unsigned n, const struct ta_press_config *cfg);
/* The memory.high to write next on the way to cap, the value in force being held and the
 * cgroup's usage usage: cap itself once it is within TA_PRESS_CAP_DESCENT below the lesser of
 * the two (or above them), otherwise that lesser less TA_PRESS_CAP_DESCENT (pressure.c). */
uint64_t ta_press_cap_next(uint64_t held, uint64_t usage, uint64_t cap);

/* ---- reclaim.c: --reclaim-for-priority, the agent's side ---- */
struct ta_reclaim_config {
	uint64_t step;	   /* bytes reclaimed at most per round and pressured parent */
	uint64_t psi_us;   /* PSI "some" stall per round that counts as pressure */
	uint64_t refaults; /* refaulted pages per round that count as pressure */
	unsigned hold;	   /* rounds a cgroup stays pressured after its last signal */
	uint64_t grow_min; /* ahead of pressure (ta_press_config): 0 for off */
	unsigned ahead;
	uint64_t interval_ns; /* a round's length: a memory.high write is cut short after one */
	struct ta_agent_priorities priorities;
};
/* The policy's timing for rounds of interval_ms, the rest zero: pressure is a stall of 1% of the
 * interval or 1 MiB refaulted, and holds a second (two rounds at least) after the last; ahead of
 * it, growth of 1 MiB a round or more that would fill the parent within half a second (two rounds
 * at least). */
void ta_reclaim_tune(struct ta_reclaim_config *cfg, uint32_t interval_ms);
/* How long a cap outlives the agent's last round: eight intervals, 2 s at least. */
uint64_t ta_reclaim_expiry_ns(uint32_t interval_ms);
struct ta_lease;
struct ta_agent_policy;
struct ta_reclaim_options {
	struct ta_reclaim_config cfg; /* every round's */
	bool cap;		/* hold victims at memory.high (pressure.c), leased (lease.h) */
	uint64_t expiry_ns;	/* a cap not renewed for this long is restored by the keeper */
	struct ta_lease *lease; /* the agent's; NULL: no caps */
};
/* libcgroup started and the policy in *out (policy.h): 0, or -1 with a line in err. Caps need
 * cgroup v2 and the lease keeper; without them the policy goes on with memory.reclaim alone,
 * and says so. Its round samples, decides (ta_press_plan), writes memory.reclaim and the caps,
 * and says so; its status is a line per cgroup it knows (priority, why it is pressured now, the
 * counters, the seconds since it was last asked to give memory and the priority it gave for);
 * its stop lifts every cap. */
int ta_reclaim_start(const struct ta_reclaim_options *o, struct ta_agent_policy *out, char *err,
		     size_t errlen);

#endif
