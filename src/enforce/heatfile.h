/* SPDX-License-Identifier: MIT */
/*
 * The agent's access file (issue 14): what tierallocd saw of one process's accesses, reads
 * included, from a kernel-side source (DAMON), for that process's enforcement worker to fold
 * into the heat of its chunks and large objects (src/enforce/access.c). One file per process,
 * /dev/shm/tieralloc_access.<pid>, written whole by the agent (root) and renamed into place,
 * owned by the process's user, mode 0400. Pure: no system calls here, so the agent and the unit
 * tests link it as it is.
 *
 * Layout (host byte order: the agent and the process share the machine):
 *   struct ta_heatfile_header, then nregions struct ta_heatfile_region, sorted by start and not
 *   overlapping. nr_accesses counts DAMON's samples, out of max_accesses per aggregation, in
 *   which the region's sampled page had been accessed (read or written).
 *
 * The counts are those of one aggregation, which began at window_ns or later. A page made in
 * it was accessed by its making: the counts say nothing of memory the process carved or mapped
 * since window_ns, as soft-dirty bits say nothing of pages faulted in since their clear.
 */
#ifndef TA_HEATFILE_H
#define TA_HEATFILE_H

#include <stddef.h>
#include <stdint.h>

#define TA_HEATFILE_MAGIC	 0x3176746165687461ull
#define TA_HEATFILE_VERSION	 2u
#define TA_HEATFILE_MAX_REGIONS	 1024u
#define TA_HEATFILE_PREFIX	 "tieralloc_access."
#define TA_HEATFILE_SOURCE_DAMON 1u

struct ta_heatfile_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size; /* sizeof(struct ta_heatfile_header) */
	uint32_t pid;	      /* the process, in the agent's pid namespace */
	uint32_t nregions;
	uint64_t start_time;  /* /proc/<pid>/stat field 22: a reused pid is not this process */
	uint64_t written_ns;  /* CLOCK_MONOTONIC when the agent wrote it */
	uint64_t window_ns;   /* CLOCK_MONOTONIC at or before the counts' aggregation began */
	uint64_t interval_ns; /* how often the agent rewrites it: stale after 3 of them */
	uint32_t max_accesses;
	uint32_t source; /* TA_HEATFILE_SOURCE_* */
};

struct ta_heatfile_region {
	uint64_t start, end; /* [start, end) */
	uint32_t nr_accesses, age;
};

#define TA_HEATFILE_MAX_BYTES                                                                      \
	(sizeof(struct ta_heatfile_header) +                                                       \
	 TA_HEATFILE_MAX_REGIONS * sizeof(struct ta_heatfile_region))

/* Checks a file's bytes: 0 when they are a file for this pid and start time, fresh at now_ns
 * (written within 3 intervals), its window begun before it was written; -1 with *why set
 * otherwise. On success *hdr and *regions point
 * into buf. */
int ta_heatfile_parse(const void *buf, size_t len, uint32_t pid, uint64_t start_time,
		      uint64_t now_ns, const struct ta_heatfile_header **hdr,
		      const struct ta_heatfile_region **regions, const char **why);

/*
 * DAMON checks one address of a region per sample, anywhere in it, and an address where the
 * process has no page is never accessed. A region that is half the heap's memory and half
 * address space with nothing in it reads at most half accessed, however hot the memory in it:
 * 4 MiB chunks taken from memkind at 4 MiB alignment came 8 MiB apart (6.12 guest), and the
 * enforcement tests' 200 MiB read set, in 53 MiB regions, read 4-5 samples of 10. So the
 * process tells how much of each region holds memory of its own (held[i], in bytes, summed with
 * ta_heatfile_hold over its chunks, large objects and mapped windows) and a region's rate is
 * taken over that part: nr_accesses / max_accesses * length / held, at most 1. Memory of the
 * process that it does not count (its stacks, its code) is taken as not accessed there; where it
 * is, the estimate runs high, so the scale is bounded by TA_HEATFILE_MAX_SCALE: a region of which
 * less than a quarter is held says no more than four times its own rate.
 */
#define TA_HEATFILE_MAX_SCALE 4u

/* Adds to held[i] the bytes of [addr, addr + len) inside region i. */
void ta_heatfile_hold(const struct ta_heatfile_region *r, uint32_t n, uint64_t addr, uint64_t len,
		      uint64_t *held);

/* The accessed part of [addr, addr + len) in per mille: each region's rate (over its held part
 * when held is not NULL, above), weighted by how much of the range each covers; what no region
 * covers counts as not accessed. */
uint32_t ta_heatfile_part(const struct ta_heatfile_region *r, uint32_t n, uint32_t max_accesses,
			  const uint64_t *held, uint64_t addr, uint64_t len);

/* Writes a file's bytes into buf (at least TA_HEATFILE_MAX_BYTES); returns the length, 0 when
 * there are more than TA_HEATFILE_MAX_REGIONS regions (the agent asks DAMON for fewer). */
size_t ta_heatfile_encode(void *buf, const struct ta_heatfile_header *hdr,
			  const struct ta_heatfile_region *regions, uint32_t n);

#endif /* TA_HEATFILE_H */
