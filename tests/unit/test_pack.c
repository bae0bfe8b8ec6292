/* SPDX-License-Identifier: MIT */
/*
 * Packed runs (src/alloc/arena.c, "Packed runs"): a young process's objects of 129 B to 16 KiB sit
 * back to back after an 8-byte header, whatever their class, so that the classes it uses do not
 * each leave a partly touched page. Checked here:
 *   - consecutive objects are adjacent, 16-aligned, with the usable size their header says;
 *   - a freed one serves its header's class, its contents kept apart from its neighbours';
 *   - the live bytes count each object alike when it is handed out and when it is freed;
 *   - an alignment above 16 never gets a packed object;
 *   - a pointer into a packed object, not at its start, is not taken for one;
 *   - a chunk of packed objects moved to another tier: its objects freed before the move come
 *     back in the new tier only, with their contents;
 *   - an object in this thread's cache when its chunk moves is not handed out as the old tier's
 *     (malloc's fast path compares retag counts only: the slow path moves it);
 *   - a process that freed a quarter of what it packed, or used up its TIERALLOC_PACK bytes,
 *     packs no more: objects come from class runs.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

static size_t packed_usable(size_t n)
{
	return ((n + 8 + 15) & ~(size_t)15) - 8;
}

static bool is_packed(const void *p)
{
	return ta_chunk_class_of(p) == TA_PAGE_PACKED;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 31u + i);
}

static bool intact(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed * 31u + i))
			return false;
	return true;
}

static void layout(void)
{
	ta_arena_set_pack_limit(16u << 20); /* and nothing freed yet */
	test_context("consecutive packed objects: adjacent, aligned, sized by their header");
	char *a = tieralloc_malloc(1000), *b = tieralloc_malloc(3000), *c = tieralloc_malloc(130);
	expect_true(a != NULL && b != NULL && c != NULL);
	expect_true(is_packed(a) && is_packed(b) && is_packed(c));
	expect_eq(tieralloc_malloc_usable_size(a), packed_usable(1000));
	expect_eq(tieralloc_malloc_usable_size(b), packed_usable(3000));
	expect_true(b == a + packed_usable(1000) + 8);
	expect_true(c == b + packed_usable(3000) + 8);
	expect_eq((uintptr_t)a % 16, 0);
	expect_eq((uintptr_t)b % 16, 0);
	expect_eq((uintptr_t)c % 16, 0);
	test_context("the class it goes back to is the largest it can serve");
	unsigned cls = ta_small_class_of(b);
	expect_le(ta_class_size[cls], packed_usable(3000));
	expect_gt(ta_class_size[cls + 1], packed_usable(3000));
	test_context("a pointer inside a packed object is not one");
	expect_eq(ta_small_class_of(b + 16), TA_NCLASSES);
	expect_eq(ta_small_class_of(b + 8), TA_NCLASSES);
	test_context("freed, it serves its class; its neighbours keep their contents");
	fill((unsigned char *)a, 1000, 1);
	fill((unsigned char *)c, 130, 3);
	tieralloc_free(b);
	char *again = tieralloc_malloc(ta_class_size[cls]);
	expect_true(again == b);
	memset(again, 0xee, tieralloc_malloc_usable_size(again));
	expect_true(intact((unsigned char *)a, 1000, 1));
	expect_true(intact((unsigned char *)c, 130, 3));
	test_context("realloc within the object stays in place");
	expect_true(tieralloc_realloc(a, packed_usable(1000)) == a);
	tieralloc_free(again);
	tieralloc_free(a);
	tieralloc_free(c);
}

static void accounting(void)
{
	ta_arena_set_pack_limit(16u << 20); /* and nothing freed yet */
	test_context("live bytes: an object counts alike out and back");
	settle();
	int64_t before = (int64_t)live(0);
	void *v[64];
	for (unsigned i = 0; i < 64; i++)
		v[i] = tieralloc_malloc(129 + i * 251);
	expect_gt((int64_t)live(0), before);
	for (unsigned i = 0; i < 64; i++)
		tieralloc_free(v[i]);
	expect_eq((int64_t)live(0), before);
}

