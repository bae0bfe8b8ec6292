/* SPDX-License-Identifier: MIT */
/*
 * Per-tier arenas: 4 MiB chunks from the tier's memkind kind, cut into runs of 16 KiB pages, one
 * size class per run. A run's descriptor, in its chunk's header, holds the run's free objects (a
 * list through their first word) and how many were never handed out; each tier and class has a
 * bin listing the runs that have objects to hand out, which the thread caches fill from and flush
 * to in batches, each object going back to its own run. The chunk map (one byte per 4 MiB of
 * address space, reserved but only touched where chunks are) answers "is this pointer in a chunk,
 * and of which tier" in one load.
 *
 * Charging is by the run: cutting a run charges the tier its pages, at the limit level the
 * steering asks for, and a refused charge cuts no run. Objects handed out and freed again move no
 * charge: their memory stays the process's, in that tier, as the kernel sees it. So reusing a free
 * object never needs headroom, and what the kernel reports beyond the charges (untracked) is only
 * what tieralloc does not hold: metadata, page cache, pages the kernel moved.
 *
 * A run whose every object is back is empty. Empty runs are given back to the kernel (their
 * pages dropped with MADV_DONTNEED, their charge returned) once they have been empty for a second
 * (ta_arena_decay, from slow paths and the worker), and at once when a charge for their tier is
 * refused (quota pressure). Their pages become a hole in the chunk that the next run of any class
 * of the tier may take: memory freed in a tier serves its next allocations. In a chunk's huge-page
 * half the pages stay, charged, until the whole half is free (chunk_new, "Huge pages").
 *
 * Locks (their order: alloc/alloc.h, enum ta_lock_rank): a bin's lock, then its tier's
 * chunk_lock (cutting a run); shape_lock (retag, the pages of purged runs) before any bin lock;
 * two bins of one class: the lower tier's first.
 *
 * One file of about 1000 lines: cutting runs, filling and flushing bins, purging and retagging
 * all change a chunk's holes, its runs' lists and its charge under the locks above, and each
 * relies on the others' invariants; split, those helpers would become the tier's interface.
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"

struct ta_arena ta_arenas[TA_MAX_TIERS];
uint8_t *ta_chunk_map;
_Atomic uint64_t ta_retag_gen;
static unsigned arena_count;
/* Retags and the page maps of purged runs: they change which tier a chunk's pages belong to. */
static pthread_mutex_t shape_lock = PTHREAD_MUTEX_INITIALIZER;

#define TA_DECAY_NS	  (1000ull * 1000 * 1000) /* empty that long: given back */
#define TA_DECAY_EVERY_NS (100ull * 1000 * 1000)  /* the decay looks at most that often */
#define TA_THP_AFTER	  16 /* chunks per tier without huge pages (see chunk_new) */
/* The kernel's THP mode is "always" for this process: 1 or 0; -1 until a tier's chunk past
 * TA_THP_AFTER asks (most processes never get there, and start one file read lighter). */
static _Atomic int huge_halves = -1;
static unsigned huge_after = TA_THP_AFTER;

int ta_arena_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS])
{
	size_t map_size = (size_t)1 << (TA_ADDR_BITS - TA_CHUNK_SHIFT);
	void *map = ta_pages_map(map_size, true); /* a few bytes of it are touched */
	if (map == NULL)
		return -ENOMEM;
	/* The bins' locks are in .bss: where an unlocked mutex is all zero (glibc), they are ready
	 * as they are, and initialising them would touch 14 KiB per tier in every process for the
	 * few classes it uses. The tiers in use only: the others' locks are never taken. */
	static const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
	static const pthread_mutex_t zero;
	bool zero_is_unlocked = memcmp(&unlocked, &zero, sizeof(zero)) == 0;
	for (unsigned t = 0; t < ntiers; t++) {
		struct ta_arena *a = &ta_arenas[t];
		for (unsigned c = 0; c < TA_NCLASSES && !zero_is_unlocked; c++)
			pthread_mutex_init(&a->bins[c].lock, NULL);
		pthread_mutex_init(&a->chunk_lock, NULL);
	}
	ta_charge_init(ntiers, limits);
	arena_count = ntiers;
	ta_chunk_map = map;
	return 0;
}

/*
 * Huge pages. Under THP "always" the first touch of any 2 MiB of a chunk faults all of it, so the
 * chunk runs are being cut from costs up to 2 MiB more than what is in use: for a program holding a
 * few MiB that is most of what it holds. So a tier's first TA_THP_AFTER chunks (64 MiB) get none.
 *
 * A huge page partly given back (MADV_DONTNEED on some of its 4 KiB pages) is not freed: the
 * kernel splits its mapping and queues it for a split that happens only under memory pressure, so
 * the whole 2 MiB stays in the container's memory.current while neither tieralloc's charges nor
 * the cgroup's anon count it (measured in the guest: 284 MiB held that way after a program freed
 * 400 MiB of 64 KiB blocks; the cgroup then reached its memory.max, and once was OOM-killed, with
 * 400 MiB live in 600M). So past TA_THP_AFTER only a chunk's upper half may be a huge page, and it
 * goes back whole: a run there that empties keeps its pages, charged, as free pages of the chunk
 * (TA_PAGE_IDLE) that the tier's next runs take like holes and without a new charge, until every
 * page of the half is free; then the half goes back at once. The lower half, with the header that
 * never goes back, gets no huge page and gives its runs back one by one.
 *
 * Nor does the upper half fault huge: every class's current run there, and the chunk's uncut end,
 * would be resident whole (in the guest, 200 MiB of mixed sizes held 5.5 MiB more than on a host
 * without THP "always"). It starts MADV_NOHUGEPAGE like the rest, and becomes MADV_HUGEPAGE once
 * the chunk is closed (no longer the one the bump cuts from) and each run cut in the half has
 * handed out all its fresh objects: khugepaged may then collapse it with nothing to fault that a
 * program had not written. Going back whole makes it MADV_NOHUGEPAGE again.
 */
