/* SPDX-License-Identifier: MIT */
/*
 * Which of this process's memory in a tier is coldest: the ranking of demotion candidates, chunks
 * (arena.c), large objects (large.c) and windows of the program's own mappings (maps.c) together.
 *
 * The policy ranks by heat first (access.c: how much of a range was written lately; a range made
 * since the last sample ranks as hottest), then by age: a large object is as cold as it is old,
 * a chunk as long ago as a run was last cut from it. Without an access source every heat is
 * unknown and age alone decides (TIERALLOC_ACCESS=age, or a kernel without soft-dirty bits).
 *
 * The large objects a ranking returns are marked busy until released (large.c says why).
 */
#include <string.h>

#include "enforce/enforce.h"

#define AGE_BITS 40

/* Heat in the high bits, then youth in milliseconds (2^40 ms is 34 years). */
static uint64_t score_by_heat_then_age(const struct ta_cold_range *r)
{
	uint64_t heat = ta_heat_known(r->heat) ? r->heat : TA_HEAT_MAX;
	uint64_t age_ms = r->age_ns / 1000000;
	const uint64_t age_max = (1ull << AGE_BITS) - 1;
	if (age_ms > age_max)
		age_ms = age_max;
	return heat << AGE_BITS | (age_max - age_ms);
}

static const struct ta_cold_policy heat_policy = { "heat, then age", score_by_heat_then_age };
const struct ta_cold_policy *ta_cold_policy = &heat_policy;

/* Shell sort by score: no malloc (qsort may allocate), and n is a few thousand at most. */
static void sort_by_score(struct ta_cold_range *r, unsigned n)
{
	static const unsigned gaps[] = { 1750, 701, 301, 132, 57, 23, 10, 4, 1 };
	for (unsigned g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
		unsigned gap = gaps[g];
		for (unsigned i = gap; i < n; i++) {
			struct ta_cold_range tmp = r[i];
			unsigned j = i;
			for (; j >= gap && r[j - gap].score > tmp.score; j -= gap)
				r[j] = r[j - gap];
			r[j] = tmp;
		}
	}
}

unsigned ta_cold_large_all(unsigned tier, struct ta_cold_range *out, unsigned max)
{
	return ta_large_take(tier, out, max, ta_monotonic_ns());
}

#define MAX_CANDIDATES 4096

/* The program's own mappings with pages in the tier, a window each (alloc/maps.c): their heat
 * is access.c's, their age unknown (as young as can be), their charge what the last sample
 * found of them there. None while a sample holds them: the next pass has them. */
static unsigned mapped_windows(unsigned tier, struct ta_cold_range *out, unsigned max)
{
	struct ta_maps_window *w;
	unsigned nw, n = 0;
	if (!ta_maps_windows_take(&w, &nw))
		return 0;
	for (unsigned i = 0; i < nw && n < max; i++) {
		if (w[i].pages[tier] == 0)
			continue;
		struct ta_cold_range *r = &out[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_MAPPED;
		r->addr = (void *)w[i].start;
		r->len = w[i].len;
		r->charge = (uint64_t)w[i].pages[tier] * TA_MAPS_PAGE;
		r->heat = w[i].heat;
	}
	ta_maps_windows_give();
	return n;
}

unsigned ta_cold_collect(unsigned tier, struct ta_cold_range *out, unsigned max, bool hottest)
{
	/* Every range of the tier is a candidate (the pass runs one at a time: static is fine):
	 * ranking only some would leave the oldest of a large heap out. */
	static struct ta_cold_range all[MAX_CANDIDATES];
	static struct ta_chunk_info info[MAX_CANDIDATES];
	uint64_t now = ta_monotonic_ns();
	unsigned n = ta_large_take(tier, all, MAX_CANDIDATES / 4, now);
	unsigned nc = ta_arena_chunks(tier, info, MAX_CANDIDATES - n, true);
	for (unsigned i = 0; i < nc; i++) {
		struct ta_cold_range *r = &all[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_CHUNK;
		r->owner = info[i].chunk;
		r->addr = info[i].chunk;
		r->len = TA_CHUNK_SIZE;
		/* What the chunk holds in pages: what moving it takes off the tier. */
		r->charge = (uint64_t)info[i].pages_held * TA_PAGE_SIZE;
		r->age_ns = now > info[i].carved_ns ? now - info[i].carved_ns : 0;
		r->heat = info[i].heat;
	}
	n += mapped_windows(tier, &all[n], MAX_CANDIDATES - n);
	for (unsigned i = 0; i < n; i++)
		all[i].score = ta_cold_policy->score(&all[i]);
	sort_by_score(all, n);
	if (hottest)
		for (unsigned i = 0; i < n / 2; i++) {
			struct ta_cold_range tmp = all[i];
			all[i] = all[n - 1 - i];
			all[n - 1 - i] = tmp;
		}
	unsigned kept = n < max ? n : max;
	memcpy(out, all, kept * sizeof(*out));
	for (unsigned i = kept; i < n; i++)
		ta_cold_release(&all[i], -1, -1);
	return kept;
}

void ta_cold_release(struct ta_cold_range *r, int moved_to, int relaxed)
{
	if (r->kind == TA_RANGE_LARGE)
		ta_large_release(r->owner, moved_to, relaxed);
}
