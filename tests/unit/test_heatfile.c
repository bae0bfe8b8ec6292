/* SPDX-License-Identifier: MIT */
/*
 * The agent's access file (src/enforce/heatfile.c): what the worker believes of it and how a
 * range's accessed part comes out of its regions. The file comes through /dev/shm, so every
 * way it can be wrong (another process's, stale, torn, regions out of order) must be refused,
 * and the part must stay within 0..1000 whatever the regions say.
 */
#include <string.h>

#include "enforce/heatfile.h"
#include "test.h"

#define MiB (1024ull * 1024)

static uint64_t buf[TA_HEATFILE_MAX_BYTES / 8 + 1];

static size_t make(uint32_t pid, uint64_t start, uint64_t written,
		   const struct ta_heatfile_region *r, uint32_t n)
{
	struct ta_heatfile_header h = { .pid = pid,
					.start_time = start,
					.written_ns = written,
					.window_ns = written - 900,
					.interval_ns = 1000,
					.max_accesses = 10,
					.source = TA_HEATFILE_SOURCE_DAMON };
	return ta_heatfile_encode(buf, &h, r, n);
}

static void test_parse(void)
{
	const struct ta_heatfile_region r[] = { { 4 * MiB, 8 * MiB, 10, 3 },
						{ 8 * MiB, 16 * MiB, 0, 5 } };
	const struct ta_heatfile_header *h;
	const struct ta_heatfile_region *got;
	const char *why = NULL;

	test_context("a good file");
	size_t len = make(42, 7, 5000, r, 2);
	expect_eq(len, sizeof(struct ta_heatfile_header) + 2 * sizeof(struct ta_heatfile_region));
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), 0);
	expect_eq(h->nregions, 2);
	expect_eq(h->window_ns, 4100);
	expect_eq(got[1].end, 16 * MiB);

	test_context("refused");
	expect_eq(ta_heatfile_parse(buf, len, 43, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file of another process");
	expect_eq(ta_heatfile_parse(buf, len, 42, 8, 5500, &h, &got, &why), -1); /* pid reused */
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5000 + 3001, &h, &got, &why), -1);
	expect_str_eq(why, "the agent's access file is stale");
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 4999, &h, &got, &why), -1); /* future */
	expect_eq(ta_heatfile_parse(buf, len - 1, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file of the wrong size");
	expect_eq(ta_heatfile_parse(buf, 10, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "not an access file");

	const struct ta_heatfile_region overlap[] = { { 4 * MiB, 9 * MiB, 1, 0 },
						      { 8 * MiB, 16 * MiB, 1, 0 } };
	len = make(42, 7, 5000, overlap, 2);
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file with bad regions");
	const struct ta_heatfile_region too_many[] = { { 4 * MiB, 8 * MiB, 11, 0 } };
	len = make(42, 7, 5000, too_many, 1);
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);
	const struct ta_heatfile_region empty[] = { { 8 * MiB, 8 * MiB, 1, 0 } };
	len = make(42, 7, 5000, empty, 1);
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);

	len = make(42, 7, 5000, r, 2);
	((struct ta_heatfile_header *)buf)->version = TA_HEATFILE_VERSION - 1; /* no window_ns */
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file of another version");
	/* Counts that say nothing of when they began, or began after the file was written. */
	len = make(42, 7, 5000, r, 2);
	((struct ta_heatfile_header *)buf)->window_ns = 0;
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file without the start of its counts");
	((struct ta_heatfile_header *)buf)->window_ns = 5001;
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);
	expect_str_eq(why, "an access file without the start of its counts");
	((struct ta_heatfile_header *)buf)->window_ns = 5000;
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), 0);
	len = make(42, 7, 5000, r, 2);
	((struct ta_heatfile_header *)buf)->max_accesses = 0;
	expect_eq(ta_heatfile_parse(buf, len, 42, 7, 5500, &h, &got, &why), -1);

	test_context("too many regions to write");
	static struct ta_heatfile_region many[TA_HEATFILE_MAX_REGIONS + 1];
	expect_eq(make(42, 7, 5000, many, TA_HEATFILE_MAX_REGIONS + 1), 0);
	test_context("%s", "");
}

