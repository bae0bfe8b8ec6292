/* SPDX-License-Identifier: MIT */
/*
 * Guest test: is memory where tieralloc says it is? Run inside the two-node guest (node 0 with the
 * CPUs, node 1 CPU-less). Every page of every object is asked of the kernel with move_pages(2)
 * (status only, nothing moves) and must be on a node of the tier the object was placed in.
 * Prints one "PASS name" or "FAIL name: why" line per check; exit status 1 if any failed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tieralloc.h"

static int failures;
static long page_size;

static void report(int ok, const char *name, const char *detail)
{
	if (ok)
		printf("PASS %s\n", name);
	else
		printf("FAIL %s: %s\n", name, detail);
	failures += !ok;
	fflush(stdout);
}

/* "0-1,3" -> bit mask. */
static uint64_t parse_nodes(const char *s)
{
	uint64_t m = 0;
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long n = a; n <= b && n < 64; n++)
			m |= 1ull << n;
		s = *end == ',' ? end + 1 : end;
	}
	return m;
}

static uint64_t tier_nodes(int tier)
{
	struct tieralloc_tier_info info = { .size = sizeof(info) };
	if (tieralloc_tier_info(tier, &info) != 0)
		return 0;
	return parse_nodes(info.nodes);
}

/* Touch every page of [p, p+n) and check each is resident on a node in mask. Returns the number
 * of pages elsewhere; *first_bad gets the node of the first such page. */
static long pages_off_tier(char *p, size_t n, uint64_t mask, int *first_bad)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page_size - 1);
	uintptr_t end = (uintptr_t)p + n;
	long bad = 0;
	memset(p, 0xa5, n);
	for (uintptr_t a = start; a < end; a += (uintptr_t)page_size) {
		void *page = (void *)a;
		int status = -1;
		if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0 || status < 0 ||
		    status >= 64 || !(mask & (1ull << status))) {
			if (bad++ == 0)
				*first_bad = status;
		}
	}
	return bad;
}

static void check_discovery(void)
{
	char detail[256];
	int n = tieralloc_tier_count();
	snprintf(detail, sizeof(detail), "%d tiers, expected 2", n);
	report(n == 2, "discovery.two_tiers", detail);
	if (n != 2)
		return;
	for (int t = 0; t < 2; t++) {
		struct tieralloc_tier_info info = { .size = sizeof(info) };
		tieralloc_tier_info(t, &info);
		char path[128], text[4096], name[64];
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", t);
		FILE *f = fopen(path, "r");
		size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
		if (f)
			fclose(f);
		text[got] = '\0';
		const char *mt = strstr(text, "MemTotal:");
		unsigned long long kb = mt ? strtoull(mt + 9, NULL, 10) : 0;
		snprintf(name, sizeof(name), "discovery.tier%d_is_node%d", t, t);
		snprintf(detail, sizeof(detail), "tier %d nodes=\"%s\"", t, info.nodes);
		report(parse_nodes(info.nodes) == (1ull << t), name, detail);
		snprintf(name, sizeof(name), "discovery.tier%d_capacity", t);
		snprintf(detail, sizeof(detail), "capacity %llu, node MemTotal %llu",
			 (unsigned long long)info.capacity, kb * 1024);
		report(kb != 0 && info.capacity == kb * 1024, name, detail);
		snprintf(name, sizeof(name), "discovery.tier%d_bound", t);
		snprintf(detail, sizeof(detail), "kind %s bound=%u", info.kind, info.bound);
		report(info.bound == 1, name, detail);
	}
}

static const size_t sizes[] = { 24, 200, 4096, 40000, 65536, 1 << 20, 6 << 20 };

static void check_explicit(int tier, int reuse)
{
	uint64_t mask = tier_nodes(tier);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		/* Enough objects to span several pages and chunks for the small sizes. */
		unsigned count = n < 4096 ? 20000 : n < 1048576 ? 64 : 4;
		char **objs = calloc(count, sizeof(char *));
		long bad = 0;
		int bad_node = -1, wrong_tier = 0;
		for (unsigned k = 0; k < count; k++) {
			objs[k] = tieralloc_malloc_tier(tier, n);
			if (objs[k] == NULL || tieralloc_tier_of(objs[k]) != tier)
				wrong_tier++;
			else
				bad += pages_off_tier(objs[k], n, mask, &bad_node);
		}
		char name[96], detail[160];
		snprintf(name, sizeof(name), "placement.tier%d.%zu_bytes%s", tier, n,
			 reuse ? ".reused" : "");
		snprintf(detail, sizeof(detail),
			 "%ld pages off the tier's nodes (first on node %d), %d "
			 "objects in the wrong tier",
			 bad, bad_node, wrong_tier);
		report(bad == 0 && wrong_tier == 0, name, detail);
		for (unsigned k = 0; k < count; k++)
			tieralloc_free(objs[k]);
		free(objs);
	}
}

