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
 * the tier's kind, their records apart (large.c). Each thread caches freed small objects per tier
 * and size class. A tier is charged for small objects by the run: a run's pages when it is cut,
 * kept while its objects come and go (the memory stays the process's, in that tier); large
 * objects are charged whole, through a per-thread "stock" of pre-charged bytes (the kernel's
 * per-cpu memcg stock), so that most operations touch no shared cache line.
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

#define TA_CHUNK_SHIFT 22
#define TA_CHUNK_SIZE  ((size_t)1 << TA_CHUNK_SHIFT)
#define TA_PAGE_SHIFT  14 /* runs are cut in 16 KiB pages; page 0 is the chunk's header */
#define TA_PAGE_SIZE   ((size_t)1 << TA_PAGE_SHIFT)
#define TA_CHUNK_PAGES (TA_CHUNK_SIZE / TA_PAGE_SIZE)
#define TA_SMALL_MAX   ((size_t)65536)
#define TA_NCLASSES    80
#define TA_ADDR_BITS   47 /* user space without 5-level paging hints */

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
enum ta_on_full { TA_ON_FULL_LOWEST = 0, TA_ON_FULL_ENOMEM = 1 };
enum ta_enforce_mode { TA_ENFORCE_DEFERRED = 0, TA_ENFORCE_INLINE = 1, TA_ENFORCE_OFF = 2 };
enum ta_promotion_mode { TA_PROMOTION_GATED = 0, TA_PROMOTION_ALWAYS = 1, TA_PROMOTION_NEVER = 2 };
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
	int on_full;		 /* TIERALLOC_ON_FULL: enum ta_on_full */
	int enforce;		 /* TIERALLOC_ENFORCE: enum ta_enforce_mode */
	int promotion;		 /* TIERALLOC_PROMOTION: enum ta_promotion_mode */
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

/* ---- pages.c: anonymous memory for metadata, never in huge pages ---- */
/* bytes of zeroed memory, or NULL; reserve_only: address space that is touched sparsely. */
void *ta_pages_map(size_t bytes, bool reserve_only);
void ta_pages_unmap(void *p, size_t bytes);

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
/* What the kind really set aside for raw (its size class). */
size_t ta_backend_usable_size(unsigned tier, void *raw);
/* A memkind kind that must outlive memkind's destructor (one of ours). */
bool ta_backend_kind_kept(void *kind);
/* Give back to the kernel every freed page the tier's kind still holds (keep.c says when). */
void ta_backend_purge(unsigned tier);
/* Bytes of freed pages the tier's kind holds now (about 10 us: it refreshes jemalloc's stats). */
uint64_t ta_backend_dirty_bytes(unsigned tier);

/* ---- keep.c: freed large objects kept for reuse, charged to their tier ---- */
/* bytes of a large object freed in its home tier: kept (still charged); may purge. */
void ta_keep_put(unsigned tier, uint64_t bytes);
/* Up to bytes of kept charge for a new large object in the tier; returns what it took. */
uint64_t ta_keep_take(unsigned tier, uint64_t bytes);
/* Purge and uncharge what the tier keeps; false when it kept nothing. */
bool ta_keep_release(unsigned tier);
/* Release what was kept longer than a second ago (from slow paths and the worker). */
void ta_keep_age(void);
uint64_t ta_keep_bytes(unsigned tier);
uint64_t ta_keep_released(unsigned tier);
/* ---- memkind_link.c: what linking memkind's archive needs ---- */
extern const char *jemk_malloc_conf;

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
	return 8u + (lg - 7u) * 8u + (unsigned)((x >> (lg - 3u)) & 7u);
}
/* Smallest class >= size whose objects are all aligned to align, or TA_NCLASSES. */
unsigned ta_size_class_aligned(size_t size, size_t align);
/* Pages of one run of this class (16 KiB pages; at least four objects, little waste). */
#define TA_RUN_MAX_PAGES 16u
unsigned ta_class_run_pages(unsigned cls);
/* Pages of the run to cut where only room pages are left: the whole run when it fits, else the
 * pages that hold as many whole objects as fit (0: not even one). */
unsigned ta_class_run_fit(unsigned cls, unsigned room);

/* ---- arena.c: per-tier chunks, runs and their free objects ---- */
/* A run: pages of a chunk cut for one size class. Its descriptor sits in the chunk's header at
 * the run's first page; fields below `tier` change under the lock of the bin that lists the run
 * (that tier's, that class's). */