static void test_part(void)
{
	const struct ta_heatfile_region r[] = { { 4 * MiB, 8 * MiB, 10, 0 },
						{ 8 * MiB, 12 * MiB, 5, 0 },
						{ 16 * MiB, 20 * MiB, 0, 0 } };
	test_context("accessed parts");
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 4 * MiB, 4 * MiB), 1000); /* every sample */
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 8 * MiB, 4 * MiB), 500);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 6 * MiB, 4 * MiB), 750); /* half each */
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 16 * MiB, 4 * MiB), 0);
	/* Not covered (a gap, past the end, before the start): not accessed. */
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 12 * MiB, 4 * MiB), 0);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 10 * MiB, 4 * MiB), 250);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 64 * MiB, 4 * MiB), 0);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 0, 4 * MiB), 0);
	expect_eq(ta_heatfile_part(r, 0, 10, NULL, 4 * MiB, 4 * MiB), 0);
	/* Degenerate input stays in range. */
	expect_eq(ta_heatfile_part(r, 3, 0, NULL, 4 * MiB, 4 * MiB), 0);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 4 * MiB, 0), 0);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, UINT64_MAX - 4096, 8192), 0);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 4 * MiB + 100, 100), 1000); /* under a page */
	test_context("%s", "");
}

/* A region's rate is taken over the part of it that holds the process's memory. */
static void test_held(void)
{
	const struct ta_heatfile_region r[] = { { 4 * MiB, 8 * MiB, 5, 0 },
						{ 8 * MiB, 24 * MiB, 1, 0 },
						{ 24 * MiB, 28 * MiB, 5, 0 } };
	uint64_t held[3] = { 0, 0, 0 };
	test_context("held bytes");
	ta_heatfile_hold(r, 3, 4 * MiB, 2 * MiB, held);	 /* half of the first */
	ta_heatfile_hold(r, 3, 7 * MiB, 3 * MiB, held);	 /* across two */
	ta_heatfile_hold(r, 3, 1 * MiB, 2 * MiB, held);	 /* before them all */
	ta_heatfile_hold(r, 3, 24 * MiB, 8 * MiB, held); /* past the end */
	ta_heatfile_hold(r, 3, UINT64_MAX - 4096, 8192, held);
	expect_eq(held[0], 3 * MiB);
	expect_eq(held[1], 2 * MiB);
	expect_eq(held[2], 4 * MiB);

	test_context("rates over the held part");
	uint64_t h[3] = { 2 * MiB, 4 * MiB, 8 * MiB };
	/* Half held, accessed in half the samples: all of what is held was. */
	expect_eq(ta_heatfile_part(r, 3, 10, h, 4 * MiB, 2 * MiB), 1000);
	expect_eq(ta_heatfile_part(r, 3, 10, NULL, 4 * MiB, 2 * MiB), 500);
	/* A quarter held: at most four times the region's own rate. */
	expect_eq(ta_heatfile_part(r, 3, 10, h, 8 * MiB, 4 * MiB), 400);
	h[1] = 1 * MiB; /* a sixteenth: still four times */
	expect_eq(ta_heatfile_part(r, 3, 10, h, 8 * MiB, 1 * MiB), 400);
	h[1] = 0;
	expect_eq(ta_heatfile_part(r, 3, 10, h, 8 * MiB, 1 * MiB), 400);
	/* Held more than the region (ranges counted twice): never below its own rate. */
	expect_eq(ta_heatfile_part(r, 3, 10, h, 24 * MiB, 4 * MiB), 500);
	/* Across regions: each at its own scale. */
	h[0] = 4 * MiB;
	h[1] = 16 * MiB;
	expect_eq(ta_heatfile_part(r, 3, 10, h, 6 * MiB, 4 * MiB), 300);
	/* Capped: a region read in every sample, an eighth held. */
	const struct ta_heatfile_region full[] = { { 0, 8 * MiB, 10, 0 } };
	uint64_t one[1] = { 1 * MiB };
	expect_eq(ta_heatfile_part(full, 1, 10, one, 0, 1 * MiB), 1000);
	test_context("%s", "");
}

int main(void)
{
	test_parse();
	test_part();
	test_held();
	return test_done();
}
