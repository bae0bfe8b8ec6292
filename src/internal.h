/* SPDX-License-Identifier: MIT */
/*
 * Internal declarations shared by the core's files, grouped by the file that defines them.
 * Nothing here is installed. Everything is hidden (-fvisibility=hidden) unless marked
 * TIERALLOC_API.
 *
 * Memory layout in one paragraph: small objects (<= TA_SMALL_MAX) live in 4 MiB chunks that the
 * tier's memkind kind provides; a chunk's first 64 KiB page holds its header, the rest is cut into
 * runs of one size class each. A byte map indexed by address >> TA_CHUNK_SHIFT tells in O(1)
 * whether a pointer is in one of our chunks and in which tier. Larger objects come straight from
 * the tier's kind with a 32-byte header in front of them. Each thread caches freed small objects
 * per tier and size class, and holds a "stock" of pre-charged bytes per tier (the kernel's per-cpu
 * memcg stock) so that most operations touch no shared cache line.
 */
#ifndef TA_INTERNAL_H
#define TA_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tieralloc.h"

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

#define TA_CHUNK_SHIFT 22
#define TA_CHUNK_SIZE  ((size_t)1 << TA_CHUNK_SHIFT)
#define TA_PAGE_SHIFT  16
#define TA_PAGE_SIZE   ((size_t)1 << TA_PAGE_SHIFT)
#define TA_CHUNK_PAGES (TA_CHUNK_SIZE / TA_PAGE_SIZE)
#define TA_SMALL_MAX   ((size_t)65536)
#define TA_NCLASSES    44
#define TA_ADDR_BITS   47 /* user space without 5-level paging hints */
#define TA_LARGE_HDR   64 /* bytes in front of a large object */

/* ---- log.c: async-signal-safe logger, one write(2) per line ---- */
enum ta_log_level { TA_LOG_ERROR = 0, TA_LOG_WARN = 1, TA_LOG_INFO = 2, TA_LOG_DEBUG = 3 };
extern int ta_log_level;
void ta_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Format into buf (always NUL-terminated); returns the length written. %s %d %u %ld %lu %lld %llu
 * %zu %zd %x %lx %llx %zx %p %c %% are understood; width and flags are not. */
