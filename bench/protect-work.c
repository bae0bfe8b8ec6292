/* SPDX-License-Identifier: MIT */
/*
 * The workloads of seed 004's experiment (bench/run-protect.sh, tests/guest/protect.sh):
 *   protect-work write FILE MIB       a file whose every 4 KiB page starts with its index
 *   protect-work read FILE PERIOD_MS  the victim: reads the whole file every PERIOD_MS, checking
 *                                     each page; "ready" after the first pass; on SIGTERM prints
 *                                     "passes=N bad=N" (bad: pages that read back wrong)
 *   protect-work stream FILE          the filler: reads the file over and over (page cache
 *                                     churned continuously), until killed
 *   protect-work burst MIB HOLD_S     an anonymous burst: MIB touched, "ready", held HOLD_S
 *                                     seconds, checked ("burst ok" or "burst bad=N"), exit
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE  4096
#define CHUNK (64 * 1024)

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: protect-work write FILE MIB | read FILE PERIOD_MS | stream FILE | "
			"burst MIB HOLD_S\n");
	return 2;
}

static int write_file(const char *path, long mib)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	static char buf[CHUNK];
	if (fd < 0) {
		perror(path);
		return 1;
	}
	uint64_t pages = (uint64_t)mib << 8;
	for (uint64_t p = 0; p < pages; p += CHUNK / PAGE) {
		for (unsigned i = 0; i < CHUNK / PAGE; i++) {
			uint64_t idx = p + i;
			memcpy(buf + (size_t)i * PAGE, &idx, sizeof(idx));
		}
		if (write(fd, buf, CHUNK) != CHUNK) {
			perror(path);
			return 1;
		}
	}
	return fsync(fd) != 0 || close(fd) != 0;
}

/* One pass over the file: the pages that read back wrong. */
static uint64_t pass(int fd, bool check, uint64_t *pages)
{
	static char buf[CHUNK];
	uint64_t bad = 0, idx = 0;
	ssize_t r;
	for (off_t off = 0; (r = pread(fd, buf, CHUNK, off)) > 0; off += r)
		for (ssize_t i = 0; check && i + PAGE <= r; i += PAGE, idx++) {
			uint64_t got;
			memcpy(&got, buf + i, sizeof(got));
			bad += got != idx;
		}
	*pages = idx;
	return bad;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	if (strcmp(argv[1], "write") == 0 && argc == 4)
		return write_file(argv[2], atol(argv[3]));
	if ((strcmp(argv[1], "read") == 0 && argc == 4) ||
	    (strcmp(argv[1], "stream") == 0 && argc == 3)) {
		bool victim = argv[1][0] == 'r';
		long period = victim ? atol(argv[3]) : 0;
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		uint64_t passes = 0, bad = 0, pages = 0;
		while (!stop) {
			bad += pass(fd, victim, &pages);
			if (passes++ == 0 && victim) {
				printf("ready pages=%llu\n", (unsigned long long)pages);
				fflush(stdout);
			}
			if (victim)
				sleep_ms(period);
		}
		printf("passes=%llu bad=%llu\n", (unsigned long long)passes,
		       (unsigned long long)bad);
		return bad != 0;
	}
	if (strcmp(argv[1], "burst") == 0 && argc == 4) {
		size_t len = (size_t)atol(argv[2]) << 20;
		unsigned char *p =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (size_t i = 0; i < len; i += PAGE)
			p[i] = (unsigned char)(i / PAGE) | 1;
		printf("ready\n");
		fflush(stdout);
		for (long s = atol(argv[3]) * 10; s > 0 && !stop; s--)
			sleep_ms(100);
		size_t bad = 0;
		for (size_t i = 0; i < len; i += PAGE)
			bad += p[i] != ((unsigned char)(i / PAGE) | 1);
		if (bad == 0)
			printf("burst ok\n");
		else
			printf("burst bad=%zu\n", bad);
		return bad != 0;
	}
	return usage();
}