struct ta_run {
	void *free;		    /* objects given back, linked through their first word */
	struct ta_run *next, *prev; /* its bin's list of runs that have objects to hand out */
	uint64_t empty_ns;	    /* when every object was back (0: some are out) */
	uint32_t nfree;		    /* objects on the free list */
	uint32_t fresh;		    /* index of the first object never handed out */
	uint32_t nobj;
	uint8_t cls;
	uint8_t tier; /* whose bin lists it (changed by a retag under both bins' locks) */
	uint8_t listed;
	uint8_t pages;
};

struct ta_chunk {
	uint64_t magic;
	uint32_t tier;		     /* where its memory is: changed when the chunk is demoted */
	uint32_t pages_used;	     /* pages ever cut from it (the header's included): its bump */
	struct ta_chunk *next;	     /* all chunks of the tier, under the arena's chunk_lock */
	struct ta_chunk *holes_next; /* the tier's chunks with free pages below the bump */
	uint64_t carved_ns;	     /* CLOCK_MONOTONIC when a run was last cut from it: its age */
	uint32_t gate_state;	     /* 1: relaxed by the promotion gate, 0: bound (gate.c) */
	uint32_t demoted;    /* moved down by demotion: the gate never lets it be promoted */
	uint32_t pages_free; /* pages below the bump given back (purged runs) */
	uint32_t moving;     /* a retag is under way: no run is cut from it */
	uint8_t on_holes;
	uint8_t page_class[TA_CHUNK_PAGES]; /* the class of the run a page is in; TA_PAGE_NONE */
	uint8_t run_back[TA_CHUNK_PAGES];   /* pages from a run's page back to its first */
	struct ta_run run[TA_CHUNK_PAGES];  /* at a run's first page */
};
_Static_assert(sizeof(struct ta_chunk) <= TA_PAGE_SIZE, "a chunk's header fits in its page 0");
#define TA_CHUNK_MAGIC 0x74696572636b6e31ull /* "tierckn1" */
#define TA_PAGE_NONE   0xff

/* Runs of one class and tier that have objects to hand out, fullest handed out first. */
struct ta_central_bin {
	pthread_mutex_t lock;
	struct ta_run *head, *tail;
	uint32_t nempty; /* listed runs with every object back */
} __attribute__((aligned(64)));

struct ta_arena {
	struct ta_central_bin bins[TA_NCLASSES];
	pthread_mutex_t chunk_lock;
	struct ta_chunk *cur; /* the chunk fresh pages are cut from */
	struct ta_chunk *chunks;
	struct ta_chunk *holes; /* chunks with free pages below their bump */
	_Atomic uint64_t nchunks;
	_Atomic uint64_t purged; /* bytes of empty runs given back to the kernel */
	/* Accounting: charged = runs cut (small objects, in use or free) + large objects + every
	 * thread's stock. Written when a run is cut and on stock refills and trims; limit is read
	 * there too, so they share a line and the counters below get their own. */
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
	_Atomic uint64_t demoted;	/* bytes of charge moved from this tier to a lower one */
	_Atomic uint64_t demotions;	/* ranges (chunks, large objects) moved from this tier */
	_Atomic uint64_t reclaim_asked; /* bytes this process wrote to memory.reclaim for it */
};

extern struct ta_arena ta_arenas[TA_MAX_TIERS];
extern uint8_t *ta_chunk_map;

int ta_arena_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS]);
/* How a fill may charge the tier for a new run: at this limit level (TA_LIMIT_HIGH or
 * TA_LIMIT_MAX), or forced (explicit requests, the overflow into the last tier). */
struct ta_fill_charge {
	int level;
	bool force;
	bool refused; /* out: a run was needed and the tier's limit refused it */
};
/* Store up to want objects of cls in out[]; returns how many. Free objects first (already
 * charged), then new runs, each charged whole as ch says. 0: nothing free and no run allowed
 * (ch->refused) or no memory. */
unsigned ta_arena_fill(unsigned tier, unsigned cls, void **out, unsigned want,
		       struct ta_fill_charge *ch);
