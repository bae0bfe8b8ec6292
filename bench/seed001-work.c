/* SPDX-License-Identifier: MIT */
/*
 * Seed 001's workload (bench/run-reclaim.sh, RECLAIM_WORKLOAD=file): what each of its two jobs
 * does, as its cover letter's selftest describes it. A job writes a file of MIB through
 * write(2), then maps it and reads one byte of every page, PASSES times over; its time runs from
 * its start to the end of the last pass. Page cache on a real file system, swap off: reclaim
 * drops clean pages and each one read again is a file refault.
 *
 *   seed001-work FILE MIB PASSES
 *
 * Each page starts with its index, checked on every read ("bad": pages that read back wrong).
 * Prints "done seconds=S passes=N bad=N"; exit status 1 if a page was bad or I/O failed.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE  4096
#define CHUNK (64 * 1024)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 4 || atol(argv[2]) <= 0 || atol(argv[3]) <= 0) {
		fprintf(stderr, "usage: seed001-work FILE MIB PASSES\n");
		return 2;
	}
	const char *path = argv[1];
	size_t len = (size_t)atol(argv[2]) << 20;
	long passes = atol(argv[3]);
	double t0 = now_s();
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	static char buf[CHUNK];
	for (size_t off = 0; off < len; off += CHUNK) {
		for (size_t i = 0; i < CHUNK; i += PAGE) {
			uint64_t idx = (off + i) / PAGE;
			memcpy(buf + i, &idx, sizeof(idx));
		}
		if (write(fd, buf, CHUNK) != CHUNK) {
			perror(path);
			return 1;
		}
	}
	const unsigned char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	uint64_t bad = 0;
	for (long p = 0; p < passes; p++)
		for (size_t off = 0; off < len; off += PAGE) {
			uint64_t got;
			memcpy(&got, map + off, sizeof(got));
			bad += got != off / PAGE;
		}
	double took = now_s() - t0;
	munmap((void *)map, len);
	close(fd);
	printf("done seconds=%.3f passes=%ld bad=%llu\n", took, passes, (unsigned long long)bad);
	return bad != 0;
}
