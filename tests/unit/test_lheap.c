/* SPDX-License-Identifier: MIT */
/*
 * The large-object heap (src/alloc/lheap.c): blocks cut from regions of the tier's kind, merged
 * with their free neighbours when freed, placed lowest address first, grown and shrunk in place;
 * freed pages kept dirty and counted exactly, cleared for calloc, given back from the top down.
 * Tier 1 of TIERALLOC_TIERS="0;0", which nothing else in this process allocates from.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "test.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define T   1u

static void fill(char *p, size_t n, char c)
{
	for (size_t o = 0; o < n; o += 4096)
		p[o] = c;
	p[n - 1] = c;
}

/* Every page of [p, p + n) reads as zeros. */
static bool all_zero(const char *p, size_t n)
{
	for (size_t o = 0; o < n; o += 512)
		if (p[o] != 0)
			return false;
	return p[n - 1] == 0;
}

/* Pages of [p, p + n) resident in memory. */
static size_t resident(void *p, size_t n)
{
	size_t pages = n / 4096, count = 0;
	unsigned char *vec = malloc(pages);
	if (vec == NULL || mincore(p, n, vec) != 0)
		test_hard("mincore: %s", strerror(errno));
	for (size_t i = 0; i < pages; i++)
		count += vec[i] & 1;
	free(vec);
	return count * 4096;
}

/* Give everything back, so that a case starts with no dirty page. */
static void clean(void)
{
	ta_lheap_purge(T, 0);
	expect_eq(ta_lheap_dirty(T), 0);
}

static void test_merge(void)
{
	test_context("free neighbours merge and serve a larger block");
	clean();
	char *a = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *b = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *guard = ta_lheap_alloc(T, 1 * MiB, 16, false);
	expect_true(a != NULL && b == a + 1 * MiB && guard == b + 1 * MiB);
	fill(a, 1 * MiB, 1);
	fill(b, 1 * MiB, 2);
	ta_lheap_free(T, b, false);
	ta_lheap_free(T, a, false);
	expect_eq(ta_lheap_dirty(T), 2 * MiB);
	char *ab = ta_lheap_alloc(T, 2 * MiB, 16, false);
	expect_true(ab == a);
	expect_eq(ta_lheap_usable(T, ab), 2 * MiB);
	/* The pages it took were the freed ones: none dirty is left, and they are still there. */
	expect_eq(ta_lheap_dirty(T), 0);
	expect_eq(ab[0], 1);
	expect_eq(ab[1 * MiB], 2);
	ta_lheap_free(T, ab, false);
	ta_lheap_free(T, guard, false);
	clean();
	test_context("%s", "");
}

static void test_lowest_first(void)
{
	test_context("the lowest free extent that fits is taken");
	clean();
	char *p[5];
	for (unsigned i = 0; i < 5; i++)
		p[i] = ta_lheap_alloc(T, 1 * MiB, 16, false);
	ta_lheap_free(T, p[3], false); /* freed first: heads its bin's list */
	ta_lheap_free(T, p[1], false);
	char *q = ta_lheap_alloc(T, 1 * MiB, 16, false);
	expect_true(q == p[1]);
	char *r = ta_lheap_alloc(T, 1 * MiB, 16, false);
	expect_true(r == p[3]);
	ta_lheap_free(T, q, false);
	ta_lheap_free(T, r, false);
	for (unsigned i = 0; i < 5; i++)
		if (i != 1 && i != 3)
			ta_lheap_free(T, p[i], false);
	clean();
	test_context("%s", "");
}

