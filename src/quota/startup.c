/* SPDX-License-Identifier: MIT */
/*
 * The memory a process holds when tieralloc starts, charged to the tier it sits on.
 *
 * Every process of a container carries a fixed part that no allocation charges: memkind's
 * jemalloc starting (its arenas' structures, about 0.2 MiB), tieralloc's own tables, and the
 * relocated data of the libraries the process loaded. Without a charge it is `untracked`: on
 * cgroup v2 steering still sees it through memory.numa_stat, 200 ms late; on v1 and without a
 * cgroup nothing sees it, so 16 processes of a container held 5-8 MiB more than their charges said
 * (issue 11, item 3). So at the end of initialisation the process's anonymous resident memory
 * (/proc/self/statm: resident - shared) is charged, forced (it is already held), to the tier of
 * the node its pages were placed on (the node of a page of our own data, written during
 * initialisation, under the process's own policy). Measured once: what grows later grows with
 * the heap (chunk headers, jemalloc's extent records) and is small beside it. A forked child
 * shares the parent's pages copy-on-write, so the charge stays the parent's (charge.c, inherited);
 * an exec starts again.
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "quota/charge.h"
#include "quota/quota.h"

#ifndef MPOL_F_NODE
#define MPOL_F_NODE (1 << 0)
#endif
#ifndef MPOL_F_ADDR
#define MPOL_F_ADDR (1 << 1)
#endif

static _Atomic uint64_t startup_bytes[TA_MAX_TIERS];

uint64_t ta_statm_anon(const char *statm, uint64_t page_size)
{
	const char *s = statm;
	unsigned long long field[3];
	for (unsigned i = 0; i < 3; i++) {
		char *end;
		while (*s == ' ')
			s++;
		if (*s < '0' || *s > '9')
			return 0;
		field[i] = strtoull(s, &end, 10);
		s = end;
	}
	if (field[2] >= field[1] || field[1] - field[2] > UINT64_MAX / page_size)
		return 0;
	return (uint64_t)(field[1] - field[2]) * page_size;
}

/* The process's anonymous resident bytes now; 0 when /proc does not say. */
static uint64_t anon_resident(void)
{
	char buf[256];
	ssize_t n = ta_read_file("/proc/self/statm", buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return ta_statm_anon(buf, (uint64_t)sysconf(_SC_PAGESIZE));
}

/* The tier whose nodes hold the page at addr; tier 0 when the kernel does not say. */
static unsigned tier_of_page(const void *addr)
{
	int node = -1;
	if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0 ||
	    node < 0 || node >= 64)
		return 0;
	for (unsigned t = 0; t < ta_ntiers; t++)
		if (ta_topo.tier[t].nodes & (1ull << node))
			return t;
	return 0;
}

uint64_t ta_startup_charge(void)
{
	int saved = errno;
	uint64_t bytes = anon_resident();
	errno = saved;
	if (bytes == 0)
		return 0;
	unsigned t = tier_of_page(&ta_topo);
	ta_charge(t, bytes, TA_LIMIT_MAX, true);
	atomic_store(&startup_bytes[t], bytes);
	return bytes;
}

/* memkind starts late (alloc/backend.c), when the process needs it: what its start faults in
 * (its jemalloc's metadata, about 0.3 MiB) joins the start-up charge. Other threads may touch
 * memory meanwhile, so no more than LATE_MAX is taken as memkind's. Not forced past the tier's
 * max, unlike the charge at start: by now the tier may be full, and a charge over its max would
 * turn away memory it has room for in fact; what does not fit stays for the kernel's count to
 * show (untracked). */
#define LATE_MAX   ((uint64_t)2 << 20)
#define LATE_GRAIN ((uint64_t)16 << 10)
static uint64_t late_before;

void ta_startup_late_begin(void)
{
	int saved = errno;
	late_before = anon_resident();
	errno = saved;
}

uint64_t ta_startup_late_end(void)
{
	int saved = errno;
	uint64_t now = anon_resident();
	errno = saved;
	if (late_before == 0 || now <= late_before)
		return 0;
	uint64_t bytes = now - late_before < LATE_MAX ? now - late_before : LATE_MAX;
	unsigned t = tier_of_page(&ta_topo);
	/* As much as fits, halving. */
	while (bytes >= LATE_GRAIN && !ta_charge(t, bytes, TA_LIMIT_MAX, false))
		bytes /= 2;
	if (bytes < LATE_GRAIN)
		return 0;
	atomic_fetch_add(&startup_bytes[t], bytes);
	return bytes;
}

uint64_t ta_startup_bytes(unsigned tier)
{
	return tier < TA_MAX_TIERS ? atomic_load(&startup_bytes[tier]) : 0;
}