void ta_arena_set_huge_halves(bool on, unsigned after)
{
	atomic_store(&huge_halves, on ? 1 : 0);
	huge_after = after;
}

/* A class's central bin. The coarse classes' bins come first: they are all a young process uses
 * (sizeclass.c), and its bins, a cache line each, then lie in 8 KiB of .bss, not in all 14. */
static inline struct ta_central_bin *central_bin(unsigned tier, unsigned cls)
{
	_Static_assert(TA_NCLASSES == 32 + 2 * 96, "32 classes to 1 KiB, 96 coarse, 96 fine");
	unsigned at = cls < 32u	   ? cls
		      : (cls & 1u) ? 32u + (cls - 32u) / 2u
				   : 128u + (cls - 32u) / 2u;
	return &ta_arenas[tier].bins[at];
}

/* A process with this many chunks of small objects gains more from finer size classes than the
 * partly touched pages of their runs cost (sizeclass.c). */
static bool fine_classes_pay(void)
{
	uint64_t chunks = 0;
	for (unsigned t = 0; t < arena_count; t++)
		chunks += atomic_load_explicit(&ta_arenas[t].nchunks, memory_order_relaxed);
	return chunks >= TA_FINE_CLASSES_AFTER;
}

static struct ta_chunk *chunk_new(unsigned tier)
{
	struct ta_chunk *c = ta_backend_chunk(tier);
	if (c == NULL) {
		atomic_fetch_add(&ta_arenas[tier].backend_failures, 1);
		return NULL;
	}
	bool huge = false;
	if (atomic_load_explicit(&ta_arenas[tier].nchunks, memory_order_relaxed) >= huge_after) {
		int h = atomic_load_explicit(&huge_halves, memory_order_relaxed);
		if (h < 0) { /* two tiers may both read it: the same answer */
			h = ta_thp_always() ? 1 : 0;
			atomic_store_explicit(&huge_halves, h, memory_order_relaxed);
		}
		huge = h == 1;
	}
	syscall(SYS_madvise, c, TA_CHUNK_SIZE, MADV_NOHUGEPAGE);
	/* The header's run descriptors are written as runs are cut: the rest of the page stays
	 * untouched. */
	c->magic = TA_CHUNK_MAGIC;
	c->tier = tier;
	c->pages_used = 1; /* page 0 holds this header */
	c->carved_ns = ta_monotonic_ns();
	c->gate_state = 0;
	c->demoted = 0;
	c->pages_free = 0;
	c->pages_idle = 0;
	c->huge_half = huge;
	atomic_store_explicit(&c->closed, 0, memory_order_relaxed);
	atomic_store_explicit(&c->upper_huge, 0, memory_order_relaxed);
	atomic_store_explicit(&c->upper_open, 0, memory_order_relaxed);
	c->moving = 0;
	c->heat = 0;
	atomic_store_explicit(&c->packed_free, 0, memory_order_relaxed);
	c->on_holes = 0;
	c->holes_next = NULL;
	memset(c->page_class, TA_PAGE_NONE, sizeof(c->page_class));
	memset(c->run_back, 0, sizeof(c->run_back));
	struct ta_arena *a = &ta_arenas[tier];
	c->next = a->chunks;
	a->chunks = c;
	atomic_fetch_add(&a->nchunks, 1);
	if (!ta_class_fine() && fine_classes_pay())
		ta_class_set_fine(true);
	/* Publish last: free() trusts the map. */
	__atomic_store_n(&ta_chunk_map[(uintptr_t)c >> TA_CHUNK_SHIFT], (uint8_t)(tier + 1),
			 __ATOMIC_RELEASE);
	return c;
}

static inline struct ta_chunk *chunk_of(const void *p)
{
	return (struct ta_chunk *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1));
}

static inline unsigned run_first(const struct ta_run *r)
{
	return (unsigned)(r - chunk_of(r)->run);
}

static inline char *run_base(const struct ta_run *r)
{
	return (char *)chunk_of(r) + (size_t)run_first(r) * TA_PAGE_SIZE;
}

static inline struct ta_run *run_of(const void *p)
{
	struct ta_chunk *c = chunk_of(p);
	unsigned page = (unsigned)(((uintptr_t)p & (TA_CHUNK_SIZE - 1)) >> TA_PAGE_SHIFT);
	return &c->run[page - c->run_back[page]];
}

/* pages free pages in a row below c's bump, or 0. */
static unsigned hole_in(const struct ta_chunk *c, unsigned pages)
{
	unsigned row = 0;
	for (unsigned p = 1; p < c->pages_used; p++) {
		uint8_t cls = c->page_class[p];
		row = cls == TA_PAGE_NONE || cls == TA_PAGE_IDLE ? row + 1 : 0;
		if (row == pages)
			return p + 1 - pages;
	}
	return 0;
}

static void holes_unlink(struct ta_arena *a, struct ta_chunk *c)
{
	for (struct ta_chunk **link = &a->holes; *link != NULL; link = &(*link)->holes_next) {
		if (*link == c) {
			*link = c->holes_next;
			break;
		}
	}
	c->on_holes = 0;
	c->holes_next = NULL;
}

static inline bool in_upper_half(const struct ta_chunk *c, unsigned first, unsigned pages)
{
	return c->huge_half && first + pages > TA_HALF_PAGES;
}