static void test_zero(void)
{
	/* Under 2 MiB dirty pages are cleared with memset, from 2 MiB by dropping them. */
	const size_t sizes[] = { 96 * KiB, 1 * MiB, 4 * MiB };
	for (unsigned i = 0; i < 3; i++) {
		test_context("a zeroed block over dirty pages, %zu KiB", sizes[i] / KiB);
		clean();
		char *a = ta_lheap_alloc(T, sizes[i], 16, false);
		char *guard = ta_lheap_alloc(T, 64 * KiB, 16, false);
		memset(a, 0x5a, sizes[i]);
		ta_lheap_free(T, a, false);
		char *z = ta_lheap_alloc(T, sizes[i], 16, true);
		expect_true(z == a);
		expect_true(all_zero(z, sizes[i]));
		ta_lheap_free(T, z, false);
		ta_lheap_free(T, guard, false);
	}
	clean();
	test_context("%s", "");
}

static void test_align(void)
{
	const size_t aligns[] = { 64 * KiB, 2 * MiB, 16 * MiB };
	for (unsigned i = 0; i < 3; i++) {
		test_context("aligned to %zu KiB", aligns[i] / KiB);
		char *pad = ta_lheap_alloc(T, 4 * KiB, 16, false);
		char *p = ta_lheap_alloc(T, 100 * KiB, aligns[i], false);
		expect_true(p != NULL && ((uintptr_t)p & (aligns[i] - 1)) == 0);
		expect_eq(ta_lheap_usable(T, p), 100 * KiB);
		fill(p, 100 * KiB, 3);
		ta_lheap_free(T, p, false);
		ta_lheap_free(T, pad, false);
	}
	clean();
	test_context("%s", "");
}

static void test_resize(void)
{
	test_context("resize in place");
	clean();
	char *p = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *q = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *guard = ta_lheap_alloc(T, 64 * KiB, 16, false);
	expect_true(q == p + 1 * MiB);
	fill(p, 1 * MiB, 7);
	/* Its neighbour is live: it cannot grow, and nothing changed. */
	expect_true(!ta_lheap_resize(T, p, 2 * MiB));
	expect_eq(ta_lheap_usable(T, p), 1 * MiB);
	fill(q, 1 * MiB, 8);
	ta_lheap_free(T, q, false);
	expect_eq(ta_lheap_dirty(T), 1 * MiB);
	/* Now it can, into the freed pages (no longer dirty: they are the block's). */
	expect_true(ta_lheap_resize(T, p, 2 * MiB));
	expect_eq(ta_lheap_usable(T, p), 2 * MiB);
	expect_eq(ta_lheap_dirty(T), 0);
	expect_eq(p[0], 7);
	/* Shrunk, its tail is free and dirty; a block of that size takes it. */
	expect_true(ta_lheap_resize(T, p, 1 * MiB + 1));
	expect_eq(ta_lheap_usable(T, p), 1 * MiB + 4 * KiB);
	expect_eq(ta_lheap_dirty(T), 1 * MiB - 4 * KiB);
	char *tail = ta_lheap_alloc(T, 1 * MiB - 4 * KiB, 16, false);
	expect_true(tail == p + 1 * MiB + 4 * KiB);
	/* Too large to ever fit in 32 bits of pages: refused. */
	expect_true(!ta_lheap_resize(T, p, (size_t)1 << 46));
	expect_eq(ta_lheap_usable(T, p), 1 * MiB + 4 * KiB);
	ta_lheap_free(T, tail, false);
	ta_lheap_free(T, p, false);
	ta_lheap_free(T, guard, false);
	clean();
	test_context("%s", "");
}

