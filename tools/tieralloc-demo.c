/* SPDX-License-Identifier: MIT */
/*
 * The built-in workload of tieralloc-run: allocates small, medium and large objects through plain
 * malloc (so it runs under the preload like any program), touches them, and asks the kernel where
 * each one's first page really is (move_pages(2) without moving) next to the tier tieralloc says
 * it placed it in. It prints one table; placement is what the demo is about, not speed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_TIERS 3
#define MAX_NODES 64

struct band {
	const char *name;
	size_t min, max;
	unsigned count;
};

static const struct band bands[] = {
	{ "small 16-512 B", 16, 512, 50000 },
	{ "medium 1-64 KiB", 1024, 65536, 500 },
	{ "large 1 MiB", 1 << 20, 1 << 20, 16 },
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int node_of(void *p)
{
	void *page = (void *)((uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1));
	int status = -1;
	if (syscall(SYS_move_pages, 0, 1UL, &page, NULL, &status, 0) != 0)
		return -1;
	return status;
}

int main(void)
{
	int (*tier_of)(const void *) =
	    (int (*)(const void *))dlsym(RTLD_DEFAULT, "tieralloc_tier_of");
	if (tier_of == NULL)
		printf("tieralloc is not loaded: every object is shown as tier -\n");
	printf("%-17s %5s %12s %10s  %s\n", "band", "tier", "objects", "bytes",
	       "resident on (first page)");
	for (size_t b = 0; b < sizeof(bands) / sizeof(bands[0]); b++) {
		const struct band *band = &bands[b];
		void **objs = calloc(band->count, sizeof(void *));
		size_t *sizes = calloc(band->count, sizeof(size_t));
		if (objs == NULL || sizes == NULL)
			return 1;
		uint64_t bytes[MAX_TIERS + 1] = { 0 }, count[MAX_TIERS + 1] = { 0 };
		uint64_t on_node[MAX_TIERS + 1][MAX_NODES + 1];
		memset(on_node, 0, sizeof(on_node));
		for (unsigned i = 0; i < band->count; i++) {
			size_t n = band->min + (size_t)(rng() % (band->max - band->min + 1));
			objs[i] = malloc(n);
			if (objs[i] == NULL)
				return 1;
			memset(objs[i], (int)i, n);
			sizes[i] = n;
		}
		for (unsigned i = 0; i < band->count; i++) {
			int t = tier_of ? tier_of(objs[i]) : -1;
			unsigned slot = t >= 0 && t < MAX_TIERS ? (unsigned)t : MAX_TIERS;
			int node = node_of(objs[i]);
			bytes[slot] += sizes[i];
			count[slot]++;
			on_node[slot][node >= 0 && node < MAX_NODES ? node : MAX_NODES]++;
		}
		for (unsigned t = 0; t <= MAX_TIERS; t++) {
			if (count[t] == 0)
				continue;
			char where[256] = "";
			size_t pos = 0;
			for (unsigned n = 0; n <= MAX_NODES && pos < sizeof(where) - 32; n++) {
				if (on_node[t][n] == 0)
					continue;
				if (n == MAX_NODES)
					pos += (size_t)snprintf(where + pos, sizeof(where) - pos,
								"%sunknown %llu", pos ? ", " : "",
								(unsigned long long)on_node[t][n]);
				else
					pos += (size_t)snprintf(
					    where + pos, sizeof(where) - pos, "%snode %u: %llu",
					    pos ? ", " : "", n, (unsigned long long)on_node[t][n]);
			}
			char tier[8];
			snprintf(tier, sizeof(tier), t < MAX_TIERS ? "%u" : "-", t);
			printf("%-17s %5s %12llu %10.1fM  %s\n", band->name, tier,
			       (unsigned long long)count[t], bytes[t] / 1048576.0, where);
		}
		for (unsigned i = 0; i < band->count; i += 2)
			free(objs[i]);
		/* The odd half stays live: it shows up as live bytes in the summary. */
		free(sizes);
	}
	return 0;
}