/* c's upper half may be huge now (see "Huge pages"): both conditions are seq_cst, so of a close
 * and a last run's exhaustion racing, one sees the other. */
static void upper_half_maybe_huge(struct ta_chunk *c)
{
	if (!c->huge_half || atomic_load(&c->closed) == 0 || atomic_load(&c->upper_open) != 0)
		return;
	if (atomic_exchange(&c->upper_huge, 1) == 0)
		syscall(SYS_madvise, (char *)c + TA_CHUNK_SIZE / 2, TA_CHUNK_SIZE / 2,
			MADV_HUGEPAGE);
}

/* One of c's upper-half runs has no fresh object left, or went back before it had none. */
static void upper_run_done(struct ta_chunk *c)
{
	if (atomic_fetch_sub(&c->upper_open, 1) == 1)
		upper_half_maybe_huge(c);
}

/* Pages of a run of cls (a class or TA_PAGE_PACKED) where room pages are left (see
 * ta_class_run_fit). */
static unsigned run_fit(unsigned cls, unsigned room)
{
	if (cls == TA_PAGE_PACKED)
		return room < TA_PACK_PAGES ? room : TA_PACK_PAGES;
	return ta_class_run_fit(cls, room);
}

/* Where a run of cls goes: a hole of a whole run in a chunk of the tier, else the current chunk's
 * bump (its end taking a shorter run), else a new chunk; sets *pages and *fresh_chunk (the caller
 * makes it). Called with the tier's chunk_lock. */
static struct ta_chunk *run_place(unsigned tier, unsigned cls, unsigned *first, unsigned *pages,
				  bool *fresh_chunk)
{
	struct ta_arena *a = &ta_arenas[tier];
	unsigned whole = cls == TA_PAGE_PACKED ? TA_PACK_PAGES : ta_class_run_pages(cls);
	*fresh_chunk = false;
	/* Holes first: memory given back is what a tier's next runs should take. Not in a chunk
	 * the gate relaxed (new faults there would land on the faulting CPU's node). */
	for (struct ta_chunk *c = a->holes; c != NULL; c = c->holes_next) {
		if (c->pages_free + c->pages_idle < whole || c->moving ||
		    __atomic_load_n(&c->gate_state, __ATOMIC_RELAXED) != 0)
			continue;
		unsigned at = hole_in(c, whole);
		if (at != 0) {
			*first = at;
			*pages = whole;
			return c;
		}
	}
	struct ta_chunk *c = a->cur;
	unsigned fit = c != NULL ? run_fit(cls, TA_CHUNK_PAGES - c->pages_used) : 0;
	if (fit != 0) {
		*first = c->pages_used;
		*pages = fit;
		return c;
	}
	*fresh_chunk = true;
	*first = 1;
	*pages = whole;
	return NULL;
}

/* A new run of cls (or a packed run), its pages charged as ch says. Called with the tier's
 * chunk_lock (and, for a class, the class's bin lock). */
static struct ta_run *run_cut(unsigned tier, unsigned cls, struct ta_fill_charge *ch)
{
	struct ta_arena *a = &ta_arenas[tier];
	unsigned first, pages;
	bool fresh_chunk;
	struct ta_chunk *c = run_place(tier, cls, &first, &pages, &fresh_chunk);
	/* Idle pages of a hole are charged already: taking them needs no headroom. */
	unsigned idle = 0;
	if (!fresh_chunk && first < c->pages_used)
		for (unsigned i = 0; i < pages; i++)
			idle += c->page_class[first + i] == TA_PAGE_IDLE;
	uint64_t bytes = (uint64_t)(pages - idle) * TA_PAGE_SIZE;
	if (bytes != 0 && !ta_charge(tier, bytes, ch->level, ch->force)) {
		ch->refused = true;
		return NULL;
	}
	if (fresh_chunk) {
		c = chunk_new(tier);
		if (c == NULL) {
			ta_uncharge(tier, bytes);
			return NULL;
		}
		struct ta_chunk *old = a->cur;
		a->cur = c;
		if (old != NULL) {
			atomic_store(&old->closed, 1);
			upper_half_maybe_huge(old);
		}
	}
	if (in_upper_half(c, first, pages))
		atomic_fetch_add(&c->upper_open, 1);
	if (first < c->pages_used) { /* a hole */
		c->pages_free -= pages - idle;
		c->pages_idle -= idle;
		if (c->pages_free + c->pages_idle == 0)
			holes_unlink(a, c);
	} else {
		c->pages_used += pages;
	}
	for (unsigned i = 0; i < pages; i++) {
		c->page_class[first + i] = (uint8_t)cls;
		c->run_back[first + i] = (uint8_t)i;
	}
	c->carved_ns = ta_monotonic_ns();
	struct ta_run *r = &c->run[first];
	r->free = NULL;
	r->next = r->prev = NULL;
	r->empty_ns = 0;
	r->nfree = 0;
	r->fresh = 0;
	r->nobj = cls == TA_PAGE_PACKED
		      ? 0
		      : (uint32_t)((size_t)pages * TA_PAGE_SIZE / ta_class_size[cls]);
	r->cls = (uint8_t)cls;
	r->tier = (uint8_t)tier;
	r->listed = 0;
	r->pages = (uint8_t)pages;
	return r;
}

/* A new run of cls, its pages charged as ch says. Called with the class's bin lock. */
static struct ta_run *run_new(unsigned tier, unsigned cls, struct ta_fill_charge *ch)
{
	struct ta_arena *a = &ta_arenas[tier];
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	struct ta_run *r = run_cut(tier, cls, ch);
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	return r;
}

