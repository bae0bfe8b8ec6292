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

#include "internal.h"
#include "shm.h"

/* The record of the large object p, if p is one of ours (large.c: no lock, no system call). */
static inline struct ta_large *large_of(const void *p)
{
	return ta_large_find(p);
}

static void log_foreign(const void *p, const char *what)
{
	static _Atomic unsigned reported;
	if (atomic_fetch_add(&reported, 1) < 8)
		ta_log(TA_LOG_WARN, "%s(%p): pointer not allocated by tieralloc; ignored", what, p);
}

/* ---- live bytes (statistics) and the charges of large objects ---- */

static inline void live_add(struct ta_tcache *tc, unsigned t, int64_t bytes)
{
	if (tc == NULL)
		atomic_fetch_add(&ta_arenas[t].folded_live, bytes);
	else
		__atomic_store_n(&tc->live[t], tc->live[t] + bytes, __ATOMIC_RELAXED);
}

/* Charge bytes to tier t for this thread: from its stock when it has a cache (most large
 * allocations then touch no shared line), else straight to the tier. */
static bool stock_charge(struct ta_tcache *tc, unsigned t, uint64_t bytes, int level, bool force)
{
	if (tc == NULL)
		return ta_arena_charge(t, bytes, level, force);
	if (tc->stock[t] < (int64_t)bytes && !ta_tcache_stock_refill(tc, t, bytes, level, force))
		return false;
	__atomic_store_n(&tc->stock[t], tc->stock[t] - (int64_t)bytes, __ATOMIC_RELAXED);
	return true;
}

static void stock_uncharge(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	if (tc == NULL) {
		ta_arena_uncharge(t, bytes);
		return;
	}
	__atomic_store_n(&tc->stock[t], tc->stock[t] + (int64_t)bytes, __ATOMIC_RELAXED);
	if (tc->stock[t] > tc->stock_high)
		ta_tcache_stock_trim(tc, t);
}

/* Charge a large object's bytes to tier t: first from what the tier keeps of freed large objects
 * (keep.c: memory it holds already, and that the kind reuses), then from the thread's stock. */
static bool charge(struct ta_tcache *tc, unsigned t, uint64_t bytes, int level, bool force)
{
	uint64_t kept = ta_keep_take(t, bytes);
	if (kept < bytes && !stock_charge(tc, t, bytes - kept, level, force)) {
		stock_uncharge(tc, t, kept); /* the kept charge goes on as stock */
		/* Quota pressure: empty runs of the tier go back first, then once more. */
		if (ta_arena_purge(t, 0) == 0 || !stock_charge(tc, t, bytes, level, force))
			return false;
	}
	live_add(tc, t, (int64_t)bytes);
	return true;
}

/* A large object's bytes leave tier t with their charge: its pages were given back or never
 * were (a failed allocation). */
static void uncharge(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	live_add(tc, t, -(int64_t)bytes);
	stock_uncharge(tc, t, bytes);
}

/* A large object's bytes went back to its tier's kind, which holds their pages for reuse: they
 * stay charged, kept (keep.c). */
static void unlive_keep(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	live_add(tc, t, -(int64_t)bytes);
	ta_keep_put(t, bytes);
}

/* A thread found tier t at its limit and moves on. */
static void note_full(unsigned t)
{
	atomic_fetch_add(&ta_arenas[t].exhausted, 1);
	/* A tier ran out: enforcement has something to look at, now rather than next period. */
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed))
		atomic_store(&ta_enforce_wanted, true);
	ta_worker_kick();
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		atomic_fetch_add(&ta_shm.tiers[t].steered_away, 1);
}

static void note_overflow(unsigned t)
{
	atomic_fetch_add(&ta_arenas[t].overflowed, 1);
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		atomic_fetch_add(&ta_shm.tiers[t].overflowed, 1);
}

