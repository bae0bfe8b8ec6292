/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the C robustness programs of tests/integration (prog_*.c). They are ordinary
 * programs, not linked with tieralloc: tests/run-preload.sh starts them under the preload, and
 * they verify their own results (contents, alignment, errno) and exit non-zero on failure, so
 * that they also run, and pass, with the C library's allocator. Under run-preload.sh
 * (TA_TEST_UNDER_PRELOAD=1) prog_expect_preload() additionally checks that malloc really is
 * tieralloc's, so that a preload that failed to load or fell back to pass-through cannot pass
 * unnoticed.
 */
#ifndef TA_TEST_PROG_H
#define TA_TEST_PROG_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int prog_failures;

/* Both evaluate cond once: it may have side effects (waitpid). */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			prog_report(__FILE__, __LINE__, #cond, __VA_ARGS__);                       \
	} while (0)

/* Stop at once: later steps would only add noise (or crash) after this one failed. */
#define REQUIRE(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			prog_report(__FILE__, __LINE__, #cond, __VA_ARGS__);                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static inline void prog_report(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void prog_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d: check failed: %s: ", file, line, cond);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	atomic_fetch_add(&prog_failures, 1);
}

/* The exit status for main: 0, or 1 when a check failed. */
static inline int prog_result(const char *name)
{
	int n = atomic_load(&prog_failures);
	if (n != 0)
		fprintf(stderr, "%s: %d check(s) failed\n", name, n);
	return n == 0 ? 0 : 1;
}

/* A byte pattern that depends on the seed and the position: a block that was overwritten or
 * handed out twice shows up as a mismatch. */
static inline unsigned char prog_pattern(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 16);
	return (unsigned char)(x >> 13);
}

static inline void prog_fill(void *p, size_t n, uint32_t seed)
{
	unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		c[i] = prog_pattern(seed, i);
}

/* Index of the first byte that does not match, or n. */
static inline size_t prog_verify(const void *p, size_t n, uint32_t seed)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != prog_pattern(seed, i))
			return i;
	return n;
}

/* Cheaper variants for hot loops: only the first and last 256 bytes carry the pattern. */
static inline void prog_fill_ends(void *p, size_t n, uint32_t seed)
{
	if (n <= 512) {
		prog_fill(p, n, seed);
		return;
	}
	prog_fill(p, 256, seed);
	prog_fill((char *)p + n - 256, 256, seed + 1);
}

static inline size_t prog_verify_ends(const void *p, size_t n, uint32_t seed)
{
	if (n <= 512)
		return prog_verify(p, n, seed);
	size_t bad = prog_verify(p, 256, seed);
	if (bad != 256)
		return bad;
	bad = prog_verify((const char *)p + n - 256, 256, seed + 1);
	return bad == 256 ? n : n - 256 + bad;
}

/* xorshift: deterministic sizes and choices per thread. */
static inline uint32_t prog_rand(uint32_t *s)
{
	uint32_t x = *s ? *s : 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* A size with a skew to small objects, up to max (cache-sized, page-sized and large). */
static inline size_t prog_size(uint32_t *s, size_t max)
{
	uint32_t r = prog_rand(s);
	size_t n;
	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		n = 1 + (r >> 8) % 128;
		break;
	case 3:
	case 4:
		n = 1 + (r >> 8) % 2048;
		break;
	case 5:
		n = 1 + (r >> 8) % 70000;
		break;
	case 6:
		n = (size_t)4096 << ((r >> 8) % 5);
		break;
	default:
		n = 1 + (r >> 8) % (2u << 20);
		break;
	}
	return n < max ? n : max;
}

/* Under run-preload.sh, check that tieralloc serves malloc (it exports tieralloc_tier_of). */
static inline void prog_expect_preload(void)
{
	const char *under = getenv("TA_TEST_UNDER_PRELOAD");
	if (under == NULL || strcmp(under, "1") != 0)
		return;
	int (*tier_of)(const void *) =
	    (int (*)(const void *))dlsym(RTLD_DEFAULT, "tieralloc_tier_of");
	REQUIRE(tier_of != NULL, "tieralloc_tier_of not found: is the preload loaded?");
	void *small = malloc(24), *large = malloc(1 << 20);
	REQUIRE(small != NULL && large != NULL, "malloc failed");
	REQUIRE(tier_of(small) >= 0 && tier_of(large) >= 0,
		"malloc'd memory is not tieralloc's (tier %d and %d): pass-through?",
		tier_of(small), tier_of(large));
	free(small);
	free(large);
}

#endif /* TA_TEST_PROG_H */
