/* SPDX-License-Identifier: MIT */
/*
 * Policy 2's decision (agent/protect.c, tierallocd --protect) on fixtures: memory.low follows
 * the victim's usage with headroom from the first sample, growth is followed, a fast fall
 * (stealing) holds the protection where the working set was, and so does any fall while the
 * kernel (BPF) tells of reclaim taking its pages; a slow one decays it in steps, the
 * administrator's memory.low is a floor and the parent's budget a ceiling; the cap's and the
 * parser's arithmetic. The guest's end-to-end part is tests/guest/protect.sh.
 */
#include <stdio.h>

#include "protect.h"
#include "test.h"

#define MiB  ((uint64_t)1 << 20)
#define MS   1000000ull
#define NOW  (1000 * MS)
#define NONE UINT64_MAX

static const struct ta_protect_cfg *cfg = &ta_protect_default_cfg;

/* One sample: the value written, or NONE. */
static uint64_t sample(struct ta_protect_state *s, uint64_t usage, uint64_t cap, uint64_t t)
{
	uint64_t v = NONE;
	enum ta_protect_why why = ta_protect_sample(cfg, s, usage, cap, t, &v);
	expect_true((why == TA_PROTECT_NONE) == (v == NONE));
	return v;
}

static void test_follows_usage(void)
{
	struct ta_protect_state s;
	test_context("the first sample requests the usage plus 4M headroom at once");
	ta_protect_init(&s, 0);
	expect_eq(sample(&s, 32 * MiB, NONE, NOW), 36 * MiB);
	expect_eq(s.written, 36 * MiB);
	test_context("steady usage: nothing written");
	expect_eq(sample(&s, 32 * MiB, NONE, NOW + 5 * MS), NONE);
	test_context("growth within half the headroom: nothing written");
	expect_eq(sample(&s, 33 * MiB, NONE, NOW + 10 * MS), NONE);
	test_context("growth eating more than half the headroom: raised");
	expect_eq(sample(&s, 35 * MiB, NONE, NOW + 15 * MS), 35 * MiB + 35 * MiB / 8);
	test_context("requests are whole pages (the kernel reads memory.low back in pages)");
	expect_eq(sample(&s, 38 * MiB + 4096, NONE, NOW + 17 * MS) % 4096, 0);
	test_context("large usage: an eighth of it as headroom");
	expect_eq(sample(&s, 800 * MiB, NONE, NOW + 20 * MS), 900 * MiB);
	expect_eq(s.writes[TA_PROTECT_GROW], 4);
	test_context("%s", "");
}

static void test_fall_holds(void)
{
	struct ta_protect_state s;
	ta_protect_init(&s, 0);
	sample(&s, 32 * MiB, NONE, NOW);
	test_context("a fall of 8M in 5 ms is stealing: protection stays at the peak");
	expect_eq(sample(&s, 24 * MiB, NONE, NOW + 5 * MS), NONE);
	expect_eq(s.falls, 1);
	expect_eq(s.written, 36 * MiB);
	test_context("still held 9 s later");
	expect_eq(sample(&s, 24 * MiB, NONE, NOW + 9000 * MS), NONE);
	test_context("the working set coming back is protected without a write");
	expect_eq(sample(&s, 32 * MiB, NONE, NOW + 9500 * MS), NONE);
	test_context("a 4 KiB fall per 5 ms sample (800 KiB/s) is not stealing");
	ta_protect_init(&s, 0);
	sample(&s, 32 * MiB, NONE, NOW);
	sample(&s, 32 * MiB - 4096, NONE, NOW + 5 * MS);
	expect_eq(s.falls, 0);
	test_context("%s", "");
}