/* Give back n objects of cls (each to its run). */
void ta_arena_flush(unsigned tier, unsigned cls, void *const *objs, unsigned n);
/* Give the pages of the tier's runs that have been empty (every object back) for min_age_ns or
 * more back to the kernel, and their charge; returns the bytes. */
uint64_t ta_arena_purge(unsigned tier, uint64_t min_age_ns);
/* From slow paths and the worker, at most every 100 ms: purge what has been empty a second. */
void ta_arena_decay(void);
void ta_arena_fork_prepare(void);
void ta_arena_fork_parent(void);
void ta_arena_fork_child(void);
/* In a forked child: what it holds now is its parent's (copy-on-write), charged in the parent's
 * slot; giving it back never touches the segment. */
void ta_arena_fork_inherit(void);
/* Give back what the tier holds and does not use (empty runs, kept large objects) now: quota
 * pressure. Returns the bytes. ta_purge_all: every tier (ctl "purge", malloc_trim). */
uint64_t ta_give_back(unsigned tier);
uint64_t ta_purge_all(void);

static inline int ta_chunk_tier_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	if (unlikely(ta_chunk_map == NULL || (a >> TA_ADDR_BITS) != 0))
		return -1;
	/* A retag changes the byte under our feet: an atomic load (a plain one on x86). */
	return (int)__atomic_load_n(&ta_chunk_map[a >> TA_CHUNK_SHIFT], __ATOMIC_RELAXED) - 1;
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
/* Demotion moved bytes of this process's charge from one tier to another (both counters, this
 * process's and the cgroup's). */
void ta_arena_move_charge(unsigned from, unsigned to, uint64_t bytes);
/* ... and live bytes of its objects in use (statistics only). */
void ta_arena_move_live(unsigned from, unsigned to, uint64_t bytes);
/* Up to max chunks of the tier that could be demoted now (not the one runs are cut from, no
 * class's current run in it), with their age. */
struct ta_chunk_info {
	struct ta_chunk *chunk;
	uint64_t carved_ns;
	uint32_t pages_used; /* its bump */
	uint32_t pages_held; /* pages of its runs (the header's included) */
};
unsigned ta_arena_chunks(unsigned tier, struct ta_chunk_info *out, unsigned max, bool movable);
/* After its pages moved: make chunk c a chunk of tier to (free lists, map, list); returns the
 * charge to move with it (its runs' pages), or -1 if it can no longer be moved. *live: about the
 * bytes of its objects in use (those neither on a central list nor in a thread's cache). */
int64_t ta_arena_retag_chunk(struct ta_chunk *c, unsigned to, uint64_t *live);

/* ---- cold.c: large objects on record, and the order in which memory is demoted ---- */
/* A large object's record, kept apart from it (large.c): the object has exactly the bytes it
 * asked for from its tier's kind. */
struct ta_large {
	struct ta_large *prev, *next; /* its tier's list, under the registry's lock */
	void *user;		      /* the object: what its home tier's kind returned */
	uint64_t size;		      /* usable bytes */
	uint64_t born_ns;	      /* CLOCK_MONOTONIC at allocation */
	uint32_t placed;  /* tier charged and holding its pages: home, or where it was demoted */
	uint32_t state;	  /* TA_LARGE_* bits, under the registry's lock */
	uint32_t tier;	  /* home: the tier whose kind it came from and goes back to */
	uint32_t aligned; /* allocated with an alignment above 16: never reallocated in place */
	uint32_t shard;	  /* the registry's shard that holds it (cold.c) */
	uint32_t reserved;
};
_Static_assert(sizeof(struct ta_large) == 64, "one cache line per large object's record");
#define TA_LARGE_BUSY	 1u /* the enforcement pass is moving or binding it */
#define TA_LARGE_FREED	 2u /* freed while busy: the pass frees it when done */
#define TA_LARGE_REBOUND 4u /* its range's policy is not its home kind's: restore before free */
#define TA_LARGE_RELAXED 8u /* the promotion gate let NUMA balancing act on it */

/* Put a new large object on record (its tier's list in the calling thread's shard, the
 * address table): its record, or NULL when no memory was left for either. */
struct ta_large *ta_large_register(void *user, uint64_t size, unsigned tier, bool aligned);
/* Take l off its tier's list; *last: what its record said. Freeing (its table entry already
 * cleared, ta_large_claim): its record goes back too; false when the pass holds it (the pass
 * frees it when done). Not freeing (realloc in place): also out of the table; false when busy,
 * demoted or rebound, or no table node could be reserved for its new address, and l stays on
 * record. */
