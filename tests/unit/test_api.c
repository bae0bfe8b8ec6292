/* SPDX-License-Identifier: MIT */
/*
 * The public API's contracts (include/tieralloc.h), through the tieralloc_* functions: the malloc
 * family as the C library defines it (alignment, zero sizes, overflow, errno), usable sizes,
 * zeroing on reuse, realloc keeping contents, and the tier functions: tier_of, tier_count,
 * tier_info/tier_stats with their size/version handling, ctl error codes, explicit placement.
 * The core initialises itself from its constructor, before main, with a clean environment (the
 * test re-executes itself without the caller's TIERALLOC_* variables).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "internal.h"
#include "test.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static char a_global[256] __attribute__((aligned(64)));

static bool filled(const unsigned char *p, size_t n, unsigned char c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return false;
	return true;
}

/* The byte i of a pattern that differs between neighbouring positions. */
static unsigned char pat(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 8) + 7);
}

static void fill_pattern(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(i);
}

static bool has_pattern(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(i))
			return false;
	return true;
}

static struct tieralloc_tier_stats stats(int tier)
{
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	if (tieralloc_tier_stats(tier, &s) != 0)
		test_hard("tieralloc_tier_stats(%d)", tier);
	return s;
}

static void test_version(void)
{
	test_context("version");
	char want[32];
	snprintf(want, sizeof(want), "%d.%d.%d", TIERALLOC_VERSION_MAJOR, TIERALLOC_VERSION_MINOR,
		 TIERALLOC_VERSION_PATCH);
	expect_str_eq(tieralloc_version(), want);
	uint32_t passthrough = 1;
	size_t len = sizeof(passthrough);
	expect_eq(tieralloc_ctl_get("passthrough", &passthrough, &len), 0);
	expect_eq(passthrough, 0);
}

/* Every aligned entry point, alignments 16 B .. 2 MiB, sizes around the alignment. */
static void test_alignment(void)
{
	for (size_t align = 16; align <= 2 * MiB; align *= 2) {
		const size_t sizes[] = { 1, align - 1, align, align + 1, 3 * align + 5, 100000 };
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			void *p[3] = { NULL, NULL, NULL };
			test_context("align %zu size %zu", align, n);
			expect_eq(tieralloc_posix_memalign(&p[0], align, n), 0);
			p[1] = tieralloc_aligned_alloc(align, n);
			p[2] = tieralloc_memalign(align, n);
			for (unsigned k = 0; k < 3; k++) {
				test_context("align %zu size %zu via %s", align, n,
					     k == 0   ? "posix_memalign"
					     : k == 1 ? "aligned_alloc"
						      : "memalign");
				expect_true(p[k] != NULL);
				if (p[k] == NULL)
					continue;
				expect_eq((uintptr_t)p[k] % align, 0);
				expect_ge(tieralloc_malloc_usable_size(p[k]), n);
				expect_eq(tieralloc_tier_of(p[k]), 0);
				memset(p[k], 0x5a, n); /* all of it is ours to write */
			}
			for (unsigned k = 0; k < 3; k++)
				tieralloc_free(p[k]);
		}
	}
	/* posix_memalign accepts any power-of-two multiple of sizeof(void *), 8 included. */
	void *p = NULL;
	test_context("posix_memalign 8");
	expect_eq(tieralloc_posix_memalign(&p, sizeof(void *), 24), 0);
	expect_true(p != NULL && (uintptr_t)p % 16 == 0); /* malloc's own alignment anyway */
	tieralloc_free(p);

	/* Page-aligned allocators. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t vsizes[] = { 0, 1, page - 1, page, page + 1, 100000, 3 * MiB };
	for (unsigned i = 0; i < sizeof(vsizes) / sizeof(vsizes[0]); i++) {
		size_t n = vsizes[i];
		test_context("valloc/pvalloc size %zu", n);
		void *v = tieralloc_valloc(n);
		void *pv = tieralloc_pvalloc(n);
		expect_true(v != NULL && pv != NULL);
		expect_eq((uintptr_t)v % page, 0);
		expect_eq((uintptr_t)pv % page, 0);
		expect_ge(tieralloc_malloc_usable_size(v), n);
		/* pvalloc rounds the size up to whole pages, at least one. */
		size_t rounded = n == 0 ? page : (n + page - 1) / page * page;
		expect_ge(tieralloc_malloc_usable_size(pv), rounded);
		if (pv != NULL)
			memset(pv, 1, rounded);
		tieralloc_free(v);
		tieralloc_free(pv);
	}
	test_context("%s", "");
}

static void test_alignment_errors(void)
{
	static const size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 96, 4097, SIZE_MAX };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		void *p = (void *)&a_global;
		test_context("posix_memalign align %zu", bad[i]);
		errno = 0;
		expect_eq(tieralloc_posix_memalign(&p, bad[i], 64), EINVAL);
		expect_true(p == (void *)&a_global); /* *memptr untouched */
		expect_eq(errno, 0);		     /* the error is the return value */
	}
	/* aligned_alloc and memalign round an alignment that is not a power of two up to one, as
	 * glibc 2.36 does (programs under the preload rely on it); only posix_memalign refuses. */
	static const size_t not_pow2[] = { 0, 3, 24, 48, 4097 };
	for (unsigned i = 0; i < sizeof(not_pow2) / sizeof(not_pow2[0]); i++) {
		size_t want = 1;
		while (want < not_pow2[i])
			want <<= 1;
		test_context("aligned_alloc/memalign align %zu", not_pow2[i]);
		void *a = tieralloc_aligned_alloc(not_pow2[i], 64);
		void *m = tieralloc_memalign(not_pow2[i], 100);
		expect_true(a != NULL && (uintptr_t)a % want == 0);
		expect_true(m != NULL && (uintptr_t)m % want == 0);
		tieralloc_free(a);
		tieralloc_free(m);
	}
	test_context("memalign align too large to round");
	errno = 0;
	expect_true(tieralloc_memalign(SIZE_MAX, 64) == NULL);
	expect_eq(errno, EINVAL);
	/* C17 dropped C11's "size a multiple of the alignment" rule; glibc accepts it too. */
	test_context("aligned_alloc size not a multiple");
	void *p = tieralloc_aligned_alloc(64, 100);
	expect_true(p != NULL && (uintptr_t)p % 64 == 0);
	tieralloc_free(p);
	test_context("%s", "");
}

