/* SPDX-License-Identifier: MIT */
/*
 * The malloc family. Fast paths: malloc pops from this thread's cache of the preferred tier;
 * free finds the tier and class from the chunk map and the chunk header and pushes onto this
 * thread's cache. Neither charges anything: small objects are charged by the run, when a run is
 * cut (arena.c). Everything else (choosing another tier, refills, large objects, the states before
 * initialisation) is in the slow paths below.
 *
 * Steering: the fastest tier that has a free object of the class (already charged) or whose
 * charge for a new run stays within its limit; when every tier is at its limit the allocation
 * goes to the last tier anyway (counted as overflowed) rather than failing. An explicit tier
 * (tieralloc_malloc_tier) is charged where it lands, limit or not.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"

/* The allocator's state, which init.c moves from UNINIT to READY or PASSTHROUGH, and the C
 * library's allocator that PASSTHROUGH forwards to (init.c finds it). */
_Atomic int ta_state = TA_UNINIT;
struct ta_real_malloc ta_real;

/* Called after every slow path, outside every lock: enforcement's (set at start-up, init.c), so
 * that the allocator calls nothing above it. */
void (*ta_alloc_poke)(void);

/* ---- small objects ---- */

/* A cached object whose chunk was demoted since it was cached: it belongs in the other tier's
 * bin (the chunk's charge moved with it, demote.c). */
static void rehome(struct ta_tcache *tc, unsigned u, unsigned cls, void *p)
{
	struct ta_bin *b = &tc->bins[u][cls];
	if (b->count >= b->cap)
		ta_tcache_make_room(tc, u, cls);
	if (unlikely(b->cap == 0)) { /* no slots at all: straight back to its run */
		ta_arena_flush(u, cls, &p, 1);
		return;
	}
	b->slots[b->count++] = p;
}

/* Chunks were retagged since tc's objects were last checked: each cached object whose chunk is
 * now in another tier moves to that tier's bin, so that malloc's fast path, which only compares
 * the counts, never hands one out as its old tier's. The count is read first: a retag meanwhile
 * makes the next malloc check again. */
static void recheck_cached(struct ta_tcache *tc)
{
	uint64_t gen = atomic_load_explicit(&ta_retag_gen, memory_order_acquire);
	for (unsigned t = 0; t < ta_ntiers; t++) {
		for (unsigned cls = 0; cls < TA_NCLASSES; cls++) {
			struct ta_bin *bin = &tc->bins[t][cls];
			unsigned n = bin->count < bin->cap ? bin->count : bin->cap, kept = 0;
			for (unsigned i = 0; i < n; i++) {
				void *p = bin->slots[i];
				int u = ta_chunk_tier_of(p);
				if (likely(u == (int)t)) {
					bin->slots[kept++] = p;
					continue;
				}
				/* As in bin_take: the retag counted it live in u. */
				ta_arena_move_live((unsigned)u, t, ta_class_size[cls]);
				rehome(tc, (unsigned)u, cls, p); /* another bin: not this one's */
			}
			if (bin->count != kept)
				bin->count = (uint16_t)kept;
		}
	}
	tc->retag_gen = gen;
}

/* An object of cls from tier t: this thread's cache, else the tier's free objects, else a new run
 * charged as ch says. */
static void *bin_take(struct ta_tcache *tc, unsigned t, unsigned cls, struct ta_fill_charge *ch)
{
	struct ta_bin *bin = &tc->bins[t][cls];
	if (unlikely(bin->cap == 0) && !ta_tcache_grow(tc, t, cls))
		return NULL; /* cannot happen: the slot area holds every bin's arrays */
	for (;;) {
		if (bin->count == 0 || bin->count > bin->cap) {
			unsigned want = bin->fill, half = ta_class_cache_cap[cls] / 2u;
			while (want > bin->cap && ta_tcache_grow(tc, t, cls))
				;
			if (want > bin->cap)
				want = bin->cap;
			bin->count = (uint16_t)ta_arena_fill(t, cls, bin->slots, want, ch);
			if (bin->count == 0)
				return NULL;
			if (bin->fill < half)
				bin->fill = (uint16_t)(bin->fill * 2 < half ? bin->fill * 2 : half);
		}
		void *p = bin->slots[--bin->count];
		int u = ta_chunk_tier_of(p);
		if (likely(u == (int)t))
			return p;
		/* The retag counted it live in u as if in use (ta_arena_retag_chunk): it was
		 * cached here. */
		ta_arena_move_live((unsigned)u, t, ta_class_size[cls]);
		rehome(tc, (unsigned)u, cls, p);
	}
}