bool ta_large_unregister(struct ta_large *l, struct ta_large *last, bool freeing);
/* After a realloc in place: l at its new address and size, back on record. Cannot fail (the
 * table nodes were reserved by ta_large_unregister). */
void ta_large_reregister(struct ta_large *l, void *user, uint64_t size);
/* Give l's record back (after its object went back to the backend). */
void ta_large_forget(struct ta_large *l);
void ta_large_fork_prepare(void);
void ta_large_fork_parent(void);
void ta_large_fork_child(void);

/* ---- large.c: records of large objects, and the table from address to record ---- */
/* The record of the large object that starts at p, or NULL. No lock. */
struct ta_large *ta_large_find(const void *p);
/* Free's claim on l: clears its table entry if it still names l. false: it did not (a double or
 * racing free). No lock. */
bool ta_large_claim(struct ta_large *l);
/* A shard's spare records and table node; the rest under that shard's lock (cold.c). */
struct ta_large_pool {
	struct ta_large *free_records;
	void *spare_leaf;
};
struct ta_large *ta_large_record_new(struct ta_large_pool *pool);
void ta_large_record_free(struct ta_large_pool *pool, struct ta_large *l);
/* Make sure a table entry can be set for any address without allocating: false if the node
 * cannot be had. */
bool ta_large_table_reserve(struct ta_large_pool *pool);
/* Set p's entry to l: false when a node could not be had (none reserved). */
bool ta_large_table_set(const void *p, struct ta_large *l, struct ta_large_pool *pool);
void ta_large_table_clear(const void *p);

/* A range the enforcement pass may demote or bind. */
enum ta_range_kind { TA_RANGE_CHUNK, TA_RANGE_LARGE };
struct ta_cold_range {
	void *addr;
	size_t len;	 /* bytes the range spans */
	uint64_t charge; /* large: its size; chunks: known when retagged */
	uint64_t age_ns; /* since allocation (large) or since a run was last cut (chunk) */
	uint64_t score;	 /* lower is colder */
	void *owner;	 /* struct ta_chunk * or struct ta_large * */
	uint8_t kind;
};
/*
 * The cold policy ranks ranges; the default ("age") scores by age alone, oldest first, since
 * nothing better is visible without privileges. A source of real hotness (NUMA hinting faults
 * seen by BPF) replaces it by setting ta_cold_policy.
 */
struct ta_cold_policy {
	const char *name;
	uint64_t (*score)(const struct ta_cold_range *r);
};
extern const struct ta_cold_policy *ta_cold_policy;
/* Up to max ranges of the tier, coldest first. Large objects returned are marked busy and must
 * be handed back with ta_cold_release. */
unsigned ta_cold_collect(unsigned tier, struct ta_cold_range *out, unsigned max);
/* Done with a large range: moved_to >= 0 when its pages now sit on that tier; relaxed 1 or 0
 * when the gate relaxed or bound it, -1 unchanged. Frees it if it was freed meanwhile. */
void ta_cold_release(struct ta_cold_range *r, int moved_to, int relaxed);
/* Large objects of the tier on record (for the promotion gate). Marked busy, like collect. */
unsigned ta_cold_large_all(unsigned tier, struct ta_cold_range *out, unsigned max);
/* Free a large object for good (the backend's kind of its home tier, its charge). */
void ta_large_destroy(struct ta_large *l);

/* ---- tcache.c: per-thread caches ---- */
/* A stack of cached objects: freeing writes nothing into the object itself. */
struct ta_bin {
	uint32_t count;
	uint32_t cap;
	void **slots;
};