static void test_zero_sizes(void)
{
	test_context("zero sizes");
	void *a = tieralloc_malloc(0), *b = tieralloc_malloc(0);
	expect_true(a != NULL && b != NULL);
	expect_true(a != b); /* unique, as glibc's */
	expect_ge(tieralloc_malloc_usable_size(a), 0);
	tieralloc_free(a);
	tieralloc_free(b);

	void *c1 = tieralloc_calloc(0, 8), *c2 = tieralloc_calloc(8, 0);
	expect_true(c1 != NULL && c2 != NULL && c1 != c2);
	tieralloc_free(c1);
	tieralloc_free(c2);

	void *m = tieralloc_memalign(64, 0);
	expect_true(m != NULL && (uintptr_t)m % 64 == 0);
	tieralloc_free(m);

	/* realloc(NULL, n) is malloc(n), also for n == 0. */
	void *r = tieralloc_realloc(NULL, 100);
	expect_true(r != NULL);
	expect_ge(tieralloc_malloc_usable_size(r), 100);
	tieralloc_free(r);
	r = tieralloc_realloc(NULL, 0);
	expect_true(r != NULL);
	tieralloc_free(r);

	/*
	 * realloc(p, 0) with p != NULL frees p and returns NULL: glibc's behaviour (C17 leaves it
	 * implementation-defined, C23 makes it undefined). Programs written for glibc rely on it,
	 * so the allocator copies it; the freed bytes leave the tier's live count.
	 */
	tieralloc_free(tieralloc_malloc(1)); /* this thread's cache is set up before the baseline */
	for (unsigned i = 0; i < 2; i++) {
		size_t n = i == 0 ? 100 : 1 * MiB;
		test_context("realloc(p, 0), p of %zu bytes", n);
		uint64_t live = stats(0).bytes_live;
		void *p = tieralloc_malloc(n);
		expect_true(p != NULL);
		expect_ge(stats(0).bytes_live, live + n);
		errno = 0;
		expect_true(tieralloc_realloc(p, 0) == NULL);
		expect_eq(errno, 0);
		expect_eq(stats(0).bytes_live, live);
	}
	test_context("%s", "");
}

static void test_realloc_contents(void)
{
	/* small -> large -> small, with the pattern checked at each step. */
	test_context("realloc small -> large -> small");
	unsigned char *p = tieralloc_malloc(100);
	expect_true(p != NULL);
	fill_pattern(p, 100);
	p = tieralloc_realloc(p, 200000);
	expect_true(p != NULL && has_pattern(p, 100));
	fill_pattern(p, 200000);
	p = tieralloc_realloc(p, 3 * MiB); /* large -> larger: the backend may grow it in place */
	expect_true(p != NULL && has_pattern(p, 200000));
	fill_pattern(p, 3 * MiB);
	p = tieralloc_realloc(p, 300000); /* large -> smaller large */
	expect_true(p != NULL && has_pattern(p, 300000));
	p = tieralloc_realloc(p, 50);
	expect_true(p != NULL && has_pattern(p, 50));
	expect_eq(tieralloc_tier_of(p), 0);
	tieralloc_free(p);

	/* Growing through every small class one step at a time. */
	test_context("realloc through the classes");
	p = NULL;
	size_t have = 0;
	for (size_t n = 1; n <= 2 * TA_SMALL_MAX; n += n / 3 + 1) {
		p = tieralloc_realloc(p, n);
		expect_true(p != NULL);
		if (p == NULL)
			break;
		expect_true(has_pattern(p, have));
		fill_pattern(p, n);
		have = n;
	}
	tieralloc_free(p);

	/* An over-aligned large object cannot be grown by the backend in place: it is moved. */
	test_context("realloc of an aligned large object");
	p = tieralloc_memalign(4096, 100000);
	expect_true(p != NULL);
	fill_pattern(p, 100000);
	p = tieralloc_realloc(p, 300000);
	expect_true(p != NULL && has_pattern(p, 100000));
	tieralloc_free(p);

	/* reallocarray: the multiplication is checked; on overflow the block is left alone. */
	test_context("reallocarray");
	p = tieralloc_reallocarray(NULL, 10, 10);
	expect_true(p != NULL);
	fill_pattern(p, 100);
	errno = 0;
	expect_true(tieralloc_reallocarray(p, SIZE_MAX / 2, 3) == NULL);
	expect_eq(errno, ENOMEM);
	expect_true(has_pattern(p, 100));
	p = tieralloc_reallocarray(p, 1000, 10);
	expect_true(p != NULL && has_pattern(p, 100));
	tieralloc_free(p);
	test_context("%s", "");
}

