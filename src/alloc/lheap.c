/* SPDX-License-Identifier: MIT */
/*
 * The large-object heap of each tier: large objects are cut from regions that the tier's kind
 * gives (1 GiB of address space, pages touched as used; one request's size when larger), split to
 * the page and coalesced with their free neighbours when freed, so that the pages of a freed
 * block serve the next block of any size.
 *
 * Why not the kind's own large allocations: memkind's jemalloc reuses a freed extent well only
 * when many are kept (it does not merge freed extents until it purges them, and then it drops all
 * of them), so a program freeing and allocating blocks of 5-25 MiB either faulted every page
 * anew (7x glibc's time) or held far more than glibc (291 MiB against 221). Here a freed block
 * merges with what is free around it, as in glibc's heap, and the pages kept are exactly known.
 *
 * Pages of a region are free-and-dirty (freed since they were last given back: they may hold
 * data and be resident), free-and-clean (never used, or given back: they read as zeros), or live.
 * A bitmap per region marks the dirty ones; keep.c charges them to the tier and says how many may
 * stay (ta_lheap_purge gives back the rest with MADV_DONTNEED, which keeps the range's NUMA
 * policy, so the next touch faults in the tier again). calloc clears only dirty pages.
 *
 * Bookkeeping is out of band, so that a freed block's pages are not touched: a descriptor per
 * extent (live or free) and, per region, the descriptor of the extent that starts and of the one
 * that ends at each page (an array touched only at extents' ends). Free extents sit in size bins
 * (four per doubling); a request takes the lowest-addressed fit of the first bin that has one,
 * and the purge gives back from the top down. One lock per tier; it is taken after the
 * record's shard lock (large.c) and before the kind's.
 *
 * Transparent huge pages only inside live blocks: regions are MADV_NOHUGEPAGE, and under THP
 * "always" a live block's whole 2 MiB units are MADV_HUGEPAGE until it is freed. A region open
 * to huge pages faults the whole 2 MiB around a block's first and last pages, free neighbours
 * included, and khugepaged fills any 2 MiB with one page present: pages this heap counts as
 * clean were resident, neither charged nor ever given back. With 8 live blocks of 5-25 MiB, a
 * cgroup whose memory.max was glibc's peak + 3% + 2 MiB (217M) was OOM-killed holding 217 MiB
 * resident, 58 MiB of it huge, against at most 201 MiB charged (footprint.large_glibc, 6.1
 * guest, 1 run in 8 quiet and more under load).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"

#define LH_PAGE_SHIFT 12
#define LH_PAGE	      ((size_t)1 << LH_PAGE_SHIFT)
#define LH_REGION     ((size_t)1 << 30)	 /* address space only: pages are touched as used */
#define LH_REGION_LOW ((size_t)64 << 20) /* when the kind cannot give LH_REGION */
#define LH_ALIGN      ((size_t)2 << 20)	 /* regions start on a huge page */
#define LH_MAX_REGION 4096u		 /* per tier */
#define LH_MAX_EXT    (1u << 22)	 /* descriptors per tier (reserved, touched as used) */
#define LH_BINS	      128
#define LH_NIL	      UINT32_MAX
#define LH_SCAN	      32 /* free extents looked at for the best fit in one bin */
/* calloc over dirty pages: memset below this, MADV_DONTNEED above (not faulting in pages that
 * the last owner never touched). */
#define LH_ZERO_BY_MADVISE ((size_t)2 << 20)

struct lh_region {
	uintptr_t base;
	uint32_t pages;
	uint32_t free_pages;
	uint32_t *start; /* per page: id + 1 of the extent starting here, 0 if none */
	uint32_t *end;	 /* per page: id + 1 of the extent ending here, 0 if none */
	uint64_t *dirty; /* per page: freed since last given back */
	size_t meta_bytes;
};

struct lh_ext {
	uint32_t region, first, pages;
	uint8_t free, bin;
	uint16_t pad;
	uint32_t prev, next; /* free: its bin's list; unused: the pool's free list (next) */
};

