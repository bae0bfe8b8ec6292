/* SPDX-License-Identifier: MIT */
/*
 * The allocator layer (src/alloc/): size classes, thread caches, chunks and runs, the large
 * objects and their heap, the bootstrap allocator, the memkind backend, the placement of ranges
 * on a tier's nodes, and the malloc family. Of the quotas it sees only quota/charge.h.
 *
 * Memory layout in one paragraph: small objects (<= TA_SMALL_MAX) live in 4 MiB chunks that the
 * tier's memkind kind provides; a chunk's first 16 KiB page holds its header, the rest is cut
 * into runs of one size class each. A byte map indexed by address >> TA_CHUNK_SHIFT tells in O(1)
 * whether a pointer is in one of our chunks and in which tier. Larger objects come from the
 * tier's heap (lheap.c), their records apart (large.c). Each thread caches freed small objects
 * per tier and size class. A tier is charged for small objects by the run: a run's pages when it
 * is cut, kept while its objects come and go (the memory stays the process's, in that tier);
 * large objects are charged whole, through a per-thread stock of pre-charged bytes.
 */
#ifndef TA_ALLOC_H
#define TA_ALLOC_H

#include <signal.h>

#include "base/base.h"
#include "quota/charge.h"

#define TA_CHUNK_SHIFT 22
#define TA_CHUNK_SIZE  ((size_t)1 << TA_CHUNK_SHIFT)
#define TA_PAGE_SHIFT  14 /* runs are cut in 16 KiB pages; page 0 is the chunk's header */
#define TA_PAGE_SIZE   ((size_t)1 << TA_PAGE_SHIFT)
#define TA_CHUNK_PAGES (TA_CHUNK_SIZE / TA_PAGE_SIZE)
#define TA_SMALL_MAX   ((size_t)65536)
#define TA_NCLASSES    224

/*
 * The allocator's locks and their order, outer first: a thread may take a lock only when every
 * lock it holds ranks below it. Debug builds (--enable-debug) check it on every acquisition
 * (ta_lock); release builds take the mutex and nothing else. No lock is held across mbind,
 * move_pages, a cgroup file or a futex wait, nor across code a signal handler's free could wait
 * on (such frees are deferred). The fork handlers (api/init.c) take every lock in this order,
 * unchecked: they hold many of one rank at once.
 */
enum ta_lock_rank {
	TA_RANK_REGISTRY, /* tcache.c: the thread caches' registry */
	TA_RANK_SHAPE,	  /* arena.c: retags and the pages of runs given back */
	TA_RANK_BIN,	  /* arena.c: a tier and class's bin; */
	TA_RANK_BIN_HIGH, /* ... the second of two bins of one class, the higher tier's */
	TA_RANK_CHUNK,	  /* arena.c: a tier's chunk list and bump */
	TA_RANK_SHARD,	  /* large.c: a shard of the large objects' record */
	TA_RANK_HEAP,	  /* lheap.c: a tier's large-object heap (memkind's own locks after) */
	TA_RANK_BACKEND,  /* backend.c: memkind's start, under a chunk's or a heap's lock */
};
#ifdef TA_DEBUG
extern __thread uint32_t ta_locks_held __attribute__((tls_model("initial-exec")));
static inline void ta_lock(pthread_mutex_t *m, enum ta_lock_rank rank)
{
	TA_ASSERT((ta_locks_held >> rank) == 0);
	pthread_mutex_lock(m);
	ta_locks_held |= 1u << rank;
}
static inline void ta_unlock(pthread_mutex_t *m, enum ta_lock_rank rank)
{
	ta_locks_held &= ~(1u << rank);
	pthread_mutex_unlock(m);
}
#else
static inline void ta_lock(pthread_mutex_t *m, enum ta_lock_rank rank)
{
	(void)rank;
	pthread_mutex_lock(m);
}
static inline void ta_unlock(pthread_mutex_t *m, enum ta_lock_rank rank)
{
	(void)rank;
	pthread_mutex_unlock(m);
}
#endif

/* ---- the allocator's state (alloc.c), moved by api/init.c ---- */
enum ta_state { TA_UNINIT = 0, TA_INITIALIZING, TA_READY, TA_PASSTHROUGH };
extern _Atomic int ta_state;
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

/* ---- backend.c: the only includer of memkind.h ---- */
struct ta_backend_tier {
	char kind_name[32];
	bool bound; /* the kind binds to exactly the tier's nodes */
};
extern struct ta_backend_tier ta_backend[TA_MAX_TIERS];
/* Ready the source; memkind starts when first needed, or now under TIERALLOC_SHOW_CONFIG or
 * TIERALLOC_STRICT: then one kind per tier is picked and checked (tiers memkind cannot bind fall
 * back to MEMKIND_DEFAULT with one error line), and -errno when not even the default kind works. */
int ta_backend_init(const struct ta_topology *topo, struct ta_options *opts);
/* A chunk (TA_CHUNK_SIZE, aligned to it), never freed: the process's first ones straight from the
 * kernel. */