/* Requests that cannot be met: NULL and ENOMEM, nothing else disturbed. */
static void test_huge(void)
{
	const size_t huge[] = { SIZE_MAX,
				(size_t)PTRDIFF_MAX + 1,
				(size_t)1 << 62,
				(size_t)PTRDIFF_MAX,
				(size_t)PTRDIFF_MAX - 100,
				SIZE_MAX - 4096 };
	unsigned char *keep = tieralloc_malloc(1000);
	if (keep == NULL)
		test_hard("malloc(1000)");
	fill_pattern(keep, 1000);
	for (unsigned i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		size_t n = huge[i];
		void *p;
		test_context("huge size %zu: malloc", n);
		errno = 0;
		expect_true(tieralloc_malloc(n) == NULL);
		expect_eq(errno, ENOMEM);
		test_context("huge size %zu: calloc", n);
		errno = 0;
		expect_true(tieralloc_calloc(1, n) == NULL);
		expect_eq(errno, ENOMEM);
		test_context("huge size %zu: realloc", n);
		errno = 0;
		expect_true(tieralloc_realloc(keep, n) == NULL);
		expect_eq(errno, ENOMEM);
		expect_true(has_pattern(keep, 1000)); /* the old block is still there */
		test_context("huge size %zu: memalign family", n);
		errno = 0;
		expect_true(tieralloc_memalign(64, n) == NULL);
		expect_eq(errno, ENOMEM);
		errno = 0;
		expect_true(tieralloc_aligned_alloc(4096, n) == NULL);
		expect_eq(errno, ENOMEM);
		p = (void *)&a_global;
		expect_eq(tieralloc_posix_memalign(&p, 2 * MiB, n), ENOMEM);
		expect_true(p == (void *)&a_global);
		errno = 0;
		expect_true(tieralloc_valloc(n) == NULL);
		expect_eq(errno, ENOMEM);
		errno = 0;
		expect_true(tieralloc_pvalloc(n) == NULL);
		expect_eq(errno, ENOMEM);
		test_context("huge size %zu: malloc_tier", n);
		errno = 0;
		expect_true(tieralloc_malloc_tier(0, n) == NULL);
		expect_eq(errno, ENOMEM);
	}
	/* calloc's multiplication overflows. */
	test_context("calloc overflow");
	errno = 0;
	expect_true(tieralloc_calloc(SIZE_MAX / 2, 3) == NULL);
	expect_eq(errno, ENOMEM);
	errno = 0;
	expect_true(tieralloc_calloc(3, SIZE_MAX / 2) == NULL);
	expect_eq(errno, ENOMEM);
	errno = 0;
	expect_true(tieralloc_calloc((size_t)1 << 32, (size_t)1 << 32) == NULL);
	expect_eq(errno, ENOMEM);
	errno = 0;
	expect_true(tieralloc_calloc_tier(0, SIZE_MAX / 2, 3) == NULL);
	expect_eq(errno, ENOMEM);
	tieralloc_free(keep);

	/* A failed request holds no memory, so it must not show in the peak. */
	test_context("peak after failed requests");
	{
		struct tieralloc_tier_stats s = stats(0);
		expect_lt(s.bytes_peak, (uint64_t)1 << 48);
	}
	test_context("%s", "");
}

/* errno is left alone by calls that succeed (glibc; POSIX.1-2024 for free). */
static void test_errno_kept(void)
{
	const size_t sizes[] = { 0, 1, 100, 4096, 65536, 65537, 1 * MiB, 8 * MiB };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		void *p;
		test_context("errno, size %zu", n);
		errno = 4242;
		p = tieralloc_malloc(n);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		p = tieralloc_realloc(p, n * 2 + 1);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		p = tieralloc_realloc(p, n / 2 + 1);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		tieralloc_free(p);
		expect_eq(errno, 4242);
		p = tieralloc_calloc(1, n);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		tieralloc_free(p);
		p = tieralloc_memalign(256, n);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		tieralloc_free(p);
		expect_eq(tieralloc_posix_memalign(&p, 4096, n), 0);
		expect_eq(errno, 4242);
		tieralloc_free(p);
		p = tieralloc_malloc_tier(0, n);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		tieralloc_free(p);
		p = tieralloc_calloc_tier(0, 1, n);
		expect_true(p != NULL);
		expect_eq(errno, 4242);
		tieralloc_free(p);
	}
	test_context("%s", "");
}

static void test_usable_size(void)
{
	test_context("usable size of NULL");
	expect_eq(tieralloc_malloc_usable_size(NULL), 0);
	/* Every size up to a few small classes past the largest, then large ones. */
	for (size_t n = 0; n <= 200000; n += n < 2048 ? 1 : 97) {
		void *p = tieralloc_malloc(n);
		size_t u = tieralloc_malloc_usable_size(p);
		test_checks++;
		if (p == NULL || u < n) {
			test_context("usable size, n = %zu", n);
			expect_true(p != NULL);
			expect_ge(u, n);
		}
		tieralloc_free(p);
	}
	/* A class size in use is served exactly (a fine class once the process has them,
	 * sizeclass.c); a large object has exactly what was asked. */
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		test_context("usable size of class %u", c);
		void *p = tieralloc_malloc(ta_class_size[c]);
		unsigned in_use = ta_class_is_coarse(c) || ta_class_fine_ok[c] ? c : c + 1;
		expect_eq(tieralloc_malloc_usable_size(p), ta_class_size[in_use]);
		tieralloc_free(p);
	}
	const size_t large[] = { TA_SMALL_MAX + 1, 100000, 1 * MiB, 1 * MiB + 3 };
	for (unsigned i = 0; i < sizeof(large) / sizeof(large[0]); i++) {
		test_context("usable size, large %zu", large[i]);
		void *p = tieralloc_malloc(large[i]);
		expect_eq(tieralloc_malloc_usable_size(p), large[i]);
		/* All of the usable size may be written. */
		if (p != NULL)
			memset(p, 0x11, tieralloc_malloc_usable_size(p));
		tieralloc_free(p);
	}
	/* And the kind sets aside no more than the request for sizes that are its own classes:
	 * nothing of ours rides along to push them into the next one (1 MiB cost 1.25 MiB when a
	 * header went in front). */
	const size_t classes[] = { 80 * KiB, 256 * KiB, 1 * MiB, 4 * MiB };
	for (unsigned i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		test_context("the kind's block for large %zu", classes[i]);
		void *p = tieralloc_malloc(classes[i]);
		int t = tieralloc_tier_of(p);
		expect_true(p != NULL && t >= 0);
		if (p != NULL && t >= 0)
			expect_eq(ta_lheap_usable((unsigned)t, p), classes[i]);
		tieralloc_free(p);
	}
	test_context("%s", "");
}

