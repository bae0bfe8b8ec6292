/* SPDX-License-Identifier: MIT */
/*
 * Steering between tiers under per-tier limits. Any host can run it: TIERALLOC_TIERS="0;0" makes
 * two logical tiers of node 0 (tier 1 then uses another memkind kind bound to the same node), and
 * tieralloc_tier_of tells where each block went. The environment is read once, in the core's
 * constructor, so the test re-executes itself with it set.
 *
 * The bounds under test. Small objects charge their tier by the run, when a run is cut, and a
 * run the limit refuses is not cut: a tier's charge never passes its limit by steering, and live
 * bytes never pass the charge. Freeing moves no charge (the memory stays in the tier, free), and
 * a free object is handed out again whatever the limit, since reusing it does not raise the
 * charge. So each case below uses a size class no earlier case left free objects of, or limits
 * relative to what the tier already holds. Large objects are charged whole, through a thread's
 * stock of CHARGE_BATCH bytes charged at once: at most one batch per thread beyond what is live.
 * Freed large objects stay charged while their kind keeps their pages (keep.c), and so do runs
 * whose objects all came back until they are given back (arena.c): the cases that set limits
 * relative to what a tier holds have both given back first (test_keep.c and test_decay.c test
 * them), and a refused charge gives them back by itself.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

#define KiB	((size_t)1024)
#define MiB	(1024 * KiB)
#define BLOCK	(4 * KiB)
#define NBLOCKS (16 * MiB / BLOCK)
/* Sizes of classes no other case uses: no free object of theirs exists before their case. */
#define BLOCK_OVERFLOW (2 * KiB)
#define BLOCK_THREADS  (3 * KiB)

static uint64_t batch; /* TIERALLOC_CHARGE_BATCH in effect */
static void *blocks[NBLOCKS];

static struct tieralloc_tier_stats stats(int tier)
{
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	if (tieralloc_tier_stats(tier, &s) != 0)
		test_hard("tieralloc_tier_stats(%d)", tier);
	return s;
}

static void free_blocks(void)
{
	for (unsigned i = 0; i < NBLOCKS; i++) {
		tieralloc_free(blocks[i]);
		blocks[i] = NULL;
	}
}

/* Allocate n blocks of size bytes; count where they went; check that once a block went to
 * tier 1, none went to tier 0 again (the limit does not move meanwhile). */
struct placement {
	unsigned in_tier[2];
	unsigned first_tier1; /* index of the first block in tier 1, or n */
	unsigned tier0_after; /* tier-0 blocks after the first tier-1 block */
	unsigned failed;
};

static struct placement allocate(unsigned n, size_t size)
{
	struct placement pl = { { 0, 0 }, n, 0, 0 };
	for (unsigned i = 0; i < n; i++) {
		blocks[i] = tieralloc_malloc(size);
		int t = tieralloc_tier_of(blocks[i]);
		if (blocks[i] == NULL || t < 0 || t > 1) {
			pl.failed++;
			continue;
		}
		memset(blocks[i], 0x3c, 64);
		pl.in_tier[t]++;
		if (t == 1 && pl.first_tier1 == n)
			pl.first_tier1 = i;
		if (t == 0 && pl.first_tier1 < i)
			pl.tier0_after++;
	}
	return pl;
}

static void test_setup(void)
{
	test_context("setup from the environment");
	uint64_t v = 0;
	size_t len = sizeof(v);
	expect_eq(tieralloc_ctl_get("tier.0.limit", &v, &len), 0);
	expect_eq(v, 1 * MiB);
	expect_eq(stats(1).limit, UINT64_MAX);
	for (int t = 0; t < 2; t++) {
		struct tieralloc_tier_info info = { .size = sizeof(info) };
		expect_eq(tieralloc_tier_info(t, &info), 0);
		expect_str_eq(info.nodes, "0");
		printf("tier %d: %s nodes=%s kind=%s bound=%u\n", t, info.name, info.nodes,
		       info.kind, info.bound);
	}
	test_context("%s", "");
}

/* 16 MiB of 4 KiB blocks against a limit 1 MiB above what tier 0 holds (at least what the
 * process held when tieralloc started, charged there: under a sanitizer that alone is several
 * MiB, more than the environment's 1 MiB). */
