/* SPDX-License-Identifier: MIT */
/*
 * Large objects (over 64 KiB, or aligned beyond what the size classes serve), their whole life:
 * allocation (steered, charged whole, cut from the tier's heap, lheap.c), the record kept apart
 * from the object, the table from an address to its record, realloc in place, free, and what the
 * enforcement pass needs (the oldest objects of a tier, marked busy, and their release).
 *
 * Records apart: an in-band header makes the block larger than the request, which moved a 1 MiB
 * object into the backend's next size class (1.25 MiB). The table is a two-level radix tree over
 * 64 KiB granules of the address space. Every large object starts in a granule of its own: its
 * block is over 64 KiB, whatever its size and alignment (large_alloc_in makes sure of it), so it
 * covers the rest of the granule it starts in. So a granule names at most one object, a record
 * whose user address is not the pointer's is not its record, and an entry that is taken is never
 * overwritten (table_set refuses, and the allocation fails rather than losing another object's
 * record). Lookups take no lock: nodes and records are never unmapped (records are reused), and
 * the user address is checked after the load.
 *
 * The record of each tier's objects is a list in allocation order, sharded by thread. A large
 * object the pass is working on is marked busy under its shard's lock; a free that finds it busy
 * leaves it to the pass (TA_LARGE_FREED), so the pass never calls mbind on memory that went back
 * to the heap, and no allocating thread ever waits for an mbind. Lock order: a shard's lock, then
 * the tier's heap lock (lheap.c).
 */
#include <string.h>

#include "alloc/alloc.h"

/* A shard's spare records and table node; the rest under that shard's lock. */
struct pool {
	struct ta_large *free_records;
	void *spare_leaf;
};

/* ---- the address table ---- */

#define GRANULE_SHIFT 16
#define LEAF_BITS     15
#define ROOT_BITS     (TA_ADDR_BITS - GRANULE_SHIFT - LEAF_BITS)
#define LEAF_SIZE     (1u << LEAF_BITS)

_Static_assert(TA_SMALL_MAX + 1 > ((size_t)1 << GRANULE_SHIFT),
	       "a large object's block covers the rest of the granule it starts in");

struct leaf {
	_Atomic(struct ta_large *) slot[LEAF_SIZE];
};

static _Atomic(struct leaf *) root[1u << ROOT_BITS]; /* 512 KiB of BSS, touched where used */

static void *map_zeroed(size_t bytes)
{
	return ta_pages_map(bytes, false);
}

static struct ta_large *record_new(struct pool *pool)
{
	if (pool->free_records == NULL) {
		enum { BATCH = 1024 }; /* 64 KiB of records */
		struct ta_large *batch = map_zeroed(BATCH * sizeof(struct ta_large));
		if (batch == NULL)
			return NULL;
		for (unsigned i = 0; i < BATCH; i++) {
			batch[i].next = pool->free_records;
			pool->free_records = &batch[i];
		}
	}
	struct ta_large *l = pool->free_records;
	pool->free_records = l->next;
	l->next = NULL;
	return l;
}

static void record_free(struct pool *pool, struct ta_large *l)
{
	/* A lock-free reader may still load it: it must not look like its old object's. */
	__atomic_store_n(&l->user, NULL, __ATOMIC_RELEASE);
	l->next = pool->free_records;
	pool->free_records = l;
}

static bool split(const void *p, uintptr_t *r, uintptr_t *i)
{
	uintptr_t g = (uintptr_t)p >> GRANULE_SHIFT;
	if (g >> (ROOT_BITS + LEAF_BITS) != 0)
		return false;
	*r = g >> LEAF_BITS;
	*i = g & (LEAF_SIZE - 1);
	return true;
}

struct ta_large *ta_large_find(const void *p)
{
	uintptr_t r, i;
	if (((uintptr_t)p & 15) != 0 || !split(p, &r, &i))
		return NULL;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	if (leaf == NULL)
		return NULL;
	struct ta_large *l = atomic_load_explicit(&leaf->slot[i], memory_order_acquire);
	if (l == NULL || __atomic_load_n(&l->user, __ATOMIC_ACQUIRE) != p)
		return NULL;
	return l;
}

static bool claim(struct ta_large *l)
{
	uintptr_t r, i;
	if (!split(l->user, &r, &i))
		return false;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	struct ta_large *expect = l;
	return leaf != NULL && atomic_compare_exchange_strong(&leaf->slot[i], &expect, NULL);
}