/* calloc must zero memory that a previous user dirtied: reuse from the thread cache. */
static void test_calloc_zeroes(void)
{
	const size_t sizes[] = { 1, 16, 100, 1000, 4096, 65536, 100000, 1 * MiB };
	enum { N = 32 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		void *p[N];
		test_context("calloc after dirty free, size %zu", n);
		for (unsigned k = 0; k < N; k++) {
			p[k] = tieralloc_malloc(n);
			if (p[k] == NULL)
				test_hard("malloc(%zu)", n);
			memset(p[k], 0xab, tieralloc_malloc_usable_size(p[k]));
		}
		for (unsigned k = 0; k < N; k++)
			tieralloc_free(p[k]);
		for (unsigned k = 0; k < N; k++) {
			p[k] = k % 2 ? tieralloc_calloc(n, 1) : tieralloc_calloc_tier(0, 1, n);
			expect_true(p[k] != NULL);
			if (p[k] != NULL)
				expect_true(filled(p[k], n, 0));
		}
		for (unsigned k = 0; k < N; k++)
			tieralloc_free(p[k]);
	}
	test_context("%s", "");
}

static void test_tier_of(void)
{
	test_context("tier_of, ours");
	void *small = tieralloc_malloc(100), *large = tieralloc_malloc(1 * MiB);
	void *aligned = tieralloc_memalign(2 * MiB, 10);
	expect_eq(tieralloc_tier_of(small), 0);
	expect_eq(tieralloc_tier_of(large), 0);
	expect_eq(tieralloc_tier_of(aligned), 0);
	tieralloc_free(small);
	tieralloc_free(large);
	tieralloc_free(aligned);

	/* Foreign pointers: the address table (src/alloc/large.c) has no record of them, and
	 * looking reads nothing of theirs, not even at the start of their objects. */
	test_context("tier_of, foreign");
	char on_stack[256] __attribute__((aligned(64)));
	memset(on_stack, 0, sizeof(on_stack));
	char *from_libc = malloc(256);
	expect_eq(tieralloc_tier_of(NULL), -EINVAL);
	expect_eq(tieralloc_tier_of(on_stack + 128), -EINVAL);
	expect_eq(tieralloc_tier_of(on_stack + 129), -EINVAL);
	expect_eq(tieralloc_tier_of(a_global + 128), -EINVAL);
	expect_eq(tieralloc_tier_of(from_libc + 128), -EINVAL);
	expect_eq(tieralloc_tier_of((void *)test_tier_of), -EINVAL);
	expect_eq(tieralloc_tier_of((void *)16), -EINVAL);
	expect_eq(tieralloc_tier_of((void *)UINTPTR_MAX), -EINVAL);
	expect_eq(tieralloc_tier_of(on_stack), -EINVAL);
	expect_eq(tieralloc_tier_of(a_global), -EINVAL);
	expect_eq(tieralloc_tier_of(from_libc), -EINVAL);
	free(from_libc);

	/* A foreign pointer at the start of a mapping whose previous page is not mapped: the look
	 * must not fault. Checked in a child, which a fault would kill. */
	test_context("tier_of, start of a mapping");
	{
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (m == MAP_FAILED)
			test_hard("mmap");
		munmap(m, page);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			_exit(tieralloc_tier_of(m + page) == -EINVAL ? 0 : 1);
		int status = 0;
		expect_eq(waitpid(pid, &status, 0), pid);
		expect_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		munmap(m + page, page);
	}
	test_context("%s", "");
}