static void test_purge_from_top(void)
{
	test_context("the purge gives back the highest free pages first");
	clean();
	char *low = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *mid = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *high = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *guard = ta_lheap_alloc(T, 64 * KiB, 16, false);
	fill(low, 1 * MiB, 1);
	fill(mid, 1 * MiB, 2);
	fill(high, 1 * MiB, 3);
	fill(guard, 64 * KiB, 4);
	ta_lheap_free(T, low, false);
	ta_lheap_free(T, high, false);
	expect_eq(ta_lheap_dirty(T), 2 * MiB);
	expect_eq(ta_lheap_purge(T, 1 * MiB + 512 * KiB), 512 * KiB);
	expect_eq(ta_lheap_dirty(T), 1 * MiB + 512 * KiB);
	/* high lost its top half; low and the rest of high are still there. */
	expect_eq(resident(high + 512 * KiB, 512 * KiB), 0);
	expect_eq(resident(high, 512 * KiB), 512 * KiB);
	expect_eq(resident(low, 1 * MiB), 1 * MiB);
	expect_eq(ta_lheap_purge(T, 0), 1 * MiB + 512 * KiB);
	expect_eq(resident(low, 1 * MiB), 0);
	expect_eq(resident(mid, 1 * MiB), 1 * MiB); /* live: never purged */
	expect_eq(mid[0], 2);
	ta_lheap_free(T, mid, false);
	ta_lheap_free(T, guard, false);
	clean();
	test_context("%s", "");
}

static void test_dropped(void)
{
	test_context("a dropped block is not kept");
	clean();
	char *a = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char *guard = ta_lheap_alloc(T, 64 * KiB, 16, false);
	fill(a, 1 * MiB, 9);
	ta_lheap_free(T, a, true);
	expect_eq(ta_lheap_dirty(T), 0);
	expect_eq(resident(a, 1 * MiB), 0);
	char *b = ta_lheap_alloc(T, 1 * MiB, 16, true);
	expect_true(b == a && all_zero(b, 1 * MiB));
	ta_lheap_free(T, b, false);
	ta_lheap_free(T, guard, false);
	clean();
	test_context("%s", "");
}

static void test_foreign(void)
{
	test_context("pointers that do not start a live block are refused");
	char *a = ta_lheap_alloc(T, 1 * MiB, 16, false);
	char local;
	expect_eq(ta_lheap_usable(T, &local), 0);
	expect_eq(ta_lheap_usable(T, a + 4096), 0);
	expect_true(!ta_lheap_resize(T, a + 4096, 2 * MiB));
	struct test_capture cap;
	char err[512];
	capture_begin(&cap);
	ta_lheap_free(T, a + 4096, false);
	ta_lheap_free(T, &local, false);
	capture_end(&cap, err, sizeof(err));
	expect_eq(count_lines(err, "tieralloc: error: large heap:"), 2);
	expect_eq(ta_lheap_usable(T, a), 1 * MiB);
	ta_lheap_free(T, a, false);
	/* A second free of the same block is refused too. */
	capture_begin(&cap);
	ta_lheap_free(T, a, false);
	capture_end(&cap, err, sizeof(err));
	expect_eq(count_lines(err, "tieralloc: error: large heap:"), 1);
	clean();
	test_context("%s", "");
}

static void test_oversize_region(void)
{
	test_context("a block larger than a region gets its own, given back when freed");
	uint64_t mapped = ta_lheap_mapped(T);
	size_t big = ((size_t)1 << 30) + 4 * MiB;
	char *p = ta_lheap_alloc(T, big, 16, false);
	expect_true(p != NULL);
	expect_ge(ta_lheap_mapped(T), mapped + big);
	fill(p, 8 * MiB, 1);
	ta_lheap_free(T, p, false);
	expect_eq(ta_lheap_mapped(T), mapped);
	expect_eq(ta_lheap_dirty(T), 0);
	test_context("%s", "");
}