/*
 * Packed runs. Every size class a process uses has a run with a partly touched page at its top,
 * about 2 KiB a class, and a young process uses many classes for few objects each: 16 processes
 * holding 4 MiB of 16 B-16 KiB blocks each held 0.42 MiB more than under glibc, most of it those
 * tops and the rounding to a class (docs/DESIGN-NOTES.md, "Footprint"). So a process's first
 * TIERALLOC_PACK bytes (8 MiB) of medium objects (TA_PACK_MIN to TA_PACK_MAX) are cut from packed
 * runs, where objects of every class sit back to back, each rounded to 16 bytes after an 8-byte
 * header, as glibc lays out its heap: one partly touched page per tier in all. Packed runs are
 * cut two pages at a time (charged like any run), and one cut right after the last grows the
 * area objects are cut from. A freed packed object goes, like any object, to a thread's bin and
 * the central one, of the largest class it can serve (its header's), and serves that class's next
 * allocations; the central bin keeps such objects on their own list (ta_arena.packed), taken
 * before its runs' objects. Packed runs are never given back to the kernel (their objects do not
 * empty them as a class's do), which is what bounds them; a chunk holding one is retagged like
 * any other, its free packed objects finding their new tier when next taken or flushed.
 */
static _Atomic uint64_t pack_left; /* TIERALLOC_PACK, set at start */
/* Bytes of packed runs cut, and of packed objects freed (reported in batches by the threads). */
static _Atomic uint64_t pack_cut, pack_freed;

void ta_arena_set_pack_limit(uint64_t bytes)
{
	atomic_store(&pack_cut, 0);
	atomic_store(&pack_freed, 0);
	atomic_store(&pack_left, bytes);
}

/*
 * Packing pays in a process that keeps what it allocates; one that frees and allocates again
 * reuses a freed packed object only for its own class, where a class's run would have emptied
 * and gone back: espresso's, larson's and glibc-thread's max RSS grew by 3-8 MiB (up to the
 * limit) when they packed. So a process stops packing for good once it has freed a quarter of
 * the bytes it packed, and more than TA_PACK_FREED_FLOOR: not for the few frees of a program that
 * grows an array by realloc (footprint-work's mixed workload stopped at 52 KiB so, and held 73.1
 * MiB in 16 processes again). What it packed stays, and is reused.
 */
void ta_arena_pack_freed(uint64_t bytes)
{
	/* Stopped already: no count to keep, and no line for the threads' frees to bounce. */
	if (atomic_load_explicit(&pack_left, memory_order_relaxed) == 0)
		return;
	uint64_t freed = atomic_fetch_add(&pack_freed, bytes) + bytes;
	if (freed > atomic_load(&pack_cut) / 4 + TA_PACK_FREED_FLOOR)
		atomic_store(&pack_left, 0);
}

bool ta_arena_packs(size_t size)
{
	return size >= TA_PACK_MIN && size <= TA_PACK_MAX &&
	       atomic_load_explicit(&pack_left, memory_order_relaxed) != 0;
}

/* The largest class of at most usable bytes that ta_size_class hands out whatever the fine
 * switch says (a coarse one): the bin a packed object of that size goes to. */
static unsigned pack_class(uint32_t usable)
{
	unsigned cls = ta_size_class(usable);
	while (ta_class_size[cls] > usable || !ta_class_is_coarse(cls))
		cls--;
	return cls;
}

/* Packed run r takes no more objects: one run less open in its upper half (see "Huge pages"). */
static void pack_run_done(struct ta_run *r)
{
	if (r != NULL && in_upper_half(chunk_of(r), run_first(r), r->pages))
		upper_run_done(chunk_of(r));
}

void *ta_arena_pack(unsigned tier, size_t size, struct ta_fill_charge *ch)
{
	struct ta_arena *a = &ta_arenas[tier];
	/* The object, with the next one's header after it: 8 mod 16 bytes. */
	uint32_t usable = (uint32_t)((size + 8u + 15u) & ~(size_t)15u) - 8u;
	uint32_t slot = usable + 8u;
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	/* Twice at most: a run that does not follow the area starts a new one, and one cut from a
	 * chunk's last page may be too short for the object. */
	while (a->pack_run == NULL || a->pack_size - a->pack_used < slot) {
		uint64_t left = atomic_load(&pack_left);
		uint64_t bytes = (uint64_t)TA_PACK_PAGES * TA_PAGE_SIZE;
		struct ta_run *r = NULL;
		if (left != 0)
			r = run_cut(tier, TA_PAGE_PACKED, ch);
		if (r == NULL) {
			ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
			return NULL;
		}
		/* Two tiers may cut the last one each: the limit is a bound, not an exact count. */
		atomic_store(&pack_left, left > bytes ? left - bytes : 0);
		atomic_fetch_add(&pack_cut, bytes);
		r->empty_ns = 0;
		struct ta_run *prev = a->pack_run;
		a->pack_run = r;
		uint32_t run_bytes = (uint32_t)r->pages * (uint32_t)TA_PAGE_SIZE;
		if (prev != NULL && run_base(r) == a->pack_base + a->pack_size) {
			a->pack_size += run_bytes; /* right after the area: it grows */
		} else {
			a->pack_base = run_base(r);
			a->pack_used = 8; /* the first object at 16: its header before it */
			a->pack_size = run_bytes;
		}
		pack_run_done(prev);
	}
	char *p = a->pack_base + a->pack_used + 8;
	a->pack_used += slot;
	unsigned cls = pack_class(usable);
	a->pack_run->empty_ns += ta_class_size[cls];
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	*(ta_word *)(p - sizeof(struct ta_pack_hdr)) = ta_pack_word(p, usable, cls);
	return p;
}

/* ---- a bin's list of runs with objects to hand out (under the bin's lock) ---- */