static void test_tier_info(void)
{
	int n = tieralloc_tier_count();
	test_context("tier_count");
	expect_ge_i(n, 1);
	expect_le(n, TIERALLOC_MAX_TIERS);
	uint32_t count = 0;
	size_t len = sizeof(count);
	expect_eq(tieralloc_ctl_get("tiers", &count, &len), 0);
	expect_eq(count, n);

	uint64_t shares = 0;
	for (int t = 0; t < n; t++) {
		struct tieralloc_tier_info info;
		memset(&info, 0xee, sizeof(info));
		info.size = sizeof(info);
		test_context("tier_info(%d)", t);
		expect_eq(tieralloc_tier_info(t, &info), 0);
		expect_eq(info.size, sizeof(info));
		expect_eq(info.version, 1);
		char want[32];
		snprintf(want, sizeof(want), "tier%d", t);
		expect_str_eq(info.name, want); /* no TIERALLOC_TIERS, so default names */
		uint64_t mask = 0;
		expect_eq(ta_nodelist_parse(info.nodes, strlen(info.nodes), &mask), 0);
		expect_ne(mask, 0);
		expect_true(strncmp(info.kind, "MEMKIND_", 8) == 0);
		expect_gt(info.capacity, 0);
		expect_le(info.share_ppm, 1000000);
		expect_le(info.bound, 1);
		shares += info.share_ppm;
		uint64_t cap = 0;
		char name[64];
		len = sizeof(cap);
		snprintf(name, sizeof(name), "tier.%d.capacity", t);
		expect_eq(tieralloc_ctl_get(name, &cap, &len), 0);
		expect_eq(cap, info.capacity);
	}
	/* Truncated shares add up to the whole, less at most one part per tier. */
	test_context("shares");
	expect_le(shares, 1000000);
	expect_ge(shares + (uint64_t)n, 1000000);
	if (n == 1) {
		struct tieralloc_tier_info info = { .size = sizeof(info) };
		test_context("tier_info, one tier");
		expect_eq(tieralloc_tier_info(0, &info), 0);
		expect_eq(info.share_ppm, 1000000);
		expect_str_eq(info.kind, "MEMKIND_REGULAR");
		expect_eq(info.bound, 1);
	}

	/* An older, shorter structure: only its bytes are written. */
	test_context("tier_info, short struct");
	unsigned char buf[sizeof(struct tieralloc_tier_info) + 64];
	struct tieralloc_tier_info *in = (struct tieralloc_tier_info *)(void *)buf;
	const size_t short_size = offsetof(struct tieralloc_tier_info, name) + 8;
	memset(buf, 0xee, sizeof(buf));
	in->size = (uint32_t)short_size;
	expect_eq(tieralloc_tier_info(0, in), 0);
	expect_eq(in->size, short_size);
	expect_eq(in->version, 1);
	expect_true(strncmp(in->name, "tier0", 6) == 0);
	expect_true(filled(buf + short_size, sizeof(buf) - short_size, 0xee));
	/* Only size and version. */
	memset(buf, 0xee, sizeof(buf));
	in->size = 8;
	expect_eq(tieralloc_tier_info(0, in), 0);
	expect_eq(in->version, 1);
	expect_true(filled(buf + 8, sizeof(buf) - 8, 0xee));
	/* A newer, longer structure: the known part is filled, size says how much. */
	test_context("tier_info, long struct");
	memset(buf, 0xee, sizeof(buf));
	in->size = sizeof(buf);
	expect_eq(tieralloc_tier_info(0, in), 0);
	expect_eq(in->size, sizeof(struct tieralloc_tier_info));
	expect_true(filled(buf + sizeof(struct tieralloc_tier_info), 64, 0xee));

	test_context("tier_info errors");
	struct tieralloc_tier_info info = { .size = sizeof(info) };
	expect_eq(tieralloc_tier_info(-1, &info), -EINVAL);
	expect_eq(tieralloc_tier_info(n, &info), -EINVAL);
	expect_eq(tieralloc_tier_info(TIERALLOC_MAX_TIERS, &info), -EINVAL);
	expect_eq(tieralloc_tier_info(0, NULL), -EINVAL);
	info.size = 7;
	expect_eq(tieralloc_tier_info(0, &info), -EINVAL);
	info.size = 0;
	expect_eq(tieralloc_tier_info(0, &info), -EINVAL);
	test_context("%s", "");
}

static void test_tier_stats(void)
{
	/* This thread's cache exists before the baseline (its set-up is not an allocation). */
	tieralloc_free(tieralloc_malloc(1));
	const size_t sizes[] = { 1, 100, 5000, 65536, 65537, 1 * MiB };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		test_context("tier_stats around malloc(%zu)", n);
		struct tieralloc_tier_stats before = stats(0);
		void *p = tieralloc_malloc(n);
		struct tieralloc_tier_stats during = stats(0);
		size_t usable = tieralloc_malloc_usable_size(p);
		tieralloc_free(p);
		struct tieralloc_tier_stats after = stats(0);
		expect_true(p != NULL);
		expect_eq(during.version, 1);
		expect_eq(during.size, sizeof(during));
		expect_ge(during.bytes_live, before.bytes_live + n);
		expect_le(during.bytes_live, before.bytes_live + usable);
		expect_eq(during.allocs, before.allocs + 1);
		expect_eq(during.explicit_allocs, before.explicit_allocs);
		expect_eq(after.bytes_live, before.bytes_live);
		expect_eq(after.allocs, before.allocs + 1);
		/* live <= charged (live + stocks) <= peak; no limit by default. */
		expect_le(during.bytes_live, during.charged);
		expect_le(during.charged, during.bytes_peak);
		expect_eq(during.limit, UINT64_MAX);
		expect_eq(during.steered_in, 0);
		expect_eq(during.overflowed, 0);
	}
	/* thread.flush publishes the thread's cache: live bytes do not change. */
	test_context("thread.flush");
	void *keep = tieralloc_malloc(300);
	struct tieralloc_tier_stats before = stats(0);
	expect_eq(tieralloc_ctl_set("thread.flush", NULL, 0), 0);
	struct tieralloc_tier_stats after = stats(0);
	expect_eq(after.bytes_live, before.bytes_live);
	expect_le(after.charged, before.charged);
	uint64_t live = 0;
	size_t len = sizeof(live);
	expect_eq(tieralloc_ctl_get("tier.0.bytes_live", &live, &len), 0);
	expect_eq(live, after.bytes_live);
	tieralloc_free(keep);

	test_context("tier_stats, struct sizes");
	unsigned char buf[sizeof(struct tieralloc_tier_stats) + 32];
	struct tieralloc_tier_stats *s = (struct tieralloc_tier_stats *)(void *)buf;
	const size_t short_size = offsetof(struct tieralloc_tier_stats, bytes_peak);
	memset(buf, 0xee, sizeof(buf));
	s->size = (uint32_t)short_size;
	expect_eq(tieralloc_tier_stats(0, s), 0);
	expect_eq(s->size, short_size);
	expect_eq(s->version, 1);
	expect_true(filled(buf + short_size, sizeof(buf) - short_size, 0xee));
	memset(buf, 0xee, sizeof(buf));
	s->size = sizeof(buf);
	expect_eq(tieralloc_tier_stats(0, s), 0);
	expect_eq(s->size, sizeof(struct tieralloc_tier_stats));
	expect_true(filled(buf + sizeof(struct tieralloc_tier_stats), 32, 0xee));

	test_context("tier_stats errors");
	struct tieralloc_tier_stats st = { .size = sizeof(st) };
	expect_eq(tieralloc_tier_stats(-1, &st), -EINVAL);
	expect_eq(tieralloc_tier_stats(tieralloc_tier_count(), &st), -EINVAL);
	expect_eq(tieralloc_tier_stats(0, NULL), -EINVAL);
	st.size = 4;
	expect_eq(tieralloc_tier_stats(0, &st), -EINVAL);
	test_context("%s", "");
}