struct ta_tcache {
	struct ta_bin bins[TA_MAX_TIERS][TA_NCLASSES];
	int64_t stock[TA_MAX_TIERS]; /* pre-charged bytes for large objects, not handed out yet */
	int64_t live[TA_MAX_TIERS];  /* bytes handed out minus bytes freed by this thread */
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
/* Refill the thread's stock for tier (large objects); false when the tier's limit forbids it. */
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
/* malloc_trim: this thread's cached objects back to their runs, then everything held and unused
 * back to the kernel; 1 if anything went. */
int ta_trim(size_t pad);
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

/* ---- demote.c: the only caller of mbind ---- */
/* Move the pages of [addr, addr+len) (page-aligned inside) to tier's nodes and bind them there. */
int ta_demote_range(void *addr, size_t len, unsigned tier);
/* Bind [addr, addr+len) to tier's nodes without moving (relax=false), or let NUMA balancing move
 * it into faster tiers up to tier `upto` (relax=true). move: take back pages that left. */
int ta_bind_range(void *addr, size_t len, unsigned tier, bool move);
int ta_relax_range(void *addr, size_t len, unsigned tier, unsigned upto);
/* A freed large object's range goes back to its home tier's policy, its pages dropped. */
void ta_restore_range(void *addr, size_t len, unsigned home);
/* Demote up to bytes of this process's memory from tier from to tier to, coldest first;
 * returns the bytes of charge moved. */
uint64_t ta_demote(unsigned from, unsigned to, uint64_t bytes);

/* ---- enforce.c: reconcile with the kernel, demote, reclaim, gate (issue 5) ---- */
struct ta_enforce_in {
	unsigned ntiers;
	uint64_t observed[TA_MAX_TIERS];   /* the cgroup's bytes on each tier's nodes */
	uint64_t limit[TA_MAX_TIERS][4];   /* TA_LIMIT_* per tier */
	uint64_t cg_charged[TA_MAX_TIERS]; /* every process's charge */
	uint64_t my_charged[TA_MAX_TIERS]; /* this process's */
	uint64_t current;		   /* memory.current, UINT64_MAX: unknown */
	bool gated[TA_MAX_TIERS];	   /* the gate of the last pass (hysteresis) */
	/* The agent saw the kernel promote into the tier since the last pass. */
	bool promoting[TA_MAX_TIERS];
	uint64_t cg_high; /* min(memory.high, memory.max), UINT64_MAX: none */
};
struct ta_enforce_plan {
	uint64_t demote[TA_MAX_TIERS][TA_MAX_TIERS]; /* this process's bytes from a to b */
	uint64_t reclaim[TA_MAX_TIERS];		     /* its bytes for memory.reclaim, per tier */
	uint64_t reclaim_total;			     /* ... for the cgroup's total */
	/* Promotions into the tier must stop: it is within half a gate margin (ta_shm_gate_margin)
	 * of its high share (and reopens only below the whole margin, so the gate does not flap).
	 */
	bool gate[TA_MAX_TIERS];
};
/* Alarms of the agent this process took (ctl "agent.alarms"). */
extern _Atomic uint64_t ta_agent_alarms;
/* What this process should do, from a reading: pure, unit-tested. */
void ta_enforce_plan(const struct ta_enforce_in *in, struct ta_enforce_plan *out);
/* One pass: observe (one process per period and cgroup), plan, act. Returns false when there
 * was nothing to act on (no new reading, no quotas). */
bool ta_enforce_pass(void);
/* Set under a real quota when a tier's charge (with what the kernel sees beyond it) reaches half
 * its high share or this process holds 16 MiB there, or when a tier was found full. */
extern _Atomic bool ta_enforce_wanted;
/* From the allocation slow paths, with no allocator lock held: start the worker, or run a pass
 * inline (TIERALLOC_ENFORCE=inline), as the mode says. */
void ta_enforce_poke(void);
void ta_enforce_fork_child(void);

/* ---- gate.c: the promotion gate (TIERALLOC_PROMOTION) ---- */
/* gate[t]: promotions into tier t must stop. Returns true when a gate closed (and took back
 * what the kernel had promoted). */
bool ta_gate_update(const bool gate[TA_MAX_TIERS]);

/* ---- worker.c: the per-process enforcement thread ---- */
#define TA_ENFORCE_PERIOD_NS (200 * 1000 * 1000ull)
void ta_worker_start(void);
void ta_worker_kick(void);
void ta_worker_fork_child(void);

static inline uint64_t ta_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- stats.c / ctl.c ---- */
int ta_stats_tier(unsigned tier, struct tieralloc_tier_stats *out);
int ta_ctl_get(const char *name, void *out, size_t *len);
int ta_ctl_set(const char *name, const void *in, size_t len);

/* ---- summary.c: per-process summary at exit (TIERALLOC_SUMMARY) ---- */
void ta_summary_write(const char *dest);

#endif /* TA_INTERNAL_H */