/* Changed under the bin's lock; read without it by the purge, to skip bins with nothing empty. */
static inline void nempty_add(struct ta_central_bin *b, int d)
{
	__atomic_store_n(&b->nempty, b->nempty + (uint32_t)d, __ATOMIC_RELAXED);
}

static void list_add(struct ta_central_bin *b, struct ta_run *r, bool at_head)
{
	r->listed = 1;
	if (at_head) {
		r->prev = NULL;
		r->next = b->head;
		if (b->head != NULL)
			b->head->prev = r;
		else
			b->tail = r;
		b->head = r;
	} else {
		r->next = NULL;
		r->prev = b->tail;
		if (b->tail != NULL)
			b->tail->next = r;
		else
			b->head = r;
		b->tail = r;
	}
}

static void list_del(struct ta_central_bin *b, struct ta_run *r)
{
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		b->head = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	else
		b->tail = r->prev;
	r->next = r->prev = NULL;
	r->listed = 0;
	if (r->empty_ns != 0) {
		r->empty_ns = 0;
		nempty_add(b, -1);
	}
}

/* Whether q, a link read from a freed object of r, is one of r's objects handed out before (a
 * run's free list holds only its own). */
static bool run_holds(const struct ta_run *r, const void *q)
{
	uint64_t off = (uintptr_t)q - (uintptr_t)run_base(r), m = ta_class_div[r->cls];
	return off < (uint64_t)r->fresh * ta_class_size[r->cls] && off * m < m;
}

/* Whether q, a link read from a freed packed object of class cls, is another one. */
static bool packed_holds(unsigned cls, const void *q)
{
	return ta_chunk_tier_of(q) >= 0 && ta_chunk_class_of(q) == TA_PAGE_PACKED &&
	       ((uintptr_t)q & 15u) == 0 && ta_pack_class_of(q) == cls;
}

/*
 * A link that fails its check (a use after free wrote the object's first word): the object and
 * the rest of its list are leaked, never handed out; the run's nfree is cleared so that it never
 * counts as empty (the program may still write there). The misuse is said after the bin's lock.
 */
unsigned ta_arena_fill(unsigned tier, unsigned cls, void **out, unsigned want,
		       struct ta_fill_charge *ch)
{
	struct ta_central_bin *b = central_bin(tier, cls);
	void **packed = &ta_arenas[tier].packed[cls];
	size_t size = ta_class_size[cls];
	unsigned got = 0, nstale = 0;
	void *stale[16], *bad = NULL;
	ta_lock(&b->lock, TA_RANK_BIN);
	/* Packed objects first: their runs never empty, a class's run may. */
	while (got < want && *packed != NULL && !ch->runs_only && nstale < 16) {
		void *p = *packed, *next = ta_link_get(p);
		if (unlikely(next != NULL && !packed_holds(cls, next))) {
			bad = p;
			*packed = NULL;
			break;
		}
		*packed = next;
		atomic_fetch_sub_explicit(&chunk_of(p)->packed_free, size, memory_order_relaxed);
		if (likely(ta_chunk_tier_of(p) == (int)tier))
			out[got++] = p;
		else
			stale[nstale++] = p; /* its chunk was retagged since it was freed */
	}
	while (got < want) {
		struct ta_run *r = b->head;
		if (r == NULL) {
			if (ch->no_new_run)
				break;
			r = run_new(tier, cls, ch);
			if (r == NULL)
				break;
			list_add(b, r, true);
		}
		if (r->empty_ns != 0) { /* objects go out: no longer empty */
			r->empty_ns = 0;
			nempty_add(b, -1);
		}
		while (got < want && r->free != NULL) {
			void *p = r->free, *next = ta_link_get(p);
			if (unlikely(next != NULL && !run_holds(r, next))) {
				bad = p;
				r->free = NULL;
				r->nfree = 0;
				break;
			}
			r->free = next;
			r->nfree--;
			out[got++] = p;
		}
		/* Fresh objects are not touched here: first touch happens in the caller's hands.
		 * They go out highest first: a thread cache hands out the last of them first, so a
		 * class fills its run upward from the bottom, leaving one partly touched page at
		 * the top rather than one at each end of every refill's window (about 2 KiB per
		 * class in use, in every process). */
		char *base = run_base(r);
		unsigned fresh = r->nobj - r->fresh < want - got ? r->nobj - r->fresh : want - got;
		for (unsigned i = fresh; i-- > 0;)
			out[got++] = base + (size_t)(r->fresh + i) * size;
		r->fresh += fresh;
		if (fresh != 0 && r->fresh == r->nobj &&
		    in_upper_half(chunk_of(r), run_first(r), r->pages))
			upper_run_done(chunk_of(r));
		if (r->free == NULL && r->fresh == r->nobj)
			list_del(b, r);
	}
	ta_unlock(&b->lock, TA_RANK_BIN);
	if (unlikely(bad != NULL))
		ta_misuse(TA_MISUSE_LINK, "malloc", bad);
	/* To their tier's list (the retag left them out of the live bytes it moved: they were
	 * listed). */
	for (unsigned i = 0; i < nstale; i++)
		ta_arena_flush((unsigned)ta_chunk_tier_of(stale[i]), cls, &stale[i], 1);
	return got;
}

/* Give objs back to their runs, which the bin of (tier, cls) lists, or packed ones to the tier's
 * list of them; objects whose run is listed by another tier's bin (its chunk was retagged since
 * they were freed) are left in *others. */