/*
 * Threads that exit holding memory fold their counts into the tier while another thread reads
 * the statistics: each exited thread's bytes are seen once, in its cache or folded, never twice
 * (a reader that summed the caches and then read the folded count saw a thread that retired in
 * between in both) and never not at all.
 */
enum { EXITERS = 2000, EXITER_BLOCKS = 4, EXITER_BLOCK = 4096 };
static void *exiter_blocks[EXITERS][EXITER_BLOCKS];
static atomic_bool exiters_done;
static _Atomic unsigned exiters_started;
static uint64_t exiters_base;
static unsigned over_reads, under_reads, reads;

static void *exiter(void *arg)
{
	void **mine = arg;
	for (unsigned i = 0; i < EXITER_BLOCKS; i++)
		mine[i] = tieralloc_malloc(EXITER_BLOCK);
	return NULL;
}

/* Each read against what can be live: at least the threads joined before it (the count read
 * first), at most the threads started when it ended (the count read after). */
static void *stats_reader(void *arg)
{
	(void)arg;
	const uint64_t per_thread = (uint64_t)EXITER_BLOCKS * EXITER_BLOCK;
	while (!atomic_load(&exiters_done)) {
		unsigned before = atomic_load(&exiters_started);
		uint64_t live = stats(0).bytes_live;
		unsigned after = atomic_load(&exiters_started);
		reads++;
		/* The thread started last may not have run yet: before - 1 had exited. */
		if (before > 0 && live < exiters_base + (before - 1) * per_thread)
			under_reads++;
		if (live > exiters_base + after * per_thread)
			over_reads++;
	}
	return NULL;
}

static void test_stats_threads_exiting(void)
{
	tieralloc_free(tieralloc_malloc(1));
	exiters_base = stats(0).bytes_live;
	const uint64_t held = (uint64_t)EXITERS * EXITER_BLOCKS * EXITER_BLOCK;
	pthread_t reader;
	if (pthread_create(&reader, NULL, stats_reader, NULL) != 0)
		test_hard("pthread_create");
	for (unsigned i = 0; i < EXITERS; i++) {
		pthread_t th;
		atomic_fetch_add(&exiters_started, 1);
		if (pthread_create(&th, NULL, exiter, exiter_blocks[i]) != 0)
			test_hard("pthread_create");
		pthread_join(th, NULL);
	}
	atomic_store(&exiters_done, true);
	pthread_join(reader, NULL);
	printf("threads exiting: %u reads, %u above what was live, %u below\n", reads, over_reads,
	       under_reads);
	test_context("tier_stats while %d threads exit holding memory", EXITERS);
	expect_eq(over_reads, 0);
	expect_eq(under_reads, 0);
	expect_eq(stats(0).bytes_live, exiters_base + held);
	for (unsigned i = 0; i < EXITERS; i++)
		for (unsigned k = 0; k < EXITER_BLOCKS; k++)
			tieralloc_free(exiter_blocks[i][k]);
	expect_eq(stats(0).bytes_live, exiters_base);
	test_context("%s", "");
}