static bool table_reserve(struct pool *pool)
{
	if (pool->spare_leaf == NULL)
		pool->spare_leaf = map_zeroed(sizeof(struct leaf));
	return pool->spare_leaf != NULL;
}

static bool table_set(const void *p, struct ta_large *l, struct pool *pool)
{
	uintptr_t r, i;
	if (!split(p, &r, &i))
		return false;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	if (leaf == NULL) {
		if (!table_reserve(pool))
			return false;
		struct leaf *expect = NULL;
		if (atomic_compare_exchange_strong(&root[r], &expect, pool->spare_leaf)) {
			leaf = pool->spare_leaf;
			pool->spare_leaf = NULL;
		} else {
			leaf = expect; /* another shard put one there first; ours stays spare */
		}
	}
	/* Taken: another object starts in this granule, which large_alloc_in rules out. Refuse
	 * rather than lose that object's record. */
	struct ta_large *expect = NULL;
	if (!atomic_compare_exchange_strong_explicit(&leaf->slot[i], &expect, l,
						     memory_order_release, memory_order_relaxed) &&
	    expect != l) {
		ta_log(TA_LOG_ERROR, "large object %p: its 64 KiB granule already holds %p", p,
		       __atomic_load_n(&expect->user, __ATOMIC_RELAXED));
		return false;
	}
	return true;
}

static void table_clear(const void *p)
{
	uintptr_t r, i;
	if (!split(p, &r, &i))
		return;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	if (leaf != NULL)
		atomic_store_explicit(&leaf->slot[i], NULL, memory_order_release);
}

/* ---- the record, sharded by thread ---- */

/* The record is sharded by thread: threads allocating and freeing large objects at once would
 * otherwise take turns on one lock (two threads of bench-malloc's large band spent their time in
 * futex waits). An object stays in the shard that recorded it; the pass looks at all of them. */
#define LARGE_SHARDS 8

struct shard {
	pthread_mutex_t lock;
	struct ta_large *head[TA_MAX_TIERS], *tail[TA_MAX_TIERS];
	struct pool pool;
} __attribute__((aligned(64)));