struct small_place {
	struct ta_tcache *tc; /* NULL: a thread without a cache */
	unsigned cls;
	size_t size;  /* what was asked */
	size_t align; /* above 16: the class was chosen for it (ta_size_class_aligned) */
};

/* An object of the class from tier t, free already or new from a run of the class. */
static void *take_from_class(struct small_place *sp, unsigned t, struct ta_fill_charge *ch)
{
	struct ta_tcache *tc = sp->tc;
	if (tc != NULL && sp->align > 16) {
		/* A packed object in the cache is aligned to 16 only: such requests take the
		 * class's runs themselves unless the cache's next object will do. */
		struct ta_bin *bin = &tc->bins[t][sp->cls];
		if (bin->count == 0 || bin->count > bin->cap ||
		    ((uintptr_t)bin->slots[bin->count - 1] & (sp->align - 1)) != 0)
			tc = NULL;
	}
	ch->runs_only = sp->align > 16;
	void *p;
	if (tc != NULL) {
		p = bin_take(tc, t, sp->cls, ch);
		if (p == NULL || ((uintptr_t)p & (sp->align - 1)) == 0)
			return p;
		/* Rare: past an object of another tier, the next was a packed one. Back where
		 * it was taken from, which has room. */
		struct ta_bin *bin = &tc->bins[t][sp->cls];
		bin->slots[bin->count++] = p;
	}
	return ta_arena_fill(t, sp->cls, &p, 1, ch) == 1 ? p : NULL;
}

/* An object of the class from tier t, charged as ch says: free objects first, then a new packed
 * object while the process packs (ta_arena_packs), else a new run of the class. */
static void *take_small(struct small_place *sp, unsigned t, struct ta_fill_charge *ch)
{
	ch->no_new_run = sp->align <= 16 && ta_arena_packs(sp->size);
	void *p = take_from_class(sp, t, ch);
	if (p != NULL || !ch->no_new_run || ch->refused)
		return p;
	p = ta_arena_pack(t, sp->size, ch);
	if (p != NULL || ch->refused)
		return p;
	ch->no_new_run = false; /* the process stopped packing meanwhile */
	return take_from_class(sp, t, ch);
}

/* Steering's try of tier t for a small object (charge.h): a free object of the class, else a new
 * run charged at this level. */
static void *place_small(unsigned t, int level, bool force, bool *refused, void *ctx)
{
	struct small_place *sp = ctx;
	struct ta_fill_charge ch = { .level = level, .force = force };
	void *p = take_small(sp, t, &ch);
	/* Quota pressure: what the tier holds unused goes back first, so that the refused run
	 * may fit. */
	if (p == NULL && ch.refused && ta_give_back(t) != 0) {
		ch.refused = false;
		p = take_small(sp, t, &ch);
	}
	*refused = ch.refused;
	return p;
}

static void *small_alloc_slow(struct ta_tcache *tc, unsigned cls, size_t size, size_t align,
			      int want_tier)
{
	tc->in_slow = 1;
	if (tc->retag_gen != atomic_load_explicit(&ta_retag_gen, memory_order_relaxed))
		recheck_cached(tc);
	ta_charge_note_limits();
	ta_keep_age();
	ta_arena_decay();
	struct small_place sp = { tc, cls, size, align };
	struct ta_placed where;
	void *p = ta_steer(want_tier, place_small, &sp, &where);
	if (p != NULL) {
		unsigned t = where.tier;
		ta_tcache_count_alloc(tc, t, where.how);
		if (want_tier < 0) {
			tc->pref_tier = t;
			tc->pref_slot = where.how;
		}
		/* A new packed object counts as its header's class, as its free will. */
		ta_tcache_live_add(tc, t, ta_class_size[ta_small_class_of(p)]);
		ta_charge_note_peak(t);
	}
	ta_tcache_finish_slow(tc);
	return p;
}