static unsigned flush_locked(struct ta_central_bin *b, unsigned tier, unsigned cls,
			     void *const *objs, unsigned n, void **others)
{
	unsigned nothers = 0;
	uint64_t now = 0;
	for (unsigned i = 0; i < n; i++) {
		void *p = objs[i];
		if (unlikely(ta_chunk_class_of(p) == TA_PAGE_PACKED)) {
			if (ta_chunk_tier_of(p) != (int)tier) {
				others[nothers++] = p;
				continue;
			}
			ta_link_put(p, ta_arenas[tier].packed[cls]);
			ta_arenas[tier].packed[cls] = p;
			atomic_fetch_add_explicit(&chunk_of(p)->packed_free, ta_class_size[cls],
						  memory_order_relaxed);
			continue;
		}
		struct ta_run *r = run_of(p);
		if (r->tier != tier) {
			others[nothers++] = p;
			continue;
		}
		ta_link_put(p, r->free);
		r->free = p;
		r->nfree++;
		if (!r->listed)
			list_add(b, r, false);
		if (r->nfree + (r->nobj - r->fresh) == r->nobj && r->empty_ns == 0) {
			if (now == 0)
				now = ta_monotonic_ns();
			r->empty_ns = now;
			nempty_add(b, 1);
		}
	}
	return nothers;
}

/* The tier whose bin p goes back to: its run's, or for a packed object its chunk's. */
static unsigned home_tier(const void *p)
{
	if (ta_chunk_class_of(p) == TA_PAGE_PACKED)
		return (unsigned)ta_chunk_tier_of(p);
	return __atomic_load_n(&run_of(p)->tier, __ATOMIC_ACQUIRE);
}

void ta_arena_flush(unsigned tier, unsigned cls, void *const *objs, unsigned n)
{
	while (n > 0) {
		void *others[64];
		unsigned batch = n < 64 ? n : 64, nothers;
		struct ta_central_bin *b = central_bin(tier, cls);
		ta_lock(&b->lock, TA_RANK_BIN);
		nothers = flush_locked(b, tier, cls, objs, batch, others);
		ta_unlock(&b->lock, TA_RANK_BIN);
		/* Rare: a retag moved their runs to another tier's bin. It counted these cached
		 * objects live in that tier as if in use: they were not. */
		for (unsigned i = 0; i < nothers; i++) {
			unsigned moved_to = home_tier(others[i]);
			if (moved_to < arena_count)
				ta_arena_move_live(moved_to, tier, ta_class_size[cls]);
			for (;;) {
				unsigned u = home_tier(others[i]);
				struct ta_central_bin *ob = central_bin(u, cls);
				ta_lock(&ob->lock, TA_RANK_BIN);
				void *again;
				unsigned left = flush_locked(ob, u, cls, &others[i], 1, &again);
				ta_unlock(&ob->lock, TA_RANK_BIN);
				if (left == 0)
					break;
			}
		}
		objs += batch;
		n -= batch;
	}
}

/* ---- giving empty runs back ---- */

/* Whether every page of c's upper half is free. Under its tier's chunk_lock. */
static bool half_free(const struct ta_chunk *c)
{
	for (unsigned p = TA_HALF_PAGES; p < TA_CHUNK_PAGES; p++)
		if (p < c->pages_used && c->page_class[p] != TA_PAGE_NONE &&
		    c->page_class[p] != TA_PAGE_IDLE)
			return false;
	return true;
}

/*
 * r's pages (unlisted, every object back) go back to the kernel and its tier's charge; in a huge
 * upper half they stay, idle and charged, until the whole half is free, and then the half goes.
 * Holds shape_lock throughout, so no retag sees pages on their way back; a half's MADV_DONTNEED
 * (2 MiB, no fault, no I/O) runs under its tier's chunk lock.
 */
static uint64_t release_run(struct ta_run *r)
{
	struct ta_chunk *c = chunk_of(r);
	unsigned first = run_first(r), pages = r->pages;
	unsigned keep_from = c->huge_half ? TA_HALF_PAGES : TA_CHUNK_PAGES;
	if (r->fresh != r->nobj && in_upper_half(c, first, pages))
		upper_run_done(c);
	unsigned now =
	    first >= keep_from ? 0 : (first + pages <= keep_from ? pages : keep_from - first);
	uint64_t bytes = (uint64_t)now * TA_PAGE_SIZE;
	if (now != 0)
		syscall(SYS_madvise, run_base(r), (size_t)bytes, MADV_DONTNEED);
	ta_lock(&shape_lock, TA_RANK_SHAPE);
	unsigned tier = c->tier; /* stable under shape_lock: the tier charged for it now */
	struct ta_arena *a = &ta_arenas[tier];
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	for (unsigned i = 0; i < pages; i++) {
		c->page_class[first + i] = i < now ? TA_PAGE_NONE : TA_PAGE_IDLE;
		c->run_back[first + i] = 0;
	}
	c->pages_free += now;
	c->pages_idle += pages - now;
	if (!c->on_holes) {
		c->on_holes = 1;
		c->holes_next = a->holes;
		a->holes = c;
	}
	/* The half's last run: the half goes back whole, under the chunk lock, so that no run is
	 * cut meanwhile from its free pages or, in the tier's current chunk, from the bump (the
	 * bump's pages beyond the half's runs were never written: dropping them loses nothing). */
	if (pages > now && half_free(c)) {
		syscall(SYS_madvise, (char *)c + TA_HALF_PAGES * TA_PAGE_SIZE, TA_CHUNK_SIZE / 2,
			MADV_DONTNEED);
		if (atomic_exchange(&c->upper_huge, 0) != 0)
			syscall(SYS_madvise, (char *)c + TA_CHUNK_SIZE / 2, TA_CHUNK_SIZE / 2,
				MADV_NOHUGEPAGE);
		unsigned idle = 0;
		for (unsigned p = TA_HALF_PAGES; p < TA_CHUNK_PAGES; p++) {
			if (c->page_class[p] == TA_PAGE_IDLE) {
				c->page_class[p] = TA_PAGE_NONE;
				idle++;
			}
		}
		c->pages_idle -= idle;
		c->pages_free += idle;
		bytes += (uint64_t)idle * TA_PAGE_SIZE;
	}
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	if (bytes != 0) {
		ta_uncharge(tier, bytes);
		atomic_fetch_add(&a->purged, bytes);
	}
	ta_unlock(&shape_lock, TA_RANK_SHAPE);
	return bytes;
}

