/* SPDX-License-Identifier: MIT */
/* Policy 2's runner (agent/protector.c): tierallocd --protect CGROUP. */
#ifndef TA_PROTECTOR_H
#define TA_PROTECTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lease.h"
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

struct ta_protector;

/* Open the victims' files (CGROUP: a path under /sys/fs/cgroup, or absolute) and start
 * sampling: the protector, or NULL with the reason in err. */
struct ta_protector *ta_protector_start(const char *const *cgroups, unsigned n,
					const struct ta_protector_opts *o, char *err,
					size_t errlen);
/* The counters, a line per victim. */
void ta_protector_report(const struct ta_protector *p, FILE *f);
/* Each victim's line of the status file (status.h): memory.low, the original, the usage and the
 * cap as of the last round, the counters, the seconds since the last write. 0, or -1 if f
 * failed. */
int ta_protector_status(struct ta_protector *p, FILE *f);
/* Its gauges and counters per victim in Prometheus' text format (tieralloc_agent_protect_*):
 * 0, or -1 if f failed. */
int ta_protector_metrics(struct ta_protector *p, FILE *f);
/* Stop sampling, restore the original memory.low values (the lease stays the caller's to
 * stop). NULL: nothing. */
void ta_protector_stop(struct ta_protector *p);

#endif