/* A thread without a cache (exiting, or out of metadata): take one object directly. */
static void *small_alloc_nocache(unsigned cls, size_t size, size_t align, int want_tier)
{
	struct small_place sp = { NULL, cls, size, align };
	struct ta_placed where;
	void *p = ta_steer(want_tier, place_small, &sp, &where);
	if (p != NULL) {
		ta_tcache_live_add(NULL, where.tier, ta_class_size[ta_small_class_of(p)]);
		ta_charge_note_peak(where.tier);
		ta_tcache_count_alloc(NULL, where.tier, where.how);
	}
	return p;
}

/* Every small free that is not the fast path's: a packed object, a full bin, a thread without a
 * cache, a signal handler's free, and whatever failed the fast path's checks (said here). */
__attribute__((noinline)) static void small_free_slow(struct ta_tcache *tc, int t, unsigned cls,
						      void *p)
{
	bool packed = cls >= TA_NCLASSES;
	cls = ta_small_class_of(p);
	if (unlikely(cls >= TA_NCLASSES)) {
		ta_misuse_pointer("free", p);
		return;
	}
	if (unlikely(ta_freed(p))) {
		ta_misuse(TA_MISUSE_DOUBLE_FREE, "free", p);
		return;
	}
	int64_t csize = ta_class_size[cls];
	if (tc == NULL)
		tc = ta_tcache_get();
	if (packed && tc != NULL && !tc->in_slow) {
		tc->pack_freed += (uint32_t)csize;
		if (tc->pack_freed >= TA_PACK_FREED_BATCH) {
			ta_arena_pack_freed(tc->pack_freed);
			tc->pack_freed = 0;
		}
	} else if (packed && tc == NULL) {
		ta_arena_pack_freed((uint64_t)csize);
	}
	if (tc == NULL) {
		ta_mark_freed(p);
		ta_arena_flush((unsigned)t, cls, &p, 1);
		ta_tcache_live_add(NULL, (unsigned)t, -csize);
		return;
	}
	if (tc->in_slow) {
		/* A signal handler interrupted one of our slow paths: no locks now. Not marked:
		 * the drain frees it through ta_free. */
		void *head = atomic_load(&tc->deferred);
		do
			ta_link_put(p, head);
		while (!atomic_compare_exchange_weak(&tc->deferred, &head, p));
		return;
	}
	tc->in_slow = 1;
	ta_mark_freed(p);
	struct ta_bin *bin = &tc->bins[t][cls];
	if (bin->count >= bin->cap)
		ta_tcache_make_room(tc, (unsigned)t, cls);
	if (unlikely(bin->cap == 0))
		ta_arena_flush((unsigned)t, cls, &p, 1);
	else
		bin->slots[bin->count++] = p;
	ta_tcache_live_add(tc, (unsigned)t, -csize);
	ta_tcache_finish_slow(tc);
}

/* ---- entry points ---- */

static void *real_alloc(size_t size, size_t align, bool zero)
{
	if (align <= 16)
		return zero ? ta_real.calloc(1, size) : ta_real.malloc(size);
	void *p = ta_real.memalign(align, size);
	if (p != NULL && zero)
		memset(p, 0, size);
	return p;
}

/* Everything but malloc's fast path: states before init, tier choice, refills, large. */
__attribute__((noinline)) static void *alloc_impl(size_t size, size_t align, int want_tier,
						  bool zero)
{
	int state = atomic_load_explicit(&ta_state, memory_order_acquire);
	if (unlikely(state != TA_READY)) {
		/* Before our constructor ran, initialising would use libnuma half-built. */
		if (state == TA_PASSTHROUGH)
			return real_alloc(size, align, zero);
		if (state != TA_READY)
			return ta_boot_alloc(size, align); /* zeroed: never reused */
	}
	/* memkind starting on this thread, maybe inside our locks (backend.c). */
	if (unlikely(ta_backend_starting))
		return ta_boot_alloc(size, align);
	if (want_tier >= (int)ta_ntiers) {
		errno = EINVAL;
		return NULL;
	}
	if (size > (size_t)PTRDIFF_MAX) {
		errno = ENOMEM;
		return NULL;
	}
	int saved_errno = errno;
	unsigned cls = TA_NCLASSES;
	if (align <= 16 && size <= TA_SMALL_MAX)
		cls = ta_size_class(size);
	else if (align > 16)
		cls = ta_size_class_aligned(size, align);
	void *p;
	if (cls < TA_NCLASSES) {
		struct ta_tcache *tc = ta_tcache_get();
		p = tc != NULL ? small_alloc_slow(tc, cls, size, align, want_tier)
			       : small_alloc_nocache(cls, size, align, want_tier);
		if (p != NULL) {
			ta_mark_taken(p);
			if (zero)
				memset(p, 0, size);
		}
	} else {
		p = ta_large_alloc(size, align, want_tier, zero);
	}
	if (p == NULL)
		saved_errno = ENOMEM;
	/* Outside every lock and cache operation: the enforcement worker may be started here. */
	if (ta_alloc_poke != NULL)
		ta_alloc_poke();
	errno = saved_errno;
	return p;
}

