/* SPDX-License-Identifier: MIT */
/*
 * free() from a signal handler that interrupts malloc, free and realloc. POSIX does not make free
 * async-signal-safe, but real programs do it and tieralloc promises to cope (STYLE.md: "assume a
 * signal handler may free"): its slow paths defer such frees instead of taking a lock that the
 * interrupted code may hold. Blocks are prepared beforehand; the handler frees them one per
 * signal. Phase 1: SIGALRM from an interval timer (setitimer) plus raise() on the main thread,
 * which allocates all the while. Phase 2: SIGUSR1 sent with pthread_kill to a thread that
 * allocates. Each phase ends when the handler has freed every prepared block, whatever the
 * timing; a deadlock shows up as a hang.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>

#include "prog.h"

#define NPREP 3000

struct prep {
	void *p;
	size_t n;
};

static struct prep prepared[NPREP];
static atomic_uint next_free;
static atomic_uint freed;
static atomic_bool phase2_stop;

static void handler(int sig)
{
	int saved = errno;
	unsigned i = atomic_fetch_add(&next_free, 1);
	if (i < NPREP) {
		/* A glance at the block (not a full check: keep the handler short). */
		if (((unsigned char *)prepared[i].p)[0] != prog_pattern(i, 0))
			atomic_fetch_add(&prog_failures, 1);
		free(prepared[i].p);
		atomic_fetch_add(&freed, 1);
	}
	errno = saved;
}

static void prepare(uint32_t seed)
{
	uint32_t rng = seed;
	for (unsigned i = 0; i < NPREP; i++) {
		prepared[i].n = prog_size(&rng, 2u << 20);
		prepared[i].p = malloc(prepared[i].n);
		REQUIRE(prepared[i].p != NULL, "malloc(%zu)", prepared[i].n);
		prog_fill(prepared[i].p, prepared[i].n > 64 ? 64 : prepared[i].n, i);
	}
	atomic_store(&next_free, 0);
	atomic_store(&freed, 0);
}

/* One step of allocation work between signals: malloc, calloc, realloc, free, checked. */
static void work_step(uint32_t *rng, void **slots, size_t *sizes, unsigned nslots)
{
	unsigned k = prog_rand(rng) % nslots;
	if (slots[k] != NULL) {
		size_t bad = prog_verify_ends(slots[k], sizes[k], k);
		CHECK(bad == sizes[k], "slot %u (%zu bytes) corrupt at %zu", k, sizes[k], bad);
		if (prog_rand(rng) % 3 == 0) {
			size_t n = prog_size(rng, 1 << 20);
			void *q = realloc(slots[k], n);
			REQUIRE(q != NULL, "realloc(%zu)", n);
			size_t keep = n < sizes[k] ? n : sizes[k];
			if (keep > 256)
				keep = 256;
			CHECK(prog_verify(q, keep, k) == keep, "realloc kept the first bytes");
			slots[k] = q;
			sizes[k] = n;
			prog_fill_ends(q, n, k);
		} else {
			free(slots[k]);
			slots[k] = NULL;
		}
		return;
	}
	sizes[k] = prog_size(rng, 1 << 20);
	slots[k] = prog_rand(rng) % 4 == 0 ? calloc(1, sizes[k]) : malloc(sizes[k]);
	REQUIRE(slots[k] != NULL, "allocation of %zu", sizes[k]);
	prog_fill_ends(slots[k], sizes[k], k);
}

static void phase1(void)
{
	prepare(1);
	struct sigaction sa = { .sa_handler = handler };
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
	struct itimerval it = { .it_interval = { 0, 200 }, .it_value = { 0, 200 } };
	REQUIRE(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");

	void *slots[256] = { NULL };
	size_t sizes[256];
	uint32_t rng = 99;
	unsigned long steps = 0;
	while (atomic_load(&freed) < NPREP) {
		work_step(&rng, slots, sizes, 256);
		if (++steps % 256 == 0)
			raise(SIGALRM); /* the handler also runs at known points */
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	for (unsigned k = 0; k < 256; k++)
		free(slots[k]);
	printf("prog_signal: phase 1: %u frees in the handler\n", atomic_load(&freed));
}

static void *phase2_thread(void *arg)
{
	void *slots[128] = { NULL };
	size_t sizes[128];
	uint32_t rng = 7;
	while (!atomic_load(&phase2_stop))
		work_step(&rng, slots, sizes, 128);
	for (unsigned k = 0; k < 128; k++)
		free(slots[k]);
	return arg;
}

static void phase2(void)
{
	prepare(2);
	struct sigaction sa = { .sa_handler = handler };
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	/* pthread_kill aims at the worker: no signal masks needed. */
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, phase2_thread, NULL) == 0, "pthread_create");
	while (atomic_load(&freed) < NPREP) {
		REQUIRE(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
		sched_yield();
	}
	atomic_store(&phase2_stop, true);
	pthread_join(t, NULL);
	printf("prog_signal: phase 2: %u frees in the handler\n", atomic_load(&freed));
}

int main(void)
{
	prog_expect_preload();
	phase1();
	phase2();
	return prog_result("prog_signal");
}