static void test_small(void)
{
	const uint64_t limit = stats(0).charged + 1 * MiB;
	set_limit(0, limit);
	struct tieralloc_tier_stats b0 = stats(0), b1 = stats(1);
	struct placement pl = allocate(NBLOCKS, BLOCK);
	struct tieralloc_tier_stats s0 = stats(0), s1 = stats(1);
	uint64_t bytes0 = (uint64_t)pl.in_tier[0] * BLOCK;
	printf("small: %u blocks in tier 0 (%llu bytes), %u in tier 1, first tier-1 block #%u\n",
	       pl.in_tier[0], (unsigned long long)bytes0, pl.in_tier[1], pl.first_tier1);

	test_context("small blocks, tier 0 limited to 1 MiB above what it held");
	expect_eq(pl.failed, 0);
	/* Runs are cut in tier 0 until the next would pass the limit: what was free under the limit
	 * before, less at most one run (the class's run is one 16 KiB page). */
	expect_le(s0.charged, limit);
	expect_le(bytes0, s0.charged - b0.charged);
	expect_ge(bytes0 + 16 * KiB + b0.charged, limit);
	/* The first blocks, then none: tier 0 stays full while nothing is freed. */
	expect_eq(pl.first_tier1, pl.in_tier[0]);
	expect_eq(pl.tier0_after, 0);
	expect_eq(pl.in_tier[1], NBLOCKS - pl.in_tier[0]);
	/* The statistics agree. */
	expect_eq(s0.bytes_live, b0.bytes_live + bytes0);
	expect_eq(s1.bytes_live, b1.bytes_live + (uint64_t)pl.in_tier[1] * BLOCK);
	expect_ge(s1.charged - b1.charged, (uint64_t)pl.in_tier[1] * BLOCK);
	expect_gt(s0.exhausted, b0.exhausted);
	expect_gt(s1.steered_in, b1.steered_in);
	expect_ge(s1.allocs - b1.allocs, pl.in_tier[1]);
	expect_eq(s1.overflowed, b1.overflowed); /* tier 1 has room: nothing overflowed */

	/* Freed, the bytes leave both tiers' live counts; the memory stays charged where it is. */
	free_blocks();
	test_context("small blocks freed");
	expect_eq(stats(0).bytes_live, b0.bytes_live);
	expect_eq(stats(1).bytes_live, b1.bytes_live);
	expect_eq(stats(0).charged, s0.charged);
	expect_eq(stats(1).charged, s1.charged);

	/*
	 * The same again, limit unchanged: tier 0's free objects are handed out again first (no new
	 * charge), and nothing new is charged anywhere: the tiers hold enough free memory.
	 */
	pl = allocate(NBLOCKS, BLOCK);
	test_context("small blocks again, from the free memory the tiers hold");
	expect_eq(pl.failed, 0);
	expect_ge((uint64_t)pl.in_tier[0] * BLOCK, bytes0);
	expect_eq(stats(0).charged, s0.charged);
	expect_eq(stats(1).charged, s1.charged);
	free_blocks();

	/*
	 * Limit raised: allocations go back to tier 0. A thread revisits its choice of tier when it
	 * takes a slow path, which happens at the latest when its cache of the class in tier 1 runs
	 * out.
	 */
	set_limit(0, 64 * MiB);
	const unsigned n = 4 * MiB / BLOCK;
	pl = allocate(n, BLOCK);
	printf("after raising the limit: %u blocks in tier 0, %u in tier 1\n", pl.in_tier[0],
	       pl.in_tier[1]);
	test_context("small blocks, tier 0 limit raised");
	expect_eq(pl.failed, 0);
	expect_le(pl.in_tier[1], ta_class_cache_cap[ta_size_class(BLOCK)]);
	expect_eq(tieralloc_tier_of(blocks[n - 1]), 0);
	free_blocks();
	test_context("%s", "");
}