struct lh_tier {
	pthread_mutex_t lock;
	struct lh_region *region; /* by id */
	uint32_t *by_base;	  /* region ids in address order: [0, nregions) */
	uint32_t nregions, region_hwm;
	uint32_t spare; /* a standard region kept whole and free, or LH_NIL */
	struct lh_ext *ext;
	uint32_t ext_hwm, ext_free;
	uint32_t bin[LH_BINS];
	uint64_t nonempty[LH_BINS / 64];
	_Atomic uint64_t dirty_bytes;
	_Atomic uint64_t mapped_bytes;
	bool ready;
};

static struct lh_tier heap[TA_MAX_TIERS];
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;

static void heap_init(void)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++) {
		struct lh_tier *h = &heap[t];
		pthread_mutex_init(&h->lock, NULL);
		for (unsigned b = 0; b < LH_BINS; b++)
			h->bin[b] = LH_NIL;
		h->ext_free = LH_NIL;
		h->spare = LH_NIL;
	}
}

/* The tables are mapped on first use: a tier that never sees a large object costs nothing. */
static bool tier_ready(struct lh_tier *h)
{
	if (h->ready)
		return true;
	h->region = ta_pages_map(LH_MAX_REGION * sizeof(*h->region), true);
	h->by_base = ta_pages_map(LH_MAX_REGION * sizeof(*h->by_base), true);
	h->ext = ta_pages_map((size_t)LH_MAX_EXT * sizeof(*h->ext), true);
	if (h->region == NULL || h->by_base == NULL || h->ext == NULL)
		return false; /* what was mapped stays for the next try */
	h->ready = true;
	return true;
}

static unsigned bin_of(uint64_t pages)
{
	if (pages < 8)
		return (unsigned)pages;
	unsigned lg = 63u - (unsigned)__builtin_clzll(pages);
	return 8 + (lg - 3) * 4 + (unsigned)((pages >> (lg - 2)) & 3);
}

/* ---- descriptors ---- */

static uint32_t ext_new(struct lh_tier *h)
{
	uint32_t id = h->ext_free;
	if (id != LH_NIL) {
		h->ext_free = h->ext[id].next;
		return id;
	}
	if (h->ext_hwm == LH_MAX_EXT)
		return LH_NIL;
	return h->ext_hwm++;
}

static void ext_drop(struct lh_tier *h, uint32_t id)
{
	h->ext[id].next = h->ext_free;
	h->ext_free = id;
}

static void bin_insert(struct lh_tier *h, uint32_t id)
{
	struct lh_ext *e = &h->ext[id];
	unsigned b = bin_of(e->pages);
	e->bin = (uint8_t)b;
	e->free = 1;
	e->prev = LH_NIL;
	e->next = h->bin[b];
	if (e->next != LH_NIL)
		h->ext[e->next].prev = id;
	h->bin[b] = id;
	h->nonempty[b / 64] |= 1ull << (b % 64);
}

static void bin_remove(struct lh_tier *h, uint32_t id)
{
	struct lh_ext *e = &h->ext[id];
	if (e->prev != LH_NIL)
		h->ext[e->prev].next = e->next;
	else
		h->bin[e->bin] = e->next;
	if (e->next != LH_NIL)
		h->ext[e->next].prev = e->prev;
	if (h->bin[e->bin] == LH_NIL)
		h->nonempty[e->bin / 64] &= ~(1ull << (e->bin % 64));
	e->free = 0;
}

/* Record e's ends in its region's maps. */
static void ext_mark(struct lh_tier *h, uint32_t id)
{
	struct lh_ext *e = &h->ext[id];
	struct lh_region *r = &h->region[e->region];
	r->start[e->first] = id + 1;
	r->end[e->first + e->pages - 1] = id + 1;
}

static void ext_unmark(struct lh_tier *h, uint32_t id)
{
	struct lh_ext *e = &h->ext[id];
	struct lh_region *r = &h->region[e->region];
	r->start[e->first] = 0;
	r->end[e->first + e->pages - 1] = 0;
}

/* Split the last `tail` pages of extent id into a new extent (not in a bin); its id, or LH_NIL
 * when no descriptor is left (then nothing changed). */
