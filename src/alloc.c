/* SPDX-License-Identifier: MIT */
/*
 * The malloc family. Fast paths: malloc pops from this thread's cache of the preferred tier when
 * the thread's stock covers the size; free finds the tier and class from the chunk map and the
 * chunk header and pushes onto this thread's cache. Everything else (choosing another tier,
 * refills, large objects, the states before initialisation) is in the slow paths below.
 *
 * Steering: the fastest tier whose charge stays within its limit; when every tier is at its limit
 * the allocation goes to the last tier anyway (counted as overflowed) rather than failing.
 * An explicit tier (tieralloc_malloc_tier) is charged where it lands, limit or not.
 */
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "shm.h"

#define TA_LARGE_MAGIC 0x7469657262696721ull /* "tierbig!" */

static inline struct ta_large_hdr *large_hdr(const void *p)
{
	return ta_large_hdr_of(p);
}

/* Is the page holding addr mapped? mincore(2) fails with ENOMEM on an unmapped range. */
static bool page_mapped(uintptr_t addr)
{
	unsigned char vec;
	uintptr_t page = addr & ~(uintptr_t)4095;
	return syscall(SYS_mincore, page, 4096UL, &vec) == 0 || errno != ENOMEM;
}

static bool large_valid(const void *p)
{
	/* Our large objects are at least 16-byte aligned and have a header before them. */
	uintptr_t a = (uintptr_t)p;
	if ((a & 15) != 0 || a < 4096)
		return false;
	/* The header of a page-aligned pointer is on the previous page, which for a pointer that is
	 * not ours may not be mapped: ask before reading (only aligned large objects pay this). */
	if ((a & 4095) < sizeof(struct ta_large_hdr)) {
		int saved_errno = errno;
		bool mapped = page_mapped(a - sizeof(struct ta_large_hdr));
		errno = saved_errno;
		if (!mapped)
			return false;
	}
	return large_hdr(p)->magic == (TA_LARGE_MAGIC ^ a);
}

static void log_foreign(const void *p, const char *what)
{
	static _Atomic unsigned reported;
	if (atomic_fetch_add(&reported, 1) < 8)
		ta_log(TA_LOG_WARN, "%s(%p): pointer not allocated by tieralloc; ignored", what, p);
}

/* ---- charging outside the small-object fast paths ---- */

/* Charge bytes to tier t for this thread: from its stock when it has a cache (most large
 * allocations then touch no shared line), else straight to the tier. */
static bool charge(struct ta_tcache *tc, unsigned t, uint64_t bytes, int level, bool force)
{
	if (tc == NULL) {
		if (!ta_arena_charge(t, bytes, level, force))
			return false;
		atomic_fetch_add(&ta_arenas[t].folded_live, (int64_t)bytes);
		return true;
	}
	if (tc->stock[t] < (int64_t)bytes && !ta_tcache_stock_refill(tc, t, bytes, level, force))
		return false;
	__atomic_store_n(&tc->stock[t], tc->stock[t] - (int64_t)bytes, __ATOMIC_RELAXED);
	return true;
}