void *ta_backend_chunk(unsigned tier);
/* A block from the tier's kind (memkind starts here if it has not yet). */
void *ta_backend_alloc(unsigned tier, size_t size, size_t align, bool zero);
void ta_backend_free(unsigned tier, void *raw, size_t size);
bool ta_backend_memkind_started(void);
/* As if memkind could not start (tests): every request then comes straight from the kernel. */
void ta_backend_refuse_memkind(void);
void ta_backend_fork_prepare(void);
void ta_backend_fork_parent(void);
void ta_backend_fork_child(void);
/* This thread is starting memkind: what it allocates meanwhile comes from the boot allocator. */
extern __thread bool ta_backend_starting __attribute__((tls_model("initial-exec")));
/* Called (set by api/init.c) on the starting thread, under the start lock: before memkind's late
 * start, and with started=true once it has started (its jemalloc registered fork handlers then,
 * and holds metadata no allocation charged). */
extern void (*ta_backend_on_start)(bool started);
/* A memkind kind that must outlive memkind's destructor (one of ours). */
bool ta_backend_kind_kept(void *kind);
/* Give back to the kernel every freed page the tier's kind still holds (lheap.c, when it
 * returns a region). */
void ta_backend_purge(unsigned tier);

/* ---- memkind_link.c: what linking memkind's archive needs ---- */
extern const char *jemk_malloc_conf;
/* Load libnuma for memkind (at its start): 0, or -ENOENT when it cannot be loaded. */
int ta_memkind_link_start(void);

/* ---- sizeclass.c ---- */
extern const uint32_t ta_class_size[TA_NCLASSES];
extern const uint8_t ta_class_small_lut[(1024 >> 4) + 1];
extern const uint16_t ta_class_cache_cap[TA_NCLASSES];
/* Per class, UINT64_MAX / size + 1: n < 2^32 is a multiple of the size iff n * it < it, in 64
 * bits (Lemire, Kaser, Kurz, "Faster remainder by direct computation", 2019). */
extern const uint64_t ta_class_div[TA_NCLASSES] TA_HIDDEN; /* hidden: no GOT load */

/* Per class: 1 for a fine class in use (sizeclass.c); sizes of the others above 1 KiB go to the
 * coarse class above. Fine classes are the even ones past 1 KiB; a young process uses none. */
extern uint8_t ta_class_fine_ok[TA_NCLASSES];
/* Every fine class whose run fits (ta_class_fits) from now on, or none again (tests). */
void ta_class_set_fine(bool fine);
/* Whether fine classes were ever in use in this process. */
bool ta_class_fine(void);
#define TA_FINE_CLASSES_AFTER 8u /* chunks of small objects (32 MiB) */
static inline bool ta_class_is_coarse(unsigned cls)
{
	return cls < 32u || (cls & 1u);
}
/* Whether the class's runs leave at most 1/128 unused after their last object. */
bool ta_class_fits(unsigned cls);

static inline unsigned ta_size_class(size_t n)
{
	if (n <= 1024)
		return ta_class_small_lut[(n + 15) >> 4];
	/* 32 per doubling above 1 KiB: class 32 is 1056, 33 is 1088. */
	size_t x = n - 1;
	unsigned lg = 63u - (unsigned)__builtin_clzl(x);
	unsigned cls = 32u + (lg - 10u) * 32u + (unsigned)((x >> (lg - 5u)) & 31u);
	return cls | (__atomic_load_n(&ta_class_fine_ok[cls], __ATOMIC_RELAXED) ^ 1u);
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
 * (that tier's, that class's). A packed run (cls TA_PAGE_PACKED) is never listed: its empty_ns
 * counts the class bytes it handed out (under the chunk lock), for the statistics of a retag. */
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
	uint32_t pages_idle; /* pages below the bump free but kept, charged (TA_PAGE_IDLE) */
	uint32_t moving;     /* a retag is under way: no run is cut from it */
	uint32_t heat;	     /* enforce/access.c's: how much of it was written lately */
	/* Class bytes of its packed objects on central lists (any tier's), for a retag's books. */
	_Atomic uint64_t packed_free;
	uint8_t on_holes;
	uint8_t huge_half; /* its upper half may be one huge page: given back only whole */
	/* The upper half of a huge_half chunk is advised huge (upper_huge) only once no run will be
	 * cut from the bump (closed) and every run there has handed out all its fresh objects
	 * (upper_open counts the others): arena.c. */
	_Atomic uint8_t closed;
	_Atomic uint8_t upper_huge;
	_Atomic uint16_t upper_open;
	uint8_t page_class[TA_CHUNK_PAGES]; /* the class of the run a page is in; TA_PAGE_NONE */
	uint8_t run_back[TA_CHUNK_PAGES];   /* pages from a run's page back to its first */
	struct ta_run run[TA_CHUNK_PAGES];  /* at a run's first page */
};
_Static_assert(sizeof(struct ta_chunk) <= TA_PAGE_SIZE, "a chunk's header fits in its page 0");
#define TA_CHUNK_MAGIC 0x74696572636b6e31ull /* "tierckn1" */
#define TA_PAGE_NONE   0xff		     /* free, given back (or never cut) */
#define TA_PAGE_IDLE   0xfe /* free, still resident and charged: its huge page is partly used */
#define TA_PAGE_PACKED 0xfd /* in a packed run: objects of any class, each with a header */
#define TA_HALF_PAGES  (TA_CHUNK_PAGES / 2)
_Static_assert(TA_NCLASSES < TA_PAGE_IDLE, "a page's class fits its byte");

/* Runs of one class and tier that have objects to hand out, fullest handed out first. */
struct ta_central_bin {
	pthread_mutex_t lock;
	struct ta_run *head, *tail;
	uint32_t nempty; /* listed runs with every object back */
} __attribute__((aligned(64)));

