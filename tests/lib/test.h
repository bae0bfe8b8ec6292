/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' harness: expect_* macros that count failures and print file:line with both
 * values, a context string for table-driven loops, stderr capture (the core logs with write(2)
 * on fd 2) and a re-exec helper for tests that need TIERALLOC_* set before the core starts.
 * Exit codes are automake's: 0 pass, 1 fail, 77 skip, 99 hard error (the test could not run).
 * Header-only on purpose: each test is one .c file, and these helpers are small.
 */
#ifndef TA_TEST_H
#define TA_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEST_PASS	0
#define TEST_FAIL	1
#define TEST_SKIP	77
#define TEST_HARD_ERROR 99

/* Loops over thousands of cases must not drown the log: the first failures tell the story. */
#define TEST_MAX_REPORTED 40

static unsigned test_checks, test_failures;
static char test_ctx[160]; /* what the current check is about; printed with a failure */

#define TEST_UNUSED	     __attribute__((unused))
#define TEST_NORETURN	     __attribute__((noreturn))
#define TEST_PRINTF(fmt, va) __attribute__((format(printf, fmt, va)))

/* Describe the case being checked, printf style; "" clears it. */
static TEST_UNUSED TEST_PRINTF(1, 2) void test_context(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(test_ctx, sizeof(test_ctx), fmt, ap);
	va_end(ap);
}

static TEST_UNUSED TEST_PRINTF(3, 4) void test_fail(const char *file, int line, const char *fmt,
						    ...)
{
	test_failures++;
	if (test_failures > TEST_MAX_REPORTED)
		return;
	va_list ap;
	va_start(ap, fmt);
	/* stdout: stderr may be redirected by a capture at this moment. */
	printf("FAIL %s:%d: ", file, line);
	vprintf(fmt, ap);
	if (test_ctx[0] != '\0')
		printf(" [%s]", test_ctx);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

#define expect_true(cond)                                                                          \
	do {                                                                                       \
		test_checks++;                                                                     \
		if (!(cond))                                                                       \
			test_fail(__FILE__, __LINE__, "expected true: %s", #cond);                 \
	} while (0)

/* Integers of any type and signedness, converted to cast (uintmax_t or intmax_t) to compare;
 * both values are printed signed and in hex. */
#define expect_cmp_(a, op, b, cast)                                                                \
	do {                                                                                       \
		cast l_ = (cast)(a), r_ = (cast)(b);                                               \
		test_checks++;                                                                     \
		if (!(l_ op r_))                                                                   \
			test_fail(__FILE__, __LINE__,                                              \
				  "%s " #op " %s: left %jd (0x%jx), right %jd (0x%jx)", #a, #b,    \
				  (intmax_t)l_, (uintmax_t)l_, (intmax_t)r_, (uintmax_t)r_);       \
	} while (0)
#define expect_eq(a, b) expect_cmp_(a, ==, b, uintmax_t)
#define expect_ne(a, b) expect_cmp_(a, !=, b, uintmax_t)
/* Ordered comparisons are unsigned (sizes, byte counts); use the _i forms for signed values. */
#define expect_le(a, b)	  expect_cmp_(a, <=, b, uintmax_t)
#define expect_ge(a, b)	  expect_cmp_(a, >=, b, uintmax_t)
#define expect_lt(a, b)	  expect_cmp_(a, <, b, uintmax_t)
#define expect_gt(a, b)	  expect_cmp_(a, >, b, uintmax_t)
#define expect_ge_i(a, b) expect_cmp_(a, >=, b, intmax_t)

#define expect_str_eq(a, b)                                                                        \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		test_checks++;                                                                     \
		if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                               \
			test_fail(__FILE__, __LINE__, "%s == %s: left \"%s\", right \"%s\"", #a,   \
				  #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                     \
	} while (0)

/* The test cannot run here (no such hardware, feature missing): automake's SKIP. */
static TEST_UNUSED TEST_NORETURN TEST_PRINTF(1, 2) void test_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("SKIP: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(TEST_SKIP);
}

/* Setup failed (no temp dir, exec failed): automake's ERROR, distinct from a failed check. */
static TEST_UNUSED TEST_NORETURN TEST_PRINTF(1, 2) void test_hard(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("ERROR: ");
	vprintf(fmt, ap);
	printf(" (errno %d: %s)\n", errno, strerror(errno));
	va_end(ap);
	exit(TEST_HARD_ERROR);
}

/*
 * Checks of a reported, not yet fixed bug run only with TA_TEST_KNOWN_BUGS=1, so that `make check`
 * stays green meanwhile and the reproducer sits in the test, ready to be switched on with the fix.
 */
static TEST_UNUSED bool test_known_bug(const char *what)
{
	const char *on = getenv("TA_TEST_KNOWN_BUGS");
	if (on != NULL && strcmp(on, "1") == 0)
		return true;
	printf("KNOWN BUG, not checked (TA_TEST_KNOWN_BUGS=1 checks it): %s\n", what);
	return false;
}

/* AddressSanitizer flags reads in front of an object even when the code under test means them. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

/* End of main: `return test_done();`. */
static TEST_UNUSED int test_done(void)
{
	printf("%u checks, %u failed\n", test_checks, test_failures);
	return test_failures == 0 ? TEST_PASS : TEST_FAIL;
}

/*
 * Capture what is written to fd 2 between capture_begin and capture_end. The core logs with raw
 * write(2) calls, so swapping the descriptor (not the FILE) is what catches its lines. A temp
 * file rather than a pipe: a pipe would block a chatty writer once its buffer is full.
 */
struct test_capture {
	int saved_fd;
	FILE *file;
};

static TEST_UNUSED void capture_begin(struct test_capture *c)
{
	fflush(stderr);
	c->file = tmpfile();
	c->saved_fd = dup(STDERR_FILENO);
	if (c->file == NULL || c->saved_fd < 0 || dup2(fileno(c->file), STDERR_FILENO) < 0)
		test_hard("cannot capture stderr");
}

/* Stop capturing; the text (NUL-terminated, truncated to size) goes to buf. */
static TEST_UNUSED void capture_end(struct test_capture *c, char *buf, size_t size)
{
	fflush(stderr);
	if (dup2(c->saved_fd, STDERR_FILENO) < 0)
		test_hard("cannot restore stderr");
	close(c->saved_fd);
	rewind(c->file);
	size_t n = fread(buf, 1, size - 1, c->file);
	buf[n] = '\0';
	fclose(c->file);
}

/* Lines of text that start with prefix. */
static TEST_UNUSED unsigned count_lines(const char *text, const char *prefix)
{
	unsigned n = 0;
	size_t plen = strlen(prefix);
	for (const char *line = text; *line != '\0';) {
		if (strncmp(line, prefix, plen) == 0)
			n++;
		const char *nl = strchr(line, '\n');
		if (nl == NULL)
			break;
		line = nl + 1;
	}
	return n;
}

/* One mapping of /proc/self/smaps, as test_smaps_each hands it over. */
struct test_smaps_vma {
	uintptr_t lo, hi;
	unsigned long anon_huge_kb; /* AnonHugePages */
	const char *flags;	    /* the VmFlags line, after "VmFlags:" */
};

/* Calls fn for each mapping of this process, at its VmFlags line (the last of each), until fn
 * returns false. */
static TEST_UNUSED void test_smaps_each(bool (*fn)(const struct test_smaps_vma *, void *),
					void *arg)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (f == NULL)
		test_hard("/proc/self/smaps: %s", strerror(errno));
	char line[512];
	struct test_smaps_vma v = { 0, 0, 0, NULL };
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		size_t word = strcspn(line, " ");
		if (word > 0 && line[word - 1] != ':' && sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			v = (struct test_smaps_vma){ lo, hi, 0, NULL };
		} else if (strncmp(line, "AnonHugePages:", 14) == 0) {
			v.anon_huge_kb = strtoul(line + 14, NULL, 10);
		} else if (strncmp(line, "VmFlags:", 8) == 0) {
			v.flags = line + 8;
			if (!fn(&v, arg))
				break;
		}
	}
	fclose(f);
}