/*
 * The fast paths run with in_slow set, as the slow paths do: a signal handler's free that lands in
 * one is deferred (small_free_slow) and done at the path's end. Otherwise the handler's free could
 * find the bin full and flush half of it to the central bin, and the interrupted path would then
 * hand out a slot it had read before the flush (its object now free in its run) or restore a count
 * over flushed slots: one object with two owners (prog_signal's "corrupt at 0"). The compiler
 * fences keep the bin's accesses between the flag's two stores.
 */
/* The end of a fast path that saw a deferred free: a tail call, so that the fast path keeps no
 * frame of its own. */
__attribute__((noinline)) static void *drain_then(struct ta_tcache *tc, void *p)
{
	ta_tcache_drain_deferred(tc);
	return p;
}

void *ta_malloc(size_t size)
{
	struct ta_tcache *tc = ta_tls;
	if (likely(tc != NULL && size <= TA_SMALL_MAX)) {
		unsigned cls = ta_size_class(size);
		unsigned t = tc->pref_tier;
		struct ta_bin *bin = &tc->bins[t][cls];
		/* Restored, not cleared: a handler's malloc (outside POSIX, but seen) inside one of
		 * our paths must leave that path's flag as it found it. Not tested on entry: that
		 * load would wait on the last path's store. */
		int was = tc->in_slow;
		tc->in_slow = 1;
		atomic_signal_fence(memory_order_seq_cst);
		unsigned n = __atomic_load_n(&bin->count, __ATOMIC_RELAXED);
		if (likely(n - 1u < bin->cap)) {
			void *p = bin->slots[n - 1];
			/* Every cached object still in its bin's tier? Not when a chunk was
			 * retagged since they were checked (the slow path checks them again). */
			if (likely(tc->retag_gen ==
				   atomic_load_explicit(&ta_retag_gen, memory_order_relaxed))) {
				__atomic_store_n(&bin->count, (uint16_t)(n - 1), __ATOMIC_RELAXED);
				ta_mark_taken(p);
				int64_t live = tc->live[t] + (int64_t)ta_class_size[cls];
				__atomic_store_n(&tc->live[t], live, __ATOMIC_RELAXED);
				uint64_t *c = &tc->cnt[t][tc->pref_slot];
				__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
				atomic_signal_fence(memory_order_seq_cst);
				tc->in_slow = was;
				if (unlikely(atomic_load_explicit(&tc->deferred,
								  memory_order_relaxed) != NULL) &&
				    was == 0)
					return drain_then(tc, p);
				return p;
			}
		}
		/* A deferred free waits for the slow path's end (ta_tcache_finish_slow). */
		atomic_signal_fence(memory_order_seq_cst);
		tc->in_slow = was;
	}
	return alloc_impl(size, 16, -1, false);
}

__attribute__((noinline)) static void free_other(void *p)
{
	if (ta_boot_owns(p))
		return;
	int state = atomic_load_explicit(&ta_state, memory_order_acquire);
	if (state == TA_PASSTHROUGH) {
		ta_real.free(p);
		return;
	}
	struct ta_large *l = state == TA_READY ? ta_large_find(p) : NULL;
	if (l != NULL) {
		ta_large_free(l);
		return;
	}
	ta_log_foreign(p, "free");
}