struct ta_arena {
	pthread_mutex_t chunk_lock;
	struct ta_chunk *cur; /* the chunk fresh pages are cut from */
	struct ta_chunk *chunks;
	struct ta_chunk *holes; /* chunks with free pages below their bump */
	_Atomic uint64_t nchunks;
	_Atomic uint64_t purged; /* bytes of empty runs given back to the kernel */
	/* The tier's charge, limit and peak are charge.c's (ta_charges). */
	_Atomic int64_t folded_live; /* exited threads' and cache-less live bytes */
	_Atomic uint64_t folded_allocs;
	_Atomic uint64_t folded_steered_in;
	_Atomic uint64_t folded_explicit;
	_Atomic uint64_t backend_failures;
	_Atomic uint64_t demoted;	/* bytes of charge moved from this tier to a lower one */
	_Atomic uint64_t demotions;	/* ranges (chunks, large objects) moved from this tier */
	_Atomic uint64_t reclaim_asked; /* bytes this process wrote to memory.reclaim for it */
	/* Where packed objects are cut, under chunk_lock: consecutive packed runs of one chunk (the
	 * last one cut, and the area's start, bytes used and size). */
	struct ta_run *pack_run;
	char *pack_base;
	uint32_t pack_used, pack_size;
	/* Per class, freed packed objects (linked through their first word), under the class's
	 * bin lock; possibly of another tier since their chunk was retagged (arena.c). */
	void *packed[TA_NCLASSES];
	/* Last, coarse classes first (arena.c's central_bin): a young process's bins and the
	 * fields above share 10 KiB. */
	struct ta_central_bin bins[TA_NCLASSES];
};

extern struct ta_arena ta_arenas[TA_MAX_TIERS];
extern uint8_t *ta_chunk_map TA_HIDDEN; /* hidden: free reads it without a GOT load */
/* Chunks retagged so far (bumped after the chunk map changes): a thread cache whose objects were
 * checked against an older count checks them again (alloc.c) before malloc's fast path hands one
 * out, which so need not look at each object's chunk. */
extern _Atomic uint64_t ta_retag_gen TA_HIDDEN;

int ta_arena_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS]);
/* How a fill may charge the tier for a new run: at this limit level (TA_LIMIT_HIGH or
 * TA_LIMIT_MAX), or forced (explicit requests, the overflow into the last tier). */
struct ta_fill_charge {
	int level;
	bool force;
	bool refused;	 /* out: a run was needed and the tier's limit refused it */
	bool no_new_run; /* free objects only: the caller packs a new one (ta_arena_pack) */
	bool runs_only;	 /* not the packed free objects: an alignment above 16 is asked */
};
/* Store up to want objects of cls in out[]; returns how many. Free objects first (already
 * charged), then new runs, each charged whole as ch says. 0: nothing free and no run allowed
 * (ch->refused) or no memory. */
unsigned ta_arena_fill(unsigned tier, unsigned cls, void **out, unsigned want,
		       struct ta_fill_charge *ch);
/* Whether a request of size bytes is packed now: the process is young (its packed runs are under
 * TIERALLOC_PACK) and the size is medium. */
bool ta_arena_packs(size_t size);
/* A new packed object of at least size bytes in the tier, from its packed run or a new one charged
 * as ch says; NULL when refused (ch->refused), when the process no longer packs, or no memory. */
void *ta_arena_pack(unsigned tier, size_t size, struct ta_fill_charge *ch);
/* Bytes of packed runs the process may cut from now on (TIERALLOC_PACK at start; 0: none), and
 * nothing packed or freed yet as far as stopping is concerned (ta_arena_pack_freed). */
void ta_arena_set_pack_limit(uint64_t bytes);
/* Bytes of packed objects freed: past a quarter of those packed (and TA_PACK_FREED_FLOOR), the
 * process packs no more. */
void ta_arena_pack_freed(uint64_t bytes);
#define TA_PACK_FREED_BATCH 16384u	 /* a thread reports its packed frees by this many bytes */
#define TA_PACK_FREED_FLOOR (256u << 10) /* frees that never stop packing */
/* Give back n objects of cls (each to its run). */
void ta_arena_flush(unsigned tier, unsigned cls, void *const *objs, unsigned n);
/* Give the pages of the tier's runs that have been empty (every object back) for min_age_ns or
 * more back to the kernel, and their charge; returns the bytes. */
uint64_t ta_arena_purge(unsigned tier, uint64_t min_age_ns);
/* From slow paths and the worker, at most every 100 ms: purge what has been empty a second. */
void ta_arena_decay(void);
/* Tests: whether chunks past the first `after` get a huge-page upper half (ta_arena_init sets it
 * from the kernel's THP mode). */
void ta_arena_set_huge_halves(bool on, unsigned after);
void ta_arena_fork_prepare(void);
void ta_arena_fork_parent(void);
void ta_arena_fork_child(void);
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

/*
 * Heap integrity (check.c). A misuse that glibc stops must not corrupt the heap silently:
 *   - a freed small object carries a mark in its second word (the secret ^ its address), written
 *     by free and cleared by malloc, so a second free finds it wherever the object is then: a
 *     thread's cache, another thread's, its run's free list (the first word is the link);
 *   - free, realloc and malloc_usable_size take only a pointer that starts an object of its run's
 *     class (ta_run_starts) or a packed object whose header's hash matches (ta_pack_class_of);
 *   - free-list links are stored XORed with their own address >> 12 and a secret, and checked to
 *     point at an object of the same run (or a packed object of the same class) when taken.
 * A failed check calls ta_misuse, which aborts (or warns and returns: the caller then leaks).
 */
