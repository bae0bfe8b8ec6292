/* SPDX-License-Identifier: MIT */
/*
 * Size classes (src/alloc/sizeclass.c), exhaustively: every small size maps to the smallest class
 * that holds it, every aligned request to the smallest class whose objects are all aligned, and
 * every class's run holds enough objects for the thread caches to be worth having.
 */
#include "internal.h"
#include "test.h"

static void test_table(void)
{
	test_context("class table");
	expect_eq(ta_class_size[0], 16);
	expect_eq(ta_class_size[TA_NCLASSES - 1], TA_SMALL_MAX);
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		test_context("class %u (%u bytes)", c, ta_class_size[c]);
		/* 16-byte granularity: malloc's alignment guarantee for every class. */
		expect_eq(ta_class_size[c] % 16, 0);
		if (c > 0) {
			expect_gt(ta_class_size[c], ta_class_size[c - 1]);
			/* At most 12.5% internal fragmentation past 128 bytes, 6.25% past
			 * 1 KiB. */
			if (ta_class_size[c - 1] >= 128)
				expect_le(ta_class_size[c] - ta_class_size[c - 1],
					  ta_class_size[c - 1] / 8);
			if (ta_class_size[c - 1] >= 1024)
				expect_le(ta_class_size[c] - ta_class_size[c - 1],
					  ta_class_size[c - 1] / 16);
		}
		expect_eq(ta_size_class(ta_class_size[c]), c);
	}
	test_context("%s", "");
}

static void test_every_size(void)
{
	for (size_t n = 0; n <= TA_SMALL_MAX; n++) {
		unsigned c = ta_size_class(n);
		if (c >= TA_NCLASSES || ta_class_size[c] < n ||
		    (c > 0 && ta_class_size[c - 1] >= n)) {
			test_context("size %zu -> class %u", n, c);
			expect_lt(c, TA_NCLASSES);
			if (c < TA_NCLASSES) {
				expect_ge(ta_class_size[c], n); /* holds n */
				if (c > 0)			/* and is the smallest */
					expect_lt(ta_class_size[c - 1], n);
			}
		}
		/* Counted once per size, not once per expectation. */
		test_checks++;
	}
	test_context("%s", "");
}

/* The smallest class that is >= size and >= align and a multiple of align, or TA_NCLASSES. */
static unsigned reference_aligned(size_t size, size_t align)
{
	for (unsigned c = 0; c < TA_NCLASSES; c++)
		if (ta_class_size[c] >= size && ta_class_size[c] >= align &&
		    ta_class_size[c] % align == 0)
			return c;
	return TA_NCLASSES;
}

static void test_aligned(void)
{
	for (size_t align = 32; align <= TA_PAGE_SIZE; align *= 2) {
		unsigned served = 0;
		for (size_t n = 0; n <= TA_SMALL_MAX; n++) {
			unsigned c = ta_size_class_aligned(n, align);
			unsigned want = reference_aligned(n, align);
			test_checks++;
			if (c == want && (c == TA_NCLASSES || ta_class_size[c] % align == 0)) {
				served += c < TA_NCLASSES;
				continue;
			}
			test_context("size %zu align %zu", n, align);
			expect_eq(c, want);
			if (c < TA_NCLASSES)
				expect_eq(ta_class_size[c] % align, 0);
		}
		/* Every alignment up to the page is served from some class for small sizes. */
		test_context("align %zu", align);
		expect_gt(served, 0);
		expect_eq(ta_size_class_aligned(1, align), reference_aligned(1, align));
		expect_lt(ta_size_class_aligned(align, align), TA_NCLASSES);
	}
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
		expect_le(waste * 24, bytes);
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
		/* Thread caches hold a few objects of every class. */
		expect_ge(ta_class_cache_cap[c], 4);
		expect_le(ta_class_cache_cap[c], 256);
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

int main(int argc, char **argv)
{
	test_reexec_with_env(argv, NULL);
	test_table();
	test_every_size();
	test_aligned();
	test_runs();
	return test_done();
}
