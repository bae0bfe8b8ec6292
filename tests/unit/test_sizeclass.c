/* SPDX-License-Identifier: MIT */
/*
 * Size classes (src/alloc/sizeclass.c), exhaustively: every small size maps to the smallest class
 * that holds it, every aligned request to the smallest class whose objects are all aligned, and
 * every class's run holds enough objects for the thread caches to be worth having.
 */
#include <string.h>

#include "internal.h"
#include "test.h"

/* Whether a process uses class c: a young one the coarse classes, one with fine classes on also
 * every fine class whose runs fit. */
static bool in_use(unsigned c, bool fine)
{
	return ta_class_is_coarse(c) || (fine && ta_class_fits(c));
}

static void test_table(void)
{
	test_context("class table");
	expect_eq(ta_class_size[0], 16);
	expect_eq(ta_class_size[TA_NCLASSES - 1], TA_SMALL_MAX);
	unsigned coarse = 0, fine_used = 0;
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		test_context("class %u (%u bytes)", c, ta_class_size[c]);
		/* 16-byte granularity: malloc's alignment guarantee for every class. */
		expect_eq(ta_class_size[c] % 16, 0);
		if (c > 0) {
			expect_gt(ta_class_size[c], ta_class_size[c - 1]);
			/* At most 12.5% internal fragmentation past 128 bytes, 3.1% past 1 KiB. */
			if (ta_class_size[c - 1] >= 128)
				expect_le(ta_class_size[c] - ta_class_size[c - 1],
					  ta_class_size[c - 1] / 8);
			if (ta_class_size[c - 1] >= 1024)
				expect_le(ta_class_size[c] - ta_class_size[c - 1],
					  ta_class_size[c - 1] / 32);
		}
		/* A young process's classes: at most 6.25% past 1 KiB, and every power of two. */
		if (ta_class_is_coarse(c)) {
			if (coarse >= 1024)
				expect_le(ta_class_size[c] - coarse, coarse / 16);
			coarse = ta_class_size[c];
		}
		if ((ta_class_size[c] & (ta_class_size[c] - 1)) == 0)
			expect_true(ta_class_is_coarse(c));
		ta_class_set_fine(true);
		expect_eq(ta_size_class(ta_class_size[c]), in_use(c, true) ? c : c + 1);
		if (in_use(c, true))
			fine_used += c >= 32 && ta_class_size[c] <= 16384 && !ta_class_is_coarse(c);
		ta_class_set_fine(false);
		expect_eq(ta_size_class(ta_class_size[c]), ta_class_is_coarse(c) ? c : c + 1);
	}
	/* Most fine classes to 16 KiB are used: 57 of the 64 have runs that fit. */
	test_context("fine classes");
	expect_ge(fine_used, 56);
	/* Thread caches: about 128 KiB of each class, 4 to 256 objects. */
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		test_context("class %u (%u bytes)", c, ta_class_size[c]);
		unsigned cap = ta_class_cache_cap[c];
		expect_ge(cap, 4);
		expect_le(cap, 256);
		if (cap > 4 && cap < 256)
			expect_eq(cap, 128 * 1024 / ta_class_size[c]);
	}
	test_context("%s", "");
}

/* The smallest class that holds n, among the coarse ones if coarse. */
static unsigned reference_class(size_t n, bool coarse)
{
	for (unsigned c = 0; c < TA_NCLASSES; c++)
		if (ta_class_size[c] >= n && in_use(c, !coarse))
			return c;
	return TA_NCLASSES;
}

static void test_every_size(void)
{
	for (int fine = 0; fine <= 1; fine++) {
		ta_class_set_fine(fine);
		unsigned want = 0;
		for (size_t n = 0; n <= TA_SMALL_MAX; n++) {
			while (want < TA_NCLASSES &&
			       (ta_class_size[want] < n || !in_use(want, fine)))
				want++;
			unsigned c = ta_size_class(n);
			if (c != want) {
				test_context("%s: size %zu -> class %u", fine ? "fine" : "coarse",
					     n, c);
				expect_eq(c, want);
				expect_eq(want, reference_class(n, !fine));
			}
			/* Counted once per size, not once per expectation. */
			test_checks++;
		}
	}
	ta_class_set_fine(false);
	test_context("%s", "");
}

