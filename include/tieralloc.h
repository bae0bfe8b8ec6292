/* SPDX-License-Identifier: MIT */
/*
 * tieralloc public API: a malloc family that places memory in tiers (sets of NUMA nodes, fastest
 * first), steering each allocation to the fastest tier that still has headroom.
 *
 * Conventions: functions return 0 or -errno and give results through out-parameters, except the
 * allocators, which keep malloc's contract (NULL with errno = ENOMEM). Structures that cross the
 * API start with `size` and `version`: set `size` to sizeof the structure you pass, and the
 * library fills no more than that, so old callers keep working when fields are appended.
 */
#ifndef TIERALLOC_H
#define TIERALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIERALLOC_VERSION_MAJOR 0
#define TIERALLOC_VERSION_MINOR 1
#define TIERALLOC_VERSION_PATCH 0

/* At most this many tiers (memkind offers three kinds that can be bound to a node set). */
#define TIERALLOC_MAX_TIERS 3

#define TIERALLOC_API __attribute__((visibility("default")))

/* stable: "MAJOR.MINOR.PATCH" of the library actually loaded. */
TIERALLOC_API const char *tieralloc_version(void);

/* stable: the malloc family; same contracts as the C library's. */
TIERALLOC_API void *tieralloc_malloc(size_t size);
TIERALLOC_API void tieralloc_free(void *ptr);
TIERALLOC_API void *tieralloc_calloc(size_t nmemb, size_t size);
TIERALLOC_API void *tieralloc_realloc(void *ptr, size_t size);
TIERALLOC_API void *tieralloc_reallocarray(void *ptr, size_t nmemb, size_t size);
TIERALLOC_API int tieralloc_posix_memalign(void **memptr, size_t alignment, size_t size);
TIERALLOC_API void *tieralloc_aligned_alloc(size_t alignment, size_t size);
TIERALLOC_API void *tieralloc_memalign(size_t alignment, size_t size);
TIERALLOC_API void *tieralloc_valloc(size_t size);
TIERALLOC_API void *tieralloc_pvalloc(size_t size);
TIERALLOC_API size_t tieralloc_malloc_usable_size(void *ptr);

/*
 * stable: explicit placement. The allocation goes to `tier` whatever its limit says (an explicit
 * request wins over steering, as a task mempolicy does in the kernel) and is charged there.
 * NULL with errno = EINVAL for a tier that does not exist, ENOMEM when the tier has no memory.
 */
TIERALLOC_API void *tieralloc_malloc_tier(int tier, size_t size);
TIERALLOC_API void *tieralloc_calloc_tier(int tier, size_t nmemb, size_t size);

/* stable: the tier holding ptr (0 = fastest), or -EINVAL when ptr is not tieralloc's. */
TIERALLOC_API int tieralloc_tier_of(const void *ptr);

/* stable: number of tiers in use (1 when tieralloc runs as a pass-through). */
TIERALLOC_API int tieralloc_tier_count(void);

struct tieralloc_tier_info {
	uint32_t size;	    /* in: sizeof(struct tieralloc_tier_info) */
	uint32_t version;   /* out: 1 */
	char name[32];	    /* "tier0" unless named in TIERALLOC_TIERS */
	char nodes[128];    /* NUMA nodes, numactl syntax: "0-1,3" */
	char kind[32];	    /* memkind kind serving the tier: "MEMKIND_REGULAR", ... */
	uint64_t capacity;  /* bytes: sum of the nodes' MemTotal */
	uint32_t share_ppm; /* capacity / total capacity, in parts per million */
	uint32_t bound;	    /* 1 when the kind binds to exactly `nodes`, 0 on fallback */
};

/* stable: describe one tier. 0, -EINVAL (bad tier, NULL out or size too small). */
TIERALLOC_API int tieralloc_tier_info(int tier, struct tieralloc_tier_info *out);

struct tieralloc_tier_stats {
	uint32_t size;		   /* in: sizeof(struct tieralloc_tier_stats) */
	uint32_t version;	   /* out: 1 */
	uint64_t bytes_live;	   /* bytes handed out and not yet freed, by every thread */
	uint64_t bytes_peak;	   /* highest charge seen (docs/allocator.md: charge batching) */
	uint64_t charged;	   /* bytes charged against the limit: runs of small objects (in use
				      or free), large objects, per-thread stock */
	uint64_t limit;		   /* current byte limit of this tier (UINT64_MAX: none) */
	uint64_t allocs;	   /* allocations placed in this tier */
	uint64_t explicit_allocs;  /* of which by tieralloc_malloc_tier() */
	uint64_t steered_in;	   /* allocations placed here because a faster tier was full */
	uint64_t exhausted;	   /* times a thread found this tier full and moved on (once
				      per charge batch, not per allocation) */
	uint64_t overflowed;	   /* every tier was full: placed in this, the last, anyway */
	uint64_t backend_failures; /* the tier's memkind kind returned no memory */
};

/* stable: statistics of one tier for the whole process. 0 or -EINVAL. */
TIERALLOC_API int tieralloc_tier_stats(int tier, struct tieralloc_tier_stats *out);

/*
 * experimental: one entry point for knobs and statistics, by dotted name (mallctl style).
 * Names: "version" (const char *), "tiers" (uint32_t), "passthrough" (uint32_t),
 * "tier.<t>.<stat>" (uint64_t; stat one of the tieralloc_tier_stats fields, "capacity", or
 * what this process's enforcement did: "demoted" bytes, "demotions" ranges, "reclaim_asked";
 * what it gave back: "purged" bytes of empty runs, "kept_released" bytes of freed large objects;
 * "kept" bytes of freed large objects its heap holds for reuse, still charged; "startup" bytes
 * the process held when tieralloc started, charged to the tier they sit on),
 * "tier.<t>.limit" (uint64_t, writable: per-process byte limit of tier t),
 * "cgroup.tier.<t>.<field>" (uint64_t, the container's numbers from the shared segment: min, low,
 * high, max, charged, peak, steered_away, overflowed, exhausted, reclaimed, observed, untracked,
 * demoted, reclaim_asked, reclaims, gated; -ENOENT when this
 * process keeps its own accounting), "shm.active" (uint32_t),
 * "opt.<name>" (the parsed TIERALLOC_* values; see tieralloc(7)), "thread.flush" (write-only, any
 * value: publish this thread's cached counters), "purge" (write-only, any value: give back to
 * the kernel now everything held and unused: empty runs, freed large objects kept).
 * Returns 0, -ENOENT (unknown name), -EPERM (read-only), -EINVAL (size mismatch or bad value).
 * For get, *len is in: the size of out; out: the size of the value.
 */
TIERALLOC_API int tieralloc_ctl_get(const char *name, void *out, size_t *len);
TIERALLOC_API int tieralloc_ctl_set(const char *name, const void *in, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TIERALLOC_H */
