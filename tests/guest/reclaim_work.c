/* SPDX-License-Identifier: MIT */
/*
 * The workload of reclaim for priority (tests/guest/pressure.sh, bench/run-reclaim.sh): one
 * container's anonymous working set, cycled over as a program that needs all of it does.
 *
 *   reclaim_work MIB PASSES [PAUSE_MS]
 *
 * Maps MIB MiB, writes two words of every page (its first and last) with a value derived from
 * the page and the pass, and prints "filled seconds=S". Then PASSES times over every page in
 * order: checks both words against the last pass's value and writes this pass's. PASSES 0: until
 * SIGTERM or SIGINT, then the pass under way is finished. PAUSE_MS: a pause after every pass (a
 * background job that comes back to its data now and then). At the end it prints "done seconds=S
 * passes=N errors=E" (S from the start, mapping included) and exits 0, or 1 when a word was
 * wrong: a page the kernel swapped out and back must come back whole. A 1800 s alarm ends a
 * forgotten process.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t value(size_t page, unsigned long pass)
{
	uint64_t x = ((uint64_t)page << 20) ^ pass ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

int main(int argc, char **argv)
{
	char *end1 = NULL, *end2 = NULL, *end3 = NULL;
	bool ok = argc == 3 || argc == 4;
	unsigned long mib = ok ? strtoul(argv[1], &end1, 10) : 0;
	unsigned long passes = ok ? strtoul(argv[2], &end2, 10) : 0;
	unsigned long pause_ms = argc == 4 ? strtoul(argv[3], &end3, 10) : 0;
	if (!ok || *end1 != '\0' || *end2 != '\0' || (end3 != NULL && *end3 != '\0') || mib == 0 ||
	    mib > 65536 || pause_ms > 60000) {
		fprintf(stderr, "usage: reclaim_work MIB PASSES [PAUSE_MS] (PASSES 0: until "
				"SIGTERM)\n");
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	alarm(1800);
	double t0 = now();
	size_t page = (size_t)sysconf(_SC_PAGESIZE), npages = mib * (1048576 / page);
	char *p =
	    mmap(NULL, npages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("reclaim_work: mmap");
		return 2;
	}
	for (size_t i = 0; i < npages; i++) {
		uint64_t *w = (uint64_t *)(void *)(p + i * page);
		w[0] = w[page / 8 - 1] = value(i, 0);
	}
	printf("filled seconds=%.3f\n", now() - t0);
	fflush(stdout);
	unsigned long done = 0, errors = 0;
	while ((passes == 0 && !stop) || (passes > 0 && done < passes)) {
		for (size_t i = 0; i < npages; i++) {
			uint64_t *w = (uint64_t *)(void *)(p + i * page);
			uint64_t want = value(i, done);
			if (w[0] != want || w[page / 8 - 1] != want)
				errors++;
			w[0] = w[page / 8 - 1] = value(i, done + 1);
		}
		done++;
		if (pause_ms > 0 && !stop) {
			struct timespec ts = { (time_t)(pause_ms / 1000),
					       (long)(pause_ms % 1000) * 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	printf("done seconds=%.3f passes=%lu errors=%lu\n", now() - t0, done, errors);
	return errors == 0 ? 0 : 1;
}