/* An explicit tier wins over steering, both ways. */
static void test_explicit(void)
{
	const size_t sizes[] = { 64, BLOCK, 65536, 2 * MiB };
	set_limit(0, UINT64_MAX);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		test_context("explicit tier 1 while tier 0 has room, size %zu", sizes[i]);
		struct tieralloc_tier_stats b1 = stats(1);
		void *p = tieralloc_malloc_tier(1, sizes[i]);
		void *q = tieralloc_calloc_tier(1, 1, sizes[i]);
		expect_eq(tieralloc_tier_of(p), 1);
		expect_eq(tieralloc_tier_of(q), 1);
		expect_eq(stats(1).explicit_allocs, b1.explicit_allocs + 2);
		expect_eq(stats(1).steered_in, b1.steered_in);
		tieralloc_free(p);
		tieralloc_free(q);
	}
	/* Tier 0 over its limit (0 bytes, and something is live there). */
	void *keep = tieralloc_malloc_tier(0, 1000);
	set_limit(0, 0);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		test_context("explicit tier 0 over its limit, size %zu", sizes[i]);
		struct tieralloc_tier_stats b0 = stats(0);
		void *p = tieralloc_malloc_tier(0, sizes[i]);
		void *q = tieralloc_calloc_tier(0, 1, sizes[i]);
		expect_eq(tieralloc_tier_of(p), 0);
		expect_eq(tieralloc_tier_of(q), 0);
		struct tieralloc_tier_stats s0 = stats(0);
		expect_eq(s0.explicit_allocs, b0.explicit_allocs + 2);
		/* Charged where it landed, limit or not. */
		expect_ge(s0.bytes_live, b0.bytes_live + 2 * sizes[i]);
		tieralloc_free(p);
		tieralloc_free(q);
	}
	tieralloc_free(keep);
	set_limit(0, UINT64_MAX);
	test_context("%s", "");
}

/* Large objects (straight from the kind) are steered by the same limit, each charged whole. */
static void test_large(void)
{
	const uint64_t room = 4 * MiB; /* above what tier 0 holds already */
	const unsigned n = 16;
	settle();
	set_limit(0, stats(0).charged + room);
	struct tieralloc_tier_stats b0 = stats(0), b1 = stats(1);
	struct placement pl = allocate(n, 1 * MiB);
	struct tieralloc_tier_stats s0 = stats(0), s1 = stats(1);
	printf("large: %u blocks of 1 MiB in tier 0, %u in tier 1 (tier 0 charged %llu before)\n",
	       pl.in_tier[0], pl.in_tier[1], (unsigned long long)b0.charged);
	test_context("1 MiB blocks, tier 0 limited to 4 MiB above what it holds");
	expect_eq(pl.failed, 0);
	/* The thread's stock for large objects counts against the limit too: 2 to 4 blocks fit. */
	expect_le((uint64_t)pl.in_tier[0] * MiB, room);
	expect_ge((uint64_t)pl.in_tier[0] * MiB + 1 * MiB + 2 * batch, room);
	expect_eq(pl.first_tier1, pl.in_tier[0]);
	expect_eq(pl.tier0_after, 0);
	/* Each large block that moved on counts once, in both tiers. */
	expect_eq(s1.steered_in - b1.steered_in, pl.in_tier[1]);
	expect_eq(s0.exhausted - b0.exhausted, pl.in_tier[1]);
	expect_eq(s1.allocs - b1.allocs, pl.in_tier[1]);
	expect_eq(s0.allocs - b0.allocs, pl.in_tier[0]);
	expect_eq(s0.bytes_live - b0.bytes_live, (uint64_t)pl.in_tier[0] * MiB);
	expect_eq(s1.bytes_live - b1.bytes_live, (uint64_t)pl.in_tier[1] * MiB);

	/* Aligned large requests follow the same rule. */
	test_context("aligned 1 MiB blocks with tier 0 full");
	void *a = tieralloc_memalign(64 * KiB, 1 * MiB);
	void *c = tieralloc_calloc(1, 2 * MiB);
	expect_eq(tieralloc_tier_of(a), 1);
	expect_eq(tieralloc_tier_of(c), 1);
	expect_eq((uintptr_t)a % (64 * KiB), 0);
	tieralloc_free(a);
	tieralloc_free(c);

	free_blocks();
	test_context("1 MiB blocks freed");
	expect_eq(stats(0).bytes_live, b0.bytes_live);
	expect_eq(stats(1).bytes_live, b1.bytes_live);
	set_limit(0, UINT64_MAX);
	test_context("%s", "");
}

/* Every tier at its limit: the last tier takes the allocation anyway, counted as overflowed. */
static void test_overflow(void)
{
	/* No room for a new run anywhere; no free object of the class exists. */
	settle();
	set_limit(0, stats(0).charged);
	set_limit(1, stats(1).charged);
	struct tieralloc_tier_stats b0 = stats(0), b1 = stats(1);
	const unsigned n = 1 * MiB / BLOCK_OVERFLOW;
	struct placement pl = allocate(n, BLOCK_OVERFLOW);
	void *large = tieralloc_malloc(2 * MiB);
	test_context("both tiers at their limits");
	expect_eq(pl.failed, 0);
	expect_true(large != NULL);
	expect_eq(tieralloc_tier_of(large), 1);
	expect_gt(stats(1).overflowed, b1.overflowed);
	expect_eq(pl.in_tier[0], 0);
	expect_eq(pl.in_tier[1], n);
	expect_eq(stats(0).charged, b0.charged);
	tieralloc_free(large);
	free_blocks();
	set_limit(0, UINT64_MAX);
	set_limit(1, UINT64_MAX);
	test_context("%s", "");
}

