/* SPDX-License-Identifier: MIT */
/*
 * Threads allocating, writing, handing objects to each other and freeing them, while another
 * thread demotes chunks and large objects from tier 0 to tier 1, gives empty runs and kept large
 * objects back, and purges: every object keeps its bytes, and once everything is freed and given
 * back, both tiers' charges and live bytes are where they started. Built with --enable-tsan as
 * well (tests/run-all.sh), where it is the test of the arena's locking: run lists, retags and
 * purges against fills and flushes. Two logical tiers on node 0.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

enum { THREADS = 4, STEPS = 20000, RING = 64, SHARED = 64 };

struct obj {
	uint32_t size;
	uint32_t seed;
	unsigned char data[];
};

static _Atomic(struct obj *) shared[SHARED];
static _Atomic bool stop_mover;
static _Atomic unsigned bad;

static uint64_t next(uint64_t *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

static struct obj *make(uint64_t *r)
{
	uint64_t k = next(r) % 100;
	/* Mostly small, some medium, a few large (64 KiB to 1 MiB). */
	size_t size = k < 80   ? 16 + next(r) % 1000
		      : k < 97 ? 1024 + next(r) % 40000
			       : 65536 + next(r) % (1 << 20);
	struct obj *o = tieralloc_malloc(sizeof(*o) + size);
	if (o == NULL)
		return NULL;
	o->size = (uint32_t)size;
	o->seed = (uint32_t)next(r);
	for (size_t i = 0; i < size; i += 61)
		o->data[i] = (unsigned char)(o->seed + i);
	o->data[size - 1] = (unsigned char)o->seed;
	return o;
}

static void check_and_free(struct obj *o)
{
	if (o == NULL)
		return;
	bool ok = o->data[o->size - 1] == (unsigned char)o->seed;
	for (size_t i = 0; ok && i < o->size - 1; i += 61)
		ok = o->data[i] == (unsigned char)(o->seed + i);
	if (!ok)
		atomic_fetch_add(&bad, 1);
	tieralloc_free(o);
}

static void *worker(void *arg)
{
	uint64_t r = 0x9e3779b97f4a7c15ull * (uintptr_t)arg + 1;
	struct obj *ring[RING] = { NULL };
	for (unsigned step = 0; step < STEPS; step++) {
		unsigned s = (unsigned)(next(&r) % RING);
		if (next(&r) % 4 == 0) {
			/* Hand it to another thread: whatever was in the shared slot is freed here.
			 */
			struct obj *prev = atomic_exchange(&shared[next(&r) % SHARED], ring[s]);
			check_and_free(prev);
		} else {
			check_and_free(ring[s]);
		}
		ring[s] = make(&r);
	}
	for (unsigned s = 0; s < RING; s++)
		check_and_free(ring[s]);
	tieralloc_ctl_set("thread.flush", NULL, 0);
	return NULL;
}

static void *mover(void *arg)
{
	(void)arg;
	unsigned round = 0;
	while (!atomic_load(&stop_mover)) {
		/* Down only, as enforcement moves memory: the live-bytes statistics of an object
		 * cached across two retags that bring its chunk back to the tier of its cache are
		 * not put right (the charges always are). The workers keep tier 0 supplied. */
		ta_demote(0, 1, 2 << 20);
		ta_arena_purge(round % 2, 0);
		ta_keep_release(1 - round % 2);
		if (round % 8 == 0)
			tieralloc_ctl_set("purge", NULL, 0);
		round++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	/* Class runs, which go back to the kernel: packed ones never do (test_pack's). */
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", "TIERALLOC_PACK=0", NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	backend_started();
	settle();
	uint64_t base0 = charged(0), base1 = charged(1), live_base = live(0) + live(1);
	pthread_t th[THREADS], mv;
	if (pthread_create(&mv, NULL, mover, NULL) != 0)
		test_hard("pthread_create");
	for (uintptr_t i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)) != 0)
			test_hard("pthread_create");
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&stop_mover, true);
	pthread_join(mv, NULL);
	for (unsigned i = 0; i < SHARED; i++)
		check_and_free(atomic_exchange(&shared[i], NULL));
	test_context("objects intact through demotions and purges");
	expect_eq(atomic_load(&bad), 0);
	test_context("everything freed and given back: the books where they started");
	settle();
	expect_eq(live(0) + live(1), live_base);
	expect_eq(charged(0), base0);
	expect_eq(charged(1), base1);
	printf("demotions: %llu chunks and large objects from tier 0, %llu from tier 1\n",
	       (unsigned long long)atomic_load(&ta_arenas[0].demotions),
	       (unsigned long long)atomic_load(&ta_arenas[1].demotions));
	return test_done();
}