/* slot: 0 placed as preferred, 1 steered in, 2 explicit. */
static void count_alloc(struct ta_tcache *tc, unsigned t, unsigned slot)
{
	if (tc != NULL) {
		__atomic_store_n(&tc->cnt[t][slot], tc->cnt[t][slot] + 1, __ATOMIC_RELAXED);
		return;
	}
	struct ta_arena *a = &ta_arenas[t];
	atomic_fetch_add(&a->folded_allocs, 1);
	if (slot == 1)
		atomic_fetch_add(&a->folded_steered_in, 1);
	else if (slot == 2)
		atomic_fetch_add(&a->folded_explicit, 1);
}

/* ---- small objects ---- */

/* A cached object whose chunk was demoted since it was cached: it belongs in the other tier's
 * bin (the chunk's charge moved with it, demote.c). */
static void rehome(struct ta_tcache *tc, unsigned u, unsigned cls, void *p)
{
	struct ta_bin *b = &tc->bins[u][cls];
	if (b->count >= b->cap)
		ta_tcache_flush_bin(tc, u, cls, b->cap / 2);
	b->slots[b->count++] = p;
}

/* An object of cls from tier t: this thread's cache, else the tier's free objects, else a new run
 * charged as ch says. */
static void *bin_take(struct ta_tcache *tc, unsigned t, unsigned cls, struct ta_fill_charge *ch)
{
	struct ta_bin *bin = &tc->bins[t][cls];
	for (;;) {
		if (bin->count == 0 || bin->count > bin->cap) {
			unsigned want = bin->cap / 2 ? bin->cap / 2 : 1;
			bin->count = ta_arena_fill(t, cls, bin->slots, want, ch);
			if (bin->count == 0)
				return NULL;
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

static void finish_slow(struct ta_tcache *tc)
{
	tc->in_slow = 0;
	if (unlikely(atomic_load_explicit(&tc->deferred, memory_order_relaxed) != NULL))
		ta_tcache_drain_deferred(tc);
}

static void *small_alloc_slow(struct ta_tcache *tc, unsigned cls, int want_tier)
{
	int64_t csize = ta_class_size[cls];
	void *p = NULL;
	unsigned t;
	tc->in_slow = 1;
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		ta_shm_refresh_limits(false);
	ta_keep_age();
	ta_arena_decay();
	if (want_tier >= 0) {
		t = (unsigned)want_tier;
		struct ta_fill_charge ch = { TA_LIMIT_MAX, true, false };
		p = bin_take(tc, t, cls, &ch);
		if (p != NULL)
			__atomic_store_n(&tc->cnt[t][2], tc->cnt[t][2] + 1, __ATOMIC_RELAXED);
	} else {
		/* The fastest tier within its high share, then within its max share. */
		unsigned slot = 0;
		for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX && p == NULL; level++) {
			for (t = 0; t < ta_ntiers; t++) {
				struct ta_fill_charge ch = { level, false, false };
				p = bin_take(tc, t, cls, &ch);
				/* Quota pressure: what the tier holds unused goes back
				 * first, so that the refused run may fit. */
				if (p == NULL && ch.refused && ta_give_back(t) != 0) {
					ch.refused = false;
					p = bin_take(tc, t, cls, &ch);
				}
				if (p != NULL)
					break;
				if (ch.refused)
					note_full(t);
				slot = 1;
			}
		}
		if (p == NULL && !ta_quota_enomem) {
			/* Every tier is at its max: overflow into the last one. */
			t = ta_ntiers - 1;
			struct ta_fill_charge ch = { TA_LIMIT_MAX, true, false };
			p = bin_take(tc, t, cls, &ch);
			if (p != NULL)
				note_overflow(t);
		}
		if (p != NULL) {
			if (t == 0)
				slot = 0;
			__atomic_store_n(&tc->cnt[t][slot], tc->cnt[t][slot] + 1, __ATOMIC_RELAXED);
			tc->pref_tier = t;
			tc->pref_slot = slot;
		}
	}
	if (p != NULL) {
		live_add(tc, t, csize);
		ta_arena_note_peak(t);
	}
	finish_slow(tc);
	return p;
}

/* A thread without a cache (exiting, or out of metadata): take one object directly. */
static void *small_alloc_nocache(unsigned cls, int want_tier)
{
	int64_t csize = ta_class_size[cls];
	unsigned first = want_tier >= 0 ? (unsigned)want_tier : 0;
	unsigned last = want_tier >= 0 ? (unsigned)want_tier : ta_ntiers - 1;
	for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX + 1; level++) {
		for (unsigned t = first; t <= last; t++) {
			/* The round after MAX is the overflow into the last tier. */
			bool force = want_tier >= 0 || (level > TA_LIMIT_MAX && t == last);
			if (level > TA_LIMIT_MAX && (!force || (want_tier < 0 && ta_quota_enomem)))
				continue;
			struct ta_fill_charge ch = { level > TA_LIMIT_MAX ? TA_LIMIT_MAX : level,
						     force, false };
			void *p;
			if (ta_arena_fill(t, cls, &p, 1, &ch) == 1) {
				live_add(NULL, t, csize);
				ta_arena_note_peak(t);
				count_alloc(NULL, t, want_tier >= 0 ? 2 : t > first ? 1 : 0);
				return p;
			}
		}
	}
	return NULL;
}

__attribute__((noinline)) static void small_free_slow(struct ta_tcache *tc, int t, unsigned cls,
						      void *p)
{
	int64_t csize = ta_class_size[cls];
	if (tc == NULL)
		tc = ta_tcache_get();
	if (tc == NULL) {
		ta_arena_flush((unsigned)t, cls, &p, 1);
		live_add(NULL, (unsigned)t, -csize);
		return;
	}
	if (tc->in_slow) {
		/* A signal handler interrupted one of our slow paths: no locks now. */
		void *head = atomic_load(&tc->deferred);
		do
			*(void **)p = head;
		while (!atomic_compare_exchange_weak(&tc->deferred, &head, p));
		return;
	}
	tc->in_slow = 1;
	struct ta_bin *bin = &tc->bins[t][cls];
	if (bin->count >= bin->cap)
		ta_tcache_flush_bin(tc, (unsigned)t, cls, bin->cap / 2);
	bin->slots[bin->count++] = p;
	live_add(tc, (unsigned)t, -csize);
	finish_slow(tc);
}

/* ---- large objects: straight from the tier's kind, their records apart (large.c) ---- */

static void *large_alloc_in(unsigned t, size_t size, size_t align, bool zero)
{
	bool aligned = align > 16;
	/* Every large object must start in a 64 KiB granule of its own (the address table's
	 * key): one of more than 64 KiB covers the rest of the granule it starts in, whatever its
	 * alignment, so a smaller one is given that many bytes. Its alignment does not spare it:
	 * 10 bytes aligned to 128 KiB start a granule and leave the rest of it to the backend,
	 * which put the next large object there, in the same table entry (issue 12). It also
	 * gives 0 bytes a block (memkind gives none for 0). */
	size_t bytes = size;
	if (bytes <= TA_SMALL_MAX)
		bytes = TA_SMALL_MAX + 1;
	void *user = ta_backend_alloc(t, bytes, aligned ? align : 16, zero);
	if (user == NULL) {
		atomic_fetch_add(&ta_arenas[t].backend_failures, 1);
		return NULL;
	}
	if (ta_large_register(user, size, t, aligned) == NULL) {
		ta_backend_free(t, user);
		return NULL;
	}
	return user;
}

static void *large_alloc(size_t size, size_t align, int want_tier, bool zero)
{
	/* Nothing the address space cannot hold, and no charge that the stocks' signed
	 * arithmetic could not. */
	if (size >= ((size_t)1 << TA_ADDR_BITS) || align >= ((size_t)1 << TA_ADDR_BITS))
		return NULL;
	struct ta_tcache *tc = ta_tcache_get();
	if (tc != NULL)
		tc->in_slow = 1;
	ta_keep_age();
	ta_arena_decay();
	void *p = NULL;
	if (want_tier >= 0) {
		unsigned t = (unsigned)want_tier;
		charge(tc, t, size, TA_LIMIT_MAX, true);
		p = large_alloc_in(t, size, align, zero);
		if (p == NULL)
			uncharge(tc, t, size);
		else
			count_alloc(tc, t, 2);
		goto out;
	}
	unsigned slot = 0;
	for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX && p == NULL; level++) {
		for (unsigned t = 0; t < ta_ntiers && p == NULL; t++) {
			if (!charge(tc, t, size, level, false)) {
				note_full(t);
				slot = 1;
				continue;
			}
			p = large_alloc_in(t, size, align, zero);
			if (p == NULL) {
				uncharge(tc, t, size);
				slot = 1;
			} else {
				count_alloc(tc, t, t > 0 ? slot : 0);
			}
		}
	}
	if (p == NULL && !ta_quota_enomem) {
		unsigned t = ta_ntiers - 1;
		charge(tc, t, size, TA_LIMIT_MAX, true);
		p = large_alloc_in(t, size, align, zero);
		if (p == NULL) {
			uncharge(tc, t, size);
		} else {
			note_overflow(t);
			count_alloc(tc, t, 1);
		}
	}
out:
	/* Only now: a request that failed (a huge size) must leave no peak behind. */
	if (p != NULL)
		ta_arena_note_peak(large_of(p)->tier);
	if (tc != NULL)
		finish_slow(tc);
	return p;
}

