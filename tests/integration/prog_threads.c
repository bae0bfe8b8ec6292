/* SPDX-License-Identifier: MIT */
/*
 * Thread churn: 200 threads, 8 at a time, each allocating blocks of many sizes and trading them
 * through a shared table, so that most blocks are freed by another thread than the one that
 * allocated them, often after that thread has exited. Threads exit with freed objects still in
 * their caches (the allocator must hand those back) and run a thread-specific-data destructor
 * that allocates and frees after the allocator's own per-thread cleanup may already have run.
 * Every block carries its size and a seed, and is checked before it is freed.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prog.h"

#define NTHREADS 200
#define WAVE	 8
#define NTABLE	 2048
#define OPS	 3000

struct blk {
	size_t n; /* bytes after the header */
	uint32_t seed;
	uint32_t owner;
};

static _Atomic(struct blk *) table[NTABLE];
static pthread_key_t key;
static atomic_uint key_destructor_runs;

static struct blk *blk_new(size_t n, uint32_t seed, uint32_t owner)
{
	struct blk *b = malloc(sizeof(*b) + n);
	REQUIRE(b != NULL, "malloc(%zu)", sizeof(*b) + n);
	b->n = n;
	b->seed = seed;
	b->owner = owner;
	prog_fill_ends(b + 1, n, seed);
	return b;
}

static void blk_free(struct blk *b)
{
	size_t bad = prog_verify_ends(b + 1, b->n, b->seed);
	CHECK(bad == b->n, "block of %zu bytes from thread %u corrupt at %zu", b->n, b->owner, bad);
	free(b);
}

/* Runs at thread exit, in an order relative to tieralloc's own key that nobody promises. */
static void key_destructor(void *arg)
{
	struct blk *b = arg;
	uint32_t seed = b->seed, owner = b->owner;
	atomic_fetch_add(&key_destructor_runs, 1);
	blk_free(b);
	void *p = malloc(100);
	void *q = calloc(10, 1000);
	CHECK(p != NULL && q != NULL, "malloc/calloc in a TSD destructor");
	char *r = realloc(p, 5000);
	CHECK(r != NULL, "realloc in a TSD destructor");
	free(q);
	if (seed % 2 == 0) {
		/* A second round of destructors, after the others (maybe tieralloc's) ran. */
		pthread_setspecific(key, blk_new(64, seed + 1, owner));
	}
	free(r);
}

static void *thread_main(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	uint32_t rng = id * 2654435761u + 17;
	pthread_setspecific(key, blk_new(32 + id, id * 2, id));

	/* Objects freed by this thread itself: they sit in its cache when it exits. */
	void *local[64];
	for (int i = 0; i < 64; i++) {
		local[i] = malloc(1 + prog_rand(&rng) % 4096);
		REQUIRE(local[i] != NULL, "malloc");
	}
	for (int op = 0; op < OPS; op++) {
		unsigned i = prog_rand(&rng) % NTABLE;
		struct blk *b = atomic_exchange(&table[i], NULL);
		if (b != NULL) {
			blk_free(b);
			continue;
		}
		size_t n = prog_size(&rng, op % 500 == 0 ? 4u << 20 : 64 * 1024);
		b = blk_new(n, prog_rand(&rng), id);
		b = atomic_exchange(&table[i], b);
		if (b != NULL)
			blk_free(b);
	}
	for (int i = 0; i < 64; i += 2)
		free(local[i]);
	/* Half the local objects go to the table for others to free. */
	for (int i = 1; i < 64; i += 2) {
		free(local[i]);
		struct blk *b = atomic_exchange(&table[prog_rand(&rng) % NTABLE],
						blk_new(prog_rand(&rng) % 300, id + 7u, id));
		if (b != NULL)
			blk_free(b);
	}
	if (id % 5 == 0)
		pthread_exit(NULL); /* the other way out, through unwinding */
	return NULL;
}

int main(void)
{
	prog_expect_preload();
	REQUIRE(pthread_key_create(&key, key_destructor) == 0, "pthread_key_create");
	for (uint32_t base = 0; base < NTHREADS; base += WAVE) {
		pthread_t t[WAVE];
		for (uint32_t i = 0; i < WAVE; i++)
			REQUIRE(pthread_create(&t[i], NULL, thread_main,
					       (void *)(uintptr_t)(base + i + 1)) == 0,
				"pthread_create");
		for (uint32_t i = 0; i < WAVE; i++)
			REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
	}
	unsigned left = 0;
	for (unsigned i = 0; i < NTABLE; i++) {
		struct blk *b = atomic_exchange(&table[i], NULL);
		if (b != NULL) {
			blk_free(b);
			left++;
		}
	}
	unsigned runs = atomic_load(&key_destructor_runs);
	CHECK(runs == 2 * NTHREADS, "TSD destructor ran %u times", runs);
	printf("prog_threads: %d threads, %u blocks left for main, %u TSD destructor runs\n",
	       NTHREADS, left, runs);
	return prog_result("prog_threads");
}
