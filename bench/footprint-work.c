/* SPDX-License-Identifier: MIT */
/*
 * The footprint workload (bench/run-footprint.sh, tests): holds memory the way a program does,
 * then says "ready" and waits to be measured and stopped, so that what the kernel counts for it
 * is read while everything is live.
 *   footprint-work hold TOTAL BLOCK       TOTAL bytes in blocks of BLOCK bytes, written
 *   footprint-work mixed TOTAL            TOTAL bytes in blocks of 16 B to 16 KiB (log-uniform,
 *                                         fixed seed), written
 *   footprint-work churn TOTAL BLOCK N    hold TOTAL in BLOCK blocks, then N times free every block
 *                                         and allocate it again (written), as a program that
 *                                         rebuilds its data does
 *   footprint-work large N                eight blocks of 5-25 MiB (random, fixed seed), N times
 *                                         one of them freed and another allocated and written a
 *                                         byte per page: large blocks coming and going
 * After the work it prints "ready <blocks> ms=<time the work took>" and waits for SIGTERM (or
 * stdin to close, with --stdin). Sizes take K and M suffixes. Exit 1 if a block lost its contents.
 */
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/lib/size_arg.h"

struct block {
	unsigned char *p;
	size_t size;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(struct block *b, size_t i)
{
	memset(b->p, (int)(i & 0xff), b->size);
}

static int check(const struct block *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i].p[0] != (unsigned char)(i & 0xff) ||
		    b[i].p[b[i].size - 1] != (unsigned char)(i & 0xff))
			return 0;
	return 1;
}

/* Blocks for TOTAL bytes: all of size block, or mixed (block == 0). */
static struct block *plan(size_t total, size_t block, size_t *count)
{
	size_t cap = 1024, n = 0, sum = 0;
	struct block *v = malloc(cap * sizeof(*v));
	while (v != NULL && sum < total) {
		if (n == cap) {
			cap *= 2;
			struct block *w = realloc(v, cap * sizeof(*v));
			if (w == NULL)
				break;
			v = w;
		}
		size_t size = block;
		if (size == 0) { /* 16 B .. 16 KiB, each doubling alike */
			size = (size_t)16 << (next() % 10);
			size += next() % size;
		}
		v[n].size = size;
		v[n].p = NULL;
		sum += size;
		n++;
	}
	*count = n;
	return v;
}

static int allocate(struct block *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		v[i].p = malloc(v[i].size);
		if (v[i].p == NULL)
			return 0;
		fill(&v[i], i);
	}
	return 1;
}

/* Until SIGTERM, or stdin's end. */
static int wait_for_end(int use_stdin)
{
	if (use_stdin) {
		char buf[64];
		while (read(0, buf, sizeof(buf)) > 0)
			;
		return 1;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sig;
	return sigwait(&set, &sig) == 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Eight slots of 5-25 MiB blocks, one replaced per step, every page written. */
static int large_blocks(long steps)
{
	enum { SLOTS = 8 };
	struct block slot[SLOTS] = { { NULL, 0 } };
	for (long i = 0; i < steps; i++) {
		unsigned s = (unsigned)(next() % SLOTS);
		if (slot[s].p != NULL && !check(&slot[s], 1))
			return 0;
		free(slot[s].p);
		slot[s].size = ((size_t)5 << 20) + (size_t)(next() % ((size_t)20 << 20));
		slot[s].p = malloc(slot[s].size);
		if (slot[s].p == NULL)
			return 0;
		for (size_t o = 0; o < slot[s].size; o += 4096)
			slot[s].p[o] = 0;
		slot[s].p[0] = slot[s].p[slot[s].size - 1] = 0;
	}
	for (unsigned s = 0; s < SLOTS; s++)
		free(slot[s].p);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
			"usage: footprint-work hold|mixed|churn TOTAL [BLOCK [N]] [--stdin]\n");
		return 2;
	}
	int use_stdin = strcmp(argv[argc - 1], "--stdin") == 0;
	if (use_stdin)
		argc--;
	const char *mode = argv[1];
	double t0 = now_ms();
	if (strcmp(mode, "large") == 0) {
		long steps = atol(argv[2]);
		if (steps <= 0 || !large_blocks(steps)) {
			fprintf(stderr,
				"footprint-work: large: bad steps, out of memory or lost data\n");
			return 1;
		}
		double ms = now_ms() - t0;
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("ready 8 ms=%.0f maxrss_kib=%ld\n", ms, ru.ru_maxrss);
		fflush(stdout);
		wait_for_end(use_stdin);
		return 0;
	}
	size_t total = parse_size(argv[2]), block = argc > 3 ? parse_size(argv[3]) : 0;
	long rounds = argc > 4 ? atol(argv[4]) : 0;
	int mixed = strcmp(mode, "mixed") == 0;
	if (total == 0 || (!mixed && block == 0) || (strcmp(mode, "churn") == 0 && rounds <= 0) ||
	    (!mixed && strcmp(mode, "hold") != 0 && strcmp(mode, "churn") != 0)) {
		fprintf(stderr, "footprint-work: bad arguments\n");
		return 2;
	}
	size_t n;
	struct block *v = plan(total, mixed ? 0 : block, &n);
	if (v == NULL || !allocate(v, n)) {
		fprintf(stderr, "footprint-work: out of memory\n");
		return 1;
	}
	for (long r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++)
			free(v[i].p);
		if (!allocate(v, n)) {
			fprintf(stderr, "footprint-work: out of memory in round %ld\n", r);
			return 1;
		}
	}
	if (!check(v, n)) {
		fprintf(stderr, "footprint-work: a block lost its contents\n");
		return 1;
	}
	printf("ready %zu ms=%.0f\n", n, now_ms() - t0);
	fflush(stdout);
	wait_for_end(use_stdin);
	return check(v, n) ? 0 : 1;
}