static void test_stolen_holds(void)
{
	struct ta_protect_state s;
	ta_protect_init(&s, 0);
	sample(&s, 64 * MiB, NONE, NOW);
	test_context("a slow shrink the kernel says was reclaim's doing (BPF): held, not decayed");
	/* The same 0.8 MiB/s as test_decays, each second with pages stolen: no decay write. */
	uint64_t t = NOW;
	for (unsigned i = 1; i <= 40; i++) {
		t += 1000 * MS;
		ta_protect_stolen(cfg, &s, t);
		expect_eq(sample(&s, 64 * MiB - i * 819 * 1024, NONE, t), NONE);
	}
	expect_eq(s.falls, 0);
	expect_eq(s.steals, 40);
	expect_eq(s.writes[TA_PROTECT_DECAY], 0);
	expect_eq(s.peak, 64 * MiB);
	test_context("once the stealing stops, the hold runs out and the gap decays");
	for (unsigned i = 0; i < 20; i++)
		sample(&s, 32 * MiB, NONE, t += 1000 * MS);
	expect_gt(s.writes[TA_PROTECT_DECAY], 0);
	expect_lt(s.peak, 40 * MiB);
	test_context("%s", "");
}

static void test_decays(void)
{
	struct ta_protect_state s;
	ta_protect_init(&s, 0);
	sample(&s, 64 * MiB, NONE, NOW);
	test_context("a slow shrink (the victim's own): the gap halves every 2 s");
	/* 32M over 40 s: 0.8 MiB/s, below the fall rate. */
	uint64_t t = NOW, last = NONE;
	for (unsigned i = 1; i <= 40; i++) {
		t += 1000 * MS;
		uint64_t v = sample(&s, 64 * MiB - i * 819 * 1024, NONE, t);
		if (v != NONE) {
			expect_lt(v, s.peak + 9 * MiB);
			last = v;
		}
	}
	expect_eq(s.falls, 0);
	expect_gt(s.writes[TA_PROTECT_DECAY], 0);
	expect_ne(last, NONE);
	test_context("settled: peak within 1M of the usage, written within a step of the target");
	for (unsigned i = 0; i < 20; i++)
		sample(&s, 32 * MiB, NONE, t += 1000 * MS);
	expect_le(s.peak, 33 * MiB);
	expect_le(s.written, 32 * MiB + 4 * MiB + cfg->step);
	expect_ge(s.written, 32 * MiB + 4 * MiB);
	test_context("%s", "");
}

static void test_floor_and_cap(void)
{
	struct ta_protect_state s;
	test_context("the administrator's memory.low is a floor");
	ta_protect_init(&s, 100 * MiB);
	expect_eq(sample(&s, 32 * MiB, NONE, NOW), NONE);
	expect_eq(s.written, 100 * MiB);
	test_context("the parent's budget is a ceiling");
	ta_protect_init(&s, 0);
	expect_eq(sample(&s, 60 * MiB, 64 * MiB, NOW), 64 * MiB);
	expect_eq(s.capped, 1);
	test_context("a cap below the floor leaves the floor");
	ta_protect_init(&s, 16 * MiB);
	expect_eq(sample(&s, 60 * MiB, 8 * MiB, NOW), NONE);
	expect_eq(s.written, 16 * MiB);
	test_context("a cap that shrinks lowers the request to it");
	ta_protect_init(&s, 0);
	sample(&s, 32 * MiB, NONE, NOW);
	expect_eq(sample(&s, 32 * MiB, 20 * MiB, NOW + 5 * MS), 20 * MiB);
	test_context("and a request back to the floor is written even when small");
	ta_protect_init(&s, 0);
	sample(&s, 0, NONE, NOW);
	expect_eq(s.written, 4 * MiB);
	expect_eq(sample(&s, 0, 0, NOW + 5 * MS), 0);
	test_context("%s", "");
}

static void test_cap_and_parse(void)
{
	uint64_t sib[3] = { 10 * MiB, 20 * MiB, 0 };
	test_context("cap: the parent's budget less the siblings' claims");
	expect_eq(ta_protect_cap(64 * MiB, sib, 3), 34 * MiB);
	expect_eq(ta_protect_cap(16 * MiB, sib, 3), 0);
	expect_eq(ta_protect_cap(UINT64_MAX, sib, 3), UINT64_MAX);
	test_context("%s", "");
}

int main(void)
{
	test_follows_usage();
	test_fall_holds();
	test_decays();
	test_stolen_holds();
	test_floor_and_cap();
	test_cap_and_parse();
	return test_done();
}