static void aligned(void)
{
	ta_arena_set_pack_limit(16u << 20); /* and nothing freed yet */
	test_context("an alignment above 16 gets a class run's object, never a packed one");
	void *p = tieralloc_malloc(1000);
	unsigned cls = ta_small_class_of(p);
	tieralloc_free(p); /* now first in its class's cache */
	for (size_t align = 32; align <= 1024; align *= 2) {
		void *q = NULL;
		expect_eq(tieralloc_posix_memalign(&q, align, ta_class_size[cls]), 0);
		expect_eq((uintptr_t)q % align, 0);
		expect_true(!is_packed(q));
		tieralloc_free(q);
	}
}

static struct ta_chunk *chunk_at(const void *p)
{
	return (struct ta_chunk *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1));
}

/* A class run's object, on top of this thread's cache when its chunk moves to tier 1. First of
 * the cases: nothing packed yet, so the chunk holds no packing area and may move. */
static void cached_retagged(void)
{
	test_context("a cached object whose chunk moved is not handed out as the old tier's");
	enum { SIZE = 48, BIG = 60000, NBIG = 256 };
	static void *big[NBIG];
	char *x = tieralloc_malloc(SIZE);
	expect_true(x != NULL && !is_packed(x));
	expect_eq(tieralloc_tier_of(x), 0);
	/* Runs are cut from another chunk from now on: x's may be retagged. */
	unsigned nbig = 0;
	while (nbig < NBIG && (nbig == 0 || chunk_at(big[nbig - 1]) == chunk_at(x)))
		if ((big[nbig++] = tieralloc_malloc_tier(0, BIG)) == NULL)
			test_hard("malloc");
	expect_true(chunk_at(big[nbig - 1]) != chunk_at(x));
	struct ta_bin *bin = &ta_tls->bins[0][ta_size_class(SIZE)];
	tieralloc_free(x);
	expect_true(bin->count > 0 && bin->slots[bin->count - 1] == x); /* the next one out */
	uint64_t moved;
	expect_ge(ta_arena_retag_chunk(chunk_at(x), 1, &moved), 0);
	expect_eq(tieralloc_tier_of(x), 1);
	char *p = tieralloc_malloc(SIZE);
	expect_true(p != NULL && p != x);
	expect_eq(tieralloc_tier_of(p), 0);
	test_context("tier 1 hands it out, its next one");
	char *q = tieralloc_malloc_tier(1, SIZE);
	expect_true(q == x);
	tieralloc_free(p);
	tieralloc_free(q);
	/* The last stays: its run, in the chunk packing starts in next, leaves that chunk no hole
	 * that retagged()'s runs of tier 1 would be cut from. */
	for (unsigned i = 0; i + 1 < nbig; i++)
		tieralloc_free(big[i]);
}

