/* SPDX-License-Identifier: MIT */
/*
 * The stopwatch of `make bench-converge` (bench/run-converge.sh): writes a new memory.max to a
 * cgroup, then samples the cgroup's node-0 bytes (anon + file of memory.numa_stat, as tieralloc's
 * observation counts them) every PERIOD_MS until they are at or under TARGET or GUARD_S passed.
 *
 *   converge-watch CGROUP_DIR NEW_MAX TARGET_BYTES BEFORE_BYTES GUARD_S [PERIOD_MS]
 *
 * Prints "converge_ms=N notice_ms=N node0_after=BYTES samples=N": converge_ms from the write to
 * the first sample at or under TARGET (-1 if none came within GUARD_S), notice_ms to the first
 * sample 4 MiB under BEFORE (-1 if none). Exit 0, or 1 on a bad argument or unreadable file.
 *
 * Why not the shell: a shell loop forks awk, sed and sleep at every sample, and in the emulated
 * guest, whose two vCPUs share one host thread by default, that took CPU from the very pass
 * being timed. One pread per sample here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The N0= field of a numa_stat line's value list, or 0. */
static uint64_t node0_of(const char *line)
{
	const char *at = strstr(line, " N0=");
	return at != NULL ? strtoull(at + 4, NULL, 10) : 0;
}

/* Node 0's anon + file bytes from memory.numa_stat's text; false if neither line is there. */
static int node0_bytes(int fd, uint64_t *out)
{
	static char text[16384];
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	uint64_t sum = 0;
	int seen = 0;
	for (char *line = text; line != NULL && *line != '\0';) {
		char *next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (strncmp(line, "anon ", 5) == 0 || strncmp(line, "file ", 5) == 0) {
			sum += node0_of(line);
			seen++;
		}
		line = next;
	}
	*out = sum;
	return seen > 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return 0;
	*out = v;
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t target, before, guard_s, period_ms = 50;
	if ((argc != 6 && argc != 7) || !parse_u64(argv[3], &target) ||
	    !parse_u64(argv[4], &before) || !parse_u64(argv[5], &guard_s) ||
	    (argc == 7 && (!parse_u64(argv[6], &period_ms) || period_ms == 0))) {
		fprintf(stderr,
			"usage: converge-watch CGROUP_DIR NEW_MAX TARGET_BYTES BEFORE_BYTES "
			"GUARD_S [PERIOD_MS]\n");
		return 1;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/memory.numa_stat", argv[1]);
	int stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (stat_fd < 0) {
		fprintf(stderr, "converge-watch: %s: %s\n", path, strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/memory.max", argv[1]);
	int max_fd = open(path, O_WRONLY | O_CLOEXEC);
	if (max_fd < 0) {
		fprintf(stderr, "converge-watch: %s: %s\n", path, strerror(errno));
		return 1;
	}
	size_t len = strlen(argv[2]);
	uint64_t t0 = now_ns();
	if (write(max_fd, argv[2], len) != (ssize_t)len) {
		fprintf(stderr, "converge-watch: writing %s to %s: %s\n", argv[2], path,
			strerror(errno));
		return 1;
	}
	close(max_fd);
	int64_t converge_ms = -1, notice_ms = -1;
	uint64_t v = before, samples = 0;
	const uint64_t notice_below = before > (4ull << 20) ? before - (4ull << 20) : 0;
	const struct timespec period = { (time_t)(period_ms / 1000),
					 (long)(period_ms % 1000) * 1000000L };
	for (;;) {
		if (!node0_bytes(stat_fd, &v)) {
			fprintf(stderr, "converge-watch: no anon/file line in memory.numa_stat\n");
			return 1;
		}
		samples++;
		uint64_t ms = (now_ns() - t0) / 1000000u;
		if (notice_ms < 0 && v < notice_below)
			notice_ms = (int64_t)ms;
		if (v <= target) {
			converge_ms = (int64_t)ms;
			break;
		}
		if (ms >= guard_s * 1000)
			break;
		nanosleep(&period, NULL);
	}
	printf("converge_ms=%lld notice_ms=%lld node0_after=%llu samples=%llu\n",
	       (long long)converge_ms, (long long)notice_ms, (unsigned long long)v,
	       (unsigned long long)samples);
	return 0;
}
