/* SPDX-License-Identifier: MIT */
/*
 * One thread allocates, another frees, for good (issue 33 item 3): a producer hands blocks of
 * small and medium sizes through a ring of RING slots to a consumer that checks and frees them.
 * At most RING blocks are alive at once, so the footprint must stop growing once the caches and
 * the central lists have filled: the frees of the consumer must come back to the producer's
 * allocations instead of piling up where the consumer freed them. The resident size after the
 * first eighth of the blocks is the baseline; the largest seen later may exceed it by SLACK only.
 * Nothing is timed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "prog.h"

#define RING   1024
#define BLOCKS 2000000u
#define SLACK  (16u << 20)

struct blk {
	size_t n; /* bytes after the header */
	uint32_t seed;
};

static _Atomic(struct blk *) ring[RING];
static atomic_uint head, tail; /* the producer's next slot, the consumer's */

static size_t rss_bytes(void)
{
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f != NULL) {
		if (fscanf(f, "%*s %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void *consumer(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < BLOCKS; i++) {
		unsigned t = atomic_load_explicit(&tail, memory_order_relaxed);
		while (atomic_load_explicit(&head, memory_order_acquire) == t)
			sched_yield();
		struct blk *b = atomic_load_explicit(&ring[t % RING], memory_order_relaxed);
		atomic_store_explicit(&tail, t + 1, memory_order_release);
		size_t bad = prog_verify_ends(b + 1, b->n, b->seed);
		REQUIRE(bad == b->n, "block %u of %zu bytes: byte %zu overwritten", i, b->n, bad);
		free(b);
	}
	return NULL;
}

int main(void)
{
	prog_expect_preload();
	pthread_t c;
	REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0, "pthread_create");
	uint32_t rnd = 12345;
	size_t base = 0, peak = 0;
	for (unsigned i = 0; i < BLOCKS; i++) {
		/* Mostly small (every small class, packed ones included), 1 in 64 up to 64 KiB. */
		size_t n = prog_rand(&rnd) % 64 == 0 ? prog_size(&rnd, 64 << 10)
						     : 16 + prog_rand(&rnd) % 2048;
		struct blk *b = malloc(sizeof(*b) + n);
		REQUIRE(b != NULL, "malloc(%zu)", sizeof(*b) + n);
		b->n = n;
		b->seed = i;
		prog_fill_ends(b + 1, n, i);
		while (i - atomic_load_explicit(&tail, memory_order_acquire) >= RING)
			sched_yield();
		atomic_store_explicit(&ring[i % RING], b, memory_order_relaxed);
		atomic_store_explicit(&head, i + 1, memory_order_release);
		if (i == BLOCKS / 8)
			base = rss_bytes();
		else if (i > BLOCKS / 8 && i % (BLOCKS / 64) == 0) {
			size_t r = rss_bytes();
			if (r > peak)
				peak = r;
		}
	}
	REQUIRE(pthread_join(c, NULL) == 0, "pthread_join");
	printf("handoff: %u blocks through %u slots; resident %zu KiB after an eighth, at most "
	       "%zu KiB later (slack %u KiB)\n",
	       BLOCKS, RING, base >> 10, peak >> 10, SLACK >> 10);
	CHECK(base > 0, "no resident size read from /proc/self/statm");
	CHECK(peak <= base + SLACK, "the footprint grew by %zu KiB while at most %u blocks lived",
	      (peak - base) >> 10, RING);
	return prog_result("prog_handoff");
}
