/* SPDX-License-Identifier: MIT */
/*
 * Allocation during exit. exit() runs the atexit handlers, then the destructors of every object
 * (the program's first, then the preloaded library's and memkind's), then flushes stdio; a
 * handler registered while that happens runs after all of them. So this program allocates, frees
 * and checks memory in
 *   - atexit handlers registered by main, and one registered by a handler during exit;
 *   - __attribute__((destructor)) functions of two priorities;
 *   - a "late" on_exit handler registered by a destructor, which glibc runs after every
 *     destructor, tieralloc's included: the allocator must still work then;
 *   - a detached thread that keeps allocating while the process exits.
 * main returns 3; the late handler turns that into _exit(0) when every step ran and passed, so a
 * late handler that never ran also fails the test.
 */
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "prog.h"

#define NKEPT 48

static struct {
	void *p;
	size_t n;
} kept[NKEPT];
static atomic_uint steps;

enum {
	STEP_H1 = 1,
	STEP_H2 = 2,
	STEP_H3 = 4,
	STEP_D1 = 8,
	STEP_D2 = 16,
	STEP_ALL = 31,
};

/* Allocate, fill, check and free a spread of sizes, with each family member. */
static void churn(uint32_t seed, const char *where)
{
	uint32_t rng = seed;
	void *ps[40];
	size_t ns[40];
	for (int i = 0; i < 40; i++) {
		ns[i] = prog_size(&rng, 3u << 20);
		ps[i] = i % 4 == 0 ? calloc(1, ns[i]) : malloc(ns[i]);
		REQUIRE(ps[i] != NULL, "%s: allocation of %zu", where, ns[i]);
		prog_fill(ps[i], ns[i], seed + (uint32_t)i);
	}
	char *big = malloc(1 << 20);
	REQUIRE(big != NULL, "%s: malloc(1 MiB)", where);
	prog_fill(big, 1 << 20, seed);
	char *bigger = realloc(big, 8u << 20);
	REQUIRE(bigger != NULL, "%s: realloc to 8 MiB", where);
	CHECK(prog_verify(bigger, 1 << 20, seed) == 1 << 20, "%s: realloc kept the contents",
	      where);
	void *al = NULL;
	CHECK(posix_memalign(&al, 4096, 10000) == 0 && ((uintptr_t)al & 4095) == 0,
	      "%s: posix_memalign", where);
	char *s = strdup(where);
	CHECK(s != NULL && strcmp(s, where) == 0, "%s: strdup", where);
	for (int i = 0; i < 40; i++) {
		size_t bad = prog_verify(ps[i], ns[i], seed + (uint32_t)i);
		CHECK(bad == ns[i], "%s: block %d of %zu corrupt at %zu", where, i, ns[i], bad);
		free(ps[i]);
	}
	free(bigger);
	free(al);
	free(s);
}

static void check_kept(int from, int to, bool release)
{
	for (int i = from; i < to; i++) {
		size_t bad = prog_verify(kept[i].p, kept[i].n, (uint32_t)i);
		CHECK(bad == kept[i].n, "kept block %d corrupt at %zu", i, bad);
		if (release) {
			free(kept[i].p);
			kept[i].p = NULL;
		}
	}
}

static void late_handler(int status, void *arg)
{
	CHECK(status == 3, "exit status %d seen by on_exit", status);
	churn(500, "late on_exit handler");
	check_kept(32, NKEPT, true);
	/* stdout's buffer is flushed after this, by the C library: it must still be valid. */
	printf("prog_atexit: late handler ran\n");
	unsigned s = atomic_load(&steps);
	CHECK(s == STEP_ALL, "steps that ran: 0x%x of 0x%x", s, (unsigned)STEP_ALL);
	if (prog_result("prog_atexit") != 0)
		_exit(1);
	fflush(stdout);
	_exit(0);
}

static void h3(void)
{
	churn(300, "atexit handler registered during exit");
	atomic_fetch_or(&steps, STEP_H3);
}

static void h2(void)
{
	churn(200, "atexit handler 2");
	CHECK(atexit(h3) == 0, "atexit() during exit");
	check_kept(0, 8, true);
	atomic_fetch_or(&steps, STEP_H2);
}

static void h1(void)
{
	churn(100, "atexit handler 1");
	check_kept(8, 16, true);
	atomic_fetch_or(&steps, STEP_H1);
}

__attribute__((destructor)) static void d1(void)
{
	churn(400, "destructor");
	check_kept(16, 24, true);
	/*
	 * atexit() would register with this program's DSO handle: __cxa_finalize would run it
	 * with the program's destructors. on_exit() has no handle, so it runs after _dl_fini,
	 * that is after every destructor, the allocator's and memkind's included.
	 */
	CHECK(on_exit(late_handler, NULL) == 0, "on_exit() in a destructor");
	atomic_fetch_or(&steps, STEP_D1);
}

__attribute__((destructor(101))) static void d2(void)
{
	churn(450, "destructor(101)");
	check_kept(24, 32, true);
	atomic_fetch_or(&steps, STEP_D2);
}

/* Keeps allocating until the process is gone. */
static void *spinner(void *arg)
{
	uint32_t rng = 77;
	for (;;) {
		size_t n = prog_size(&rng, 1 << 20);
		char *p = malloc(n);
		if (p != NULL) {
			p[0] = p[n - 1] = 1;
			free(p);
		}
	}
	return arg;
}

int main(void)
{
	prog_expect_preload();
	uint32_t rng = 42;
	for (int i = 0; i < NKEPT; i++) {
		kept[i].n = prog_size(&rng, 2u << 20);
		kept[i].p = malloc(kept[i].n);
		REQUIRE(kept[i].p != NULL, "malloc(%zu)", kept[i].n);
		prog_fill(kept[i].p, kept[i].n, (uint32_t)i);
	}
	REQUIRE(atexit(h1) == 0 && atexit(h2) == 0, "atexit");
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	REQUIRE(pthread_create(&t, &attr, spinner, NULL) == 0, "pthread_create");
	pthread_attr_destroy(&attr);
	printf("prog_atexit: main done\n");
	return 3; /* the late handler replaces this with 0 when all went well */
}