/* The fast path's push of p, an object of cls (its start checked), onto this thread's bin; false
 * (nothing changed) when it is freed already (its mark), the bin is full or, packed, a batch of
 * packed frees is to be reported (ta_arena_pack_freed): the slow path does those. */
static inline __attribute__((always_inline)) bool free_to_bin(struct ta_tcache *tc, size_t t,
							      size_t cls, void *p, bool packed)
{
	uint64_t mark = ta_secret.mark ^ (uintptr_t)p;
	if (unlikely(((ta_word *)p)[1] == mark))
		return false;
	struct ta_bin *bin = tc->bins[0] + (t * TA_NCLASSES + cls);
	uint32_t csize = ta_class_size[cls];
	tc->in_slow = 1; /* as in malloc */
	atomic_signal_fence(memory_order_seq_cst);
	unsigned n = __atomic_load_n(&bin->count, __ATOMIC_RELAXED);
	uint32_t pack_freed = tc->pack_freed + csize;
	if (likely(n < bin->cap && (!packed || pack_freed < TA_PACK_FREED_BATCH))) {
		((ta_word *)p)[1] = mark;
		bin->slots[n] = p;
		__atomic_store_n(&bin->count, (uint16_t)(n + 1), __ATOMIC_RELAXED);
		if (packed)
			tc->pack_freed = pack_freed;
		int64_t live = tc->live[t] - (int64_t)csize;
		__atomic_store_n(&tc->live[t], live, __ATOMIC_RELAXED);
		atomic_signal_fence(memory_order_seq_cst);
		ta_tcache_finish_slow(tc);
		return true;
	}
	atomic_signal_fence(memory_order_seq_cst);
	tc->in_slow = 0; /* the slow path drains what was deferred */
	return false;
}

void ta_free(void *p)
{
	int t = ta_chunk_tier_of(p);
	if (likely(t >= 0)) {
		struct ta_tcache *tc = ta_tls;
		size_t kind = ta_chunk_class_of(p); /* a class, or TA_PAGE_PACKED */
		/* An object's start (a packed one's header checked), not freed already: alloc.h,
		 * "Heap integrity". The slow path says what failed. */
		if (likely(tc != NULL && !tc->in_slow)) {
			if (likely(kind < TA_NCLASSES)) {
				if (likely(ta_run_starts(p, kind)) &&
				    free_to_bin(tc, (unsigned)t, kind, p, false))
					return;
			} else if (kind == TA_PAGE_PACKED && ((uintptr_t)p & 15u) == 0) {
				/* ta_pack_class_of less its check of the usable size, which free
				 * does not read: the tag covers it (the slow path checks it all).
				 */
				uint64_t h = *(const ta_word *)ta_pack_hdr_of(p);
				unsigned cls = (unsigned)(h >> 32) & 0xffu;
				if (((ta_pack_hash(p, h) ^ h) & TA_PACK_TAG_MASK) == 0 &&
				    cls < TA_NCLASSES && free_to_bin(tc, (unsigned)t, cls, p, true))
					return;
			}
		}
		small_free_slow(tc, t, (unsigned)kind, p);
		return;
	}
	if (p == NULL)
		return;
	free_other(p);
}

int ta_trim(size_t pad)
{
	int state = atomic_load_explicit(&ta_state, memory_order_acquire);
	if (state == TA_PASSTHROUGH) {
		static int (*real_trim)(size_t);
		if (real_trim == NULL)
			real_trim = (int (*)(size_t))dlsym(RTLD_NEXT, "malloc_trim");
		return real_trim != NULL ? real_trim(pad) : 0;
	}
	if (state != TA_READY)
		return 0;
	/* Whole runs and kept large objects go back: glibc's pad (slack kept at its heap's top)
	 * has no counterpart here. */
	ta_tcache_flush_all_mine();
	return ta_purge_all() != 0;
}

void *ta_calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (likely(ta_tls != NULL && total <= TA_SMALL_MAX)) {
		void *p = ta_malloc(total);
		if (p != NULL)
			memset(p, 0, total);
		return p;
	}
	return alloc_impl(total, 16, -1, true);
}

