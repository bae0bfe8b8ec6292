/* SPDX-License-Identifier: MIT */
/*
 * The workload of the agent's guest test (tests/guest/agent.sh): pages the kernel will promote.
 *
 *   promote_work [--hold] MIB SECONDS [CGROUP]
 *
 * Maps MIB MiB, binds it to node 1 and writes it (so its pages are first touched there), then
 * drops the binding (MPOL_DEFAULT, nothing moves) and reads one word of every page from this
 * process's CPU, which is on node 0: with kernel.numa_balancing=1, NUMA balancing migrates the
 * pages to node 0. It reads for SECONDS, and then on until at least 90% of the pages are on node
 * 0 (move_pages(2) asked once a second) or GUARD_S seconds have passed in all: on a loaded host the
 * emulated guest reads, and so promotes, slower, and the tests want an outcome, not a rate. Prints
 * "promote total=T node0=A node1=B seconds=S": the pages, where move_pages(2) finds them at the
 * end (A is what moved), and how long it read.
 *
 * With --hold it then keeps the pages, untouched, until it is sent SIGTERM: a test can watch what
 * the promoted pages do to the cgroup's node 0 for as long as it needs to.
 *
 * With CGROUP (a cgroup v2 directory), it moves itself there after writing the pages: their
 * charges stay with the cgroup it started in (v2 does not move charges), so the promotions are of
 * that cgroup's pages, made by a task of another one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GUARD_S 120

/* Where the pages of [p, p + n pages) are: on[0], on[1], on[2] (elsewhere or not present). */
static int where(char *p, size_t n, void **pages, int *status, size_t on[3])
{
	for (size_t i = 0; i < n; i++)
		pages[i] = p + i * 4096;
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0)
		return -1;
	on[0] = on[1] = on[2] = 0;
	for (size_t i = 0; i < n; i++)
		on[status[i] == 0 ? 0 : status[i] == 1 ? 1 : 2]++;
	return 0;
}

int main(int argc, char **argv)
{
	int hold = argc > 1 && strcmp(argv[1], "--hold") == 0;
	argc -= hold;
	argv += hold;
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s [--hold] MIB SECONDS [CGROUP]\n", argv[0]);
		return 2;
	}
	size_t len = (size_t)atoi(argv[1]) << 20;
	int seconds = atoi(argv[2]);
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || len == 0)
		return 1;
	uint64_t node1 = 2;
	if (syscall(SYS_mbind, p, len, 2 /* MPOL_BIND */, &node1, 65, 0) != 0) {
		perror("mbind");
		return 1;
	}
	memset(p, 1, len);
	if (syscall(SYS_mbind, p, len, 0 /* MPOL_DEFAULT */, NULL, 0, 0) != 0) {
		perror("mbind default");
		return 1;
	}
	if (argc == 4) {
		char procs[4096];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", argv[3]);
		FILE *f = fopen(procs, "w");
		if (f == NULL || fprintf(f, "0\n") < 0 || fclose(f) != 0) {
			perror(procs);
			return 1;
		}
	}
	size_t n = len / 4096, on[3] = { 0 };
	void **pages = malloc(n * sizeof(void *));
	int *status = malloc(n * sizeof(int));
	if (pages == NULL || status == NULL)
		return 1;
	volatile char sink = 0;
	time_t start = time(NULL), end = start + seconds, check = end;
	for (;;) {
		for (size_t i = 0; i < len; i += 4096)
			sink = (char)(sink + p[i]);
		time_t now = time(NULL);
		if (now < check)
			continue;
		if (where(p, n, pages, status, on) != 0)
			return 1;
		if (on[0] * 10 >= n * 9 || now - start >= GUARD_S)
			break;
		check = now + 1;
	}
	printf("promote total=%zu node0=%zu node1=%zu seconds=%lld\n", n, on[0], on[1],
	       (long long)(time(NULL) - start));
	fflush(stdout);
	if (hold)
		for (;;)
			pause();
	return 0;
}