struct ta_secrets {
	uint64_t mark; /* a freed object's second word: mark ^ its address */
	uint64_t tag;  /* keys the packed headers' tags */
	uint64_t link; /* free-list links */
};
extern struct ta_secrets ta_secret TA_HIDDEN; /* hidden: read without a GOT load */
/* Set the secrets (getrandom), once, before the first chunk. */
void ta_check_init(void);
enum ta_misuse {
	TA_MISUSE_DOUBLE_FREE,
	TA_MISUSE_FREED,   /* realloc of a freed object */
	TA_MISUSE_INVALID, /* inside a chunk, but not an object's start */
	TA_MISUSE_HEADER,  /* a packed object's header fails its tag: overwritten, or not a start */
	TA_MISUSE_LINK,	   /* p's free-list link overwritten after it was freed */
};
/* One line naming the misuse, fn (the call) and p, then abort(); under TIERALLOC_ON_MISUSE=warn
 * a warning (the first 16), and the caller leaks what was involved. No lock may be held. */
void ta_misuse(enum ta_misuse what, const char *fn, const void *p);
/* p, in a chunk, starts no object: TA_MISUSE_HEADER in a packed run, else TA_MISUSE_INVALID. */
void ta_misuse_pointer(const char *fn, const void *p);

/* The object's words, whatever the program stored there. */
typedef uint64_t __attribute__((__may_alias__)) ta_word;
static inline bool ta_freed(const void *p)
{
	return ((const ta_word *)p)[1] == (ta_secret.mark ^ (uintptr_t)p);
}
static inline void ta_mark_freed(void *p)
{
	((ta_word *)p)[1] = ta_secret.mark ^ (uintptr_t)p;
}
static inline void ta_mark_taken(void *p)
{
	((ta_word *)p)[1] = 0;
}
/* A free-list link at `at` (a freed object's first word): glibc's safe-linking, keyed too, so
 * that a pointer written there by a use after free decodes to garbage that the taker refuses. */
#define TA_LINK_SHIFT 12
static inline void ta_link_put(void *at, const void *next)
{
	*(ta_word *)at = (uintptr_t)next ^ ((uintptr_t)at >> TA_LINK_SHIFT) ^ ta_secret.link;
}
static inline void *ta_link_get(const void *at)
{
	return (void *)(uintptr_t)(*(const ta_word *)at ^ ((uintptr_t)at >> TA_LINK_SHIFT) ^
				   ta_secret.link);
}

/* Whether p (in a page of a run of class cls) starts one of the run's objects: its offset in the
 * run is a multiple of the class's size (a multiply by ta_class_div, no division) and its last
 * byte is still in the run (not past the run's last object). */
static inline bool ta_run_starts(const void *p, size_t cls)
{
	uintptr_t a = (uintptr_t)p, page = (a >> TA_PAGE_SHIFT) & (TA_CHUNK_PAGES - 1);
	const uint8_t *back = ((const struct ta_chunk *)(a & ~(TA_CHUNK_SIZE - 1)))->run_back;
	uint64_t m = ta_class_div[cls];
	if (((a & (TA_PAGE_SIZE - 1)) + ((uint64_t)back[page] << TA_PAGE_SHIFT)) * m >= m)
		return false;
	/* Ends on a later page (rare for small classes): one as many pages further into the run. */
	uintptr_t more = ((a & (TA_PAGE_SIZE - 1)) + ta_class_size[cls] - 1) >> TA_PAGE_SHIFT;
	return more == 0 ||
	       (page + more < TA_CHUNK_PAGES && back[page + more] == back[page] + more);
}

/*
 * Packed runs (arena.c, "Packed runs"): a young process's first medium objects (TA_PACK_MIN to
 * TA_PACK_MAX bytes) sit back to back in runs shared by every class, glibc-like, each after an
 * 8-byte header; freed, one goes to the bin of the largest class it can serve (its header's).
 */
#define TA_PACK_MIN   65u
#define TA_PACK_MAX   16384u
#define TA_PACK_PAGES 2u /* pages of a packed run: room for the largest object */
struct ta_pack_hdr {
	uint32_t usable; /* bytes of the object: 8 mod 16, so that the next one is aligned */
	/* The bin it goes to (the largest class of at most usable bytes) in the low byte; above it
	 * 24 bits of a hash of the header and the object's address, keyed by the secret: an
	 * overflow from the object before, or a pointer that is not an object's start, fails. */
	uint32_t tag;
};
_Static_assert(sizeof(struct ta_pack_hdr) == 8, "one word, read and checked at once");
#define TA_PACK_TAG_MASK 0xffffff0000000000ull /* the hash's bits in the header's word */
/* The header word h (the hash's bits ignored) at p's, with its hash: one multiply, whose top
 * bits depend on every bit of the address, the secret and the fields. */
static inline uint64_t ta_pack_hash(const void *p, uint64_t h)
{
	return ((uintptr_t)p ^ ta_secret.tag ^ (h & ~TA_PACK_TAG_MASK)) * 0x9e3779b97f4a7c15ull;
}
static inline uint64_t ta_pack_word(const void *p, uint32_t usable, unsigned cls)
{
	uint64_t h = usable | (uint64_t)cls << 32;
	return h | (ta_pack_hash(p, h) & TA_PACK_TAG_MASK);
}
static inline const struct ta_pack_hdr *ta_pack_hdr_of(const void *p)
{
	return (const struct ta_pack_hdr *)((const char *)p - sizeof(struct ta_pack_hdr));
}
/* The class of the packed object that starts at p (16-aligned, in a packed run), or TA_NCLASSES
 * when its header fails its hash. */