uint64_t ta_arena_purge(unsigned tier, uint64_t min_age_ns)
{
	enum { BATCH = 64 };
	uint64_t now = ta_monotonic_ns(), bytes = 0;
	bool fine = ta_class_fine();
	for (unsigned cls = 0; cls < TA_NCLASSES; cls++) {
		if (!fine && !ta_class_is_coarse(cls))
			continue; /* never used: not even a look at its bin's page */
		struct ta_central_bin *b = central_bin(tier, cls);
		for (;;) {
			if (__atomic_load_n(&b->nempty, __ATOMIC_RELAXED) == 0)
				break;
			struct ta_run *take[BATCH];
			unsigned n = 0;
			ta_lock(&b->lock, TA_RANK_BIN);
			for (struct ta_run *r = b->head, *next; r != NULL && n < BATCH; r = next) {
				next = r->next;
				if (r->empty_ns != 0 && now - r->empty_ns >= min_age_ns) {
					list_del(b, r);
					r->tier = UINT8_MAX; /* no bin's: being given back */
					take[n++] = r;
				}
			}
			ta_unlock(&b->lock, TA_RANK_BIN);
			for (unsigned i = 0; i < n; i++)
				bytes += release_run(take[i]);
			if (n < BATCH)
				break;
		}
	}
	return bytes;
}

uint64_t ta_give_back(unsigned tier)
{
	uint64_t before = ta_keep_released(tier);
	uint64_t bytes = ta_arena_purge(tier, 0);
	if (ta_keep_release(tier))
		bytes += ta_keep_released(tier) - before;
	return bytes;
}

uint64_t ta_purge_all(void)
{
	uint64_t bytes = 0;
	for (unsigned t = 0; t < arena_count; t++)
		bytes += ta_give_back(t);
	return bytes;
}

void ta_arena_decay(void)
{
	static _Atomic uint64_t next_ns;
	uint64_t now = ta_monotonic_ns(),
		 due = atomic_load_explicit(&next_ns, memory_order_relaxed);
	if (now < due || !atomic_compare_exchange_strong(&next_ns, &due, now + TA_DECAY_EVERY_NS))
		return;
	for (unsigned t = 0; t < arena_count; t++)
		ta_arena_purge(t, TA_DECAY_NS);
}

void ta_arena_move_live(unsigned from, unsigned to, uint64_t bytes)
{
	/* Statistics: the moved objects' live bytes are now counted in the lower tier. */
	atomic_fetch_sub(&ta_arenas[from].folded_live, (int64_t)bytes);
	atomic_fetch_add(&ta_arenas[to].folded_live, (int64_t)bytes);
}

/* Not the chunk runs or packed objects are being cut from, nor one being moved. */
static bool chunk_movable(unsigned tier, struct ta_chunk *c)
{
	const struct ta_arena *a = &ta_arenas[tier];
	return c != a->cur && !c->moving && (a->pack_base == NULL || chunk_of(a->pack_base) != c);
}

unsigned ta_arena_chunks(unsigned tier, struct ta_chunk_info *out, unsigned max, bool movable)
{
	struct ta_arena *a = &ta_arenas[tier];
	unsigned n = 0;
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	for (struct ta_chunk *c = a->chunks; c != NULL && n < max; c = c->next) {
		if (movable && !chunk_movable(tier, c))
			continue;
		out[n].chunk = c;
		out[n].carved_ns = c->carved_ns;
		out[n].pages_used = c->pages_used;
		out[n].pages_held = c->pages_used - c->pages_free;
		out[n].heat = c->heat;
		n++;
	}
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	return n;
}

/* Under the locks a run's cut takes: a page no run holds now cannot be written meanwhile. The
 * header's page is left alone (its descriptors are written as runs are cut). */
static bool page_unheld(const struct ta_chunk *c, size_t off)
{
	size_t p = off / TA_PAGE_SIZE;
	return p != 0 && (p >= c->pages_used || c->page_class[p] == TA_PAGE_NONE);
}

void ta_arena_drop_filled(struct ta_chunk *c, uintptr_t unit, const unsigned char *present)
{
	enum { SYS_PAGE = 4096, UNIT_PAGES = TA_CHUNK_SIZE / 2 / SYS_PAGE };
	size_t off = unit - (uintptr_t)c;
	ta_lock(&shape_lock, TA_RANK_SHAPE);
	struct ta_arena *a = &ta_arenas[c->tier];
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	for (unsigned i = 0; i < UNIT_PAGES;) {
		unsigned n = 0;
		while (i + n < UNIT_PAGES && !(present[i + n] & 1) &&
		       page_unheld(c, off + (size_t)(i + n) * SYS_PAGE))
			n++;
		if (n == 0) {
			i++;
			continue;
		}
		syscall(SYS_madvise, unit + (uintptr_t)i * SYS_PAGE, (size_t)n * SYS_PAGE,
			MADV_DONTNEED);
		i += n;
	}
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	ta_unlock(&shape_lock, TA_RANK_SHAPE);
}