void ta_large_destroy(struct ta_large *l)
{
	void *user = l->user;
	unsigned home = l->tier, placed = l->placed;
	size_t size = l->size;
	bool rebound = l->state & TA_LARGE_REBOUND;
	if (rebound)
		ta_restore_range(user, size, home);
	ta_backend_free(home, user);
	ta_large_forget(l);
	/* Its pages dropped (rebound), or held by its kind for reuse (kept, still charged). */
	if (rebound || placed != home)
		uncharge(NULL, placed, size);
	else
		unlive_keep(NULL, placed, size);
}

static void large_free(struct ta_large *l)
{
	void *p = l->user;
	struct ta_tcache *tc = ta_tls;
	if (tc != NULL && tc->in_slow) {
		void *head = atomic_load(&tc->deferred);
		do
			*(void **)p = head;
		while (!atomic_compare_exchange_weak(&tc->deferred, &head, p));
		return;
	}
	if (tc == NULL)
		tc = ta_tcache_get();
	/* Out of the table first: a second free of p is then refused as foreign. */
	if (!ta_large_claim(l)) {
		log_foreign(p, "free");
		return;
	}
	/* Before taking the registry's lock: a signal handler's free must not wait for it. */
	if (tc != NULL)
		tc->in_slow = 1;
	struct ta_large last;
	if (!ta_large_unregister(l, &last, true)) {
		/* The enforcement pass is moving it and frees it when done. */
		if (tc != NULL)
			finish_slow(tc);
		return;
	}
	bool rebound = last.state & TA_LARGE_REBOUND;
	if (rebound)
		ta_restore_range(p, last.size, last.tier);
	ta_backend_free(last.tier, p);
	if (rebound || last.placed != last.tier)
		uncharge(tc, last.placed, last.size);
	else
		unlive_keep(tc, last.placed, last.size);
	ta_keep_age();
	if (tc != NULL)
		finish_slow(tc);
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
		p = tc != NULL ? small_alloc_slow(tc, cls, want_tier)
			       : small_alloc_nocache(cls, want_tier);
		if (p != NULL && zero)
			memset(p, 0, size);
	} else {
		p = large_alloc(size, align, want_tier, zero);
	}
	if (p == NULL)
		saved_errno = ENOMEM;
	/* Outside every lock and cache operation: the worker may be started here. */
	ta_enforce_poke();
	errno = saved_errno;
	return p;
}

