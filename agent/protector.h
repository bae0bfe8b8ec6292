/* SPDX-License-Identifier: MIT */
/* Policy 2's runner (agent/protector.c): tierallocd --protect CGROUP. */
#ifndef TA_PROTECTOR_H
#define TA_PROTECTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lease.h"
#include "policy.h"
#include "protect.h"
#include "status.h"
#include "steals.h"

struct ta_protector_opts {
	uint64_t interval_ms;	/* sample at least this often */
	uint64_t expiry_ms;	/* a request not renewed for this long is undone */
	struct ta_lease *lease; /* the agent's (lease.h): each raise is leased */
	bool print;
	/* The kernel's word on reclaim taking the victims' pages (BPF), or NULL: then stealing
	 * is seen from memory.current's fall alone. The protector watches its victims with it;
	 * the caller closes it after ta_protector_stop(). */
	struct ta_steals *steals;
};

/* Open the victims' files (CGROUP: a path under /sys/fs/cgroup, or absolute) and start
 * sampling on its own thread: 0 and the policy in *out (no round; its status is a line per
 * victim: memory.low, the original, the usage and the cap as of the last sample, the counters,
 * the seconds since the last write; its metrics tieralloc_agent_protect_*; its stop restores
 * the original memory.low values and prints the counters), or -1 with the reason in err. */
int ta_protector_start(const char *const *cgroups, unsigned n, const struct ta_protector_opts *o,
		       struct ta_agent_policy *out, char *err, size_t errlen);

#endif