static void test_ctl(void)
{
	uint32_t u32;
	uint64_t u64;
	size_t len;
	char str[64];

	test_context("ctl get");
	const char *version = NULL;
	len = sizeof(version);
	expect_eq(tieralloc_ctl_get("version", &version, &len), 0);
	expect_str_eq(version, tieralloc_version());
	len = sizeof(u32);
	expect_eq(tieralloc_ctl_get("tiers", &u32, &len), 0);
	len = sizeof(u64);
	expect_eq(tieralloc_ctl_get("tier.0.limit", &u64, &len), 0);
	expect_eq(u64, UINT64_MAX);
	static const char *const fields[] = {
		"bytes_live", "bytes_peak",	  "charged",	"limit",
		"allocs",     "explicit_allocs",  "steered_in", "exhausted",
		"overflowed", "backend_failures", "capacity"
	};
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char name[64];
		snprintf(name, sizeof(name), "tier.0.%s", fields[i]);
		test_context("ctl get %s", name);
		len = sizeof(u64);
		expect_eq(tieralloc_ctl_get(name, &u64, &len), 0);
		len = sizeof(u32);
		expect_eq(tieralloc_ctl_get(name, &u32, &len), -EINVAL);
	}

	/* Strings: the caller's buffer must hold the value; *len says how long it is. */
	test_context("ctl get opt.*");
	len = sizeof(str);
	expect_eq(tieralloc_ctl_get("opt.CHARGE_BATCH", str, &len), 0);
	expect_str_eq(str, "262144");
	expect_eq(len, 7);
	len = 3;
	expect_eq(tieralloc_ctl_get("opt.CHARGE_BATCH", str, &len), -EINVAL);
	len = sizeof(str);
	expect_eq(tieralloc_ctl_get("opt.LOG_LEVEL", str, &len), 0);
	expect_str_eq(str, "warn");
	len = sizeof(str);
	expect_eq(tieralloc_ctl_get("opt.TIERS", str, &len), 0);
	expect_str_eq(str, "");
	for (unsigned i = 0; i < ta_opt_count; i++) {
		char name[64];
		snprintf(name, sizeof(name), "opt.%s", ta_opt_table[i].name);
		test_context("ctl get %s", name);
		len = sizeof(str);
		expect_eq(tieralloc_ctl_get(name, str, &len), 0);
		expect_eq(len, strlen(str) + 1);
	}

	test_context("ctl get errors");
	static const char *const unknown[] = { "nope",		"",
					       "tier",		"tier.0",
					       "tier.0.",	"tier.0.nope",
					       "tier.9.allocs", "tier.x.allocs",
					       "tier..allocs",	"opt.NOPE",
					       "opt.",		"opt.charge_batch",
					       "tiers.x",	"VERSION" };
	for (unsigned i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		test_context("ctl get \"%s\"", unknown[i]);
		len = sizeof(u64);
		expect_eq(tieralloc_ctl_get(unknown[i], &u64, &len), -ENOENT);
	}
	test_context("ctl get bad arguments");
	len = sizeof(u64);
	expect_eq(tieralloc_ctl_get(NULL, &u64, &len), -EINVAL);
	len = sizeof(u64);
	expect_eq(tieralloc_ctl_get("tiers", &u64, &len), -EINVAL); /* wrong length */
	len = 0;
	expect_eq(tieralloc_ctl_get("tiers", &u32, &len), -EINVAL);
	expect_eq(tieralloc_ctl_get("tiers", &u32, NULL), -EINVAL);
	len = sizeof(u32);
	expect_eq(tieralloc_ctl_get("tiers", NULL, &len), -EINVAL);

	test_context("ctl set");
	u64 = 123456;
	expect_eq(tieralloc_ctl_set("tier.0.limit", &u64, sizeof(u64)), 0);
	len = sizeof(u64);
	u64 = 0;
	expect_eq(tieralloc_ctl_get("tier.0.limit", &u64, &len), 0);
	expect_eq(u64, 123456);
	expect_eq(stats(0).limit, 123456);
	u64 = UINT64_MAX;
	expect_eq(tieralloc_ctl_set("tier.0.limit", &u64, sizeof(u64)), 0);
	expect_eq(stats(0).limit, UINT64_MAX);
	expect_eq(tieralloc_ctl_set("thread.flush", NULL, 0), 0);

	test_context("ctl set errors");
	u32 = 2;
	expect_eq(tieralloc_ctl_set("tiers", &u32, sizeof(u32)), -EPERM);
	expect_eq(tieralloc_ctl_set("version", &u64, sizeof(u64)), -EPERM);
	expect_eq(tieralloc_ctl_set("passthrough", &u32, sizeof(u32)), -EPERM);
	expect_eq(tieralloc_ctl_set("opt.CHARGE_BATCH", "4096", 5), -EPERM);
	expect_eq(tieralloc_ctl_set("tier.0.bytes_live", &u64, sizeof(u64)), -EPERM);
	expect_eq(tieralloc_ctl_set("tier.0.capacity", &u64, sizeof(u64)), -EPERM);
	expect_eq(tieralloc_ctl_set("nope", &u64, sizeof(u64)), -ENOENT);
	expect_eq(tieralloc_ctl_set("opt.NOPE", &u64, sizeof(u64)), -ENOENT);
	expect_eq(tieralloc_ctl_set("tier.0.nope", &u64, sizeof(u64)), -ENOENT);
	expect_eq(tieralloc_ctl_set("tier.7.limit", &u64, sizeof(u64)), -ENOENT);
	expect_eq(tieralloc_ctl_set("tier.0.limit", &u32, sizeof(u32)), -EINVAL);
	expect_eq(tieralloc_ctl_set("tier.0.limit", NULL, sizeof(u64)), -EINVAL);
	expect_eq(tieralloc_ctl_set(NULL, &u64, sizeof(u64)), -EINVAL);
	expect_eq(stats(0).limit, UINT64_MAX); /* none of these changed it */
	test_context("%s", "");
}

static void test_explicit_tier(void)
{
	int n = tieralloc_tier_count();
	const int bad[] = { -1, -1000, n, TIERALLOC_MAX_TIERS, 5, 1 << 30 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad[i] >= 0 && bad[i] < n)
			continue;
		test_context("malloc_tier(%d)", bad[i]);
		errno = 0;
		expect_true(tieralloc_malloc_tier(bad[i], 64) == NULL);
		expect_eq(errno, EINVAL);
		errno = 0;
		expect_true(tieralloc_malloc_tier(bad[i], 2 * MiB) == NULL);
		expect_eq(errno, EINVAL);
		errno = 0;
		expect_true(tieralloc_calloc_tier(bad[i], 1, 64) == NULL);
		expect_eq(errno, EINVAL);
	}

	tieralloc_free(tieralloc_malloc(1));
	const size_t sizes[] = { 0, 64, 4096, 65536, 2 * MiB };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		test_context("malloc_tier(0, %zu)", sizes[i]);
		struct tieralloc_tier_stats before = stats(0);
		void *p = tieralloc_malloc_tier(0, sizes[i]);
		void *q = tieralloc_calloc_tier(0, 1, sizes[i]);
		struct tieralloc_tier_stats during = stats(0);
		expect_true(p != NULL && q != NULL);
		expect_eq(tieralloc_tier_of(p), 0);
		expect_eq(tieralloc_tier_of(q), 0);
		expect_ge(tieralloc_malloc_usable_size(p), sizes[i]);
		if (q != NULL)
			expect_true(filled(q, sizes[i], 0));
		expect_eq(during.explicit_allocs, before.explicit_allocs + 2);
		expect_eq(during.allocs, before.allocs + 2);
		expect_ge(during.bytes_live, before.bytes_live + 2 * sizes[i]);
		tieralloc_free(p);
		tieralloc_free(q);
		expect_eq(stats(0).bytes_live, before.bytes_live);
	}
	test_context("%s", "");
}

/* Large objects' records live in an address table (src/alloc/large.c): a second free of one is
 * refused, and threads allocating, growing and freeing them at once never see each other's. */
