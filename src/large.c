/* SPDX-License-Identifier: MIT */
/*
 * Large objects' records, kept apart from the objects, and the table from an address to its
 * record.
 *
 * Why apart: an in-band header makes the kind's allocation larger than the request, which moves
 * it into jemalloc's next size class: a 1 MiB object cost a 1.25 MiB extent (25% more, paid in
 * memory of the tier). Now the object gets exactly the bytes it asked for.
 *
 * The table is a two-level radix tree over 64 KiB granules of the address space. Every large
 * object starts in a granule of its own: its block is over 64 KiB, whatever its size and alignment
 * (large_alloc_in makes sure of it), so it covers the rest of the granule it starts in. So a
 * granule names at most one object, and a record whose user address is not the pointer's is not
 * its record; an entry that is taken is never overwritten (ta_large_table_set refuses, and the
 * allocation fails rather than losing another object's record). Lookups take no lock: nodes and
 * records are never unmapped (records are reused), and the user address is checked after the
 * load.
 * Records and a spare node come from the pool of a shard of the registry (cold.c), under its
 * lock; a node is put in the table with a compare-and-swap, since shards set entries at once.
 */

#include "internal.h"

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

struct ta_large *ta_large_record_new(struct ta_large_pool *pool)
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

void ta_large_record_free(struct ta_large_pool *pool, struct ta_large *l)
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

bool ta_large_claim(struct ta_large *l)
{
	uintptr_t r, i;
	if (!split(l->user, &r, &i))
		return false;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	struct ta_large *expect = l;
	return leaf != NULL && atomic_compare_exchange_strong(&leaf->slot[i], &expect, NULL);
}

bool ta_large_table_reserve(struct ta_large_pool *pool)
{
	if (pool->spare_leaf == NULL)
		pool->spare_leaf = map_zeroed(sizeof(struct leaf));
	return pool->spare_leaf != NULL;
}

bool ta_large_table_set(const void *p, struct ta_large *l, struct ta_large_pool *pool)
{
	uintptr_t r, i;
	if (!split(p, &r, &i))
		return false;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	if (leaf == NULL) {
		if (!ta_large_table_reserve(pool))
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

void ta_large_table_clear(const void *p)
{
	uintptr_t r, i;
	if (!split(p, &r, &i))
		return;
	struct leaf *leaf = atomic_load_explicit(&root[r], memory_order_acquire);
	if (leaf != NULL)
		atomic_store_explicit(&leaf->slot[i], NULL, memory_order_release);
}