struct test_thp_advice_arg {
	uintptr_t p;
	char advice;
};

static TEST_UNUSED bool test_thp_advice_of(const struct test_smaps_vma *v, void *arg)
{
	struct test_thp_advice_arg *a = arg;
	if (a->p < v->lo || a->p >= v->hi)
		return true;
	a->advice = strstr(v->flags, " hg") ? 'h' : strstr(v->flags, " nh") ? 'n' : '-';
	return false;
}

/* How the mapping holding p is advised: 'h' for MADV_HUGEPAGE ("hg" in VmFlags), 'n' for
 * MADV_NOHUGEPAGE ("nh"), '-' for neither, '?' when no mapping holds it. */
static TEST_UNUSED char test_thp_advice(const void *p)
{
	struct test_thp_advice_arg a = { (uintptr_t)p, '?' };
	test_smaps_each(test_thp_advice_of, &a);
	return a.advice;
}

static TEST_UNUSED bool test_nohuge_huge_of(const struct test_smaps_vma *v, void *arg)
{
	if (strstr(v->flags, " nh") != NULL)
		*(unsigned long *)arg += v->anon_huge_kb;
	return true;
}

/* kB of huge pages in this process's MADV_NOHUGEPAGE mappings ("nh" in VmFlags). */
static TEST_UNUSED unsigned long test_nohuge_huge_kb(void)
{
	unsigned long total = 0;
	test_smaps_each(test_nohuge_huge_of, &total);
	return total;
}

/* This process's resident anonymous memory, kB (RssAnon of /proc/self/status). */
static TEST_UNUSED unsigned long test_rss_anon_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		test_hard("/proc/self/status: %s", strerror(errno));
	char line[256];
	unsigned long kb = 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "RssAnon:", 8) == 0)
			kb = strtoul(line + 8, NULL, 10);
	fclose(f);
	return kb;
}

/*
 * The core reads the environment once, in its constructor, before main. A test that needs
 * TIERALLOC_* values runs itself again with them: every TIERALLOC_* variable inherited from the
 * caller is removed (so that a developer's shell cannot change the outcome) and vars
 * ("NAME=value", NULL-terminated) are set. Returns only in the re-executed process.
 */
static TEST_UNUSED void test_reexec_with_env(char **argv, const char *const *vars)
{
	static const char marker[] = "TA_TEST_REEXECED";
	extern char **environ;
	if (getenv(marker) != NULL)
		return;
	char names[32][64];
	unsigned n = 0;
	for (char **e = environ; *e != NULL && n < 32; e++) {
		const char *eq = strchr(*e, '=');
		if (strncmp(*e, "TIERALLOC_", 10) == 0 && eq != NULL && eq - *e < 64) {
			memcpy(names[n], *e, (size_t)(eq - *e));
			names[n++][eq - *e] = '\0';
		}
	}
	for (unsigned i = 0; i < n; i++)
		unsetenv(names[i]);
	for (unsigned i = 0; vars != NULL && vars[i] != NULL; i++)
		if (putenv((char *)vars[i]) != 0)
			test_hard("putenv %s", vars[i]);
	setenv(marker, "1", 1);
	fflush(stdout);
	execv("/proc/self/exe", argv);
	test_hard("cannot re-execute /proc/self/exe");
}

#endif /* TA_TEST_H */
