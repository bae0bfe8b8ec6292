/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap allocator (src/alloc/boot.c) that serves calls made before and during
 * initialisation: alignment, zeroed memory (calloc before init relies on it), ownership by address,
 * growth past the static 1 MiB region into mmap'd extensions, concurrent bumping, and how the rest
 * of the malloc family treats its pointers (free ignores them, realloc moves them out).
 */
#include <pthread.h>

#include "internal.h"
#include "test.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static int a_global;

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void test_alignment(void)
{
	static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4095, 4096, 70000 };
	for (size_t align = 0; align <= 4096; align = align ? align * 2 : 1) {
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			test_context("size %zu align %zu", n, align);
			unsigned char *p = ta_boot_alloc(n, align);
			expect_true(p != NULL);
			if (p == NULL)
				continue;
			expect_eq((uintptr_t)p % (align > 16 ? align : 16), 0);
			expect_true(ta_boot_owns(p));
			expect_true(ta_boot_owns(p + (n ? n - 1 : 0)));
			expect_ge(ta_boot_usable(p), n);
			expect_eq(ta_boot_usable(p), (n + 15) & ~(size_t)15);
			expect_true(all_zero(p, n));
			memset(p, 0xa5, n);
		}
	}
	test_context("boot limits");
	errno = 0;
	expect_true(ta_boot_alloc(16, 8192) == NULL);
	expect_eq(errno, ENOMEM);
	errno = 0;
	expect_true(ta_boot_alloc(SIZE_MAX, 16) == NULL);
	expect_eq(errno, ENOMEM);
	errno = 0;
	expect_true(ta_boot_alloc(SIZE_MAX / 2, 16) == NULL);
	expect_eq(errno, ENOMEM);
	test_context("%s", "");
}

static void test_ownership(void)
{
	int on_stack = 0;
	void *from_libc = malloc(64);
	void *ours = tieralloc_malloc(64);
	test_context("ownership");
	expect_true(!ta_boot_owns(NULL));
	expect_true(!ta_boot_owns(&on_stack));
	expect_true(!ta_boot_owns(&a_global));
	expect_true(!ta_boot_owns(from_libc));
	expect_true(ours != NULL);
	expect_true(!ta_boot_owns(ours));
	free(from_libc);
	tieralloc_free(ours);
	test_context("%s", "");
}

/* Blocks are disjoint: fill each with its own byte, then check them all. */
static void test_growth(void)
{
	enum { NBLOCKS = 48 };
	unsigned char *blocks[NBLOCKS];
	const size_t size = 64 * KiB; /* 3 MiB in all: past the static 1 MiB region */
	test_context("growth");
	for (unsigned i = 0; i < NBLOCKS; i++) {
		blocks[i] = ta_boot_alloc(size, 64);
		expect_true(blocks[i] != NULL);
		if (blocks[i] == NULL)
			test_hard("boot allocation %u failed", i);
		expect_true(ta_boot_owns(blocks[i]));
		expect_true(ta_boot_owns(blocks[i] + size - 1));
		expect_true(all_zero(blocks[i], size));
		memset(blocks[i], i + 1, size);
	}
	for (unsigned i = 0; i < NBLOCKS; i++) {
		test_context("growth, block %u", i);
		expect_eq(blocks[i][0], i + 1);
		expect_eq(blocks[i][size - 1], i + 1);
		expect_eq(blocks[i][size / 2], i + 1);
	}

	/* Bigger than an extension region (8 MiB): a region of its own. */
	test_context("growth, 20 MiB");
	size_t big = 20 * MiB;
	unsigned char *p = ta_boot_alloc(big, 4096);
	expect_true(p != NULL);
	if (p != NULL) {
		expect_eq((uintptr_t)p % 4096, 0);
		expect_true(ta_boot_owns(p));
		expect_true(ta_boot_owns(p + big - 1));
		expect_eq(ta_boot_usable(p), big);
		expect_true(all_zero(p, big));
		p[0] = 1;
		p[big - 1] = 2;
	}
	/* Small allocations keep working after it. */
	void *q = ta_boot_alloc(100, 16);
	expect_true(q != NULL && ta_boot_owns(q));
	test_context("%s", "");
}

/* Lock-free bumping from several threads: no block handed out twice. */
enum { NTHREADS = 4, PER_THREAD = 256 };
static unsigned char *thread_blocks[NTHREADS][PER_THREAD];

static void *bump_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	for (unsigned i = 0; i < PER_THREAD; i++) {
		/* Mixed sizes so that some calls have to open a new region. */
		size_t n = (i % 16 == 0) ? 256 * KiB : 1000;
		unsigned char *p = ta_boot_alloc(n, 32);
		thread_blocks[id][i] = p;
		if (p != NULL)
			memset(p, (int)(id * PER_THREAD + i) & 0xff, 16);
	}
	return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
	return x < y ? -1 : x > y;
}

static void test_threads(void)
{
	pthread_t th[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, bump_thread, (void *)(uintptr_t)i) != 0)
			test_hard("pthread_create");
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	test_context("threads");
	static unsigned char *all[NTHREADS * PER_THREAD];
	unsigned n = 0;
	for (unsigned t = 0; t < NTHREADS; t++) {
		for (unsigned i = 0; i < PER_THREAD; i++) {
			unsigned char *p = thread_blocks[t][i];
			expect_true(p != NULL);
			if (p == NULL)
				continue;
			expect_eq((uintptr_t)p % 32, 0);
			expect_true(ta_boot_owns(p));
			expect_eq(p[0], (t * PER_THREAD + i) & 0xff);
			all[n++] = p;
		}
	}
	/* Sorted by address, each block ends before the next begins. */
	qsort(all, n, sizeof(all[0]), cmp_ptr);
	unsigned overlaps = 0;
	for (unsigned i = 0; i + 1 < n; i++)
		overlaps += all[i] + ta_boot_usable(all[i]) > all[i + 1];
	expect_eq(overlaps, 0);
	test_context("%s", "");
}

/* Boot pointers handed to the malloc family (memory from before init meets the allocator). */
static void test_family(void)
{
	test_context("boot pointer in the malloc family");
	unsigned char *p = ta_boot_alloc(100, 16);
	if (p == NULL)
		test_hard("boot allocation failed");
	for (unsigned i = 0; i < 100; i++)
		p[i] = (unsigned char)i;
	expect_eq(tieralloc_malloc_usable_size(p), 112);
	expect_eq(tieralloc_tier_of(p), -EINVAL);
	tieralloc_free(p); /* ignored: never reused */
	expect_true(ta_boot_owns(p));
	expect_eq(p[99], 99);

	unsigned char *q = tieralloc_realloc(p, 5000);
	expect_true(q != NULL);
	if (q != NULL) {
		expect_true(!ta_boot_owns(q));
		expect_eq(tieralloc_tier_of(q), 0);
		unsigned bad = 0;
		for (unsigned i = 0; i < 100; i++)
			bad += q[i] != (unsigned char)i;
		expect_eq(bad, 0);
		tieralloc_free(q);
	}
	/* Shrinking a boot block moves it too (it cannot be reused in place either way). */
	p = ta_boot_alloc(4096, 16);
	if (p == NULL)
		test_hard("boot allocation failed");
	memset(p, 7, 4096);
	q = tieralloc_realloc(p, 10);
	expect_true(q != NULL);
	if (q != NULL) {
		expect_eq(q[0], 7);
		expect_eq(q[9], 7);
		tieralloc_free(q);
	}
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	test_reexec_with_env(argv, NULL);
	test_alignment();
	test_ownership();
	test_growth();
	test_threads();
	test_family();
	return test_done();
}