void *ta_malloc(size_t size)
{
	struct ta_tcache *tc = ta_tls;
	if (likely(tc != NULL && size <= TA_SMALL_MAX)) {
		unsigned cls = ta_size_class(size);
		unsigned t = tc->pref_tier;
		struct ta_bin *bin = &tc->bins[t][cls];
		if (likely(bin->count - 1u < bin->cap)) {
			void *p = bin->slots[bin->count - 1];
			/* Still in this tier? Its chunk may have been demoted (slow path). */
			if (unlikely(__atomic_load_n(&ta_chunk_map[(uintptr_t)p >> TA_CHUNK_SHIFT],
						     __ATOMIC_RELAXED) != t + 1))
				return alloc_impl(size, 16, -1, false);
			bin->count--;
			int64_t live = tc->live[t] + (int64_t)ta_class_size[cls];
			__atomic_store_n(&tc->live[t], live, __ATOMIC_RELAXED);
			uint64_t *c = &tc->cnt[t][tc->pref_slot];
			__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
			return p;
		}
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
	struct ta_large *l = state == TA_READY ? large_of(p) : NULL;
	if (l != NULL) {
		large_free(l);
		return;
	}
	log_foreign(p, "free");
}

void ta_free(void *p)
{
	int t = ta_chunk_tier_of(p);
	if (likely(t >= 0)) {
		struct ta_tcache *tc = ta_tls;
		unsigned cls = ta_chunk_class_of(p);
		if (likely(tc != NULL && !tc->in_slow)) {
			struct ta_bin *bin = &tc->bins[t][cls];
			if (likely(bin->count < bin->cap)) {
				bin->slots[bin->count++] = p;
				int64_t live = tc->live[t] - (int64_t)ta_class_size[cls];
				__atomic_store_n(&tc->live[t], live, __ATOMIC_RELAXED);
				return;
			}
		}
		small_free_slow(tc, t, cls, p);
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
	if (ta_chunk_tier_of(p) >= 0)
		return ta_class_size[ta_chunk_class_of(p)];
	if (ta_boot_owns(p))
		return ta_boot_usable(p);
	int state = atomic_load(&ta_state);
	if (state == TA_PASSTHROUGH)
		return ta_real.usable_size(p);
	struct ta_large *l = state == TA_READY ? large_of(p) : NULL;
	if (l != NULL)
		return l->size;
	log_foreign(p, "malloc_usable_size");
	return 0;
}

/* Large object, same tier, plain alignment: let the backend grow or shrink it in place. */
static void *large_realloc(struct ta_large *l, size_t size)
{
	void *p = l->user;
	unsigned t = l->tier;
	size_t old = l->size;
	if (l->aligned || size >= ((size_t)1 << TA_ADDR_BITS))
		return NULL;
	struct ta_tcache *tc = ta_tcache_get();
	if (size > old && !charge(tc, t, size - old, TA_LIMIT_MAX, false))
		return NULL;
	/* Off the record while the backend may move it; one that was demoted or is being worked
	 * on is copied instead (its range's policy is not its home kind's). */
	if (tc != NULL)
		tc->in_slow = 1;
	struct ta_large last;
	if (!ta_large_unregister(l, &last, false)) {
		if (size > old)
			uncharge(tc, t, size - old);
		if (tc != NULL)
			finish_slow(tc);
		return NULL;
	}
	void *user = ta_backend_realloc(t, p, size);
	/* Failed: still at p, with its old size. */
	ta_large_reregister(l, user != NULL ? user : p, user != NULL ? size : old);
	if (user == NULL) {
		if (size > old)
			uncharge(tc, t, size - old);
	} else if (size < old) {
		unlive_keep(tc, t, old - size); /* the kind holds the tail's pages */
	} else {
		ta_arena_note_peak(t);
	}
	if (tc != NULL)
		finish_slow(tc);
	return user;
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
		old = ta_class_size[ta_chunk_class_of(p)];
		if (size <= old && (size > old / 2 || old <= 16))
			return p;
	} else if (ta_boot_owns(p)) {
		old = ta_boot_usable(p);
	} else {
		int state = atomic_load(&ta_state);
		if (state == TA_PASSTHROUGH)
			return ta_real.realloc(p, size);
		struct ta_large *l = state == TA_READY ? large_of(p) : NULL;
		if (l == NULL) {
			log_foreign(p, "realloc");
			errno = ENOMEM;
			return NULL;
		}
		old = l->size;
		if (size <= old && size > old / 2)
			return p;
		if (size > TA_SMALL_MAX) {
			void *q = large_realloc(l, size);
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
	struct ta_large *l = large_of(p);
	if (l != NULL)
		return (int)__atomic_load_n(&l->placed, __ATOMIC_RELAXED);
	return -EINVAL;
}