static void uncharge(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	if (tc == NULL) {
		ta_arena_uncharge(t, bytes);
		atomic_fetch_sub(&ta_arenas[t].folded_live, (int64_t)bytes);
		return;
	}
	__atomic_store_n(&tc->stock[t], tc->stock[t] + (int64_t)bytes, __ATOMIC_RELAXED);
	if (tc->stock[t] > tc->stock_high)
		ta_tcache_stock_trim(tc, t);
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
 * bin, and is charged there when handed out (enforce.c moved the chunk's live charge only). */
static void rehome(struct ta_tcache *tc, unsigned u, unsigned cls, void *p)
{
	struct ta_bin *b = &tc->bins[u][cls];
	if (b->count >= b->cap)
		ta_tcache_flush_bin(tc, u, cls, b->cap / 2);
	b->slots[b->count++] = p;
}

static void *bin_take(struct ta_tcache *tc, unsigned t, unsigned cls)
{
	struct ta_bin *bin = &tc->bins[t][cls];
	for (;;) {
		if (bin->count == 0 || bin->count > bin->cap) {
			unsigned want = bin->cap / 2 ? bin->cap / 2 : 1;
			bin->count = ta_arena_fill(t, cls, bin->slots, want);
			if (bin->count == 0)
				return NULL;
		}
		void *p = bin->slots[--bin->count];
		int u = ta_chunk_tier_of(p);
		if (likely(u == (int)t))
			return p;
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
	if (want_tier >= 0) {
		t = (unsigned)want_tier;
		if (tc->stock[t] < csize)
			ta_tcache_stock_refill(tc, t, (uint64_t)csize, TA_LIMIT_MAX, true);
		p = bin_take(tc, t, cls);
		if (p != NULL)
			__atomic_store_n(&tc->cnt[t][2], tc->cnt[t][2] + 1, __ATOMIC_RELAXED);
	} else {
		/* The fastest tier within its high share, then within its max share. */
		unsigned slot = 0;
		for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX && p == NULL; level++) {
			for (t = 0; t < ta_ntiers; t++) {
				if (tc->stock[t] >= csize ||
				    ta_tcache_stock_refill(tc, t, (uint64_t)csize, level, false)) {
					p = bin_take(tc, t, cls);
					if (p != NULL)
						break;
				}
				note_full(t);
				slot = 1;
			}
		}
		if (p == NULL && !ta_quota_enomem) {
			/* Every tier is at its max: overflow into the last one. */
			t = ta_ntiers - 1;
			if (tc->stock[t] < csize)
				ta_tcache_stock_refill(tc, t, (uint64_t)csize, TA_LIMIT_MAX, true);
			p = bin_take(tc, t, cls);
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
		__atomic_store_n(&tc->stock[t], tc->stock[t] - csize, __ATOMIC_RELAXED);
		ta_arena_note_peak(t);
	}
	finish_slow(tc);
	return p;
}

/* A thread without a cache (exiting, or out of metadata): charge and take one object directly. */
static void *small_alloc_nocache(unsigned cls, int want_tier)
{
	uint64_t csize = ta_class_size[cls];
	unsigned first = want_tier >= 0 ? (unsigned)want_tier : 0;
	unsigned last = want_tier >= 0 ? (unsigned)want_tier : ta_ntiers - 1;
	for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX + 1; level++) {
		for (unsigned t = first; t <= last; t++) {
			/* The round after MAX is the overflow into the last tier. */
			bool force = want_tier >= 0 || (level > TA_LIMIT_MAX && t == last);
			if (level > TA_LIMIT_MAX && (!force || (want_tier < 0 && ta_quota_enomem)))
				continue;
			if (!charge(NULL, t, csize, level > TA_LIMIT_MAX ? TA_LIMIT_MAX : level,
				    force))
				continue;
			void *p;
			if (ta_arena_fill(t, cls, &p, 1) == 1) {
				ta_arena_note_peak(t);
				count_alloc(NULL, t, want_tier >= 0 ? 2 : t > first ? 1 : 0);
				return p;
			}
			uncharge(NULL, t, csize);
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
		uncharge(NULL, (unsigned)t, (uint64_t)csize);
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
	__atomic_store_n(&tc->stock[t], tc->stock[t] + csize, __ATOMIC_RELAXED);
	if (tc->stock[t] > tc->stock_high)
		ta_tcache_stock_trim(tc, (unsigned)t);
	finish_slow(tc);
}

/* ---- large objects: straight from the tier's kind, a header in front ---- */

/*
 * A plain large object starts 32 bytes into a cache line (16-byte alignment, as glibc gives), so
 * that its 32-byte header shares the line the program touches first and is never on the previous
 * page: telling our pointers from foreign ones then needs no system call (see large_valid).
 * Aligned ones start `align` bytes into a block aligned to `align`.
 */
#define TA_LARGE_ROOM 96

static void *large_alloc_in(unsigned t, size_t size, size_t align, bool zero)
{
	bool aligned = align > 16;
	size_t room = aligned ? (align > TA_LARGE_HDR ? align : TA_LARGE_HDR) : TA_LARGE_ROOM;
	char *raw = ta_backend_alloc(t, size + room, aligned ? room : 16, zero);
	if (raw == NULL) {
		atomic_fetch_add(&ta_arenas[t].backend_failures, 1);
		return NULL;
	}
	char *user = raw + room;
	if (!aligned)
		user = (char *)((((uintptr_t)raw + 64) & ~(uintptr_t)63) + 32);
	struct ta_large_hdr *h = large_hdr(user);
	h->size = size;
	h->offset = (uint32_t)(user - raw);
	h->tier = t;
	h->aligned = aligned;
	h->reserved = 0;
	h->magic = TA_LARGE_MAGIC ^ (uintptr_t)user;
	ta_large_register(ta_large_link_of(user), t);
	return user;
}

static void *large_alloc(size_t size, size_t align, int want_tier, bool zero)
{
	if (size > (size_t)PTRDIFF_MAX - 2 * (align > TA_LARGE_HDR ? align : TA_LARGE_HDR))
		return NULL;
	struct ta_tcache *tc = ta_tcache_get();
	if (tc != NULL)
		tc->in_slow = 1;
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
		ta_arena_note_peak(large_hdr(p)->tier);
	if (tc != NULL)
		finish_slow(tc);
	return p;
}

void ta_large_destroy(struct ta_large_link *l)
{
	void *user = ta_large_user_of(l);
	struct ta_large_hdr *h = large_hdr(user);
	unsigned home = h->tier, placed = l->placed;
	size_t size = h->size;
	if (l->state & TA_LARGE_REBOUND)
		ta_restore_range(user, size, home);
	ta_backend_free(home, (char *)user - h->offset);
	ta_arena_uncharge(placed, size);
	atomic_fetch_sub(&ta_arenas[placed].folded_live, (int64_t)size);
}

static void large_free(void *p)
{
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
	struct ta_large_hdr *h = large_hdr(p);
	struct ta_large_link *l = ta_large_link_of(p);
	h->magic = 0; /* a double free is then caught as foreign, not freed twice */
	/* Before taking the registry's lock: a signal handler's free must not wait for it. */
	if (tc != NULL)
		tc->in_slow = 1;
	uint32_t state;
	if (!ta_large_unregister(l, &state, true)) {
		/* The enforcement pass is moving it and frees it when done. */
		if (tc != NULL)
			finish_slow(tc);
		return;
	}
	unsigned home = h->tier, placed = l->placed;
	size_t size = h->size;
	if (state & TA_LARGE_REBOUND)
		ta_restore_range(p, size, home);
	ta_backend_free(home, (char *)p - h->offset);
	uncharge(tc, placed, size);
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
		int64_t csize = ta_class_size[cls];
		if (likely(bin->count - 1u < bin->cap && tc->stock[t] >= csize)) {
			void *p = bin->slots[bin->count - 1];
			/* Still in this tier? Its chunk may have been demoted (slow path). */
			if (unlikely(ta_chunk_map[(uintptr_t)p >> TA_CHUNK_SHIFT] != t + 1))
				return alloc_impl(size, 16, -1, false);
			bin->count--;
			__atomic_store_n(&tc->stock[t], tc->stock[t] - csize, __ATOMIC_RELAXED);
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
	if (state == TA_READY && large_valid(p)) {
		large_free(p);
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
				int64_t stock = tc->stock[t] + (int64_t)ta_class_size[cls];
				__atomic_store_n(&tc->stock[t], stock, __ATOMIC_RELAXED);
				if (unlikely(stock > tc->stock_high))
					ta_tcache_stock_trim(tc, (unsigned)t);
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
	if (state == TA_READY && large_valid(p))
		return large_hdr(p)->size;
	log_foreign(p, "malloc_usable_size");
	return 0;
}

/* Large object, same tier, plain alignment: let the backend grow or shrink it in place. */
static void *large_realloc(void *p, size_t size)
{
	struct ta_large_hdr *h = large_hdr(p);
	unsigned t = h->tier;
	size_t old = h->size, off = h->offset;
	if (h->aligned || size > (size_t)PTRDIFF_MAX - TA_LARGE_ROOM)
		return NULL;
	struct ta_tcache *tc = ta_tcache_get();
	if (size > old && !charge(tc, t, size - old, TA_LIMIT_MAX, false))
		return NULL;
	/* Off the record while the backend may move it; one that was demoted or is being worked
	 * on is copied instead (its range's policy is not its home kind's). */
	if (tc != NULL)
		tc->in_slow = 1;
	uint32_t state;
	if (!ta_large_unregister(ta_large_link_of(p), &state, false)) {
		if (size > old)
			uncharge(tc, t, size - old);
		if (tc != NULL)
			finish_slow(tc);
		return NULL;
	}
	h->magic = 0;
	char *raw = ta_backend_realloc(t, (char *)p - off, size + TA_LARGE_ROOM);
	if (raw == NULL) {
		large_hdr(p)->magic = TA_LARGE_MAGIC ^ (uintptr_t)p;
		ta_large_register(ta_large_link_of(p), t);
		if (size > old)
			uncharge(tc, t, size - old);
		if (tc != NULL)
			finish_slow(tc);
		return NULL;
	}
	/* The block moved with its header: the object keeps its offset. */
	char *user = raw + off;
	h = large_hdr(user);
	h->size = size;
	h->magic = TA_LARGE_MAGIC ^ (uintptr_t)user;
	ta_large_register(ta_large_link_of(user), t);
	if (size < old)
		uncharge(tc, t, old - size);
	else
		ta_arena_note_peak(t);
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
		if (state != TA_READY || !large_valid(p)) {
			log_foreign(p, "realloc");
			errno = ENOMEM;
			return NULL;
		}
		old = large_hdr(p)->size;
		if (size <= old && size > old / 2)
			return p;
		if (size > TA_SMALL_MAX) {
			void *q = large_realloc(p, size);
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
	if (large_valid(p))
		return (int)ta_large_link_of(p)->placed;
	return -EINVAL;
}
