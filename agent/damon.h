/* SPDX-License-Identifier: MIT */
/*
 * --access damon (damon.c): one kdamond per process of the segments' slots, and the access file
 * each one's enforcement reads (TIERALLOC_ACCESS=agent).
 */
#ifndef TA_AGENT_DAMON_H
#define TA_AGENT_DAMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h" /* struct ta_agent_proc */

/* ---- damon.c: --access damon ---- */
#define TA_DAMON_MAX_PROCS 64
struct ta_damon;
struct ta_damon_stats {
	uint64_t files_written;
	unsigned regions; /* in the last file */
};
/* Takes DAMON's sysfs interface (admin: /sys/kernel/mm/damon/admin) and starts the thread that
 * keeps one kdamond per process and rewrites its access file in shm every aggregation (5 s; less
 * often when that would take more than 1% of a core). NULL with a line in err when the kernel has
 * none or another kdamond is on. */
struct ta_damon *ta_damon_start(const char *admin, const char *shm, bool verbose, char *err,
				size_t errlen);
/* The processes to monitor from now on. */
void ta_damon_set_procs(struct ta_damon *d, const struct ta_agent_proc *p, unsigned n);
void ta_damon_stats(struct ta_damon *d, struct ta_damon_stats *out);
/* Stops the kdamonds, removes the access files, ends the thread. */
void ta_damon_stop(struct ta_damon *d);
/* For the tests: a tried_regions directory's regions, sorted (max: out's room, max_accesses
 * caps their counts): their number, or -1 when they do not fit or overlap. */
struct ta_heatfile_region;
int ta_damon_regions(const char *dir, struct ta_heatfile_region *out, unsigned max,
		     uint32_t max_accesses);
/* How often each access file is rewritten, as the file says (stale after 3): the round's
 * period, or as many aggregations as there are processes, whichever is longer. */
uint64_t ta_damon_interval_ns(uint64_t period_ns, unsigned nrun, uint64_t aggr_us);
/* For the tests: write an access file for p into shm, whole (temporary name, rename). */
int ta_damon_write_file(const char *shm, const struct ta_agent_proc *p, const void *buf,
			size_t len);

#endif