int64_t ta_arena_retag_chunk(struct ta_chunk *c, unsigned to, uint64_t *live)
{
	ta_lock(&shape_lock, TA_RANK_SHAPE);
	unsigned from = c->tier;
	struct ta_arena *a = &ta_arenas[from], *b = &ta_arenas[to];
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	if (from == to || !chunk_movable(from, c)) {
		ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
		ta_unlock(&shape_lock, TA_RANK_SHAPE);
		return -1;
	}
	c->moving = 1; /* no run is cut from it (a hole) while its runs change bins */
	uint32_t used = c->pages_used;
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);

	/* Each run to the other tier's bin of its class. Runs being given back (tier UINT8_MAX)
	 * are the purge's; their pages still count in what moves (release_run waits for us). */
	uint64_t carved = 0, avail = 0;
	for (unsigned p = 1; p < used; p++) {
		if (c->page_class[p] == TA_PAGE_NONE || c->run_back[p] != 0)
			continue;
		struct ta_run *r = &c->run[p];
		if (c->page_class[p] == TA_PAGE_PACKED) {
			/* Out of their runs, as with a class's; the listed ones are subtracted
			 * below, those in threads' caches put right as a run's are. No object
			 * is cut from it: the packing area is not in a movable chunk. */
			carved += r->empty_ns;
			continue;
		}
		unsigned cls = r->cls;
		struct ta_central_bin *ba = central_bin(from, cls), *bb = central_bin(to, cls);
		struct ta_central_bin *lo = from < to ? ba : bb, *hi = from < to ? bb : ba;
		ta_lock(&lo->lock, TA_RANK_BIN);
		ta_lock(&hi->lock, TA_RANK_BIN_HIGH);
		if (r->tier == from) {
			bool listed = r->listed;
			uint64_t empty = r->empty_ns;
			if (listed)
				list_del(ba, r);
			__atomic_store_n(&r->tier, (uint8_t)to, __ATOMIC_RELEASE);
			if (listed) {
				list_add(bb, r, false);
				if (empty != 0) {
					r->empty_ns = empty;
					nempty_add(bb, 1);
				}
			}
			carved += (uint64_t)r->nobj * ta_class_size[cls];
			avail += (uint64_t)(r->nfree + r->nobj - r->fresh) * ta_class_size[cls];
		}
		ta_unlock(&hi->lock, TA_RANK_BIN_HIGH);
		ta_unlock(&lo->lock, TA_RANK_BIN);
	}

	avail += atomic_load(&c->packed_free);
	/* From here on frees of its objects go to the new tier. */
	c->tier = to;
	c->demoted = 1;
	__atomic_store_n(&c->gate_state, 0,
			 __ATOMIC_RELAXED); /* the move bound it to its new tier */
	__atomic_store_n(&ta_chunk_map[(uintptr_t)c >> TA_CHUNK_SHIFT], (uint8_t)(to + 1),
			 __ATOMIC_RELEASE);
	/* After the map: a cache that sees the new count sees the new tier (alloc.c). */
	atomic_fetch_add_explicit(&ta_retag_gen, 1, memory_order_release);
	/* Off the old tier's lists, onto the new one's. */
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	for (struct ta_chunk **link = &a->chunks; *link != NULL; link = &(*link)->next) {
		if (*link == c) {
			*link = c->next;
			break;
		}
	}
	if (c->on_holes)
		holes_unlink(a, c);
	uint32_t holes = c->pages_free, idle = c->pages_idle;
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
	atomic_fetch_sub(&a->nchunks, 1);
	ta_lock(&b->chunk_lock, TA_RANK_CHUNK);
	c->next = b->chunks;
	b->chunks = c;
	if (holes + idle != 0) {
		c->on_holes = 1;
		c->holes_next = b->holes;
		b->holes = c;
	}
	c->moving = 0;
	ta_unlock(&b->chunk_lock, TA_RANK_CHUNK);
	atomic_fetch_add(&b->nchunks, 1);
	atomic_fetch_add(&a->demotions, 1);
	ta_unlock(&shape_lock, TA_RANK_SHAPE);
	/* Its runs were charged to the old tier when they were cut: that charge moves whole. For
	 * the statistics, the objects out of their runs were counted live in the old tier and will
	 * be freed to the new one. Some of them sit in threads' caches instead: each is put right
	 * when its thread hands it out or flushes it and finds it in the other tier (alloc.c,
	 * ta_arena_flush). No thread reads another's cache: its owner changes it without a lock. */
	*live = carved > avail ? carved - avail : 0;
	return (int64_t)(used - 1 - holes) * (int64_t)TA_PAGE_SIZE;
}

/* Fork: take every arena lock so that the child sees consistent lists, in one fixed order. */
void ta_arena_fork_prepare(void)
{
	pthread_mutex_lock(&shape_lock);
	for (unsigned t = 0; t < arena_count; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			pthread_mutex_lock(&ta_arenas[t].bins[c].lock);
		pthread_mutex_lock(&ta_arenas[t].chunk_lock);
	}
}

void ta_arena_fork_parent(void)
{
	for (unsigned t = arena_count; t-- > 0;) {
		pthread_mutex_unlock(&ta_arenas[t].chunk_lock);
		for (unsigned c = TA_NCLASSES; c-- > 0;)
			pthread_mutex_unlock(&ta_arenas[t].bins[c].lock);
	}
	pthread_mutex_unlock(&shape_lock);
}

void ta_arena_fork_child(void)
{
	/* The forking thread owns every lock; re-initialising is the robust choice. */
	for (unsigned t = 0; t < arena_count; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			pthread_mutex_init(&ta_arenas[t].bins[c].lock, NULL);
		pthread_mutex_init(&ta_arenas[t].chunk_lock, NULL);
	}
	pthread_mutex_init(&shape_lock, NULL);
}
