/* SPDX-License-Identifier: MIT */
/*
 * The malloc family mixed across its members, as programs and libraries mix it: memory from one
 * function released or resized by another, alignments from 8 bytes to 1 MiB, the error cases
 * (overflow, bad alignment) and their errno, calloc on reused memory, malloc_usable_size, and
 * memory that the C library allocates for the caller (strdup, asprintf, getline,
 * open_memstream). Every result is checked; the program passes with glibc's allocator too.
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "prog.h"

static bool aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static const size_t sizes[] = { 0,     1,     7,     8,	     15,       16,
				17,    100,   1000,  4095,   4096,     4097,
				65535, 65536, 65537, 200000, 1u << 20, (3u << 20) + 5 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* memalign and aligned_alloc at every power of two, released by free. */
static void test_memalign_free(void)
{
	for (size_t a = 8; a <= (1u << 20); a *= 2) {
		for (unsigned i = 0; i < NSIZES; i++) {
			size_t n = sizes[i];
			void *p = memalign(a, n);
			REQUIRE(p != NULL, "memalign(%zu, %zu)", a, n);
			CHECK(aligned(p, a), "memalign(%zu, %zu) = %p", a, n, p);
			CHECK(malloc_usable_size(p) >= n, "usable size of memalign(%zu, %zu)", a,
			      n);
			prog_fill(p, n, (uint32_t)(a + n));
			void *q = aligned_alloc(a, n + a);
			REQUIRE(q != NULL, "aligned_alloc(%zu, %zu)", a, n + a);
			CHECK(aligned(q, a), "aligned_alloc(%zu, %zu) = %p", a, n + a, q);
			prog_fill(q, n + a, 1);
			CHECK(prog_verify(p, n, (uint32_t)(a + n)) == n,
			      "memalign(%zu, %zu) contents", a, n);
			free(p);
			free(q);
		}
	}
}

/* posix_memalign: 8 .. 1 MiB, sizes around the alignment; bad alignments give EINVAL. */
static void test_posix_memalign(void)
{
	for (size_t a = sizeof(void *); a <= (1u << 20); a *= 2) {
		const size_t ns[] = { 1, a - 1, a, a + 1, 3 * a, 100000 };
		for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
			void *p = NULL;
			errno = 0;
			int rc = posix_memalign(&p, a, ns[i]);
			REQUIRE(rc == 0, "posix_memalign(%zu, %zu) = %d", a, ns[i], rc);
			CHECK(errno == 0, "posix_memalign changed errno to %d", errno);
			CHECK(aligned(p, a), "posix_memalign(%zu, %zu) = %p", a, ns[i], p);
			memset(p, 0x5a, ns[i]);
			free(p);
		}
	}
	void *p = (void *)0x1;
	CHECK(posix_memalign(&p, 3 * sizeof(void *), 16) == EINVAL, "alignment not a power of 2");
	CHECK(posix_memalign(&p, sizeof(void *) / 2, 16) == EINVAL, "alignment < sizeof(void *)");
	CHECK(posix_memalign(&p, 0, 16) == EINVAL, "alignment 0");
	CHECK(p == (void *)0x1, "posix_memalign left *memptr alone on error");
}

/* aligned_alloc, then realloc to many sizes: the contents up to the smaller size stay. */
static void test_aligned_realloc(void)
{
	const size_t grow[] = { 10, 100, 5000, 70000, 1u << 20, 3u << 20, 64, 200000, 8 };
	for (size_t a = 16; a <= 65536; a *= 4) {
		size_t n = a * 2;
		char *p = aligned_alloc(a, n);
		REQUIRE(p != NULL, "aligned_alloc(%zu, %zu)", a, n);
		prog_fill(p, n, (uint32_t)a);
		size_t valid = n;
		for (unsigned i = 0; i < sizeof(grow) / sizeof(grow[0]); i++) {
			char *q = realloc(p, grow[i]);
			REQUIRE(q != NULL, "realloc(aligned_alloc(%zu), %zu)", a, grow[i]);
			size_t keep = valid < grow[i] ? valid : grow[i];
			size_t bad = prog_verify(q, keep, (uint32_t)a);
			CHECK(bad == keep, "realloc of aligned_alloc(%zu) to %zu: byte %zu differs",
			      a, grow[i], bad);
			/* Extend the pattern so that the next step checks every byte again. */
			prog_fill(q, grow[i], (uint32_t)a);
			valid = grow[i];
			p = q;
		}
		free(p);
	}
}

