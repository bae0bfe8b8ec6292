/* SPDX-License-Identifier: MIT */
/* tierallocd's command line (options.c): what main() is told to do, checked before anything
 * needs root. */
#ifndef TA_AGENT_OPTIONS_H
#define TA_AGENT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "protect.h"
#include "tieralloc/shm_abi.h"

/* Where the agent writes files of its own, beside TA_AGENT_RUN_DIR (policies.h); and the kernel
 * files of options its systemd unit does not give. usage() lists them all, which
 * tests/tools/test_unit_security.sh checks the unit against. */
#define SHM_DIR	    "/dev/shm"
#define CGROUP_DIR  "/sys/fs/cgroup"
#define DAMON_ADMIN "/sys/kernel/mm/damon/admin"

struct ta_agent_options {
	double interval, rescan; /* seconds */
	bool print, once, stats, metrics_any, damon, lend, reclaim;
	uint64_t lend_reserve; /* bytes */
	uint64_t reclaim_step; /* bytes */
	bool reclaim_no_cap;
	struct ta_agent_priority priorities[TA_AGENT_MAX_PRIORITIES];
	char priority_paths[TA_AGENT_MAX_PRIORITIES][TA_SHM_PATH_MAX + 1]; /* canonical */
	unsigned npriorities;
	uint32_t priority_ceiling; /* TIERALLOC_PRIORITY counts up to this */
	const char *state_dir;	   /* the lock and the caps' and protections' state files */
	const char *btf, *metrics, *textfile, *status;
	const char *protect[TA_PROTECT_MAX];
	unsigned nprotect;
	unsigned protect_interval_ms;
	double protect_expiry; /* seconds */
};

/* The command line into o: -1 to go on, else the exit status (0 after --help, 2 on a usage
 * error, with a line saying which). */
int ta_agent_options_parse(int argc, char **argv, struct ta_agent_options *o);

#endif