static struct shard shards[LARGE_SHARDS] = {
	[0 ... LARGE_SHARDS - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};
static _Atomic unsigned next_shard;
static __thread unsigned my_shard_plus1 __attribute__((tls_model("initial-exec"))); /* 0: none */

static struct shard *my_shard(void)
{
	if (my_shard_plus1 == 0)
		my_shard_plus1 = atomic_fetch_add(&next_shard, 1) % LARGE_SHARDS + 1;
	return &shards[my_shard_plus1 - 1];
}

static struct shard *shard_of(const struct ta_large *l)
{
	return &shards[l->shard % LARGE_SHARDS];
}

static void list_append(struct shard *sh, struct ta_large *l, unsigned tier)
{
	l->next = NULL;
	l->prev = sh->tail[tier];
	if (l->prev != NULL)
		l->prev->next = l;
	else
		sh->head[tier] = l;
	sh->tail[tier] = l;
}

static void list_remove(struct shard *sh, struct ta_large *l)
{
	unsigned t = l->placed;
	if (l->prev != NULL)
		l->prev->next = l->next;
	else
		sh->head[t] = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	else
		sh->tail[t] = l->prev;
	l->prev = l->next = NULL;
}

/* Put a new large object on record (its tier's list in the calling thread's shard, the address
 * table): its record, or NULL when no memory was left for either. */
static struct ta_large *large_register(void *user, uint64_t size, unsigned tier, bool aligned)
{
	uint64_t now = ta_monotonic_ns();
	struct shard *sh = my_shard();
	ta_lock(&sh->lock, TA_RANK_SHARD);
	struct ta_large *l = record_new(&sh->pool);
	if (l != NULL) {
		l->size = size;
		l->born_ns = now;
		l->placed = l->tier = tier;
		l->state = 0;
		l->heat = 0;
		l->aligned = aligned;
		l->shard = (uint32_t)(sh - shards);
		__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
		if (table_set(user, l, &sh->pool)) {
			list_append(sh, l, tier);
		} else {
			record_free(&sh->pool, l);
			l = NULL;
		}
	}
	ta_unlock(&sh->lock, TA_RANK_SHARD);
	return l;
}

/* Take l off its tier's list; *last: what its record said. Freeing (its table entry already
 * cleared by claim): its record goes back too; false when the pass holds it (the pass frees it
 * when done). Not freeing (realloc in place): also out of the table; false when busy, demoted or
 * rebound, or no table node could be reserved for its new address, and l stays on record. */
static bool unregister(struct ta_large *l, struct ta_large *last, bool freeing)
{
	struct shard *sh = shard_of(l);
	ta_lock(&sh->lock, TA_RANK_SHARD);
	*last = *l;
	if (l->state & TA_LARGE_BUSY) {
		if (freeing)
			l->state |= TA_LARGE_FREED;
		ta_unlock(&sh->lock, TA_RANK_SHARD);
		return false;
	}
	if (!freeing) {
		/* In place only when nothing about its range changed, and its new address will
		 * have a table entry whatever it is. */
		if (l->state != 0 || l->placed != l->tier || !table_reserve(&sh->pool)) {
			ta_unlock(&sh->lock, TA_RANK_SHARD);
			return false;
		}
		table_clear(l->user);
	}
	list_remove(sh, l);
	if (freeing)
		record_free(&sh->pool, l);
	ta_unlock(&sh->lock, TA_RANK_SHARD);
	return true;
}

/* After a realloc in place: l at its new address and size, back on record. Cannot fail (the
 * table node was reserved by unregister). */
static void reregister(struct ta_large *l, void *user, uint64_t size)
{
	struct shard *sh = shard_of(l);
	ta_lock(&sh->lock, TA_RANK_SHARD);
	__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
	l->size = size;
	if (!table_set(user, l, &sh->pool))
		ta_log(TA_LOG_ERROR, "large object %p has no table entry; its free will be refused",
		       user);
	list_append(sh, l, l->tier);
	ta_unlock(&sh->lock, TA_RANK_SHARD);
}

/* Give l's record back (after its object went back to the heap). */
static void forget(struct ta_large *l)
{
	struct shard *sh = shard_of(l);
	ta_lock(&sh->lock, TA_RANK_SHARD);
	record_free(&sh->pool, l);
	ta_unlock(&sh->lock, TA_RANK_SHARD);
}

/* Up to quota of a shard's not busy objects of the tier, oldest first, marked busy. */
static unsigned take_from(struct shard *sh, unsigned tier, struct ta_cold_range *out,
			  unsigned quota, uint64_t now)
{
	unsigned n = 0;
	ta_lock(&sh->lock, TA_RANK_SHARD);
	for (struct ta_large *l = sh->head[tier]; l != NULL && n < quota; l = l->next) {
		if (l->state & TA_LARGE_BUSY)
			continue;
		l->state |= TA_LARGE_BUSY;
		struct ta_cold_range *r = &out[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_LARGE;
		r->owner = l;
		r->addr = l->user;
		r->len = l->size;
		r->charge = r->len;
		r->age_ns = now > l->born_ns ? now - l->born_ns : 0;
		r->heat = l->heat;
	}
	ta_unlock(&sh->lock, TA_RANK_SHARD);
	return n;
}

unsigned ta_large_take(unsigned tier, struct ta_cold_range *out, unsigned max, uint64_t now)
{
	/* An even part from every shard first (each list is oldest first, so no shard's old
	 * objects are crowded out by another's), then whatever room is left. The busy mark keeps
	 * the second round from taking an object twice. */
	unsigned n = 0, even = max / LARGE_SHARDS > 0 ? max / LARGE_SHARDS : 1;
	for (unsigned round = 0; round < 2; round++)
		for (unsigned i = 0; i < LARGE_SHARDS && n < max; i++) {
			unsigned quota = round == 0 && even < max - n ? even : max - n;
			n += take_from(&shards[i], tier, out + n, quota, now);
		}
	return n;
}

void ta_large_set_heat(struct ta_large *l, uint32_t heat)
{
	struct shard *sh = shard_of(l);
	ta_lock(&sh->lock, TA_RANK_SHARD);
	l->heat = heat;
	ta_unlock(&sh->lock, TA_RANK_SHARD);
}

static void destroy(struct ta_large *l);

void ta_large_release(struct ta_large *l, int moved_to, int relaxed)
{
	struct shard *sh = shard_of(l);
	ta_lock(&sh->lock, TA_RANK_SHARD);
	if (moved_to >= 0 && (unsigned)moved_to != l->placed) {
		list_remove(sh, l);
		l->placed = (uint32_t)moved_to;
		list_append(sh, l, (unsigned)moved_to);
	}
	if (moved_to >= 0) {
		l->state |= TA_LARGE_REBOUND;
		l->state &= ~TA_LARGE_RELAXED; /* bound to its new tier by the move */
	}
	if (relaxed == 1)
		l->state |= TA_LARGE_REBOUND | TA_LARGE_RELAXED;
	else if (relaxed == 0)
		l->state &= ~TA_LARGE_RELAXED; /* bound to its tier again; REBOUND stays */
	l->state &= ~TA_LARGE_BUSY;
	bool freed = (l->state & TA_LARGE_FREED) != 0;
	if (freed)
		list_remove(sh, l);
	ta_unlock(&sh->lock, TA_RANK_SHARD);
	if (freed)
		destroy(l);
}

void ta_large_fork_prepare(void)
{
	for (unsigned i = 0; i < LARGE_SHARDS; i++)
		pthread_mutex_lock(&shards[i].lock);
}

void ta_large_fork_parent(void)
{
	for (unsigned i = LARGE_SHARDS; i-- > 0;)
		pthread_mutex_unlock(&shards[i].lock);
}

/* The child has no pass running: nothing stays busy. An object freed while busy in the parent
 * stays allocated in the child (one object, only when fork meets a pass). */
void ta_large_fork_child(void)
{
	for (unsigned i = 0; i < LARGE_SHARDS; i++) {
		pthread_mutex_init(&shards[i].lock, NULL);
		for (unsigned t = 0; t < TA_MAX_TIERS; t++)
			for (struct ta_large *l = shards[i].head[t]; l != NULL; l = l->next)
				l->state &= ~(TA_LARGE_BUSY | TA_LARGE_FREED);
	}
}

/* ---- charges ---- */

/* This thread's stock, or none (straight to the tier) without a cache. */
static inline struct ta_stock *stock_of(struct ta_tcache *tc)
{
	return tc != NULL ? &tc->stock : NULL;
}

/* Charge a large object's bytes to tier t: first from what the tier keeps of freed large objects
 * (keep.c: memory it holds already, and that the kind reuses), then from the thread's stock. */
static bool charge(struct ta_tcache *tc, unsigned t, uint64_t bytes, int level, bool force)
{
	uint64_t kept = ta_keep_take(t, bytes);
	if (kept < bytes && !ta_stock_charge(stock_of(tc), t, bytes - kept, level, force)) {
		ta_stock_uncharge(stock_of(tc), t, kept); /* the kept charge goes on as stock */
		/* Quota pressure: what the tier holds unused (empty runs, freed large objects'
		 * pages) goes back first, then once more. */
		if (ta_give_back(t) == 0 || !ta_stock_charge(stock_of(tc), t, bytes, level, force))
			return false;
	}
	ta_tcache_live_add(tc, t, (int64_t)bytes);
	return true;
}

/* A large object's bytes leave tier t with their charge: its pages were given back or never
 * were (a failed allocation). */
static void uncharge(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	ta_tcache_live_add(tc, t, -(int64_t)bytes);
	ta_stock_uncharge(stock_of(tc), t, bytes);
}

/* A large object's bytes went back to its tier's kind, which holds their pages for reuse: they
 * stay charged, kept (keep.c). */
static void unlive_keep(struct ta_tcache *tc, unsigned t, uint64_t bytes)
{
	ta_tcache_live_add(tc, t, -(int64_t)bytes);
	ta_keep_put(t, bytes);
}

/* ---- allocation, free, realloc ---- */

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
	void *user = ta_lheap_alloc(t, bytes, aligned ? align : 16, zero);
	if (user == NULL) {
		atomic_fetch_add(&ta_arenas[t].backend_failures, 1);
		return NULL;
	}
	if (large_register(user, size, t, aligned) == NULL) {
		ta_lheap_free(t, user, true);
		user = NULL;
	}
	ta_keep_sync(t); /* the kept charge follows the dirty pages the block took */
	return user;
}

struct large_place {
	struct ta_tcache *tc;
	size_t size, align;
	bool zero;
};

/* Steering's try of tier t for a large object (charge.h): charged whole, then cut from the
 * tier's heap. */
static void *place_large(unsigned t, int level, bool force, bool *refused, void *ctx)
{
	struct large_place *lp = ctx;
	if (!charge(lp->tc, t, lp->size, level, force)) {
		*refused = true;
		return NULL;
	}
	void *p = large_alloc_in(t, lp->size, lp->align, lp->zero);
	if (p == NULL)
		uncharge(lp->tc, t, lp->size);
	return p;
}

void *ta_large_alloc(size_t size, size_t align, int want_tier, bool zero)
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
	struct large_place lp = { tc, size, align, zero };
	struct ta_placed where;
	void *p = ta_steer(want_tier, place_large, &lp, &where);
	if (p != NULL) {
		ta_tcache_count_alloc(tc, where.tier, where.how);
		/* Only now: a request that failed (a huge size) must leave no peak behind. */
		ta_charge_note_peak(where.tier);
	}
	if (tc != NULL)
		ta_tcache_finish_slow(tc);
	return p;
}