/* The smallest class that is >= size and >= align and a multiple of align, or TA_NCLASSES. */
static unsigned reference_aligned(size_t size, size_t align, bool coarse)
{
	for (unsigned c = 0; c < TA_NCLASSES; c++)
		if (ta_class_size[c] >= size && ta_class_size[c] >= align &&
		    ta_class_size[c] % align == 0 && in_use(c, !coarse))
			return c;
	return TA_NCLASSES;
}

static void test_aligned(void)
{
	for (int fine = 0; fine <= 1; fine++) {
		ta_class_set_fine(fine);
		for (size_t align = 32; align <= TA_PAGE_SIZE; align *= 2) {
			unsigned served = 0;
			for (size_t n = 0; n <= TA_SMALL_MAX; n++) {
				unsigned c = ta_size_class_aligned(n, align);
				unsigned want = reference_aligned(n, align, !fine);
				test_checks++;
				if (c == want &&
				    (c == TA_NCLASSES || ta_class_size[c] % align == 0)) {
					served += c < TA_NCLASSES;
					continue;
				}
				test_context("size %zu align %zu", n, align);
				expect_eq(c, want);
				if (c < TA_NCLASSES)
					expect_eq(ta_class_size[c] % align, 0);
			}
			/* Every alignment up to the page is served from some class for small
			 * sizes. */
			test_context("align %zu", align);
			expect_gt(served, 0);
			expect_eq(ta_size_class_aligned(1, align),
				  reference_aligned(1, align, !fine));
			expect_lt(ta_size_class_aligned(align, align), TA_NCLASSES);
		}
	}
	ta_class_set_fine(false);
	/* Past the small range or past a page of alignment: a large object. */
	test_context("aligned limits");
	expect_eq(ta_size_class_aligned(TA_SMALL_MAX + 1, 32), TA_NCLASSES);
	expect_eq(ta_size_class_aligned(16, TA_PAGE_SIZE * 2), TA_NCLASSES);
	expect_eq(ta_size_class_aligned(SIZE_MAX, 64), TA_NCLASSES);
	test_context("%s", "");
}