static inline unsigned ta_pack_class_of(const void *p)
{
	uint64_t h = *(const ta_word *)ta_pack_hdr_of(p);
	unsigned cls = (unsigned)(h >> 32) & 0xffu;
	if (((ta_pack_hash(p, h) ^ h) & TA_PACK_TAG_MASK) != 0 || cls >= TA_NCLASSES ||
	    (uint32_t)h > TA_PACK_MAX + 8u)
		return TA_NCLASSES;
	return cls;
}
/* The class of the small object that starts at p, whichever run holds it; TA_NCLASSES when p
 * starts none (inside an object, a header overwritten, a free page). */
static inline unsigned ta_small_class_of(const void *p)
{
	unsigned cls = ta_chunk_class_of(p);
	if (cls < TA_NCLASSES)
		return ta_run_starts(p, cls) ? cls : TA_NCLASSES;
	if (cls != TA_PAGE_PACKED || ((uintptr_t)p & 15u) != 0)
		return TA_NCLASSES;
	return ta_pack_class_of(p);
}
/* Bytes the object at p may use (0 when p starts none of ours). */
static inline size_t ta_small_usable(const void *p)
{
	unsigned cls = ta_chunk_class_of(p);
	if (cls < TA_NCLASSES)
		return ta_run_starts(p, cls) ? ta_class_size[cls] : 0;
	return ta_small_class_of(p) < TA_NCLASSES ? ta_pack_hdr_of(p)->usable : 0;
}

/* ... and live bytes of its objects in use (statistics only). */
void ta_arena_move_live(unsigned from, unsigned to, uint64_t bytes);
/* Up to max chunks of the tier that could be demoted now (not the one runs are cut from, no
 * class's current run in it), with their age. */
struct ta_chunk_info {
	struct ta_chunk *chunk;
	uint64_t carved_ns;
	uint32_t pages_used; /* its bump */
	uint32_t pages_held; /* pages of its runs (the header's included) */
	uint32_t heat;
};
unsigned ta_arena_chunks(unsigned tier, struct ta_chunk_info *out, unsigned max, bool movable);
/* After a huge move of c's 2 MiB unit at unit (place.c): its 4 KiB pages that were absent
 * (present[i], mincore's, without bit 0), filled by the collapse, go back where no run holds
 * them. */
void ta_arena_drop_filled(struct ta_chunk *c, uintptr_t unit, const unsigned char *present);
/* After its pages moved: make chunk c a chunk of tier to (free lists, map, list); returns the
 * charge to move with it (its runs' pages), or -1 if it can no longer be moved. *live: about the
 * bytes of its objects in use (those neither on a central list nor in a thread's cache). */
int64_t ta_arena_retag_chunk(struct ta_chunk *c, unsigned to, uint64_t *live);

/* ---- lheap.c: large objects, cut from regions of their tier's kind ---- */
/* A block of at least size bytes at a page boundary aligned to align (zeroed if zero), or NULL. */
void *ta_lheap_alloc(unsigned tier, size_t size, size_t align, bool zero);
/* Back to the heap; dropped: its pages are not the tier's to keep (demoted, rebound): they are
 * given back instead of kept dirty. */
void ta_lheap_free(unsigned tier, void *p, bool dropped);
/* Grow or shrink p's block in place to size; false (and nothing changed) when it cannot. */
bool ta_lheap_resize(unsigned tier, void *p, size_t size);
/* Bytes the heap set aside for p (its pages), 0 if p does not start one of its blocks. */
size_t ta_lheap_usable(unsigned tier, void *p);
/* Bytes of freed pages the tier's heap holds (dirty), and of regions it took from the kind. */
uint64_t ta_lheap_dirty(unsigned tier);
uint64_t ta_lheap_mapped(unsigned tier);
/* Give back freed pages (largest free extents first) until at most keep bytes are dirty;
 * returns the bytes given back. */
uint64_t ta_lheap_purge(unsigned tier, uint64_t keep);
/* Huge pages for live blocks' whole 2 MiB units: 1 as under THP "always", 0 never, -1 as this
 * process's THP mode says (the default; tests set it). */
void ta_lheap_set_thp(int on);
/* Whether a live block's whole 2 MiB units are open to huge pages (THP "always"). */
bool ta_lheap_thp_blocks(void);
void ta_lheap_fork_prepare(void);
void ta_lheap_fork_parent(void);
void ta_lheap_fork_child(void);

/* ---- keep.c: freed large objects kept for reuse, charged to their tier ---- */
/* bytes of a large object freed in its home tier: kept (still charged); may purge. */
void ta_keep_put(unsigned tier, uint64_t bytes);
/* Set the tier's kept charge to the heap's dirty pages, giving back those past the bound. */
void ta_keep_sync(unsigned tier);
/* Up to bytes of kept charge for a new large object in the tier; returns what it took. */
uint64_t ta_keep_take(unsigned tier, uint64_t bytes);
/* Purge and uncharge what the tier keeps; false when it kept nothing. */
bool ta_keep_release(unsigned tier);
/* Release what was kept longer than a second ago (from slow paths and the worker). */
void ta_keep_age(void);
uint64_t ta_keep_bytes(unsigned tier);
uint64_t ta_keep_released(unsigned tier);
/* ---- large.c: large objects, their whole life ---- */
/* A large object's record, kept apart from it: the object has the whole pages it asked for from
 * its tier's heap. */
