/* SPDX-License-Identifier: MIT */
/*
 * What tracking written pages costs (issue 14 item 4): run under the preload in a cgroup with a
 * quota (bench/run-access.sh), once with TIERALLOC_ACCESS=age and once with soft-dirty.
 *
 *   access-cost WS_MIB SECONDS
 *
 * Allocates WS_MIB of 64 KiB blocks and fills them, then a thread writes one word of every
 * 4 KiB page of them, round after round, for SECONDS. Prints one line:
 *   access=S ws_mib=N pages_per_s=P writer_cpu_ms=W process_cpu_ms=C minflt=F samples=K
 *   sample_ms=M period_ms=P source=SOURCE
 * writer_cpu_ms is the writer thread's CPU time, process_cpu_ms the whole process's (the worker
 * that samples included), minflt the writer's minor faults after the fill (soft-dirty's write
 * faults), samples and sample_ms the sampler's count and the time its last sample took (ctl
 * access.samples and access.sample_ns, found with dlsym). The driver compares the two runs.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BLOCK ((size_t)65536)

static char **blocks;
static size_t nblocks;
static double seconds;
static uint64_t pages_written;
static struct rusage writer_usage, writer_start;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *writer(void *arg)
{
	(void)arg;
	getrusage(RUSAGE_THREAD, &writer_start);
	double end = now_s() + seconds;
	uint64_t n = 0;
	while (now_s() < end) {
		for (size_t i = 0; i < nblocks; i++)
			for (size_t off = 0; off < BLOCK; off += 4096)
				((volatile char *)blocks[i])[off]++;
		n += nblocks * (BLOCK / 4096);
	}
	pages_written = n;
	getrusage(RUSAGE_THREAD, &writer_usage);
	return NULL;
}

static double cpu_ms(const struct rusage *r)
{
	return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e3 +
	       (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec) / 1e3;
}

/* ctl access.source, blanks made underscores (one word in the line). */
static const char *source(void)
{
	static char buf[128] = "none";
	int (*get)(const char *, void *, size_t *) =
	    (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	size_t len = sizeof(buf);
	if (get == NULL || get("access.source", buf, &len) != 0)
		return "none";
	for (char *c = buf; *c != '\0'; c++)
		if (*c == ' ')
			*c = '_';
	return buf;
}

static uint64_t ctl_u64(const char *name)
{
	int (*get)(const char *, void *, size_t *) =
	    (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	uint64_t v = 0;
	size_t len = sizeof(v);
	return get != NULL && get(name, &v, &len) == 0 ? v : 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s WS_MIB SECONDS\n", argv[0]);
		return 2;
	}
	size_t mib = strtoul(argv[1], NULL, 10);
	seconds = strtod(argv[2], NULL);
	nblocks = mib * (1024 * 1024 / BLOCK);
	blocks = calloc(nblocks, sizeof(*blocks));
	if (blocks == NULL || seconds <= 0)
		return 1;
	for (size_t i = 0; i < nblocks; i++) {
		blocks[i] = malloc(BLOCK);
		if (blocks[i] == NULL)
			return 1;
		memset(blocks[i], 1, BLOCK);
	}
	struct rusage before, after;
	getrusage(RUSAGE_SELF, &before);
	double t0 = now_s();
	pthread_t th;
	if (pthread_create(&th, NULL, writer, NULL) != 0)
		return 1;
	pthread_join(th, NULL);
	double wall = now_s() - t0;
	getrusage(RUSAGE_SELF, &after);
	const char *access = getenv("TIERALLOC_ACCESS");
	printf("access=%s ws_mib=%zu pages_per_s=%.0f writer_cpu_ms=%.0f process_cpu_ms=%.0f "
	       "minflt=%ld samples=%llu sample_ms=%.2f period_ms=%.0f source=%s\n",
	       access != NULL ? access : "soft-dirty", mib, (double)pages_written / wall,
	       cpu_ms(&writer_usage) - cpu_ms(&writer_start), cpu_ms(&after) - cpu_ms(&before),
	       writer_usage.ru_minflt - writer_start.ru_minflt,
	       (unsigned long long)ctl_u64("access.samples"),
	       (double)ctl_u64("access.sample_ns") / 1e6, (double)ctl_u64("access.period_ns") / 1e6,
	       source());
	return 0;
}
