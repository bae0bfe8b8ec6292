/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition of tieralloc's segments, shared by tieralloc-stat
 * (--prometheus) and the agent (tierallocd --metrics, --textfile). Each program reads the
 * segments its own way (the tool with pread into private memory, the agent from the segments it
 * keeps open) into these plain snapshots; this file only formats them, so that both print the
 * same metric names, types and labels.
 */
#ifndef TA_PROM_H
#define TA_PROM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tieralloc/shm_abi.h"

/* One tier of a segment, as read. A value that is not available is left out of the output. */
struct ta_prom_tier {
	char name[33];		    /* bounded by the record's field and terminated */
	uint64_t nodes;		    /* NUMA node mask, printed as a list ("0-1,3") */
	uint64_t limit[TA_NLIMITS]; /* TA_SHM_UNLIMITED: none (+Inf) */
	uint64_t capacity, charged, peak;
	uint32_t share_ppm;
	bool have_observed;
	uint64_t observed;
	uint64_t steered_away, overflowed, refused_max, reclaimed;
	bool have_enforcement; /* ABI minor 1 */
	uint64_t untracked, demoted, reclaim_asked, reclaims, gated;
	bool have_access; /* ABI minor 3 */
	uint64_t hot, cold, exchange_promoted, exchange_down;
	bool have_lend; /* ABI minor 5: the lending block */
	uint64_t loan, lent, taken_back, take_backs;
	uint64_t yielded; /* ABI minor 6 (0 before) */
	bool have_agent;  /* the agent's counts, in pages, when fresh and attributable */
	uint64_t kernel_promoted, kernel_demoted, kernel_moved;
};

struct ta_prom_segment {
	char segment[300];			    /* "/" and the file's name */
	char cgroup[TA_SHM_PATH_MAX + 1];	    /* the cgroup's path, "" without one */
	unsigned processes;			    /* live processes attached */
	unsigned dead_slots;			    /* slots of dead processes not yet taken back */
	unsigned ntiers;			    /* at most TA_SHM_MAX_TIERS */
	bool have_priority;			    /* ABI minor 5 */
	uint32_t priority;			    /* TIERALLOC_PRIORITY, for lending */
	struct ta_prom_tier tier[TA_SHM_MAX_TIERS]; /* tier[t] is tier t */
};

/*
 * Write the exposition of n segments to f: every metric family once, with its HELP and TYPE
 * lines, then one sample per segment (and tier). Label values are escaped as the format asks (a
 * backslash, a double quote and a newline), and bytes that are not valid UTF-8 become U+FFFD. A
 * segment whose segment and cgroup labels repeat an earlier one's is left out: the exposition
 * must not hold one series twice. Returns 0, or -1 when f had a write error.
 */
int ta_prom_write(FILE *f, const struct ta_prom_segment *segs, unsigned n);

/* One label value, escaped as ta_prom_write escapes them (the agent's own metrics use it too). */
void ta_prom_label_value(FILE *f, const char *str);

#endif /* TA_PROM_H */