struct ta_large {
	struct ta_large *prev, *next; /* its tier's list, under its shard's lock */
	void *user;		      /* the object: what its home tier's heap returned */
	uint64_t size;		      /* usable bytes */
	uint64_t born_ns;	      /* CLOCK_MONOTONIC at allocation */
	uint32_t placed;  /* tier charged and holding its pages: home, or where it was demoted */
	uint32_t state;	  /* TA_LARGE_* bits, under its shard's lock */
	uint32_t tier;	  /* home: the tier whose heap it came from and goes back to */
	uint32_t aligned; /* allocated with an alignment above 16: never reallocated in place */
	uint32_t shard;	  /* the record's shard that holds it */
	uint32_t heat; /* enforce/access.c's; written under the shard's lock (ta_large_set_heat) */
};
_Static_assert(sizeof(struct ta_large) == 64, "one cache line per large object's record");
#define TA_LARGE_BUSY	 1u /* the enforcement pass is moving or binding it */
#define TA_LARGE_FREED	 2u /* freed while busy: the pass frees it when done */
#define TA_LARGE_REBOUND 4u /* its range's policy is not its home kind's: restore before free */
#define TA_LARGE_RELAXED 8u /* the promotion gate let NUMA balancing act on it */

/* A large object of size bytes aligned to align, steered (want_tier < 0) or in want_tier,
 * zeroed if zero; NULL when no tier could give it (or TIERALLOC_ON_FULL=enomem refused it). */
void *ta_large_alloc(size_t size, size_t align, int want_tier, bool zero);
/* The record of the large object that starts at p, or NULL. No lock, no system call. */
struct ta_large *ta_large_find(const void *p);
/* free(l's object): back to its heap, or left to the enforcement pass when it holds it. A
 * second free of the same object finds no record (ta_large_find) and is refused as foreign. */
void ta_large_free(struct ta_large *l);
/* l's object grown or shrunk in place to size: the same pointer, or NULL (nothing changed) when
 * its neighbours are taken, it was demoted or aligned, or the limit refused the growth. */
void *ta_large_realloc(struct ta_large *l, size_t size);
/* For the enforcement pass (cold.c ranks them): up to max of the tier's objects that are not
 * busy, oldest first, marked busy, as ranges. */
struct ta_cold_range;
unsigned ta_large_take(unsigned tier, struct ta_cold_range *out, unsigned max, uint64_t now);
/* Its heat (enforce/access.c), under its shard's lock: a free reads the record's words. */
void ta_large_set_heat(struct ta_large *l, uint32_t heat);
/* ... and each one's release: moved_to >= 0, it now sits there (and is bound there); relaxed 1,
 * the gate let NUMA balancing act on it, 0, bound to its tier again, -1 unchanged. An object
 * freed while busy is freed now. */
void ta_large_release(struct ta_large *l, int moved_to, int relaxed);
void ta_large_fork_prepare(void);
void ta_large_fork_parent(void);
void ta_large_fork_child(void);

/* A range the enforcement pass may demote or bind. */
enum ta_range_kind { TA_RANGE_CHUNK, TA_RANGE_LARGE, TA_RANGE_MAPPED };
struct ta_cold_range {
	void *addr;
	size_t len;	 /* bytes the range spans */
	uint64_t charge; /* large: its size; chunks: known when retagged */
	uint64_t age_ns; /* since allocation (large) or since a run was last cut (chunk) */
	uint64_t score;	 /* lower is colder */
	uint32_t heat;	 /* the owner's (enforce/access.c): 0 never sampled */
	void *owner;	 /* struct ta_chunk * or struct ta_large * */
	uint8_t kind;
};
/* ---- tcache.c: per-thread caches ---- */
/* A stack of cached objects: freeing writes only the object's mark (its second word). */
struct ta_bin {
	uint16_t count;
	uint16_t cap;
	/* Objects the next refill takes: 8 at first, doubling per refill up to cap / 2, so that a
	 * class a thread uses little costs it few slots touched and few objects held. cap, fill
	 * and slots are 0 until the class is first used (ta_tcache_grow). */
	uint16_t fill;
	void **slots;
};

struct ta_tcache {
	struct ta_stock stock;	    /* pre-charged bytes for large objects, not handed out yet */
	int64_t live[TA_MAX_TIERS]; /* bytes handed out minus bytes freed by this thread */
	/* Allocation counts: [t][0] placed as preferred, [t][1] steered in, [t][2] explicit. */
	uint64_t cnt[TA_MAX_TIERS][3];
	uint64_t allocs_when_full[TA_MAX_TIERS]; /* cnt's sum at the tier's last full bin */
	unsigned pref_tier;	/* tier the fast path tries: the fastest with headroom */
	unsigned pref_slot;	/* 0 or 1: is pref_tier there because a faster tier was full? */
	uint64_t retag_gen;	/* ta_retag_gen when every cached object was in its bin's tier */
	volatile int in_slow;	/* inside a slow path: signal-handler frees must not take locks */
	void *_Atomic deferred; /* frees that arrived from a signal handler mid-slow-path */
	size_t map_size;	/* bytes of this mmap'd structure with its slot arrays */
	uint32_t pack_freed;	/* bytes of packed objects freed, not yet reported */
	void **slot_next, **slot_end; /* the slot area not handed to a bin yet */
	struct ta_tcache *next, *prev;
	/* Last: a process with fewer tiers never touches the others' bins (10 KiB for three). */
	struct ta_bin bins[TA_MAX_TIERS][TA_NCLASSES];
};