size_t ta_format(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ta_write_all(int fd, const char *buf, size_t len);
void ta_log_fatal_assert(const char *cond, const char *file, int line) __attribute__((noreturn));

/* ---- env.c: TIERALLOC_* options, parsed once without malloc ---- */
enum ta_opt_type { TA_OPT_BOOL, TA_OPT_SIZE, TA_OPT_STRING, TA_OPT_LEVEL, TA_OPT_ENUM };

struct ta_options {
	bool disable;
	bool strict;
	bool show_config;
	int log_level;
	uint64_t charge_batch;
	char tiers[256];	 /* raw TIERALLOC_TIERS, "" = discover */
	char process_limit[256]; /* raw TIERALLOC_PROCESS_LIMIT, resolved against the tiers */
	char summary[256];	 /* "", "stderr" or a file to append to */
	char shm_name[128];	 /* TIERALLOC_SHM_NAME: "" per cgroup, "off" local only */
	char tier_limits[256];	 /* TIERALLOC_TIER_LIMITS, resolved by quota.c */
	char split[128];	 /* TIERALLOC_SPLIT, resolved by quota.c */
	bool on_full_enomem;	 /* TIERALLOC_ON_FULL=enomem */
	unsigned nerrors;	 /* bad values seen (for TIERALLOC_STRICT) */
};

struct ta_opt_desc {
	const char *name;
	enum ta_opt_type type;
	const char *def;
	const char *help;
};

extern struct ta_options ta_opts;
extern const struct ta_opt_desc ta_opt_table[];
extern const unsigned ta_opt_count;
/* Parse envp into opts. Each bad value: one warning, default kept, opts->nerrors++. */
void ta_env_parse(char **envp, struct ta_options *opts);
/* A TIERALLOC_* name that the table does not know, or NULL. */
int ta_parse_size(const char *s, uint64_t *out);
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

/* ---- backend.c: the only includer of memkind.h ---- */
struct ta_backend_tier {
	char kind_name[32];
	bool bound; /* the kind binds to exactly the tier's nodes */
};
extern struct ta_backend_tier ta_backend[TA_MAX_TIERS];
/* Pick and check one memkind kind per tier. Tiers memkind cannot bind fall back to
 * MEMKIND_DEFAULT with one error line. 0, or -errno when not even the default kind works. */
int ta_backend_init(const struct ta_topology *topo, struct ta_options *opts);
void *ta_backend_alloc(unsigned tier, size_t size, size_t align, bool zero);
void *ta_backend_realloc(unsigned tier, void *raw, size_t size);
void ta_backend_free(unsigned tier, void *raw);

/* ---- sizeclass.c ---- */
extern const uint32_t ta_class_size[TA_NCLASSES];
extern const uint8_t ta_class_small_lut[(1024 >> 4) + 1];
extern const uint16_t ta_class_cache_cap[TA_NCLASSES];

static inline unsigned ta_size_class(size_t n)
{
	if (n <= 1024)
		return ta_class_small_lut[(n + 15) >> 4];
	size_t x = n - 1;
	unsigned lg = 63u - (unsigned)__builtin_clzl(x);
	return 8u + (lg - 7u) * 4u + (unsigned)((x >> (lg - 2u)) & 3u);
}
/* Smallest class >= size whose objects are all aligned to align, or TA_NCLASSES. */
unsigned ta_size_class_aligned(size_t size, size_t align);
/* 64 KiB pages in one run of this class. */
unsigned ta_class_run_pages(unsigned cls);

/* ---- arena.c: per-tier chunks, runs and central free lists ---- */
struct ta_chunk {
	uint64_t magic;
	uint32_t tier;
	uint32_t pages_used;
	struct ta_chunk *next; /* all chunks of the tier, for statistics */
	uint8_t page_class[TA_CHUNK_PAGES];
};
#define TA_CHUNK_MAGIC 0x74696572636b6e31ull /* "tierckn1" */
#define TA_PAGE_NONE   0xff

struct ta_central_bin {
	pthread_mutex_t lock;
	void *head;
	uint32_t count;
	char *bump;
	char *bump_end;
} __attribute__((aligned(64)));

struct ta_arena {
	struct ta_central_bin bins[TA_NCLASSES];
	pthread_mutex_t chunk_lock;
	struct ta_chunk *cur;
	struct ta_chunk *chunks;
	_Atomic uint64_t nchunks;
	/* Accounting: charged = live + every thread's stock. Written on refills and trims only;
	 * limit is read there too, so they share a line and the counters below get their own. */
	_Atomic uint64_t charged __attribute__((aligned(64)));
	_Atomic uint64_t limit;
	_Atomic uint64_t peak __attribute__((aligned(64)));
	_Atomic int64_t folded_live; /* exited threads' and cache-less charges */
	_Atomic uint64_t folded_allocs;
	_Atomic uint64_t folded_steered_in;
	_Atomic uint64_t folded_explicit;
	_Atomic uint64_t exhausted;
	_Atomic uint64_t overflowed; /* every tier full: placed in the last one anyway */
	_Atomic uint64_t backend_failures;
};

extern struct ta_arena ta_arenas[TA_MAX_TIERS];
extern uint8_t *ta_chunk_map;

int ta_arena_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS]);
/* Store up to want objects of cls in out[]; returns how many (0: the tier has no memory). */
unsigned ta_arena_fill(unsigned tier, unsigned cls, void **out, unsigned want);
/* Give back n objects of cls. */
void ta_arena_flush(unsigned tier, unsigned cls, void *const *objs, unsigned n);
void ta_arena_fork_prepare(void);
void ta_arena_fork_parent(void);
void ta_arena_fork_child(void);

static inline int ta_chunk_tier_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	if (unlikely(ta_chunk_map == NULL || (a >> TA_ADDR_BITS) != 0))
		return -1;
	return (int)ta_chunk_map[a >> TA_CHUNK_SHIFT] - 1;
}
static inline unsigned ta_chunk_class_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	const struct ta_chunk *c = (const struct ta_chunk *)(a & ~(TA_CHUNK_SIZE - 1));
	return c->page_class[(a & (TA_CHUNK_SIZE - 1)) >> TA_PAGE_SHIFT];
}

/* Charge bytes to the tier: this process's limit (TIERALLOC_PROCESS_LIMIT), then the cgroup's
 * limit of this level (TA_LIMIT_HIGH or TA_LIMIT_MAX) in the shared segment. False when either
 * would be passed, unless force. Called on stock refills, large objects and cache-less threads. */
bool ta_arena_charge(unsigned tier, uint64_t bytes, int level, bool force);
/* After an allocation succeeded: raise the tier's peak to its charge. Not done when charging, so
 * that a request that then fails (a huge size) leaves no trace. */
void ta_arena_note_peak(unsigned tier);
void ta_arena_uncharge(unsigned tier, uint64_t bytes);