static void test_large_double_free(void)
{
	test_context("large: a second free is refused, the block is not handed out twice");
	void *p = tieralloc_malloc(1 * MiB);
	expect_true(p != NULL);
	tieralloc_free(p);
	struct test_capture cap;
	char text[512];
	capture_begin(&cap);
	tieralloc_free(p);
	capture_end(&cap, text, sizeof(text));
	void *a = tieralloc_malloc(1 * MiB), *b = tieralloc_malloc(1 * MiB);
	expect_true(a != NULL && b != NULL && a != b);
	expect_eq(tieralloc_malloc_usable_size(a), 1 * MiB);
	expect_eq(tieralloc_malloc_usable_size(b), 1 * MiB);
	tieralloc_free(a);
	tieralloc_free(b);
}

struct large_worker {
	unsigned seed;
	unsigned bad;
};

static void *large_churn(void *arg)
{
	struct large_worker *w = arg;
	enum { LIVE = 16, ROUNDS = 3000 };
	unsigned char *live[LIVE] = { NULL };
	size_t size[LIVE] = { 0 };
	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned i = rand_r(&w->seed) % LIVE;
		unsigned char tag = (unsigned char)(i + 1);
		if (live[i] != NULL) {
			/* Our bytes are still ours: first, last, and the record's size (a shrink
			 * by less than half keeps the block). */
			if (live[i][0] != tag || live[i][size[i] - 1] != tag ||
			    tieralloc_malloc_usable_size(live[i]) < size[i])
				w->bad++;
		}
		size_t n = TA_SMALL_MAX + 1 + (size_t)rand_r(&w->seed) % (2 * MiB);
		if (live[i] != NULL && r % 3 == 0) {
			unsigned char *q = tieralloc_realloc(live[i], n);
			if (q == NULL) {
				w->bad++;
				continue;
			}
			if (q[0] != tag)
				w->bad++;
			live[i] = q;
		} else {
			tieralloc_free(live[i]);
			live[i] = tieralloc_malloc(n);
			if (live[i] == NULL) {
				w->bad++;
				continue;
			}
		}
		size[i] = n;
		live[i][0] = live[i][n - 1] = tag;
	}
	for (unsigned i = 0; i < LIVE; i++)
		tieralloc_free(live[i]);
	return NULL;
}

static void test_large_threads(void)
{
	test_context("large: three threads allocating, growing and freeing at once");
	struct large_worker w[3] = { { 1, 0 }, { 2, 0 }, { 3, 0 } };
	pthread_t t[3];
	for (unsigned i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, large_churn, &w[i]);
	for (unsigned i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < 3; i++)
		expect_eq(w[i].bad, 0);
}

/* Issue 12, item 1: every large object owns the 64 KiB granule it starts in, whatever its size and
 * alignment. Small objects aligned above a page used to be given only their own bytes, and a later
 * large object placed in the rest of the granule took their record: usable size 0, realloc
 * refused, free ignored (the object and its charge leaked). */
static void test_large_granules(void)
{
	tieralloc_free(tieralloc_malloc(1)); /* this thread's cache, before the baseline */
	const size_t aligns[] = { 8 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 1 * MiB };
	for (unsigned a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
		enum { N = 64 };
		size_t align = aligns[a];
		test_context("large granules: %d x memalign(%zu, 10), then malloc(70000)", N,
			     align);
		struct tieralloc_tier_stats before = stats(0);
		unsigned char *p[N], *big[N];
		for (unsigned i = 0; i < N; i++) {
			p[i] = tieralloc_memalign(align, 10);
			big[i] = tieralloc_malloc(70000);
			expect_true(p[i] != NULL && big[i] != NULL);
			if (p[i] == NULL || big[i] == NULL)
				return;
			expect_eq((uintptr_t)p[i] % align, 0);
			memset(p[i], 0xa0 + (int)(i % 16), 10);
			memset(big[i], 0x50, 70000);
		}
		unsigned short_usable = 0, bad_big = 0;
		for (unsigned i = 0; i < N; i++) {
			short_usable += tieralloc_malloc_usable_size(p[i]) < 10;
			bad_big += tieralloc_malloc_usable_size(big[i]) < 70000;
		}
		expect_eq(short_usable, 0);
		expect_eq(bad_big, 0);
		/* realloc keeps the aligned objects' bytes (it may move them). */
		unsigned failed = 0, changed = 0;
		for (unsigned i = 0; i < N; i++) {
			unsigned char *q = tieralloc_realloc(p[i], 20);
			if (q == NULL) {
				failed++;
				continue;
			}
			p[i] = q;
			changed += !filled(q, 10, (unsigned char)(0xa0 + i % 16));
		}
		expect_eq(failed, 0);
		expect_eq(changed, 0);
		for (unsigned i = 0; i < N; i++) {
			tieralloc_free(p[i]);
			tieralloc_free(big[i]);
		}
		/* Everything was given back: no object's record was lost. */
		struct tieralloc_tier_stats after = stats(0);
		expect_eq(after.bytes_live, before.bytes_live);
	}
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	/* Class runs: packed objects (a young process's first medium ones) are test_pack's. */
	static const char *const env[] = { "TIERALLOC_PACK=0", NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() < 1)
		test_hard("no tier");
	test_version();
	test_alignment();
	test_alignment_errors();
	test_zero_sizes();
	test_realloc_contents();
	test_huge();
	test_errno_kept();
	test_usable_size();
	test_calloc_zeroes();
	test_tier_of();
	test_tier_info();
	test_tier_stats();
	test_stats_threads_exiting();
	test_ctl();
	test_explicit_tier();
	test_large_double_free();
	test_large_threads();
	test_large_granules();
	return test_done();
}
