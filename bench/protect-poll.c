/* SPDX-License-Identifier: MIT */
/*
 * The polling arm of seed 004's experiment (bench/run-protect.sh), as strong as the seed's U arm:
 * the files opened once, nothing allocated in the loop, memory.current pread on an absolute 5 ms
 * timer; when it falls at FALL_RATE bytes/s or faster (the victim is being stolen from), the
 * sample is pwritten to memory.low. MODE "sample" (the seed's U arm) writes every such sample;
 * "max" (the default) never lowers what it wrote, which is at least as strong.
 *   protect-poll CGROUP PERIOD_MS FALL_RATE [max|sample]
 * On SIGTERM: memory.low back to what it was, and "samples=N writes=N" on stdout.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t read_u64(int fd)
{
	char buf[32];
	ssize_t r = pread(fd, buf, sizeof(buf) - 1, 0);
	uint64_t v = 0;
	for (ssize_t i = 0; i < r && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(buf[i] - '0');
	return v;
}

static int write_u64(int fd, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return pwrite(fd, buf, (size_t)n, 0) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	bool lower = argc == 5 && strcmp(argv[4], "sample") == 0;
	if ((argc != 4 && argc != 5) || (argc == 5 && !lower && strcmp(argv[4], "max") != 0)) {
		fprintf(stderr, "usage: protect-poll CGROUP PERIOD_MS FALL_RATE [max|sample]\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/memory.current", argv[1]);
	int cur = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/memory.low", argv[1]);
	int low = open(path, O_RDWR | O_CLOEXEC);
	if (cur < 0 || low < 0) {
		perror(argv[1]);
		return 1;
	}
	long period_ns = atol(argv[2]) * 1000000L;
	uint64_t fall_rate = strtoull(argv[3], NULL, 10);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	uint64_t original = read_u64(low), written = original, samples = 0, writes = 0;
	uint64_t prev = read_u64(cur);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	printf("polling\n");
	fflush(stdout);
	while (!stop) {
		next.tv_nsec += period_ns;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		uint64_t now = read_u64(cur);
		samples++;
		/* Bytes per second over one period. */
		if (now < prev && (prev - now) * 1000000000u / (uint64_t)period_ns >= fall_rate &&
		    (lower ? now != written : now > written) && write_u64(low, now) == 0) {
			written = now;
			writes++;
		}
		prev = now;
	}
	write_u64(low, original);
	printf("samples=%" PRIu64 " writes=%" PRIu64 "\n", samples, writes);
	return 0;
}