static uint32_t ext_split(struct lh_tier *h, uint32_t id, uint32_t tail)
{
	uint32_t nid = ext_new(h);
	if (nid == LH_NIL)
		return LH_NIL;
	struct lh_ext *e = &h->ext[id], *n = &h->ext[nid];
	ext_unmark(h, id);
	*n = (struct lh_ext){ .region = e->region,
			      .first = e->first + e->pages - tail,
			      .pages = tail,
			      .prev = LH_NIL,
			      .next = LH_NIL };
	e->pages -= tail;
	ext_mark(h, id);
	ext_mark(h, nid);
	return nid;
}

/* ---- dirty pages ---- */

/* Count the dirty pages in [first, first + n) of r; clear them when clear is set. */
static uint64_t dirty_count(struct lh_region *r, uint32_t first, uint32_t n, bool clear)
{
	uint64_t count = 0;
	for (uint32_t p = first, end = first + n; p < end;) {
		uint32_t w = p / 64, bit = p % 64;
		uint32_t take = 64 - bit < end - p ? 64 - bit : end - p;
		uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << bit;
		count += (uint64_t)__builtin_popcountll(r->dirty[w] & mask);
		if (clear && (r->dirty[w] & mask))
			r->dirty[w] &= ~mask;
		p += take;
	}
	return count;
}

static void dirty_set(struct lh_region *r, uint32_t first, uint32_t n)
{
	for (uint32_t p = first, end = first + n; p < end;) {
		uint32_t w = p / 64, bit = p % 64;
		uint32_t take = 64 - bit < end - p ? 64 - bit : end - p;
		r->dirty[w] |= (take == 64 ? ~0ull : ((1ull << take) - 1)) << bit;
		p += take;
	}
}

/* Calls fn(region, first, n, arg) for each run of dirty pages in [first, first + n). */
static void dirty_runs(struct lh_region *r, uint32_t first, uint32_t n,
		       void (*fn)(struct lh_region *, uint32_t, uint32_t, void *), void *arg)
{
	uint32_t end = first + n, run = 0, at = 0;
	for (uint32_t p = first; p < end;) {
		if (run == 0 && p % 64 == 0 && end - p >= 64 && r->dirty[p / 64] == 0) {
			p += 64; /* a clean word */
			continue;
		}
		bool d = (r->dirty[p / 64] >> (p % 64)) & 1;
		if (d && run++ == 0)
			at = p;
		if (!d && run) {
			fn(r, at, run, arg);
			run = 0;
		}
		p++;
	}
	if (run)
		fn(r, at, run, arg);
}

static void page_advise(uintptr_t a, size_t len, int advice)
{
	int saved = errno;
	syscall(SYS_madvise, a, len, advice);
	errno = saved;
}

static void zero_run(struct lh_region *r, uint32_t first, uint32_t n, void *arg)
{
	(void)arg;
	uintptr_t a = r->base + ((uintptr_t)first << LH_PAGE_SHIFT);
	size_t len = (size_t)n << LH_PAGE_SHIFT;
	if (len >= LH_ZERO_BY_MADVISE)
		page_advise(a, len, MADV_DONTNEED);
	else
		memset((void *)a, 0, len);
}

/* ---- regions ---- */

/* The region holding address a, or NULL. */
static struct lh_region *region_find(struct lh_tier *h, uintptr_t a, uint32_t *id)
{
	uint32_t lo = 0, hi = h->nregions;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		struct lh_region *r = &h->region[h->by_base[mid]];
		if (a < r->base)
			hi = mid;
		else if (a >= r->base + ((uintptr_t)r->pages << LH_PAGE_SHIFT))
			lo = mid + 1;
		else {
			*id = h->by_base[mid];
			return r;
		}
	}
	return NULL;
}

/*
 * A block of bytes from the tier's kind, holding no pages. Not asked zeroed: the kind would write
 * every page of an aligned block. Dropping its pages instead makes it read as zeros and hold
 * nothing, whether the kind's extent was fresh or reused; the range keeps its NUMA policy. No
 * huge pages but those of live blocks (block_thp).
 */