static void test_runs(void)
{
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		unsigned pages = ta_class_run_pages(c);
		size_t bytes = (size_t)pages * TA_PAGE_SIZE;
		test_context("class %u (%u bytes), %u pages", c, ta_class_size[c], pages);
		expect_ge(pages, 1);
		/* A run and the chunk header page fit in one chunk. */
		expect_le(pages, TA_CHUNK_PAGES - 1);
		/* At least four objects per run, so that big classes are not one mmap per object.
		 */
		expect_ge(bytes / ta_class_size[c], 4);
		/* At most 16 pages, and at most 1/128 of the run after its last object where some
		 * run of at most 16 pages allows it; else no such run wastes a smaller share (at
		 * most 1/24 for these classes: bytes never touched, at the run's end). */
		expect_le(pages, TA_RUN_MAX_PAGES);
		size_t waste = bytes % ta_class_size[c];
		bool fine_exists = false;
		for (unsigned p = 1; p <= TA_RUN_MAX_PAGES; p++) {
			size_t b = (size_t)p * TA_PAGE_SIZE;
			if (b / ta_class_size[c] < 4)
				continue;
			fine_exists |= (b % ta_class_size[c]) * 128 <= b;
			if (waste * 128 > bytes)
				expect_le(waste * b, (b % ta_class_size[c]) * bytes);
		}
		if (fine_exists)
			expect_le(waste * 128, bytes);
		/* The classes in use: every coarse one, and fine ones whose runs fit. */
		if (ta_class_is_coarse(c))
			expect_le(waste * 24, bytes);
		else
			expect_eq(ta_class_fits(c), waste * 128 <= bytes);
		/* The end of a chunk: the whole run if it fits, else whole objects only. */
		expect_eq(ta_class_run_fit(c, pages), pages);
		expect_eq(ta_class_run_fit(c, TA_CHUNK_PAGES), pages);
		unsigned one = (unsigned)((ta_class_size[c] + TA_PAGE_SIZE - 1) / TA_PAGE_SIZE);
		expect_eq(ta_class_run_fit(c, one), one);
		if (one > 1)
			expect_eq(ta_class_run_fit(c, one - 1), 0);
		for (unsigned room = 1; room < pages; room++) {
			unsigned fit = ta_class_run_fit(c, room);
			size_t objects = (size_t)room * TA_PAGE_SIZE / ta_class_size[c];
			expect_le(fit, room);
			expect_eq((size_t)fit * TA_PAGE_SIZE / ta_class_size[c], objects);
		}
	}
	test_context("%s", "");
	/* 64 KiB objects: 16 pages hold four; a chunk's last 15 pages hold three. */
	unsigned c64 = ta_size_class(65536);
	expect_eq(ta_class_run_pages(c64), 16);
	expect_eq(ta_class_run_fit(c64, 15), 12);
	expect_eq(ta_class_run_fit(c64, 3), 0);
	/* 40 KiB objects: four in 160 KiB exactly (whole 64 KiB pages left 32 KiB of 192 unused).
	 */
	expect_eq(ta_class_run_pages(ta_size_class(40960)), 10);
	/* 1280-byte objects: one page leaves 1 KiB of 16 unused; four leave 256 bytes of 64 KiB. */
	expect_eq(ta_class_run_pages(ta_size_class(1280)), 4);
}

/* A process takes the fine classes once it holds TA_FINE_CLASSES_AFTER chunks of small objects:
 * 4200 bytes is 4352 before (6.25% steps), 4224 after (3.1%); objects keep their class. */
static void test_switch(void)
{
	test_context("fine classes: a young process");
	char *young = tieralloc_malloc(4200);
	expect_true(young != NULL);
	expect_true(!ta_class_fine());
	expect_eq(tieralloc_malloc_usable_size(young), 4352);
	memset(young, 0x5a, 4200);
	size_t n = (size_t)(TA_FINE_CLASSES_AFTER + 1) * (TA_CHUNK_SIZE / 65536);
	void **held = tieralloc_malloc(n * sizeof(*held));
	expect_true(held != NULL);
	if (held == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		held[i] = tieralloc_malloc(65536);
	test_context("fine classes: past %u chunks", TA_FINE_CLASSES_AFTER);
	expect_true(ta_class_fine());
	char *grown = tieralloc_malloc(4200);
	expect_eq(tieralloc_malloc_usable_size(grown), 4224);
	expect_eq(tieralloc_malloc_usable_size(young), 4352);
	expect_eq(young[0], 0x5a);
	expect_eq(young[4199], 0x5a);
	/* Grown past its class: the data goes along. */
	char *moved = tieralloc_realloc(young, 8000);
	expect_true(moved != NULL);
	if (moved != NULL)
		expect_eq(moved[4199], 0x5a);
	tieralloc_free(moved);
	tieralloc_free(grown);
	for (size_t i = 0; i < n; i++)
		tieralloc_free(held[i]);
	tieralloc_free(held);
	ta_class_set_fine(false);
	/* Fine bins may still hold objects: decay keeps looking at them. */
	expect_true(ta_class_fine());
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	/* Class runs: packed objects (a young process's first medium ones) are test_pack's. */
	static const char *const env[] = { "TIERALLOC_PACK=0", NULL };
	test_reexec_with_env(argv, env);
	test_switch();
	test_table();
	test_every_size();
	test_aligned();
	test_runs();
	return test_done();
}