/* With tier 0 limited, steered allocations spill into tier 1, and land on its node. Tier 0 is
 * charged for the memory it holds, free objects included (the runs cut for them): the limit is
 * set 8 MiB above that. Free objects of 64 KiB are handed out again first, whatever the limit,
 * and when a run is refused, the runs check_explicit emptied are given back to make room: tier 0
 * gets at least the 8 MiB and at most its limit. */
static void check_steering(void)
{
	struct tieralloc_tier_stats st = { .size = sizeof(st) };
	tieralloc_tier_stats(0, &st);
	const uint64_t room = 8 << 20, held = st.charged;
	uint64_t limit = held + room;
	int rc = tieralloc_ctl_set("tier.0.limit", &limit, sizeof(limit));
	report(rc == 0, "steering.set_limit", "tieralloc_ctl_set(tier.0.limit) failed");
	enum { N = 1024, SIZE = 65536 };
	static char *objs[N];
	unsigned in_tier[2] = { 0, 0 };
	long bad = 0;
	int bad_node = -1;
	for (unsigned k = 0; k < N; k++) {
		objs[k] = tieralloc_malloc(SIZE);
		int t = objs[k] ? tieralloc_tier_of(objs[k]) : -1;
		if (t < 0 || t > 1) {
			bad++;
			continue;
		}
		in_tier[t]++;
		bad += pages_off_tier(objs[k], SIZE, tier_nodes(t), &bad_node);
	}
	char detail[320];
	/* run: one run of the 64 KiB class, four objects: at most that is refused short of the
	 * room. */
	uint64_t t0 = (uint64_t)in_tier[0] * SIZE, run = 4 * (uint64_t)SIZE;
	uint64_t batch = 256 << 10;
	/* Where the objects are now: the worker may have moved some of tier 0's down meanwhile (a
	 * chunk it found cold while the kernel's count of node 0 was over the limit), which made
	 * room for more, so the limit bounds what tier 0 holds at the end, not what it was
	 * given. */
	uint64_t t0_end = 0, demoted = 0;
	for (unsigned k = 0; k < N; k++)
		if (objs[k] != NULL && tieralloc_tier_of(objs[k]) == 0)
			t0_end += SIZE;
	size_t len = sizeof(demoted);
	tieralloc_ctl_get("tier.0.demoted", &demoted, &len);
	tieralloc_tier_stats(0, &st);
	snprintf(detail, sizeof(detail),
		 "tier0 given %llu bytes, holds %llu (room %llu above the %llu held), charged %llu "
		 "(limit %llu), tier1 %u objects, %llu bytes demoted",
		 (unsigned long long)t0, (unsigned long long)t0_end, (unsigned long long)room,
		 (unsigned long long)held, (unsigned long long)st.charged,
		 (unsigned long long)limit, in_tier[1], (unsigned long long)demoted);
	report(st.charged <= limit && t0 + run >= room && t0_end <= limit && in_tier[1] > 0,
	       "steering.tier0_limit_spills_to_tier1", detail);
	snprintf(detail, sizeof(detail), "%ld pages off their tier's nodes (first on node %d)", bad,
		 bad_node);
	report(bad == 0, "steering.spilled_pages_on_node1", detail);
	/* Explicit requests ignore the limit. */
	char *hot = tieralloc_malloc_tier(0, 1 << 20);
	snprintf(detail, sizeof(detail), "tier_of = %d", hot ? tieralloc_tier_of(hot) : -99);
	report(hot != NULL && tieralloc_tier_of(hot) == 0 &&
		   pages_off_tier(hot, 1 << 20, tier_nodes(0), &bad_node) == 0,
	       "steering.explicit_tier0_over_limit", detail);
	tieralloc_free(hot);
	for (unsigned k = 0; k < N; k++)
		tieralloc_free(objs[k]);
	limit = UINT64_MAX;
	tieralloc_ctl_set("tier.0.limit", &limit, sizeof(limit));
	/* A thread keeps using what it caches of the class in tier 1 (4 objects of 64 KiB) before
	 * it looks at tier 0 again. */
	unsigned n = 0;
	int t = 1;
	while (t != 0 && (uint64_t)n * SIZE <= 2 * batch + SIZE) {
		objs[n] = tieralloc_malloc(SIZE);
		t = objs[n] ? tieralloc_tier_of(objs[n]) : -99;
		n++;
	}
	snprintf(detail, sizeof(detail), "still tier %d after %u allocations of %d bytes", t, n,
		 SIZE);
	report(t == 0, "steering.back_to_tier0_within_batch", detail);
	while (n > 0)
		tieralloc_free(objs[--n]);
}

int main(void)
{
	page_size = sysconf(_SC_PAGESIZE);
	check_discovery();
	if (tieralloc_tier_count() == 2) {
		for (int reuse = 0; reuse < 2; reuse++) {
			check_explicit(0, reuse);
			check_explicit(1, reuse);
		}
		check_steering();
	}
	return failures ? 1 : 0;
}