/* The kind cannot give a whole region (an address-space limit): a smaller one serves. */
static void test_region_fallback(void)
{
	if (TEST_ASAN) {
		printf(
		    "region fallback: not checked under AddressSanitizer (it needs RLIMIT_AS)\n");
		return;
	}
	test_context("a smaller region when the address space is short");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* Room for 512 MiB more address space: not for a whole region. */
		uint64_t mapped = ta_lheap_mapped(T);
		FILE *f = fopen("/proc/self/statm", "r");
		unsigned long vm_pages = 0;
		if (f == NULL || fscanf(f, "%lu", &vm_pages) != 1)
			_exit(3);
		fclose(f);
		struct rlimit lim = { .rlim_cur = vm_pages * 4096 + 512 * MiB,
				      .rlim_max = RLIM_INFINITY };
		if (setrlimit(RLIMIT_AS, &lim) != 0)
			_exit(4);
		/* Fill the current regions (address space only): then a block needs a new one. */
		for (unsigned i = 0; i < 256 && ta_lheap_mapped(T) == mapped; i++)
			if (ta_lheap_alloc(T, 16 * MiB, 16, false) == NULL)
				_exit(5);
		_exit(ta_lheap_mapped(T) - mapped == 64 * MiB ? 0 : 6);
	}
	int status = 0;
	expect_true(pid > 0 && waitpid(pid, &status, 0) == pid);
	expect_true(WIFEXITED(status));
	expect_eq(WEXITSTATUS(status), 0);
	test_context("%s", "");
}

/* Huge pages only inside live blocks: a region open to them faulted the free pages around a
 * block with it, resident and counted nowhere (lheap.c). */
static void test_thp(void)
{
	test_context("a live block's whole 2 MiB units open to huge pages, nothing else");
	clean();
	ta_lheap_set_thp(1); /* as under THP "always", whatever this host's mode */
	char *pad = ta_lheap_alloc(T, 4096, 16, false); /* a starts off a 2 MiB boundary */
	size_t size = 10 * MiB + 4096;
	char *a = ta_lheap_alloc(T, size, 16, false);
	if (pad == NULL || a == NULL)
		test_hard("allocation failed");
	uintptr_t lo = ((uintptr_t)a + 2 * MiB - 1) & ~(2 * MiB - 1);
	uintptr_t hi = ((uintptr_t)a + size) & ~(2 * MiB - 1);
	expect_true(hi - lo >= 8 * MiB);
	expect_eq(test_thp_advice((void *)lo), 'h');
	expect_eq(test_thp_advice((void *)(hi - 1)), 'h');
	if ((uintptr_t)a < lo)
		expect_eq(test_thp_advice(a), 'n');    /* its first unit is shared with pad */
	expect_eq(test_thp_advice((void *)hi), 'n');   /* its last, with free pages */
	expect_eq(test_thp_advice(a + 64 * MiB), 'n'); /* free */
	fill(a, size, 5);

	test_context("a block shrunk and grown in place: its new whole units, and only those");
	expect_true(ta_lheap_resize(T, a, 4 * MiB + 4096));
	uintptr_t hi2 = ((uintptr_t)a + 4 * MiB + 4096) & ~(2 * MiB - 1);
	expect_eq(test_thp_advice((void *)(hi2 - 1)), 'h');
	expect_eq(test_thp_advice((void *)hi2), 'n');
	expect_eq(test_thp_advice((void *)(hi - 1)), 'n');
	expect_true(ta_lheap_resize(T, a, size));
	expect_eq(test_thp_advice((void *)(hi - 1)), 'h');

	test_context("freed, its units closed again");
	ta_lheap_free(T, a, false);
	expect_eq(test_thp_advice((void *)lo), 'n');
	expect_eq(test_thp_advice((void *)(hi - 1)), 'n');

	test_context("no huge pages when the mode says never");
	ta_lheap_set_thp(0);
	a = ta_lheap_alloc(T, size, 16, false);
	if (a == NULL)
		test_hard("allocation failed");
	lo = ((uintptr_t)a + 2 * MiB - 1) & ~(2 * MiB - 1);
	expect_eq(test_thp_advice((void *)lo), 'n');
	ta_lheap_free(T, a, false);
	ta_lheap_free(T, pad, false);
	ta_lheap_set_thp(-1);
	clean();
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	test_merge();
	test_lowest_first();
	test_zero();
	test_align();
	test_resize();
	test_purge_from_top();
	test_dropped();
	test_foreign();
	test_thp();
	/* Before a region was given back: the kind keeps its address space for reuse. */
	test_region_fallback();
	test_oversize_region();
	return test_done();
}