extern __thread struct ta_tcache *ta_tls __attribute__((tls_model("initial-exec")));
/* This thread's cache, creating it; NULL if the thread is exiting or metadata ran out. */
struct ta_tcache *ta_tcache_get(void);
/* Give cached objects and stock back, fold counters into the arenas (thread exit). */
void ta_tcache_retire(struct ta_tcache *tc);
/* Give all but keep of a bin's objects back to the central list. */
void ta_tcache_flush_bin(struct ta_tcache *tc, unsigned tier, unsigned cls, unsigned keep);
void ta_tcache_drain_deferred(struct ta_tcache *tc);
/* Room for one more object in a full bin (a free or a rehome, in a slow path): grown, or objects
 * given back to the central list. */
void ta_tcache_make_room(struct ta_tcache *tc, unsigned tier, unsigned cls);
/* Give a bin its first 16 slots, or double them (up to its class's cap), in a slow path; false
 * when it cannot. */
bool ta_tcache_grow(struct ta_tcache *tc, unsigned tier, unsigned cls);
/* The end of a slow path (in_slow set at its start): frees that a signal handler deferred run now.
 */
static inline void ta_tcache_finish_slow(struct ta_tcache *tc)
{
	tc->in_slow = 0;
	if (__builtin_expect(atomic_load_explicit(&tc->deferred, memory_order_relaxed) != NULL, 0))
		ta_tcache_drain_deferred(tc);
}
/* A tier's statistics counters, summed over the live tcaches and what the arena holds folded. */
struct ta_tier_counts {
	int64_t live;
	uint64_t allocs, steered_in, explicit_allocs;
};
/* Both parts are read under the lock a retiring thread folds under, so no thread's counts are
 * seen twice (in its cache and folded) or not at all. */
void ta_tcache_sum(struct ta_tier_counts out[TA_MAX_TIERS]);
/* Live bytes of tier t (statistics): in this thread's cache, or folded into the tier without
 * one. */
static inline void ta_tcache_live_add(struct ta_tcache *tc, unsigned t, int64_t bytes)
{
	if (tc == NULL)
		atomic_fetch_add(&ta_arenas[t].folded_live, bytes);
	else
		__atomic_store_n(&tc->live[t], tc->live[t] + bytes, __ATOMIC_RELAXED);
}
/* An allocation placed in tier t (statistics); how: 0 preferred, 1 steered in, 2 explicit. */
static inline void ta_tcache_count_alloc(struct ta_tcache *tc, unsigned t, unsigned how)
{
	if (tc != NULL) {
		__atomic_store_n(&tc->cnt[t][how], tc->cnt[t][how] + 1, __ATOMIC_RELAXED);
		return;
	}
	struct ta_arena *a = &ta_arenas[t];
	atomic_fetch_add(&a->folded_allocs, 1);
	if (how == 1)
		atomic_fetch_add(&a->folded_steered_in, 1);
	else if (how == 2)
		atomic_fetch_add(&a->folded_explicit, 1);
}
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
/* After every allocation slow path, outside every lock (enforcement's, set at start-up). */
extern void (*ta_alloc_poke)(void);
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

/* ---- place.c: ranges placed on a tier's nodes, the only caller of mbind ---- */
/* Move the pages of [addr, addr+len) (page-aligned inside) to tier's nodes and bind them there.
 * 2 MiB units from addr + huge_from on are open to huge pages and may stay huge; chunk: the
 * range is that chunk, whose free pages a huge move may fill and give back ("Huge moves"). */
int ta_demote_range(void *addr, size_t len, unsigned tier, size_t huge_from,
		    struct ta_chunk *chunk);
/* The 2 MiB unit at unit (aligned), all of its pages present, to tier as one huge page where
 * the kernel migrates a page at a time ("Huge moves"), and bound there: for a unit that spans
 * several ranges all being demoted (demote.c). False, nothing moved, where huge moves are off or
 * the unit cannot take one; the ranges' own moves do it then. */
#define TA_HUGE_UNIT ((size_t)2 << 20)
bool ta_demote_unit(void *unit, unsigned tier);
/* Huge moves on (1), off (0), or as the kernel's version says (-1): for tests. */
void ta_place_set_huge_moves(int on);
/* 2 MiB units moved as huge pages so far in this process. */
uint64_t ta_place_huge_units_moved(void);
/* Bind [addr, addr+len) to tier's nodes without moving (relax=false), or let NUMA balancing move
 * it into faster tiers up to tier `upto` (relax=true). move: take back pages that left. */
int ta_bind_range(void *addr, size_t len, unsigned tier, bool move);
int ta_relax_range(void *addr, size_t len, unsigned tier, unsigned upto);
int ta_prefer_range(void *addr, size_t len, unsigned tier);
/* Move up to max bytes of [addr, addr+len)'s pages resident on from_nodes to to_nodes, policy
 * unchanged (a program's own mapping keeps its preference); the bytes moved. */
uint64_t ta_move_resident(uintptr_t addr, size_t len, uint64_t from_nodes, uint64_t to_nodes,
			  uint64_t max);
