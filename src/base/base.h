/* SPDX-License-Identifier: MIT */
/*
 * The base layer (src/base/): options, the logger, the tiers (topology), sysfs and /proc
 * helpers, metadata pages, the clock. Every other layer may include this header; it includes
 * nothing of theirs.
 *
 * The layers, from the bottom: base, quota (charging and steering, limits, the shared segment and
 * the cgroup's files), alloc (size classes, thread caches, chunks and runs, large objects, the
 * memkind backend), enforce (worker, planner, cold ranking, demotion, promotion gate), api (init,
 * the public API, ctl, summary). A file includes its own layer's header and those below, never
 * one above; the allocator sees of the quotas only quota/charge.h; only the quota layer touches
 * the shared segment (quota/shm.h). tests/check-layers.sh checks it.
 */
#ifndef TA_BASE_H
#define TA_BASE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "tieralloc.h"
#include "tieralloc/shm_abi.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define TA_HIDDEN   __attribute__((visibility("hidden")))

#ifdef TA_DEBUG
#define TA_ASSERT(c)                                                                               \
	do {                                                                                       \
		if (!(c))                                                                          \
			ta_log_fatal_assert(#c, __FILE__, __LINE__);                               \
	} while (0)
#else
#define TA_ASSERT(c) ((void)0)
#endif

#define TA_MAX_TIERS TIERALLOC_MAX_TIERS
#define TA_MAX_NODES 64 /* node sets are uint64_t bit masks */
#define TA_ADDR_BITS 47 /* user space without 5-level paging hints */

/* ---- log.c: async-signal-safe logger, one write(2) per line ---- */
enum ta_log_level { TA_LOG_ERROR = 0, TA_LOG_WARN = 1, TA_LOG_INFO = 2, TA_LOG_DEBUG = 3 };
extern int ta_log_level;
void ta_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about the configuration (a bad TIERALLOC_* value): like ta_log, but between
 * ta_config_hold and ta_config_release it is held, so that a cgroup's processes can say it once
 * (quota.c's ta_quota_first_to_say). */
void ta_config_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ta_config_hold(void);
/* Write the held lines for which first() is true (all of them when first is NULL); stop holding.
 */
void ta_config_release(bool (*first)(const char *line, size_t len));
/* A pointer the allocator does not own, handed to what (free, realloc...): said for the first 8. */
void ta_log_foreign(const void *p, const char *what);
/* Format into buf (always NUL-terminated); returns the length written. %s %d %u %ld %lu %lld %llu
 * %zu %zd %x %lx %llx %zx %p %c %% are understood; width and flags are not. */
size_t ta_format(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ta_write_all(int fd, const char *buf, size_t len);
void ta_log_fatal_assert(const char *cond, const char *file, int line) __attribute__((noreturn));

/* ---- env.c: TIERALLOC_* options, parsed once without malloc ---- */
enum ta_on_full { TA_ON_FULL_LOWEST = 0, TA_ON_FULL_ENOMEM = 1 };
enum ta_enforce_mode { TA_ENFORCE_DEFERRED = 0, TA_ENFORCE_INLINE = 1, TA_ENFORCE_OFF = 2 };
enum ta_promotion_mode { TA_PROMOTION_GATED = 0, TA_PROMOTION_ALWAYS = 1, TA_PROMOTION_NEVER = 2 };
enum ta_access_mode { TA_ACCESS_SOFT_DIRTY = 0, TA_ACCESS_AGE = 1, TA_ACCESS_AGENT = 2 };
enum ta_on_misuse { TA_ON_MISUSE_ABORT = 0, TA_ON_MISUSE_WARN = 1 };
enum ta_opt_type { TA_OPT_BOOL, TA_OPT_SIZE, TA_OPT_STRING, TA_OPT_LEVEL, TA_OPT_ENUM, TA_OPT_MS };

struct ta_options {
	bool disable;
	bool strict;
	bool show_config;
	int log_level;
	uint64_t charge_batch;
	uint64_t pack;		   /* TIERALLOC_PACK: bytes of packed runs (alloc/arena.c) */
	char tiers[256];	   /* raw TIERALLOC_TIERS, "" = discover */
	char process_limit[256];   /* raw TIERALLOC_PROCESS_LIMIT, resolved against the tiers */
	char summary[256];	   /* "", "stderr" or a file to append to */
	char shm_name[128];	   /* TIERALLOC_SHM_NAME: "" per cgroup, "off" local only */
	char tier_limits[256];	   /* TIERALLOC_TIER_LIMITS, resolved by quota.c */
	char split[128];	   /* TIERALLOC_SPLIT, resolved by quota.c */
	char priority[8];	   /* TIERALLOC_PRIORITY, "" or 0..TA_PRIORITY_MAX (lending) */
	int on_full;		   /* TIERALLOC_ON_FULL: enum ta_on_full */
	int enforce;		   /* TIERALLOC_ENFORCE: enum ta_enforce_mode */
	int promotion;		   /* TIERALLOC_PROMOTION: enum ta_promotion_mode */
	int access;		   /* TIERALLOC_ACCESS: enum ta_access_mode */
	int on_misuse;		   /* TIERALLOC_ON_MISUSE: enum ta_on_misuse (alloc/check.c) */
	uint64_t access_period_ms; /* TIERALLOC_ACCESS_PERIOD */
	bool maps;		   /* TIERALLOC_MAPS: record the program's own mappings */
	unsigned nerrors;	   /* bad values seen (for TIERALLOC_STRICT) */
};

/* One row per TIERALLOC_* variable: the only place its field, type, range and default live. */
struct ta_opt_desc {
	const char *name; /* after "TIERALLOC_" */
	enum ta_opt_type type;
	size_t offset;		  /* of its field in struct ta_options */
	size_t size;		  /* of that field (a string's buffer) */
	const char *def;	  /* the default, as a user would write it; parsed at start */
	uint64_t min, max;	  /* TA_OPT_SIZE, TA_OPT_MS: the accepted range */
	const char *const *words; /* TA_OPT_LEVEL, TA_OPT_ENUM: the values' words, in order */
	/* TA_OPT_STRING: why a value is refused, or NULL when it is good. */
	const char *(*check)(const char *value);
	const char *shown_default; /* how a warning names the default; NULL: def, or "none" */
	const char *help;
};

extern struct ta_options ta_opts;
extern const struct ta_opt_desc ta_opt_table[];
extern const unsigned ta_opt_count;
/* Set opts to the table's defaults, then parse envp into it. Each bad value: one warning, the
 * default kept, opts->nerrors++. */
void ta_env_parse(char **envp, struct ta_options *opts);
/* TIERALLOC_PRIORITY's value, as checked at parse time (0 for anything else). */
#define TA_PRIORITY_MAX 1000u
uint32_t ta_priority_value(const char *v);
/* "64K", "2M": bytes. */
int ta_parse_size(const char *s, uint64_t *out);
/* "500ms", "2s", or a bare number of milliseconds. */
int ta_parse_ms(const char *s, uint64_t *out);
int ta_parse_bool(const char *s, bool *out);
/* Render an option's current value ("opt.<name>" in ctl; TIERALLOC_SHOW_CONFIG). */
size_t ta_opt_render(const struct ta_opt_desc *d, const struct ta_options *o, char *buf, size_t n);
/* Called when a bad value was found; applies TIERALLOC_STRICT. */
void ta_config_error(struct ta_options *opts);

/* ---- topo.c: NUMA nodes -> tiers, from sysfs, raw syscalls only ---- */
struct ta_tier_desc {
	char name[32];
	uint64_t nodes; /* bit n = node n */
	uint64_t capacity;
	uint32_t share_ppm;
};

struct ta_topology {
	unsigned ntiers;
	struct ta_tier_desc tier[TA_MAX_TIERS];
	uint64_t total_capacity;
	uint64_t cpu_nodes; /* nodes with CPUs and memory */
	uint64_t mem_nodes; /* nodes with memory */
	const char *source; /* "TIERALLOC_TIERS", "memory_tiering", "cpu-less nodes", "one tier" */
};

/* Parse a numactl node list ("0,2-3") into a mask. 0 or -EINVAL. */
int ta_nodelist_parse(const char *s, size_t len, uint64_t *mask);
/* Render a mask as a node list; returns the length. */
size_t ta_nodelist_format(uint64_t mask, char *buf, size_t n);
/*
 * Discover tiers under sysfs_root ("" for the real /sys). tiers_spec is TIERALLOC_TIERS or "".
 * A bad spec gives one warning and falls back to discovery; 0 or -errno (no usable node).
 */
int ta_topo_discover(const char *sysfs_root, const char *tiers_spec, struct ta_topology *topo,
		     struct ta_options *opts);
/* Resolve TIERALLOC_PROCESS_LIMIT against the tiers: limits[t] = bytes or UINT64_MAX. */
int ta_topo_parse_limits(const struct ta_topology *topo, const char *spec,
			 uint64_t limits[TA_MAX_TIERS], struct ta_options *opts);
/* Tier index for a name or number, or -1. */
int ta_topo_tier_by_name(const struct ta_topology *topo, const char *s, size_t len);
/* Read a small file whole with raw syscalls; returns bytes read or -errno. */
ssize_t ta_read_file(const char *path, char *buf, size_t size);

/* The tiers of this process, found at start (api/init.c). */
extern struct ta_topology ta_topo;
extern unsigned ta_ntiers;

/* ---- pages.c: anonymous memory for metadata, never in huge pages ---- */
/* bytes of zeroed memory, or NULL; reserve_only: address space that is touched sparsely. */
void *ta_pages_map(size_t bytes, bool reserve_only);
void ta_pages_unmap(void *p, size_t bytes);
/* Transparent huge pages are "always" for this process: anonymous memory it does not advise
 * otherwise becomes huge pages at first touch. */
bool ta_thp_always(void);
/*
 * No huge pages in our .bss (jemalloc's 2 MiB radix-tree root, the arenas, the boot buffer: a few
 * pages touched). Under THP "always" the first write to any 2 MiB-aligned range of it faults a
 * whole huge page, and which of our variables fall in such a range depends on where the object was
 * loaded: so this runs before anything of ours is written (init and the boot allocator call it).
 */
void ta_pages_statics_no_huge(void);

static inline uint64_t ta_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* TA_BASE_H */