/* valloc and pvalloc: page aligned; pvalloc rounds the size up to whole pages. */
static void test_valloc(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t ns[] = { 1, 100, page - 1, page, page + 1, 5 * page + 3, 1u << 20 };
	for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		void *v = valloc(ns[i]);
		REQUIRE(v != NULL, "valloc(%zu)", ns[i]);
		CHECK(aligned(v, page), "valloc(%zu) = %p", ns[i], v);
		memset(v, 1, ns[i]);
		void *pv = pvalloc(ns[i]);
		REQUIRE(pv != NULL, "pvalloc(%zu)", ns[i]);
		CHECK(aligned(pv, page), "pvalloc(%zu) = %p", ns[i], pv);
		size_t rounded = (ns[i] + page - 1) / page * page;
		CHECK(malloc_usable_size(pv) >= rounded, "pvalloc(%zu): usable %zu < %zu", ns[i],
		      malloc_usable_size(pv), rounded);
		memset(pv, 2, rounded); /* the whole rounded size is the caller's */
		void *r = realloc(v, ns[i] * 3);
		REQUIRE(r != NULL, "realloc(valloc)");
		free(r);
		free(pv);
	}
}

/* Hide a value from the optimiser: the compiler would reject the huge constant sizes below,
 * and warn about using a pointer after a realloc that is known here to fail. */
#define OPAQUE(x)                                                                                  \
	({                                                                                         \
		__typeof__(x) opaque_ = (x);                                                       \
		__asm__("" : "+r"(opaque_));                                                       \
		opaque_;                                                                           \
	})

/* Overflows fail with ENOMEM and leave the old block alone. */
static void test_overflow(void)
{
	char *p = malloc(100);
	REQUIRE(p != NULL, "malloc(100)");
	memset(p, 'x', 100);
	errno = 0;
	void *q = reallocarray(OPAQUE(p), OPAQUE(SIZE_MAX / 2), 3);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray overflow: %p errno %d", q, errno);
	CHECK(p[0] == 'x' && p[99] == 'x', "reallocarray overflow kept the block");
	q = reallocarray(p, 50, 4);
	REQUIRE(q != NULL, "reallocarray(p, 50, 4)");
	CHECK(memchr(q, 'y', 100) == NULL && ((char *)q)[99] == 'x', "reallocarray kept contents");
	free(q);

	errno = 0;
	q = calloc(OPAQUE(SIZE_MAX / 16), 32);
	CHECK(q == NULL && errno == ENOMEM, "calloc overflow: %p errno %d", q, errno);
	errno = 0;
	q = malloc(OPAQUE(SIZE_MAX - 4096));
	CHECK(q == NULL && errno == ENOMEM, "malloc(OPAQUE(SIZE_MAX - 4096)): %p errno %d", q,
	      errno);
	errno = 0;
	q = malloc(OPAQUE((size_t)PTRDIFF_MAX + 1));
	CHECK(q == NULL && errno == ENOMEM, "malloc(PTRDIFF_MAX + 1): %p errno %d", q, errno);
	p = malloc(10);
	REQUIRE(p != NULL, "malloc(10)");
	errno = 0;
	q = realloc(OPAQUE(p), OPAQUE(SIZE_MAX - 100));
	CHECK(q == NULL && errno == ENOMEM, "realloc to SIZE_MAX - 100: %p errno %d", q, errno);
	free(p);
	errno = 0;
	q = aligned_alloc(64, OPAQUE(SIZE_MAX - 10));
	CHECK(q == NULL && errno == ENOMEM, "aligned_alloc(64, huge): %p errno %d", q, errno);
}

/* calloc must zero memory that earlier blocks dirtied. */
static void test_calloc_reuse(void)
{
	for (int round = 0; round < 4; round++) {
		for (unsigned i = 1; i < NSIZES; i++) {
			void *dirty[32];
			for (int k = 0; k < 32; k++) {
				dirty[k] = malloc(sizes[i]);
				REQUIRE(dirty[k] != NULL, "malloc(%zu)", sizes[i]);
				memset(dirty[k], 0xa5, sizes[i]);
			}
			for (int k = 0; k < 32; k++)
				free(dirty[k]);
			for (int k = 0; k < 32; k++) {
				unsigned char *c = calloc(1, sizes[i]);
				REQUIRE(c != NULL, "calloc(1, %zu)", sizes[i]);
				size_t nz = 0;
				for (size_t b = 0; b < sizes[i]; b++)
					nz += c[b] != 0;
				CHECK(nz == 0, "calloc(1, %zu): %zu non-zero bytes", sizes[i], nz);
				dirty[k] = c;
			}
			for (int k = 0; k < 32; k++)
				free(dirty[k]);
		}
	}
	/* calloc(n, size) with n > 1, and zero-sized requests. */
	unsigned *u = calloc(3000, sizeof(unsigned));
	REQUIRE(u != NULL, "calloc(3000, 4)");
	for (int i = 0; i < 3000; i++)
		CHECK(u[i] == 0, "calloc(3000, 4)[%d] = %u", i, u[i]);
	free(u);
	void *z1 = malloc(0), *z2 = malloc(0), *z3 = calloc(0, 0);
	CHECK(z1 != NULL && z2 != NULL && z3 != NULL, "malloc(0) and calloc(0, 0) give pointers");
	CHECK(z1 != z2, "two malloc(0) give different pointers");
	free(z1);
	free(z2);
	free(z3);
	free(NULL);
}