size_t ta_usable_size(void *p)
{
	if (p == NULL)
		return 0;
	if (ta_chunk_tier_of(p) >= 0) {
		size_t usable = ta_small_usable(p);
		if (usable == 0)
			ta_misuse_pointer("malloc_usable_size", p);
		return usable;
	}
	if (ta_boot_owns(p))
		return ta_boot_usable(p);
	int state = atomic_load(&ta_state);
	if (state == TA_PASSTHROUGH)
		return ta_real.usable_size(p);
	struct ta_large *l = state == TA_READY ? ta_large_find(p) : NULL;
	if (l != NULL)
		return l->size;
	ta_log_foreign(p, "malloc_usable_size");
	return 0;
}

void *ta_realloc(void *p, size_t size)
{
	if (p == NULL)
		return ta_malloc(size);
	if (size == 0) {
		/* glibc's behaviour: free and return NULL. */
		ta_free(p);
		return NULL;
	}
	size_t old;
	int t = ta_chunk_tier_of(p);
	if (t >= 0) {
		old = ta_small_usable(p);
		if (old == 0 || ta_freed(p)) {
			if (old == 0)
				ta_misuse_pointer("realloc", p);
			else
				ta_misuse(TA_MISUSE_FREED, "realloc", p);
			/* Under TIERALLOC_ON_MISUSE=warn: refused, as a foreign pointer is. */
			errno = ENOMEM;
			return NULL;
		}
		if (size <= old && (size > old / 2 || old <= 16))
			return p;
	} else if (ta_boot_owns(p)) {
		old = ta_boot_usable(p);
	} else {
		int state = atomic_load(&ta_state);
		if (state == TA_PASSTHROUGH)
			return ta_real.realloc(p, size);
		struct ta_large *l = state == TA_READY ? ta_large_find(p) : NULL;
		if (l == NULL) {
			ta_log_foreign(p, "realloc");
			errno = ENOMEM;
			return NULL;
		}
		old = l->size;
		if (size <= old && size > old / 2)
			return p;
		if (size > TA_SMALL_MAX) {
			void *q = ta_large_realloc(l, size);
			if (q != NULL)
				return q;
		}
	}
	void *q = ta_malloc(size);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < size ? old : size);
	ta_free(p);
	return q;
}

void *ta_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return ta_realloc(p, total);
}

static bool power_of_two(size_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

void *ta_memalign(size_t align, size_t size)
{
	/* glibc rounds an alignment that is not a power of two up to one (and programs rely on
	 * it under the preload); only posix_memalign rejects it. */
	if (!power_of_two(align)) {
		if (align > (SIZE_MAX >> 1) + 1) {
			errno = EINVAL;
			return NULL;
		}
		size_t p2 = 1;
		while (p2 < align)
			p2 <<= 1;
		align = p2;
	}
	if (align <= 16)
		return ta_malloc(size);
	return alloc_impl(size, align, -1, false);
}

int ta_posix_memalign(void **out, size_t align, size_t size)
{
	if (!power_of_two(align) || align % sizeof(void *) != 0)
		return EINVAL;
	int saved_errno = errno;
	void *p = ta_memalign(align, size);
	errno = saved_errno;
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

void *ta_aligned_alloc(size_t align, size_t size)
{
	/* C17 drops the size % align rule; glibc accepts any power of two. */
	return ta_memalign(align, size);
}

void *ta_valloc(size_t size)
{
	return ta_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *ta_pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (size > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	size_t rounded = size == 0 ? page : (size + page - 1) & ~(page - 1);
	return ta_memalign(page, rounded);
}

void *ta_malloc_tier(int tier, size_t size, bool zero)
{
	if (tier < 0 || tier >= TA_MAX_TIERS) {
		errno = EINVAL;
		return NULL;
	}
	return alloc_impl(size, 16, tier, zero);
}

int ta_tier_of(const void *p)
{
	int t = ta_chunk_tier_of(p);
	if (t >= 0)
		return t;
	if (p == NULL || ta_boot_owns(p) || atomic_load(&ta_state) != TA_READY)
		return -EINVAL;
	struct ta_large *l = ta_large_find(p);
	if (l != NULL)
		return (int)__atomic_load_n(&l->placed, __ATOMIC_RELAXED);
	return -EINVAL;
}