/* A freed large object's range goes back to its home tier's policy, its pages dropped. */
void ta_restore_range(void *addr, size_t len, unsigned home);
/* Resident pages of [addr, addr+len) per node (bytes added to per_node[node]); the pages found. */
uint64_t ta_resident_nodes(uintptr_t addr, size_t len, uint64_t per_node[TA_MAX_NODES]);

/* ---- maps.c: the program's own anonymous private mappings (docs/runtimes.md) ---- */
#define TA_MAPS_MAX 4096u
struct ta_maps_range {
	uintptr_t start, end;
};
struct ta_maps {
	struct ta_maps_range *r; /* sorted, disjoint, neighbours merged */
	unsigned n, cap;
	uint64_t bytes;		/* address space recorded */
	uint64_t refused;	/* mappings (or parts of them) that did not fit */
	uint64_t refused_bytes; /* ... and their address space */
};
/* The process's, under ta_maps_lock; recorded: anything ever was (else unmaps need no lock). */
extern struct ta_maps ta_maps;
extern _Atomic bool ta_maps_recorded;
/* ta_maps.bytes as of the last change, to read without the lock. */
extern _Atomic uint64_t ta_maps_bytes;
/* Recorded mappings worth a worker's samples under a quota: a runtime's heap, not a program's
 * own bookkeeping. */
#define TA_MAPS_WORKER_AFTER ((uint64_t)32 << 20)
/* Record [start, end) (what it overlapped is replaced); false when it did not fit. */
bool ta_maps_insert(struct ta_maps *m, uintptr_t start, uintptr_t end);
void ta_maps_erase(struct ta_maps *m, uintptr_t start, uintptr_t end);
bool ta_maps_overlaps(const struct ta_maps *m, uintptr_t start, uintptr_t end);
/* Every signal blocked (the old mask in *old), then the lock; its storage mapped on first use. */
void ta_maps_lock(sigset_t *old);
void ta_maps_unlock(const sigset_t *old);
/* A copy of up to max ranges, and the bytes recorded, for the sampler. */
unsigned ta_maps_copy(struct ta_maps_range *out, unsigned max, uint64_t *bytes);
/* Resident bytes of the recorded mappings per tier, at the last sample and at most; samples. */
extern _Atomic uint64_t ta_maps_resident[TA_MAX_TIERS];
extern _Atomic uint64_t ta_maps_resident_peak[TA_MAX_TIERS];
extern _Atomic uint64_t ta_maps_samples;
/* What the last sample took, and all of them (ns): the worker spaces them by it (worker.c). */
extern _Atomic uint64_t ta_maps_sample_ns;
extern _Atomic uint64_t ta_maps_sample_ns_total;
/* Sample where the recorded mappings are resident (mincore, then move_pages without moving) and
 * charge them (ta_charge_mapped); false when another thread is sampling. */
bool ta_maps_sample(bool wait);
/* Placement (docs/runtimes.md, step 3): under a quota with more than one tier, each sample
 * picks the fastest tier within its high share, the tier new ranges are bound to (policy only);
 * when the pick changes, every recorded range is bound to the new one, so that its later faults
 * land there and the pages already placed stay. placing: a pick was made; rebinds: changes. */
extern _Atomic bool ta_maps_placing;
extern _Atomic unsigned ta_maps_place_tier;
extern _Atomic uint64_t ta_maps_rebinds;
/* What the program grew by between its last two samples (filling leaves as much room below a
 * share, enforce/fill.c). */
extern _Atomic uint64_t ta_maps_growth;
/* Under the lock, after recording [start, end): bind it to the pick. */
void ta_maps_place_locked(uintptr_t start, uintptr_t end);
/*
 * Windows (enforce/ ranks and moves them): each sample cuts the recorded ranges into pieces
 * aligned to TA_MAPS_WINDOW and keeps those with pages resident, with their pages per tier as
 * that sample found them and a heat that enforce/access.c keeps on its own scale (0 unknown;
 * fresh: first seen since its last update). Held by whoever took them, the sampler excluded.
 */
#define TA_MAPS_WINDOW	   ((uintptr_t)2 << 20)
#define TA_MAPS_WINDOWS	   4096u
#define TA_MAPS_HEAT_MOVED 0xffffu /* enforce.h's TA_HEAT_MOVED */
#define TA_MAPS_PAGE	   4096u   /* the unit of a window's pages: the kernel's base page */
struct ta_maps_window {
	uintptr_t start;
	uint32_t len;
	uint32_t heat;
	uint32_t pages[TA_MAX_TIERS]; /* TA_MAPS_PAGE each */
	uint64_t seen_ns;	      /* when a sample first found pages in it */
};
/* The windows of the last sample, for the caller alone until it gives them back; false (none
 * taken) while a sample or another holder has them. */
bool ta_maps_windows_take(struct ta_maps_window **w, unsigned *n);
void ta_maps_windows_give(void);
/* Move up to max bytes of a window's pages from tier from to tier to (their preference kept),
 * charges with them; the bytes moved, 0 while a sample is under way. Windows not taken. */
uint64_t ta_maps_move_window(uintptr_t start, size_t len, unsigned from, unsigned to, uint64_t max);
/* Bytes of the recorded mappings moved from tier a to tier b (demotion, exchange, fill). */
extern _Atomic uint64_t ta_maps_moved[TA_MAX_TIERS][TA_MAX_TIERS];
void ta_maps_fork_prepare(void);
void ta_maps_fork_parent(void);
void ta_maps_fork_child(void);

#endif /* TA_ALLOC_H */