/* A chunk of packed objects moved to tier 1, as demotion does (its pages stay: one node). */
static void retagged(void)
{
	ta_arena_set_pack_limit(16u << 20); /* and nothing freed yet */
	test_context("a retagged chunk's packed objects find their new tier");
	enum { N = 3000, SIZE = 2000 };
	static unsigned char *v[N];
	for (unsigned i = 0; i < N; i++) {
		v[i] = tieralloc_malloc_tier(0, SIZE);
		if (v[i] == NULL)
			test_hard("malloc");
		fill(v[i], SIZE, i);
	}
	struct ta_chunk *first = (struct ta_chunk *)((uintptr_t)v[0] & ~(TA_CHUNK_SIZE - 1));
	struct ta_chunk *last = (struct ta_chunk *)((uintptr_t)v[N - 1] & ~(TA_CHUNK_SIZE - 1));
	expect_true(is_packed(v[0]) && first != last); /* 6 MiB: the area moved on */
	unsigned freed = 0;
	for (unsigned i = 0; i < N; i += 2) /* freed in tier 0, before the move */
		if ((struct ta_chunk *)((uintptr_t)v[i] & ~(TA_CHUNK_SIZE - 1)) == first) {
			tieralloc_free(v[i]);
			v[i] = NULL;
			freed++;
		}
	settle(); /* out of this thread's cache: onto tier 0's packed list */
	uint64_t live_bytes;
	expect_ge(ta_arena_retag_chunk(first, 1, &live_bytes), 0);
	expect_eq(tieralloc_tier_of(v[1]), 1);
	test_context("tier 0 hands out none of them, and moves them to tier 1; tier 1 all");
	unsigned cls = ta_small_class_of(v[1]);
	unsigned in1 = 0;
	for (unsigned i = 0; i < 20 * freed && ta_arenas[0].packed[cls] != NULL; i++) {
		unsigned char *p = tieralloc_malloc_tier(0, ta_class_size[cls]);
		expect_eq(tieralloc_tier_of(p), 0);
		expect_true((struct ta_chunk *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1)) != first);
	}
	expect_true(ta_arenas[0].packed[cls] == NULL);
	/* Past the largest cache: a refill may put run objects on top of them. */
	for (unsigned i = 0; i < freed + 512; i++) {
		unsigned char *p = tieralloc_malloc_tier(1, ta_class_size[cls]);
		in1 += (struct ta_chunk *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1)) == first;
	}
	expect_eq(in1, freed);
	test_context("the objects kept their contents");
	for (unsigned i = 0; i < N; i++)
		if (v[i] != NULL && !intact(v[i], SIZE, i))
			test_fail(__FILE__, __LINE__, "object %u changed", i);
}

/* A process that frees much of what it packed packs no more: its freed objects would serve only
 * their own class, where a class's run would have gone back to the kernel. */
static void churn(void)
{
	ta_arena_set_pack_limit(16u << 20); /* and nothing freed yet */
	test_context("freeing a quarter of what was packed stops packing");
	expect_true(ta_arena_packs(1000));
	enum { N = 4096 };
	static void *v[N];
	unsigned n = 0;
	while (n < N && ta_arena_packs(1000)) {
		for (unsigned i = 0; i < 64 && n < N; i++, n++)
			v[n] = tieralloc_malloc(1000 + (n % 7) * 500);
		for (unsigned i = n - 64; i < n; i++) {
			tieralloc_free(v[i]); /* all of each batch */
			v[i] = NULL;
		}
	}
	expect_true(!ta_arena_packs(1000));
	/* A class no freed packed object serves (none listed, none cached): a new object. */
	unsigned cls = ta_size_class(TA_PACK_MIN);
	while (cls < ta_size_class(TA_PACK_MAX) &&
	       (ta_arenas[0].packed[cls] != NULL || ta_tls->bins[0][cls].count != 0 ||
		!ta_class_is_coarse(cls)))
		cls++;
	void *p = tieralloc_malloc(ta_class_size[cls]);
	expect_true(p != NULL && !is_packed(p));
	tieralloc_free(p);
}

static void used_up(void)
{
	test_context("no packed bytes left: medium objects from class runs");
	ta_arena_set_pack_limit(0);
	void *p = tieralloc_malloc(1000);
	expect_true(p != NULL && !is_packed(p));
	expect_eq(tieralloc_malloc_usable_size(p), ta_class_size[ta_size_class(1000)]);
	tieralloc_free(p);
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_TIERS=0;0", "TIERALLOC_PACK=16M", NULL };
	test_reexec_with_env(argv, env);
	cached_retagged();
	retagged();
	layout();
	accounting();
	aligned();
	churn();
	used_up();
	test_context("%s", "");
	return test_done();
}
