/* SPDX-License-Identifier: MIT */
/*
 * Latency of malloc under a lock while enforcement is needed: the user-space counterpart of
 * seed 003's table (enforcement inline in the allocating task stalls whoever waits on a lock it
 * holds). Run under the preload, as root, in a cgroup v2 of its own, on a machine (or the QEMU
 * guest) with two tiers; bench/run-enforce.sh runs it once per TIERALLOC_ENFORCE mode.
 *
 *   enforce-latency [--hold MIB] [--seconds S] [--threads N]
 *
 * 1. Sets its cgroup's memory.max to 4 x HOLD and holds HOLD MiB (64 KiB blocks, written): with
 *    the tiers' capacity shares near one half, all of it fits in tier 0.
 * 2. Lowers memory.max to 2 x HOLD: tier 0's share drops to about HOLD, below what it holds with
 *    memkind's own memory and this program's sample arrays, and enforcement has to demote that.
 * 3. For S seconds, N threads take one mutex, malloc 4..64 KiB, write it, unlock, and free an
 *    older block (a ring of 256 per thread keeps the heap steady). Each malloc under the lock is
 *    timed, and so is each wait for the lock (what the other threads pay).
 * Prints one line: "mode=M malloc_ns p50=.. p99=.. p999=.. max=.. wait_ns p50=.. p99=..
 * p999=.. max=.. ops=.. node0_before=.. node0_after=.. share0=..".
 * Exit 77 (skip) without root, cgroup v2 or a second NUMA node with memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES (1u << 20)

static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *lat_malloc, *lat_wait;
static _Atomic unsigned nsamples;
static volatile int stop;
static char cg_dir[600];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int write_file(const char *name, const char *val)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", cg_dir, name);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	int rc = fputs(val, f) < 0 ? -1 : 0;
	return fclose(f) != 0 ? -1 : rc;
}

/* The cgroup's bytes on node 0, anon + file (what tieralloc's observation counts). */
static uint64_t node0(void)
{
	char path[700], line[4096];
	snprintf(path, sizeof(path), "%s/memory.numa_stat", cg_dir);
	FILE *f = fopen(path, "r");
	uint64_t sum = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "anon ", 5) != 0 && strncmp(line, "file ", 5) != 0)
			continue;
		char *n0 = strstr(line, " N0=");
		if (n0 != NULL)
			sum += strtoull(n0 + 4, NULL, 10);
	}
	fclose(f);
	return sum;
}

static int find_cgroup(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];
	int found = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(cg_dir, sizeof(cg_dir), "/sys/fs/cgroup%s", line + 3);
		found = 0;
	}
	if (f != NULL)
		fclose(f);
	if (found == 0) {
		char path[700];
		snprintf(path, sizeof(path), "%s/memory.numa_stat", cg_dir);
		found = access(path, R_OK) == 0 ? 0 : -1;
	}
	return found;
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *ring[256] = { NULL };
	unsigned at = 0;
	while (!stop) {
		size_t size = 4096 + (size_t)(rand_r(&seed) % (60 * 1024));
		uint64_t t0 = now_ns();
		pthread_mutex_lock(&big_lock);
		uint64_t t1 = now_ns();
		char *p = malloc(size);
		uint64_t t2 = now_ns();
		if (p != NULL)
			memset(p, (int)size, 64);
		pthread_mutex_unlock(&big_lock);
		unsigned i = atomic_fetch_add(&nsamples, 1);
		if (i < MAX_SAMPLES) {
			lat_wait[i] = t1 - t0;
			lat_malloc[i] = t2 - t1;
		}
		free(ring[at]);
		ring[at] = p;
		at = (at + 1) % 256;
	}
	for (unsigned i = 0; i < 256; i++)
		free(ring[i]);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void percentiles(const char *name, uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	printf(" %s p50=%llu p99=%llu p999=%llu max=%llu", name, (unsigned long long)v[n / 2],
	       (unsigned long long)v[(uint64_t)n * 99 / 100],
	       (unsigned long long)v[(uint64_t)n * 999 / 1000], (unsigned long long)v[n - 1]);
}

int main(int argc, char **argv)
{
	unsigned hold_mib = 256, seconds = 5, nthreads = 2;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--hold") == 0)
			hold_mib = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--threads") == 0)
			nthreads = (unsigned)atoi(argv[i + 1]);
	}
	if (hold_mib == 0 || seconds == 0 || nthreads == 0 || nthreads > 64) {
		fprintf(stderr, "usage: %s [--hold MIB] [--seconds S] [--threads N]\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0 || find_cgroup() != 0 ||
	    access("/sys/devices/system/node/node1", F_OK)) {
		fprintf(stderr,
			"enforce-latency: needs root, cgroup v2 with memory.numa_stat and a "
			"second NUMA node (the QEMU guest: bench/run-enforce.sh)\n");
		return 77;
	}
	const char *mode = getenv("TIERALLOC_ENFORCE");
	char val[64];
	snprintf(val, sizeof(val), "%llu", 4ull * hold_mib << 20);
	if (write_file("memory.max", val) != 0) {
		fprintf(stderr, "enforce-latency: cannot write %s/memory.max: %s\n", cg_dir,
			strerror(errno));
		return 1;
	}
	lat_malloc = calloc(MAX_SAMPLES, sizeof(uint64_t));
	lat_wait = calloc(MAX_SAMPLES, sizeof(uint64_t));
	size_t nblocks = (size_t)hold_mib * 16;
	char **held = calloc(nblocks, sizeof(*held));
	if (lat_malloc == NULL || lat_wait == NULL || held == NULL)
		return 1;
	for (size_t i = 0; i < nblocks; i++) {
		held[i] = malloc(64 * 1024);
		if (held[i] == NULL)
			return 1;
		memset(held[i], (int)i, 64 * 1024);
	}
	sleep(1);
	uint64_t before = node0();
	snprintf(val, sizeof(val), "%llu", ((unsigned long long)hold_mib * 2) << 20);
	if (write_file("memory.max", val) != 0)
		return 1;
	pthread_t th[64];
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	sleep(seconds);
	stop = 1;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	unsigned n = atomic_load(&nsamples);
	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	printf("mode=%s", mode != NULL ? mode : "deferred");
	percentiles("malloc_ns", lat_malloc, n);
	percentiles("wait_ns", lat_wait, n);
	printf(" ops=%u node0_before=%llu node0_after=%llu\n", n, (unsigned long long)before,
	       (unsigned long long)node0());
	for (size_t i = 0; i < nblocks; i++)
		free(held[i]);
	return 0;
}