static void *region_map(unsigned tier, size_t bytes)
{
	void *base = ta_backend_alloc(tier, bytes, LH_ALIGN, false);
	if (base == NULL)
		return NULL;
	page_advise((uintptr_t)base, bytes, MADV_DONTNEED);
	page_advise((uintptr_t)base, bytes, MADV_NOHUGEPAGE);
	return base;
}

/* -1 until read: THP "always" for this process (ta_thp_always), or the test's setting. */
static _Atomic int thp_blocks = -1;

void ta_lheap_set_thp(int on)
{
	atomic_store(&thp_blocks, on);
}

bool ta_lheap_thp_blocks(void)
{
	int t = atomic_load_explicit(&thp_blocks, memory_order_relaxed);
	if (t < 0) { /* two threads may both read it: the same answer */
		t = ta_thp_always() ? 1 : 0;
		atomic_store_explicit(&thp_blocks, t, memory_order_relaxed);
	}
	return t == 1;
}

/* Live pages [first, first + pages) of r: their whole 2 MiB units open to huge pages (on) or
 * closed again (freed), as THP "always" would have them. Nothing when the block holds no whole
 * unit: a block under 2 MiB never costs a system call. */
static void block_thp(struct lh_region *r, uint32_t first, uint32_t pages, bool on)
{
	uintptr_t a = r->base + ((uintptr_t)first << LH_PAGE_SHIFT);
	uintptr_t lo = (a + LH_ALIGN - 1) & ~(uintptr_t)(LH_ALIGN - 1);
	uintptr_t hi = (a + ((uintptr_t)pages << LH_PAGE_SHIFT)) & ~(uintptr_t)(LH_ALIGN - 1);
	if (hi > lo && ta_lheap_thp_blocks())
		page_advise(lo, hi - lo, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

/* A new region of at least `pages` from the tier's kind, as one free, clean extent: its id. A
 * region is address space until used, so it is large (LH_REGION): free pages merge across the
 * whole of it, as in one heap; smaller when the kind cannot give that much (an address-space
 * limit, strict overcommit), and exactly the request's size as the last resort. */
static uint32_t region_new(struct lh_tier *h, unsigned tier, uint64_t pages)
{
	uint64_t want = ((pages << LH_PAGE_SHIFT) + LH_ALIGN - 1) & ~(uint64_t)(LH_ALIGN - 1);
	if (want >> LH_PAGE_SHIFT > UINT32_MAX - 1 || h->nregions == LH_MAX_REGION)
		return LH_NIL;
	uint32_t eid = ext_new(h);
	if (eid == LH_NIL)
		return LH_NIL;
	const size_t tries[] = { want > LH_REGION ? want : LH_REGION,
				 want > LH_REGION_LOW ? want : LH_REGION_LOW, want };
	void *base = NULL;
	char *m = NULL;
	size_t bytes = 0, meta = 0;
	for (unsigned i = 0; i < sizeof(tries) / sizeof(tries[0]) && base == NULL; i++) {
		if (i > 0 && tries[i] == tries[i - 1])
			continue;
		bytes = tries[i];
		size_t npages = bytes >> LH_PAGE_SHIFT, words = (npages + 63) / 64;
		meta = 2 * npages * sizeof(uint32_t) + words * sizeof(uint64_t);
		meta = (meta + LH_PAGE - 1) & ~(LH_PAGE - 1);
		m = ta_pages_map(meta, true);
		base = m != NULL ? region_map(tier, bytes) : NULL;
		if (base == NULL && m != NULL)
			ta_pages_unmap(m, meta);
	}
	if (base == NULL) {
		ext_drop(h, eid);
		return LH_NIL;
	}
	uint32_t npages = (uint32_t)(bytes >> LH_PAGE_SHIFT);
	/* Region ids are slots, reused; find a free one (base 0). */
	uint32_t rid = h->region_hwm;
	for (uint32_t i = 0; i < h->region_hwm; i++)
		if (h->region[i].base == 0) {
			rid = i;
			break;
		}
	struct lh_region *r = &h->region[rid];
	*r = (struct lh_region){ .base = (uintptr_t)base,
				 .pages = npages,
				 .free_pages = npages,
				 .start = (uint32_t *)m,
				 .end = (uint32_t *)m + npages,
				 .dirty = (uint64_t *)(m + 2 * (size_t)npages * sizeof(uint32_t)),
				 .meta_bytes = meta };
	if (rid == h->region_hwm)
		h->region_hwm++;
	uint32_t at = h->nregions;
	while (at > 0 && h->region[h->by_base[at - 1]].base > r->base) {
		h->by_base[at] = h->by_base[at - 1];
		at--;
	}
	h->by_base[at] = rid;
	h->nregions++;
	atomic_fetch_add(&h->mapped_bytes, bytes);
	h->ext[eid] = (struct lh_ext){ .region = rid, .first = 0, .pages = npages };
	ext_mark(h, eid);
	bin_insert(h, eid);
	return eid;
}

/* Extent eid covers the whole of its region, free: give the region back to the kind, which
 * purges it (backend.c); false when it is the tier's one standard region kept spare. */
static bool region_release(struct lh_tier *h, unsigned tier, uint32_t eid)
{
	struct lh_ext *e = &h->ext[eid];
	uint32_t rid = e->region;
	struct lh_region *r = &h->region[rid];
	bool standard = (size_t)r->pages << LH_PAGE_SHIFT <= LH_REGION;
	if (standard && (h->spare == LH_NIL || h->spare == rid)) {
		h->spare = rid;
		return false;
	}
	bin_remove(h, eid);
	ext_unmark(h, eid);
	ext_drop(h, eid);
	atomic_fetch_sub(&h->dirty_bytes, dirty_count(r, 0, r->pages, false) << LH_PAGE_SHIFT);
	uint32_t at = 0;
	while (h->by_base[at] != rid)
		at++;
	memmove(&h->by_base[at], &h->by_base[at + 1], (h->nregions - at - 1) * sizeof(*h->by_base));
	h->nregions--;
	atomic_fetch_sub(&h->mapped_bytes, (uint64_t)r->pages << LH_PAGE_SHIFT);
	ta_backend_free(tier, (void *)r->base, (size_t)r->pages << LH_PAGE_SHIFT);
	ta_backend_purge(tier);
	ta_pages_unmap(r->start, r->meta_bytes);
	*r = (struct lh_region){ 0 };
	return true;
}

/* ---- allocation ---- */

static uintptr_t ext_addr(struct lh_tier *h, uint32_t id)
{
	return h->region[h->ext[id].region].base + ((uintptr_t)h->ext[id].first << LH_PAGE_SHIFT);
}

/*
 * A free extent of at least `pages`, or LH_NIL: the lowest-addressed fit (of the first LH_SCAN)
 * in the first size bin that has one. Address order keeps the live blocks low and the free pages
 * together at the top, where they merge and where the purge takes them first: against the best
 * fit, the 5-25 MiB block bench peaked at 216 MiB instead of 228 (glibc 226), in the same time.
 */
static uint32_t find_fit(struct lh_tier *h, uint64_t pages)
{
	unsigned b = bin_of(pages);
	for (;;) {
		/* the next non-empty bin from b */
		unsigned w = b / 64;
		uint64_t bits = w < LH_BINS / 64 ? h->nonempty[w] & (~0ull << (b % 64)) : 0;
		while (bits == 0 && ++w < LH_BINS / 64)
			bits = h->nonempty[w];
		if (bits == 0)
			return LH_NIL;
		b = w * 64 + (unsigned)__builtin_ctzll(bits);
		uint32_t best = LH_NIL;
		unsigned seen = 0;
		for (uint32_t id = h->bin[b]; id != LH_NIL && seen < LH_SCAN;
		     id = h->ext[id].next, seen++) {
			if (h->ext[id].pages >= pages &&
			    (best == LH_NIL || ext_addr(h, id) < ext_addr(h, best)))
				best = id;
		}
		if (best != LH_NIL)
			return best;
		if (++b == LH_BINS)
			return LH_NIL;
	}
}

void *ta_lheap_alloc(unsigned tier, size_t size, size_t align, bool zero)
{
	pthread_once(&heap_once, heap_init);
	struct lh_tier *h = &heap[tier];
	uint64_t pages = ((uint64_t)size + LH_PAGE - 1) >> LH_PAGE_SHIFT;
	uint64_t align_pages = align > LH_PAGE ? align >> LH_PAGE_SHIFT : 1;
	uint64_t need = pages + align_pages - 1;
	if (pages == 0 || need > UINT32_MAX / 2)
		return NULL;
	ta_lock(&h->lock, TA_RANK_HEAP);
	void *p = NULL;
	uint32_t id = tier_ready(h) ? find_fit(h, need) : LH_NIL;
	if (id == LH_NIL && h->ready)
		id = region_new(h, tier, need);
	if (id == LH_NIL)
		goto out;
	bin_remove(h, id);
	struct lh_ext *e = &h->ext[id];
	struct lh_region *r = &h->region[e->region];
	uintptr_t a = r->base + ((uintptr_t)e->first << LH_PAGE_SHIFT);
	uint32_t lead =
	    (uint32_t)((((a + align - 1) & ~(uintptr_t)(align - 1)) - a) >> LH_PAGE_SHIFT);
	if (align <= LH_PAGE)
		lead = 0;
	if (lead > 0) {
		/* the pages before the aligned start stay free */
		uint32_t nid = ext_split(h, id, e->pages - lead);
		if (nid == LH_NIL) {
			bin_insert(h, id);
			goto out;
		}
		bin_insert(h, id);
		id = nid;
		e = &h->ext[id];
	}
	if (e->pages > pages) {
		uint32_t rest = ext_split(h, id, e->pages - (uint32_t)pages);
		if (rest != LH_NIL)
			bin_insert(h, rest); /* else: the object keeps the extra pages */
		e = &h->ext[id];
	}
	r->free_pages -= e->pages;
	if (zero)
		dirty_runs(r, e->first, e->pages, zero_run, NULL);
	uint64_t reused = dirty_count(r, e->first, e->pages, true);
	atomic_fetch_sub(&h->dirty_bytes, reused << LH_PAGE_SHIFT);
	p = (void *)(r->base + ((uintptr_t)e->first << LH_PAGE_SHIFT));
	block_thp(r, e->first, e->pages, true);
	if (h->spare == e->region)
		h->spare = LH_NIL; /* in use again: the next region found whole and free is kept */
out:
	ta_unlock(&h->lock, TA_RANK_HEAP);
	return p;
}

/* The live extent that starts at p, or LH_NIL (not ours: a bug or a foreign pointer). */
static uint32_t live_extent(struct lh_tier *h, uintptr_t p, struct lh_region **rp)
{
	uint32_t rid;
	struct lh_region *r = h->ready ? region_find(h, p, &rid) : NULL;
	if (r == NULL || (p & (LH_PAGE - 1)) != 0)
		return LH_NIL;
	uint32_t id = r->start[(p - r->base) >> LH_PAGE_SHIFT];
	if (id == 0 || h->ext[id - 1].free)
		return LH_NIL;
	*rp = r;
	return id - 1;
}

/* Put extent id back among the free ones, merged with its free neighbours; gives the region
 * back when all of it is free (and it is not the spare). */
static void release_extent(struct lh_tier *h, unsigned tier, struct lh_region *r, uint32_t id)
{
	struct lh_ext *e = &h->ext[id];
	r->free_pages += e->pages;
	if (e->first > 0) {
		uint32_t prev = r->end[e->first - 1];
		if (prev != 0 && h->ext[prev - 1].free) {
			struct lh_ext *pe = &h->ext[prev - 1];
			bin_remove(h, prev - 1);
			ext_unmark(h, prev - 1);
			ext_unmark(h, id);
			pe->pages += e->pages;
			ext_drop(h, id);
			id = prev - 1;
			e = pe;
			ext_mark(h, id);
		}
	}
	uint32_t after = e->first + e->pages;
	if (after < r->pages) {
		uint32_t next = r->start[after];
		if (next != 0 && h->ext[next - 1].free) {
			struct lh_ext *ne = &h->ext[next - 1];
			bin_remove(h, next - 1);
			ext_unmark(h, next - 1);
			ext_unmark(h, id);
			e->pages += ne->pages;
			ext_drop(h, next - 1);
			ext_mark(h, id);
		}
	}
	bin_insert(h, id);
	if (e->pages == r->pages)
		region_release(h, tier, id);
}

void ta_lheap_free(unsigned tier, void *p, bool dropped)
{
	pthread_once(&heap_once, heap_init);
	struct lh_tier *h = &heap[tier];
	ta_lock(&h->lock, TA_RANK_HEAP);
	struct lh_region *r;
	uint32_t id = live_extent(h, (uintptr_t)p, &r);
	if (id == LH_NIL) {
		ta_unlock(&h->lock, TA_RANK_HEAP);
		ta_log(TA_LOG_ERROR, "large heap: %p is not a block of tier %u; not freed", p,
		       tier);
		return;
	}
	struct lh_ext *e = &h->ext[id];
	block_thp(r, e->first, e->pages, false);
	if (dropped) {
		/* Its pages were given back or sit in another tier (demoted): drop them, so that
		 * the range reads as zeros and faults in its own tier again. */
		page_advise((uintptr_t)p, (size_t)e->pages << LH_PAGE_SHIFT, MADV_DONTNEED);
	} else {
		dirty_set(r, e->first, e->pages);
		atomic_fetch_add(&h->dirty_bytes, (uint64_t)e->pages << LH_PAGE_SHIFT);
	}
	release_extent(h, tier, r, id);
	ta_unlock(&h->lock, TA_RANK_HEAP);
}

bool ta_lheap_resize(unsigned tier, void *p, size_t size)
{
	pthread_once(&heap_once, heap_init);
	struct lh_tier *h = &heap[tier];
	uint64_t pages = ((uint64_t)size + LH_PAGE - 1) >> LH_PAGE_SHIFT;
	if (pages == 0 || pages > UINT32_MAX / 2)
		return false;
	ta_lock(&h->lock, TA_RANK_HEAP);
	bool done = false;
	struct lh_region *r;
	uint32_t id = live_extent(h, (uintptr_t)p, &r);
	if (id == LH_NIL)
		goto out;
	struct lh_ext *e = &h->ext[id];
	if (pages == e->pages) {
		done = true;
		goto out;
	}
	block_thp(r, e->first, e->pages, false);
	if (pages < e->pages) {
		uint32_t tail = ext_split(h, id, e->pages - (uint32_t)pages);
		if (tail != LH_NIL) {
			struct lh_ext *te = &h->ext[tail];
			r->free_pages -= te->pages; /* release_extent adds them back */
			dirty_set(r, te->first, te->pages);
			atomic_fetch_add(&h->dirty_bytes, (uint64_t)te->pages << LH_PAGE_SHIFT);
			release_extent(h, tier, r, tail);
			done = true;
		}
	} else {
		uint32_t after = e->first + e->pages, grow = (uint32_t)pages - e->pages;
		uint32_t next = after < r->pages ? r->start[after] : 0;
		if (next != 0 && h->ext[next - 1].free && h->ext[next - 1].pages >= grow) {
			uint32_t nid = next - 1;
			bin_remove(h, nid);
			if (h->ext[nid].pages > grow) {
				uint32_t rest = ext_split(h, nid, h->ext[nid].pages - grow);
				if (rest == LH_NIL) {
					bin_insert(h, nid);
					goto advise;
				}
				bin_insert(h, rest);
			}
			uint64_t reused = dirty_count(r, after, grow, true);
			atomic_fetch_sub(&h->dirty_bytes, reused << LH_PAGE_SHIFT);
			ext_unmark(h, nid);
			ext_drop(h, nid);
			ext_unmark(h, id);
			e->pages += grow;
			ext_mark(h, id);
			r->free_pages -= grow;
			done = true;
		}
	}
advise:
	block_thp(r, e->first, e->pages, true);
out:
	ta_unlock(&h->lock, TA_RANK_HEAP);
	return done;
}

uint64_t ta_lheap_dirty(unsigned tier)
{
	return atomic_load_explicit(&heap[tier].dirty_bytes, memory_order_relaxed);
}

uint64_t ta_lheap_mapped(unsigned tier)
{
	return atomic_load_explicit(&heap[tier].mapped_bytes, memory_order_relaxed);
}

/* Give back the dirty pages of [first, first + n) of r from its high end, at most budget of
 * them; returns how many. An allocation takes a free extent's low pages, so its high ones are
 * the last to be reused. */
static uint64_t purge_down(struct lh_region *r, uint32_t first, uint32_t n, uint64_t budget)
{
	uint64_t done = 0;
	uint32_t p = first + n;
	while (p > first && done < budget) {
		if (p % 64 == 0 && p - first >= 64 && r->dirty[p / 64 - 1] == 0) {
			p -= 64; /* a clean word */
			continue;
		}
		if (!((r->dirty[(p - 1) / 64] >> ((p - 1) % 64)) & 1)) {
			p--;
			continue;
		}
		uint32_t hi = p;
		while (p > first && done < budget &&
		       ((r->dirty[(p - 1) / 64] >> ((p - 1) % 64)) & 1)) {
			r->dirty[(p - 1) / 64] &= ~(1ull << ((p - 1) % 64));
			p--;
			done++;
		}
		page_advise(r->base + ((uintptr_t)p << LH_PAGE_SHIFT),
			    (size_t)(hi - p) << LH_PAGE_SHIFT, MADV_DONTNEED);
	}
	return done;
}

uint64_t ta_lheap_purge(unsigned tier, uint64_t keep)
{
	pthread_once(&heap_once, heap_init);
	struct lh_tier *h = &heap[tier];
	uint64_t purged = 0;
	ta_lock(&h->lock, TA_RANK_HEAP);
	/* From the top of the heap down, as a heap gives back its top: the highest free pages are
	 * the ones an address-ordered heap reuses last. */
	for (uint32_t i = h->nregions; i-- > 0;) {
		struct lh_region *r = &h->region[h->by_base[i]];
		for (uint32_t at = r->pages; at > 0;) {
			uint64_t dirty = atomic_load(&h->dirty_bytes) >> LH_PAGE_SHIFT;
			if (dirty <= keep >> LH_PAGE_SHIFT)
				goto out;
			struct lh_ext *e = &h->ext[r->end[at - 1] - 1];
			if (e->free) {
				uint64_t n = purge_down(r, e->first, e->pages,
							dirty - (keep >> LH_PAGE_SHIFT));
				atomic_fetch_sub(&h->dirty_bytes, n << LH_PAGE_SHIFT);
				purged += n << LH_PAGE_SHIFT;
			}
			at = e->first;
		}
	}
out:
	ta_unlock(&h->lock, TA_RANK_HEAP);
	return purged;
}

void ta_lheap_fork_prepare(void)
{
	pthread_once(&heap_once, heap_init);
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		pthread_mutex_lock(&heap[t].lock);
}

void ta_lheap_fork_parent(void)
{
	for (unsigned t = TA_MAX_TIERS; t-- > 0;)
		pthread_mutex_unlock(&heap[t].lock);
}

void ta_lheap_fork_child(void)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		pthread_mutex_init(&heap[t].lock, NULL);
}

size_t ta_lheap_usable(unsigned tier, void *p)
{
	pthread_once(&heap_once, heap_init);
	struct lh_tier *h = &heap[tier];
	ta_lock(&h->lock, TA_RANK_HEAP);
	struct lh_region *r;
	uint32_t id = live_extent(h, (uintptr_t)p, &r);
	size_t bytes = id == LH_NIL ? 0 : (size_t)h->ext[id].pages << LH_PAGE_SHIFT;
	ta_unlock(&h->lock, TA_RANK_HEAP);
	return bytes;
}
