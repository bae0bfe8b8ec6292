/* SPDX-License-Identifier: MIT */
/*
 * Heap integrity (src/alloc/check.c, alloc.h "Heap integrity"), under TIERALLOC_ON_MISUSE=warn so
 * that each misuse is said and survived:
 *   - every class: a pointer starts an object of its run exactly when its offset in the run is
 *     a multiple of the class's size below the run's last object (every 16-byte offset of a run
 *     of each class, against the run's own nobj);
 *   - a packed header with any one of its bytes changed, or copied to another object, no longer
 *     names a class;
 *   - a double free (small, packed) is said once and the object handed out once;
 *   - a free-list link overwritten after the free (run list, packed list) is said when taken,
 *     and neither that object nor the pointer written there is handed out;
 *   - links are stored encoded: the word in a freed object is not the next object's address.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

static bool is_packed(const void *p)
{
	return ta_chunk_class_of(p) == TA_PAGE_PACKED;
}

static struct ta_run *run_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct ta_chunk *c = (struct ta_chunk *)(a & ~(TA_CHUNK_SIZE - 1));
	unsigned page = (unsigned)((a & (TA_CHUNK_SIZE - 1)) >> TA_PAGE_SHIFT);
	return &c->run[page - c->run_back[page]];
}

/* Said lines of a call, captured. */
static unsigned said(void (*fn)(void *), void *arg, const char *what)
{
	struct test_capture cap;
	char buf[4096];
	capture_begin(&cap);
	fn(arg);
	capture_end(&cap, buf, sizeof(buf));
	unsigned n = count_lines(buf, "tieralloc: warning: ");
	if (what != NULL && strstr(buf, what) == NULL)
		test_fail(__FILE__, __LINE__, "expected \"%s\" in: %s", what, buf);
	return n;
}

static void do_free(void *p)
{
	tieralloc_free(p);
}

static void run_starts(void)
{
	ta_class_set_fine(true); /* the fine classes' runs too */
	for (unsigned cls = 0; cls < TA_NCLASSES; cls++) {
		if (!ta_class_is_coarse(cls) && !ta_class_fine_ok[cls])
			continue;
		test_context("class %u (%u bytes)", cls, ta_class_size[cls]);
		void *p = tieralloc_malloc(ta_class_size[cls]);
		if (p == NULL || is_packed(p) || ta_chunk_class_of(p) != cls)
			test_hard("malloc(%u): no object of a class run", ta_class_size[cls]);
		struct ta_run *r = run_of(p);
		char *base =
		    (char *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1)) +
		    (size_t)(r - ((struct ta_chunk *)((uintptr_t)p & ~(TA_CHUNK_SIZE - 1)))->run) *
			TA_PAGE_SIZE;
		size_t size = ta_class_size[cls], bytes = (size_t)r->pages * TA_PAGE_SIZE;
		unsigned wrong = 0;
		for (size_t off = 0; off < bytes; off += 16) {
			bool start = off % size == 0 && off / size < r->nobj;
			wrong += ta_run_starts(base + off, cls) != start;
			wrong += (ta_small_class_of(base + off) == cls) != start;
		}
		expect_eq(wrong, 0);
		tieralloc_free(p);
	}
	ta_class_set_fine(false);
	test_context("%s", "");
}

static void packed_header(void)
{
	ta_arena_set_pack_limit(16u << 20);
	settle(); /* no cached object of the classes: packed ones are cut */
	test_context("a packed header with a byte changed, or another's, names no class");
	char *a = tieralloc_malloc(1000), *b = tieralloc_malloc(200);
	expect_true(a != NULL && b != NULL && is_packed(a) && is_packed(b));
	unsigned cls = ta_small_class_of(a);
	expect_lt(cls, TA_NCLASSES);
	uint64_t good, other;
	memcpy(&good, a - 8, 8);
	memcpy(&other, b - 8, 8);
	unsigned passed = 0;
	for (unsigned byte = 0; byte < 8; byte++) {
		for (unsigned v = 1; v < 256; v++) {
			unsigned char *h = (unsigned char *)a - 8;
			h[byte] ^= (unsigned char)v;
			passed += ta_small_class_of(a) != TA_NCLASSES;
			h[byte] ^= (unsigned char)v;
		}
	}
	/* 24 bits of hash: a changed field passes by chance once in 16 M (1275 tries here). */
	expect_le(passed, 1);
	memcpy(a - 8, &other, 8);
	expect_eq(ta_small_class_of(a), TA_NCLASSES);
	expect_eq(ta_small_usable(a), 0);
	memcpy(a - 8, &good, 8);
	expect_eq(ta_small_class_of(a), cls);
	tieralloc_free(a);
	tieralloc_free(b);
}

static void double_free(size_t size)
{
	test_context("double free of a %zu-byte object", size);
	settle(); /* no cached object of the class: a packed one is cut while packing */
	void *keep = tieralloc_malloc(size), *p = tieralloc_malloc(size);
	expect_eq(is_packed(p), size > 64);
	tieralloc_free(p);
	expect_eq(said(do_free, p, "double free"), 1);
	void *q[64];
	unsigned seen = 0;
	for (unsigned i = 0; i < 64; i++) {
		q[i] = tieralloc_malloc(size);
		seen += q[i] == p;
	}
	expect_le(seen, 1);
	for (unsigned i = 0; i < 64; i++)
		tieralloc_free(q[i]);
	tieralloc_free(keep);
}

static void overwritten_link(size_t size)
{
	test_context("a %zu-byte object's free-list link overwritten", size);
	settle();
	enum { N = 64 };
	void *v[N], *live = tieralloc_malloc(size);
	for (unsigned i = 0; i < N; i++)
		v[i] = tieralloc_malloc(size);
	expect_eq(is_packed(v[0]), size > 64);
	for (unsigned i = 0; i < N; i += 2)
		tieralloc_free(v[i]);
	settle(); /* onto the run's or the packed list; the run keeps live objects */
	void *next = ta_link_get(v[0]);
	uint64_t word;
	memcpy(&word, v[0], 8);
	expect_true(word != (uintptr_t)next); /* stored encoded */
	for (unsigned i = 0; i < N; i += 2)
		memcpy(v[i], &live, sizeof(live));
	struct test_capture cap;
	char buf[4096];
	void *q[2 * N];
	unsigned bad = 0;
	capture_begin(&cap);
	for (unsigned i = 0; i < 2 * N; i++) {
		q[i] = tieralloc_malloc(size);
		bad += q[i] == live;
		for (unsigned k = 0; k < N; k += 2)
			bad += q[i] == v[k];
	}
	capture_end(&cap, buf, sizeof(buf));
	expect_ge(count_lines(buf, "tieralloc: warning: malloc(): free-list link"), 1);
	expect_eq(bad, 0);
	for (unsigned i = 0; i < 2 * N; i++)
		tieralloc_free(q[i]);
	for (unsigned i = 1; i < N; i += 2)
		tieralloc_free(v[i]);
	tieralloc_free(live);
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_PACK=0", "TIERALLOC_ON_MISUSE=warn", NULL };
	test_reexec_with_env(argv, env);
	run_starts();
	packed_header();
	ta_arena_set_pack_limit(0);
	double_free(48);
	overwritten_link(48);
	/* 1024: a packed object of that size serves its own class (1024) once freed. */
	ta_arena_set_pack_limit(16u << 20);
	double_free(1024);
	overwritten_link(1024);
	return test_done();
}