/* malloc_usable_size >= the request, and the whole usable size is writable and kept. */
static void test_usable_size(void)
{
	uint32_t rng = 3;
	for (int i = 0; i < 3000; i++) {
		size_t n = prog_size(&rng, 4u << 20);
		char *p = malloc(n);
		REQUIRE(p != NULL, "malloc(%zu)", n);
		size_t u = malloc_usable_size(p);
		CHECK(u >= n, "malloc_usable_size(malloc(%zu)) = %zu", n, u);
		prog_fill_ends(p, u, (uint32_t)i);
		char *q = realloc(p, u); /* "growing" to the usable size keeps everything */
		REQUIRE(q != NULL, "realloc to the usable size");
		CHECK(prog_verify_ends(q, u, (uint32_t)i) == u, "usable bytes kept by realloc");
		free(q);
	}
	CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
}

/* realloc growing and shrinking a 1..8 MiB buffer keeps its contents. */
static void test_realloc_big(void)
{
	const size_t steps[] = { 1u << 20, 2u << 20, (3u << 20) + 17, 8u << 20,
				 5u << 20, 1u << 20, (7u << 20) + 1,  4096,
				 8u << 20, 100 };
	char *p = malloc(1000);
	REQUIRE(p != NULL, "malloc(1000)");
	prog_fill(p, 1000, 77);
	size_t valid = 1000;
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		char *q = realloc(p, steps[i]);
		REQUIRE(q != NULL, "realloc(%zu)", steps[i]);
		size_t keep = valid < steps[i] ? valid : steps[i];
		size_t bad = prog_verify(q, keep, 77);
		CHECK(bad == keep, "realloc to %zu: byte %zu of %zu differs", steps[i], bad, keep);
		prog_fill(q, steps[i], 77);
		valid = steps[i];
		p = q;
	}
	free(p);
	/* realloc(NULL, n) is malloc(n). */
	p = realloc(NULL, 5000);
	REQUIRE(p != NULL, "realloc(NULL, 5000)");
	memset(p, 1, 5000);
	free(p);
}

/* Memory the C library allocates on the caller's behalf, freed by the caller. */
static void test_libc_allocations(void)
{
	char *s = strdup("tiered memory");
	CHECK(s != NULL && strcmp(s, "tiered memory") == 0, "strdup");
	char *s2 = strndup(s, 6);
	CHECK(s2 != NULL && strcmp(s2, "tiered") == 0, "strndup");
	char *a = NULL;
	CHECK(asprintf(&a, "%s-%d-%0500d", s, 42, 7) == 517 && a != NULL, "asprintf");
	free(s);
	free(s2);
	free(a);

	char *buf = NULL;
	size_t len = 0;
	FILE *ms = open_memstream(&buf, &len);
	REQUIRE(ms != NULL, "open_memstream");
	for (int i = 0; i < 20000; i++)
		fprintf(ms, "line %d\n", i);
	fclose(ms);
	CHECK(len > 100000 && buf != NULL && strncmp(buf, "line 0\n", 7) == 0, "open_memstream");

	FILE *in = fmemopen(buf, len, "r");
	REQUIRE(in != NULL, "fmemopen");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lines = 0;
	while ((n = getline(&line, &cap, in)) > 0)
		lines++;
	CHECK(lines == 20000, "getline read %ld lines", lines);
	fclose(in);
	free(line);
	free(buf);

	char *cwd = getcwd(NULL, 0);
	CHECK(cwd != NULL, "getcwd(NULL, 0)");
	free(cwd);
	char *rp = realpath("/", NULL);
	CHECK(rp != NULL && strcmp(rp, "/") == 0, "realpath");
	free(rp);
}

/* errno is left alone by successful calls. */
static void test_errno_kept(void)
{
	errno = 1234;
	void *p = malloc(100), *q = malloc(1u << 21);
	void *r = calloc(10, 10);
	p = realloc(p, 100000);
	void *al = aligned_alloc(256, 1000);
	CHECK(p && q && r && al, "allocations");
	free(p);
	free(q);
	free(r);
	free(al);
	CHECK(errno == 1234, "errno %d after successful calls", errno);
}

int main(void)
{
	prog_expect_preload();
	test_memalign_free();
	test_posix_memalign();
	test_aligned_realloc();
	test_valloc();
	test_overflow();
	test_calloc_reuse();
	test_usable_size();
	test_realloc_big();
	test_libc_allocations();
	test_errno_kept();
	printf("prog_mix: done\n");
	return prog_result("prog_mix");
}