/* Free a large object for good: back to its home tier's heap, its charge with it. */
static void destroy(struct ta_large *l)
{
	void *user = l->user;
	unsigned home = l->tier, placed = l->placed;
	size_t size = l->size;
	bool rebound = l->state & TA_LARGE_REBOUND;
	if (rebound)
		ta_restore_range(user, size, home);
	ta_lheap_free(home, user, rebound || placed != home);
	forget(l);
	/* Its pages dropped (rebound), or held by its kind for reuse (kept, still charged). */
	if (rebound || placed != home)
		uncharge(NULL, placed, size);
	else
		unlive_keep(NULL, placed, size);
}

void ta_large_free(struct ta_large *l)
{
	void *p = l->user;
	struct ta_tcache *tc = ta_tls;
	if (tc != NULL && tc->in_slow) {
		void *head = atomic_load(&tc->deferred);
		do
			ta_link_put(p, head);
		while (!atomic_compare_exchange_weak(&tc->deferred, &head, p));
		return;
	}
	if (tc == NULL)
		tc = ta_tcache_get();
	/* Out of the table first: a second free of p is then refused as foreign. */
	if (!claim(l)) {
		ta_log_foreign(p, "free");
		return;
	}
	/* Before taking its shard's lock: a signal handler's free must not wait for it. */
	if (tc != NULL)
		tc->in_slow = 1;
	struct ta_large last;
	if (!unregister(l, &last, true)) {
		/* The enforcement pass is moving it and frees it when done. */
		if (tc != NULL)
			ta_tcache_finish_slow(tc);
		return;
	}
	bool rebound = last.state & TA_LARGE_REBOUND;
	if (rebound)
		ta_restore_range(p, last.size, last.tier);
	ta_lheap_free(last.tier, p, rebound || last.placed != last.tier);
	if (rebound || last.placed != last.tier)
		uncharge(tc, last.placed, last.size);
	else
		unlive_keep(tc, last.placed, last.size);
	ta_keep_age();
	if (tc != NULL)
		ta_tcache_finish_slow(tc);
}