/* Two threads allocating at once against one limit. */
enum { NTHREADS = 2, PER_THREAD = 8 * MiB / BLOCK_THREADS };
static void *thread_blocks[NTHREADS][PER_THREAD];
static _Atomic uint64_t max_live0; /* highest tier-0 live bytes any thread saw */
static pthread_barrier_t start;

static void *alloc_thread(void *arg)
{
	void **mine = arg;
	pthread_barrier_wait(&start);
	for (unsigned i = 0; i < PER_THREAD; i++) {
		mine[i] = tieralloc_malloc(BLOCK_THREADS);
		if (mine[i] != NULL)
			memset(mine[i], 0x77, 64);
		if (i % 16 == 0) {
			struct tieralloc_tier_stats s = { .size = sizeof(s) };
			tieralloc_tier_stats(0, &s);
			uint64_t seen = atomic_load(&max_live0);
			while (s.bytes_live > seen &&
			       !atomic_compare_exchange_weak(&max_live0, &seen, s.bytes_live))
				;
		}
	}
	return NULL;
}

static void test_threads(void)
{
	const uint64_t room = 1 * MiB; /* above what tier 0 holds already */
	settle();
	uint64_t held = stats(0).charged;
	set_limit(0, held + room);
	uint64_t base = stats(0).bytes_live;
	uint64_t allocs = stats(0).allocs + stats(1).allocs;
	pthread_t th[NTHREADS];
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (unsigned i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, alloc_thread, thread_blocks[i]) != 0)
			test_hard("pthread_create");
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);

	unsigned in_tier[2] = { 0, 0 }, failed = 0;
	for (unsigned t = 0; t < NTHREADS; t++) {
		for (unsigned i = 0; i < PER_THREAD; i++) {
			int tier = tieralloc_tier_of(thread_blocks[t][i]);
			if (thread_blocks[t][i] == NULL || tier < 0 || tier > 1)
				failed++;
			else
				in_tier[tier]++;
		}
	}
	/* Runs are charged before they are cut: the room is never passed. */
	uint64_t bound = room;
	uint64_t live0 = stats(0).bytes_live;
	printf("threads: %u blocks in tier 0, %u in tier 1; tier-0 live peak seen %llu, now %llu "
	       "(baseline %llu, bound %llu)\n",
	       in_tier[0], in_tier[1], (unsigned long long)atomic_load(&max_live0),
	       (unsigned long long)live0, (unsigned long long)base, (unsigned long long)bound);
	test_context("%u threads, tier 0 limited to 1 MiB above what it holds", NTHREADS);
	expect_eq(failed, 0);
	expect_gt(in_tier[0], 0);
	expect_le((uint64_t)in_tier[0] * BLOCK_THREADS, bound);
	expect_le(atomic_load(&max_live0), base + bound);
	expect_le(live0, base + bound);
	expect_le(stats(0).charged, held + room);
	expect_ge((uint64_t)in_tier[1] * BLOCK_THREADS,
		  (uint64_t)NTHREADS * PER_THREAD * BLOCK_THREADS - bound);
	/* The exited threads' counts were folded into the tiers, none lost. */
	expect_eq(stats(0).allocs + stats(1).allocs, allocs + NTHREADS * PER_THREAD);

	/* Freed by another thread than the one that allocated: the bytes still leave the tier. */
	for (unsigned t = 0; t < NTHREADS; t++)
		for (unsigned i = 0; i < PER_THREAD; i++)
			tieralloc_free(thread_blocks[t][i]);
	test_context("threads' blocks freed by main");
	expect_eq(stats(0).bytes_live, base);
	set_limit(0, UINT64_MAX);
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_PROCESS_LIMIT=0=1M",
					   NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	batch = ta_opts.charge_batch;
	test_setup();
	test_small();
	test_explicit();
	test_large();
	test_overflow();
	test_threads();
	return test_done();
}