/* ---- tcache.c: per-thread caches ---- */
/* A stack of cached objects: freeing writes nothing into the object itself. */
struct ta_bin {
	uint32_t count;
	uint32_t cap;
	void **slots;
};

struct ta_tcache {
	struct ta_bin bins[TA_MAX_TIERS][TA_NCLASSES];
	int64_t stock[TA_MAX_TIERS]; /* pre-charged bytes not handed out yet */
	int64_t
	    taken[TA_MAX_TIERS]; /* net bytes taken from the tier's charge: live = taken - stock */
	/* Allocation counts: [t][0] placed as preferred, [t][1] steered in, [t][2] explicit. */
	uint64_t cnt[TA_MAX_TIERS][3];
	unsigned pref_tier;	/* tier the fast path tries: the fastest with headroom */
	unsigned pref_slot;	/* 0 or 1: is pref_tier there because a faster tier was full? */
	int64_t stock_high;	/* trim the stock above this (2 x charge batch) */
	volatile int in_slow;	/* inside a slow path: signal-handler frees must not take locks */
	void *_Atomic deferred; /* frees that arrived from a signal handler mid-slow-path */
	size_t map_size;	/* bytes of this mmap'd structure with its slot arrays */
	struct ta_tcache *next, *prev;
};

extern __thread struct ta_tcache *ta_tls __attribute__((tls_model("initial-exec")));
/* This thread's cache, creating it; NULL if the thread is exiting or metadata ran out. */
struct ta_tcache *ta_tcache_get(void);
/* Give cached objects and stock back, fold counters into the arenas (thread exit). */
void ta_tcache_retire(struct ta_tcache *tc);
/* Give all but keep of a bin's objects back to the central list. */
void ta_tcache_flush_bin(struct ta_tcache *tc, unsigned tier, unsigned cls, unsigned keep);
/* Refill the thread's stock for tier; false when the tier's limit forbids it. */
bool ta_tcache_stock_refill(struct ta_tcache *tc, unsigned tier, uint64_t need, int level,
			    bool force);
void ta_tcache_stock_trim(struct ta_tcache *tc, unsigned tier);
void ta_tcache_drain_deferred(struct ta_tcache *tc);
/* Sum of the live tcaches' counters into per-tier totals. */
void ta_tcache_sum(int64_t live[TA_MAX_TIERS], uint64_t cnt[TA_MAX_TIERS][3]);
void ta_tcache_flush_all_mine(void);
int ta_tcache_init(void);
void ta_tcache_fork_prepare(void);
void ta_tcache_fork_parent(void);
void ta_tcache_fork_child(void);

/* ---- boot.c: bump allocator for calls before init and from init itself ---- */
void *ta_boot_alloc(size_t size, size_t align);
bool ta_boot_owns(const void *p);
size_t ta_boot_usable(const void *p);

/* ---- alloc.c: the malloc family ---- */
void *ta_malloc(size_t size);
void ta_free(void *p);
void *ta_calloc(size_t n, size_t size);
void *ta_realloc(void *p, size_t size);
void *ta_reallocarray(void *p, size_t n, size_t size);
int ta_posix_memalign(void **out, size_t align, size_t size);
void *ta_aligned_alloc(size_t align, size_t size);
void *ta_memalign(size_t align, size_t size);
void *ta_valloc(size_t size);
void *ta_pvalloc(size_t size);
size_t ta_usable_size(void *p);
void *ta_malloc_tier(int tier, size_t size, bool zero);
int ta_tier_of(const void *p);

/* ---- init.c: state machine, constructor, fork ---- */
enum ta_state { TA_UNINIT = 0, TA_INITIALIZING, TA_READY, TA_PASSTHROUGH };
extern _Atomic int ta_state;
extern struct ta_topology ta_topo;
extern unsigned ta_ntiers;
extern uint64_t ta_charge_batch;
/* Run the one-time initialisation if nobody has; returns the resulting state. */
int ta_init(void);
/* glibc's allocator, for pass-through mode. */
struct ta_real_malloc {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	size_t (*usable_size)(void *);
};
extern struct ta_real_malloc ta_real;

/* ---- stats.c / ctl.c ---- */
int ta_stats_tier(unsigned tier, struct tieralloc_tier_stats *out);
int ta_ctl_get(const char *name, void *out, size_t *len);
int ta_ctl_set(const char *name, const void *in, size_t len);

/* ---- summary.c: per-process summary at exit (TIERALLOC_SUMMARY) ---- */
void ta_summary_write(const char *dest);

#endif /* TA_INTERNAL_H */