/* Large object, same tier, plain alignment: grow or shrink its block in place (lheap.c). */
void *ta_large_realloc(struct ta_large *l, size_t size)
{
	void *p = l->user;
	unsigned t = l->tier;
	size_t old = l->size;
	if (l->aligned || size >= ((size_t)1 << TA_ADDR_BITS))
		return NULL;
	struct ta_tcache *tc = ta_tcache_get();
	if (size > old && !charge(tc, t, size - old, TA_LIMIT_MAX, false))
		return NULL;
	/* Off the record while its size changes; one that was demoted or is being worked on is
	 * copied instead (its range's policy is not its home kind's). */
	if (tc != NULL)
		tc->in_slow = 1;
	struct ta_large last;
	if (!unregister(l, &last, false)) {
		if (size > old)
			uncharge(tc, t, size - old);
		if (tc != NULL)
			ta_tcache_finish_slow(tc);
		return NULL;
	}
	/* In place or not at all: the caller copies when the neighbours are taken. */
	void *user = ta_lheap_resize(t, p, size) ? p : NULL;
	reregister(l, p, user != NULL ? size : old);
	if (user == NULL) {
		if (size > old)
			uncharge(tc, t, size - old);
	} else if (size < old) {
		unlive_keep(tc, t, old - size); /* the heap keeps the tail's pages */
	} else {
		ta_keep_sync(t);
		ta_charge_note_peak(t);
	}
	if (tc != NULL)
		ta_tcache_finish_slow(tc);
	return user;
}
