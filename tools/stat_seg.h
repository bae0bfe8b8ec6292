/* SPDX-License-Identifier: MIT */
/*
 * One shared segment as tieralloc-stat reads it (stat_seg.c): the file copied into private memory
 * and validated there, and what the copy says, per tier and per process, with the kernel's usage
 * in its cgroup and the blocks an agent and newer ABIs add (each NULL or false when the segment
 * lacks it).
 */
#ifndef TA_STAT_SEG_H
#define TA_STAT_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stat_scan.h"
#include "tieralloc/shm_abi.h"

#define TA_STAT_TIER_NAME_MAX sizeof(((struct ta_shm_tier *)0)->name)

struct ta_stat_seg {
	char name[300];	    /* "/" and the file's name, as read: printed escaped */
	unsigned char *buf; /* the parts of the file used, at their offsets; the rest zero */
	const struct ta_shm_header *hdr; /* = buf once it validated */
	size_t size;
	uid_t owner;
	dev_t dev;
	ino_t ino;
	const char *error;	      /* why it could not be read, or NULL */
	const struct ta_place *place; /* where it was found: its namespace's /proc */
	/* Its slots' processes, counted once when read: alive, dead (or left marked by a
	 * reclaimer); gone when none lives and some did. */
	unsigned alive, dead;
	bool gone;
	/* The strings, bounded by their fields and terminated. */
	char cgroup_path[TA_SHM_PATH_MAX + 1];
	char tier_name[TA_SHM_MAX_TIERS][TA_STAT_TIER_NAME_MAX + 1];
};

/* Read the segment named file in the place's directory into s: 0, or -1 with s->error. s->buf is
 * the caller's to free either way. */
int ta_stat_open_seg(const struct ta_place *place, const char *file, struct ta_stat_seg *s);

/* Tier t's record, and the number of tiers (at most TA_SHM_MAX_TIERS). */
const struct ta_shm_tier *ta_stat_tier_rec(const struct ta_stat_seg *s, unsigned t);
unsigned ta_stat_ntiers(const struct ta_stat_seg *s);
/* Tier t's name, bounded by its field. */
const char *ta_stat_tier_name(struct ta_stat_seg *s, unsigned t);

/* The kernel's usage of the cgroup on each tier's nodes: a node in several tiers counts in each. */
bool ta_stat_observed(const struct ta_stat_seg *s, uint64_t out[TA_SHM_MAX_TIERS]);

/* What the tier is charged; zero in a gone segment, as it will be once its slots are taken back
 * (every slot's charge is part of the tier's: their dead processes hold nothing). */
uint64_t ta_stat_charged_of(const struct ta_stat_seg *s, const struct ta_shm_tier *r);

/* Tier t's bytes by heat at each live process's last access sample (ABI minor 3): false when
 * the segment has no access block. Dead processes' records are not counted. */
bool ta_stat_access_sums(const struct ta_stat_seg *s, unsigned t, uint64_t *hot, uint64_t *cold);

/* Segments of ABI minor 0 end their tier record before the enforcement counters. */
bool ta_stat_has_enforcement(const struct ta_stat_seg *s);

/* Whether the cgroup has memory.reclaim: cgroup v2 only (Linux >= 5.19), so never on v1 or
 * without a cgroup; not once a process of the cgroup found it missing (ABI minor 1); and only
 * when the file is there (looked at the way numa_stat is read, without opening it for I/O). */
bool ta_stat_reclaim_available(const struct ta_stat_seg *s);

/* The agent's block, when an agent wrote it recently and could attribute migrations to the
 * segment's cgroup; otherwise NULL and why. */
const struct ta_shm_agent *ta_stat_agent_counts(const struct ta_stat_seg *s, const char **why,
						uint64_t *age_ms);

/* The lending block (ABI minor 5) and whether its loans count now (CLOCK_MONOTONIC before the
 * agent's expiry): a lapsed loan is shown as none. */
const struct ta_shm_lend *ta_stat_lending(const struct ta_stat_seg *s, bool *live);

#endif /* TA_STAT_SEG_H */
