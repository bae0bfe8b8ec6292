/* SPDX-License-Identifier: MIT */
/*
 * Reclaim for priority (issue 17 policy 1, seed 001): the policy's decisions (agent/pressure.c,
 * ta_press_plan) and the parsing of the control files it reads (agent/cgstat.c), on fixtures.
 * - Each signal alone makes a cgroup pressured (PSI stall, memory.events, refaults, steering,
 *   growth that will fill the parent's room within `ahead` rounds); below the thresholds, first
 *   seen, or counters gone backwards: not. Steering alone reclaims nothing (the tier's yield
 *   answers it, test_lend.c).
 * - Only lower-priority siblings are reclaimed, lowest first, within the step, never below
 *   max(memory.low, memory.min); equal priorities and other parents' children are left alone.
 * - Caps: a victim is held at its usage less what it gives, never below its floor or above its
 *   own memory.high (down to 0 without a floor); the cap holds while a higher priority is
 *   pressured, then rises by the room beyond a step (a quarter step at least), and is lifted
 *   at its own memory.high, a step above its usage, or without a parent limit. Without caps,
 *   nothing is capped. A cap comes down TA_PRESS_CAP_DESCENT a write below the usage.
 * - cgroup v2 and v1 texts give the figures, and bad text none.
 * The guest's end-to-end part is tests/guest/pressure.sh.
 */
#include <string.h>

#include "agent.h"
#include "cgctl.h"
#include "reclaim.h"
#include "test.h"

#define MiB ((uint64_t)1 << 20)

static const struct ta_press_config cfg = { .psi_us = 10000, .refaults = 256, .step = 32 * MiB };

static struct ta_press_cg cg(uint32_t group, uint32_t prio, uint64_t current, uint64_t low)
{
	struct ta_press_cg c = { .group = group,
				 .priority = prio,
				 .have_prev = true,
				 .room = UINT64_MAX,
				 .cap = UINT64_MAX,
				 .high_orig = UINT64_MAX };
	c.prev.high = c.now.high = UINT64_MAX;
	c.prev.current = c.now.current = current;
	c.prev.low = c.now.low = low;
	return c;
}

static void test_signals(void)
{
	struct ta_press_cg c[2];
	test_context("quiet: no pressure, nothing reclaimed");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[1] = cg(1, 1, 200 * MiB, 0);
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	expect_eq(c[0].why, 0);
	expect_eq(c[1].reclaim, 0);
	expect_true(c[1].for_whom == -1);

	test_context("PSI stall at the threshold");
	c[0].now.psi_us = 10000;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[0].why, TA_PRESS_PSI);
	expect_eq(c[1].reclaim, 32 * MiB);
	expect_true(c[1].for_whom == 0);
	test_context("PSI stall below it");
	c[0].now.psi_us = 9999;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);

	test_context("a memory.events high or max event");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].prev.events = 5;
	c[0].now.events = 6;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[0].why, TA_PRESS_EVENTS);

	test_context("refaults at the threshold, and below it");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].prev.refaults = 1000;
	c[0].now.refaults = 1256;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[0].why, TA_PRESS_REFAULT);
	c[0].now.refaults = 1255;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);

	test_context("steered below the fast tier: shown, but no reclaim (the tier's yield answers "
		     "it)");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].now.steered = 4096;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	expect_eq(c[0].why, TA_PRESS_STEERED);
	expect_eq(c[1].reclaim, 0);
	test_context("steered and stalled: the stall reclaims");
	c[0].prev.psi_us = 0;
	c[0].now.psi_us = cfg.psi_us;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[0].why, TA_PRESS_STEERED | TA_PRESS_PSI);

	test_context("counters that went backwards (a cgroup made again) are no pressure");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].prev.psi_us = 1000000;
	c[0].prev.events = 9;
	c[0].prev.refaults = 99999;
	c[0].prev.steered = 1 << 30;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);

	test_context("pressure lingers for `hold` rounds after the last signal, then ends");
	struct ta_press_config linger = cfg;
	linger.hold = 2;
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].calm = UINT32_MAX;
	c[0].now.events = 1;
	expect_eq(ta_press_plan(c, 2, &linger), 1);
	expect_eq(c[0].why, TA_PRESS_EVENTS);
	expect_eq(c[0].calm, 0);
	c[0].prev = c[0].now; /* quiet rounds from here */
	expect_eq(ta_press_plan(c, 2, &linger), 1);
	expect_eq(c[0].why, TA_PRESS_LINGER);
	expect_eq(c[0].calm, 1);
	expect_eq(c[1].reclaim, 32 * MiB);
	expect_eq(ta_press_plan(c, 2, &linger), 0);
	expect_eq(c[0].why, 0);
	expect_eq(c[0].calm, 2);
	test_context("a new signal starts it again; without hold, no lingering");
	c[0].now.events = 2;
	expect_eq(ta_press_plan(c, 2, &linger), 1);
	expect_eq(c[0].calm, 0);
	c[0].prev = c[0].now;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	test_context("a cgroup never pressured (calm at its maximum) does not linger");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].calm = UINT32_MAX;
	expect_eq(ta_press_plan(c, 2, &linger), 0);
	expect_eq(c[0].calm, UINT32_MAX);

	test_context("growing into the parent's limit: pressured ahead of any stall");
	struct ta_press_config ahead = cfg;
	ahead.grow_min = 1 * MiB;
	ahead.ahead = 5;
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].now.current = 208 * MiB; /* 8 MiB this round */
	c[0].room = 39 * MiB;	      /* gone in under 5 rounds at that pace */
	expect_eq(ta_press_plan(c, 2, &ahead), 1);
	expect_eq(c[0].why, TA_PRESS_GROWING);
	expect_eq(c[1].reclaim, 1 * MiB); /* 5 rounds of 8 MiB, less the 39 free */
	test_context("growing fast: what 5 rounds need, less the room, at most 4 steps");
	c[0].now.current = 224 * MiB; /* 24 MiB this round: 120 wanted */
	c[0].room = 66 * MiB;
	c[1] = cg(1, 1, 200 * MiB, 0);
	expect_eq(ta_press_plan(c, 2, &ahead), 1);
	expect_eq(c[1].reclaim, 54 * MiB);
	c[0].now.current = 300 * MiB; /* 100 MiB: 500 wanted, 128 at most */
	c[0].room = 8 * MiB;
	c[1].now.current = 400 * MiB;
	expect_eq(ta_press_plan(c, 2, &ahead), 1);
	expect_eq(c[1].reclaim, 120 * MiB);
	c[1].now.current = 200 * MiB;
	c[0].now.current = 208 * MiB;
	test_context("room for 5 rounds of that growth: not yet");
	c[0].room = 40 * MiB;
	expect_eq(ta_press_plan(c, 2, &ahead), 0);
	test_context("no limit above it (room unknown): never");
	c[0].room = UINT64_MAX;
	expect_eq(ta_press_plan(c, 2, &ahead), 0);
	test_context("growth below grow_min, even with no room: not");
	c[0].room = 0;
	c[0].now.current = 200 * MiB + MiB - 1;
	expect_eq(ta_press_plan(c, 2, &ahead), 0);
	test_context("shrinking with no room: not (its own reclaim, no growth)");
	c[0].now.current = 190 * MiB;
	expect_eq(ta_press_plan(c, 2, &ahead), 0);
	test_context("off (ahead 0), whatever the growth");
	c[0].now.current = 300 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	test_context("the lowest priority growing has nobody to take from");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[1] = cg(1, 1, 200 * MiB, 0);
	c[1].now.current = 240 * MiB;
	c[1].room = 0;
	expect_eq(ta_press_plan(c, 2, &ahead), 0);
	expect_eq(c[1].why, TA_PRESS_GROWING);
	expect_eq(c[0].reclaim, 0);

	test_context("a parent with room: a step less the room; none when a step is free");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].now.psi_us = 50000;
	c[1] = cg(1, 1, 200 * MiB, 0);
	c[0].room = c[1].room = 20 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[1].reclaim, 12 * MiB);
	c[0].room = c[1].room = 32 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	expect_eq(c[0].why, TA_PRESS_PSI); /* pressured still, but not by its parent */
	expect_eq(c[1].reclaim, 0);

	test_context("first seen: no previous sample, no pressure");
	c[0] = cg(1, 10, 200 * MiB, 0);
	c[0].have_prev = false;
	c[0].now.psi_us = 1 << 30;
	c[0].now.events = 100;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	test_context("%s", "");
}

static void test_victims(void)
{
	struct ta_press_cg c[5];
	test_context("the step bounds a round; the floor is the larger of low and min");
	c[0] = cg(1, 10, 100 * MiB, 0);
	c[0].now.events = 1;
	c[1] = cg(1, 1, 100 * MiB, 90 * MiB);
	c[1].now.min = 80 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[1].reclaim, 10 * MiB);
	c[1].now.min = 95 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_eq(c[1].reclaim, 5 * MiB);
	test_context("at its floor: left alone");
	c[1].now.current = 95 * MiB;
	expect_eq(ta_press_plan(c, 2, &cfg), 0);
	expect_eq(c[1].reclaim, 0);
	c[1].now.current = 90 * MiB; /* below it (memory.low raised since) */
	expect_eq(ta_press_plan(c, 2, &cfg), 0);

	test_context("lowest priority first, then the next, within the step");
	c[0] = cg(1, 10, 100 * MiB, 0);
	c[0].now.psi_us = 50000;
	c[1] = cg(1, 5, 100 * MiB, 0);
	c[2] = cg(1, 2, 100 * MiB, 80 * MiB);
	expect_eq(ta_press_plan(c, 3, &cfg), 2);
	expect_eq(c[2].reclaim, 20 * MiB);
	expect_eq(c[1].reclaim, 12 * MiB);
	expect_true(c[1].for_whom == 0 && c[2].for_whom == 0);
	expect_eq(c[0].reclaim, 0);

	test_context("within a priority, the one with the most above its floor first");
	c[1] = cg(1, 2, 100 * MiB, 90 * MiB);
	c[2] = cg(1, 2, 100 * MiB, 50 * MiB);
	expect_eq(ta_press_plan(c, 3, &cfg), 1);
	expect_eq(c[2].reclaim, 32 * MiB);
	expect_eq(c[1].reclaim, 0);

	test_context("equal priority, higher priority, other parents: never reclaimed");
	c[0] = cg(1, 5, 100 * MiB, 0);
	c[0].now.events = 3;
	c[1] = cg(1, 5, 100 * MiB, 0);
	c[2] = cg(1, 9, 100 * MiB, 0);
	c[3] = cg(2, 0, 100 * MiB, 0);
	expect_eq(ta_press_plan(c, 4, &cfg), 0);

	test_context("the group's highest pressured cgroup decides; a pressured low one is taken");
	c[0] = cg(1, 5, 100 * MiB, 0);
	c[0].now.events = 3;
	c[1] = cg(1, 9, 100 * MiB, 0);
	c[1].now.events = 3;
	c[2] = cg(1, 1, 100 * MiB, 0);
	c[2].now.events = 3;
	expect_eq(ta_press_plan(c, 3, &cfg), 1);
	expect_eq(c[2].reclaim, 32 * MiB);
	expect_true(c[2].for_whom == 1);
	expect_eq(c[0].reclaim, 0);
	c[2].now.low = 100 * MiB; /* at its floor: the next priority up gives */
	expect_eq(ta_press_plan(c, 3, &cfg), 1);
	expect_eq(c[0].reclaim, 32 * MiB);
	expect_true(c[0].for_whom == 1);

	test_context("two groups pressured at once: a step each");
	c[0] = cg(1, 9, 100 * MiB, 0);
	c[0].now.events = 1;
	c[1] = cg(2, 9, 100 * MiB, 0);
	c[1].now.events = 1;
	c[2] = cg(1, 1, 100 * MiB, 0);
	c[3] = cg(2, 1, 100 * MiB, 0);
	c[4] = cg(2, 1, 10 * MiB, 0);
	expect_eq(ta_press_plan(c, 5, &cfg), 2);
	expect_eq(c[2].reclaim, 32 * MiB);
	expect_eq(c[3].reclaim, 32 * MiB);
	expect_eq(c[4].reclaim, 0);
	expect_true(c[3].for_whom == 1);
	test_context("%s", "");
}

static void test_caps(void)
{
	struct ta_press_config capped = cfg;
	capped.cap = true;
	struct ta_press_cg c[3];
	test_context("without caps, a victim's cap stays as it was");
	c[0] = cg(1, 10, 100 * MiB, 0);
	c[0].now.events = 1;
	c[1] = cg(1, 1, 100 * MiB, 0);
	expect_eq(ta_press_plan(c, 2, &cfg), 1);
	expect_true(c[1].cap_to == UINT64_MAX);

	test_context("a victim is held at its usage less what it gives");
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_eq(c[1].cap_to, 68 * MiB);
	expect_true(c[0].cap_to == UINT64_MAX); /* the pressured one is never capped */
	test_context("the next round takes it lower, from its usage then");
	c[1].cap = 68 * MiB;
	c[1].now.current = 70 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_eq(c[1].cap_to, 38 * MiB);
	test_context("never within the margin of its floor");
	c[1].now.low = 50 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_eq(c[1].reclaim, 20 * MiB);
	expect_eq(c[1].cap_to, 50 * MiB + TA_PRESS_CAP_MARGIN);
	c[1].cap = 68 * MiB;
	test_context("never raised by a round that reclaims");
	c[1].cap = 40 * MiB; /* lowered since, by the kernel's or the operator's floor */
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_eq(c[1].cap_to, 40 * MiB);
	test_context("without a floor, down to 0");
	c[1] = cg(1, 1, 20 * MiB, 0);
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_eq(c[1].reclaim, 20 * MiB);
	expect_eq(c[1].cap_to, 0);
	test_context("its own memory.high lower than the cap would be: no cap");
	c[1] = cg(1, 1, 100 * MiB, 0);
	c[1].high_orig = c[1].now.high = 60 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 1);
	expect_true(c[1].cap_to == UINT64_MAX);

	test_context("a higher priority still pressured (lately): the cap holds, room or not");
	c[0] = cg(1, 10, 100 * MiB, 0);
	c[0].calm = 0;
	c[1] = cg(1, 1, 40 * MiB, 40 * MiB); /* at its floor: not reclaimed */
	c[1].cap = 40 * MiB;
	c[0].room = c[1].room = 500 * MiB;
	capped.hold = 5;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_eq(c[0].why, TA_PRESS_LINGER);
	expect_eq(c[1].cap_to, 40 * MiB);
	test_context("none pressured, no room beyond a step: it rises by a quarter step");
	c[0].calm = 5;
	c[0].room = c[1].room = 32 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_eq(c[0].why, 0);
	expect_eq(c[1].cap_to, 48 * MiB);
	test_context("room beyond a step: it rises by that");
	c[1].now.current = 40 * MiB;
	c[0].room = c[1].room = 42 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_eq(c[1].cap_to, 50 * MiB);
	test_context("up to its own memory.high, where it is lifted");
	c[1].high_orig = 80 * MiB;
	c[0].room = c[1].room = 72 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_true(c[1].cap_to == UINT64_MAX);
	c[0].room = c[1].room = 71 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_eq(c[1].cap_to, 79 * MiB);
	test_context("a step above its usage: lifted, it no longer binds");
	c[1].high_orig = UINT64_MAX;
	c[1].cap = 72 * MiB;
	c[1].now.current = 40 * MiB;
	c[0].room = c[1].room = 33 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_true(c[1].cap_to == UINT64_MAX);
	c[1].now.current = 41 * MiB;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_eq(c[1].cap_to, 80 * MiB); /* a quarter step: more than the 1 MiB of room */
	c[1].cap = 40 * MiB;
	c[1].now.current = 40 * MiB;
	test_context("a parent without a limit: lifted at once");
	c[0].room = c[1].room = UINT64_MAX;
	expect_eq(ta_press_plan(c, 2, &capped), 0);
	expect_true(c[1].cap_to == UINT64_MAX);
	test_context("a pressured equal or lower priority does not hold it");
	c[2] = cg(1, 1, 10 * MiB, 0);
	c[2].now.events = 9;
	c[0].room = c[1].room = c[2].room = 100 * MiB;
	expect_eq(ta_press_plan(c, 3, &capped), 0);
	expect_eq(c[1].cap_to, 108 * MiB); /* raised by the room beyond a step */
	test_context("%s", "");
}

/* A cap comes down a descent at a time below the usage or the value in force, whichever is
 * less, and reaches the cap once within a descent; rising and lifting are one write. */
static void test_cap_descent(void)
{
	const uint64_t d = TA_PRESS_CAP_DESCENT;
	test_context("down from the usage: uncapped (max), 160 MiB in use, cap 80 MiB");
	uint64_t held = UINT64_MAX, usage = 160 * MiB, writes = 0;
	while (held != 80 * MiB && writes < 100) {
		uint64_t next = ta_press_cap_next(held, usage, 80 * MiB);
		expect_true(next >= 80 * MiB);
		expect_true(next + d >=
			    (held < usage ? held : usage)); /* never more than a descent */
		held = next;
		usage = held; /* the write reclaimed to it */
		writes++;
	}
	expect_eq(held, 80 * MiB);
	expect_eq(writes, (160 - 80) * MiB / d);

	test_context("the usage below the value in force (an overshoot): from the usage");
	expect_eq(ta_press_cap_next(150 * MiB, 100 * MiB, 80 * MiB), 100 * MiB - d);
	expect_eq(ta_press_cap_next(100 * MiB, 150 * MiB, 80 * MiB), 100 * MiB - d);
	test_context("within a descent, or below: the cap itself");
	expect_eq(ta_press_cap_next(UINT64_MAX, 80 * MiB + d, 80 * MiB), 80 * MiB);
	expect_eq(ta_press_cap_next(UINT64_MAX, 60 * MiB, 80 * MiB), 80 * MiB);
	expect_eq(ta_press_cap_next(82 * MiB, 200 * MiB, 80 * MiB), 80 * MiB);
	test_context("rising or lifted: at once");
	expect_eq(ta_press_cap_next(80 * MiB, 79 * MiB, 120 * MiB), 120 * MiB);
	expect_eq(ta_press_cap_next(80 * MiB, 200 * MiB, UINT64_MAX), UINT64_MAX);
	expect_eq(ta_press_cap_next(UINT64_MAX, UINT64_MAX, UINT64_MAX), UINT64_MAX);
	test_context("%s", "");
}

static void test_parse(void)
{
	uint64_t v = 0;
	test_context("v2 memory.pressure: some's and full's totals");
	const char *psi = "some avg10=1.50 avg60=0.30 avg300=0.06 total=123456\n"
			  "full avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
	expect_eq(ta_cgstat_psi_total(psi, "some", &v), 0);
	expect_eq(v, 123456);
	expect_eq(ta_cgstat_psi_total(psi, "full", &v), 0);
	expect_eq(v, 789);
	expect_true(ta_cgstat_psi_total("some avg10=1.00 total=\n", "some", &v) == -1);
	expect_true(ta_cgstat_psi_total("something total=5\n", "some", &v) == -1);
	expect_true(ta_cgstat_psi_total("", "some", &v) == -1);

	test_context("v2 memory.events and memory.stat: whole keys only");
	const char *events = "low 0\nhigh 17\nmax 4\noom 0\noom_kill 0\n";
	expect_eq(ta_cgstat_key(events, "high", &v), 0);
	expect_eq(v, 17);
	expect_eq(ta_cgstat_key(events, "max", &v), 0);
	expect_eq(v, 4);
	expect_true(ta_cgstat_key(events, "oom_group_kill", &v) == -1);
	const char *stat = "anon 1048576\nworkingset_refault_anon_x 9\nworkingset_refault_anon "
			   "300\nworkingset_refault_file 22";
	expect_eq(ta_cgstat_key(stat, "workingset_refault_anon", &v), 0);
	expect_eq(v, 300);
	expect_eq(ta_cgstat_key(stat, "workingset_refault_file", &v), 0);
	expect_eq(v, 22);
	expect_true(ta_cgstat_key("anon x\n", "anon", &v) == -1);

	test_context("one value: a number or max (v2), v1's numbers");
	expect_eq(ta_cgstat_value("268435456\n", &v), 0);
	expect_eq(v, 268435456);
	expect_eq(ta_cgstat_value("max\n", &v), 0);
	expect_eq(v, UINT64_MAX);
	expect_eq(ta_cgstat_value("9223372036854771712\n", &v), 0);
	expect_eq(v, 9223372036854771712ull);
	expect_true(ta_cgstat_value("maximum\n", &v) == -1);
	expect_true(ta_cgstat_value("12 34\n", &v) == -1);
	expect_true(ta_cgstat_value("-1\n", &v) == -1);
	expect_true(ta_cgstat_value("99999999999999999999999\n", &v) == -1);
	expect_eq(ta_cgstat_value("0", &v), 0); /* no newline: as a pread may give it */
	expect_eq(v, 0);
	expect_true(ta_cgstat_value("", &v) == -1);
	expect_true(ta_cgstat_value("12k", &v) == -1);
	test_context("%s", "");
}

int main(void)
{
	test_signals();
	test_victims();
	test_caps();
	test_cap_descent();
	test_parse();
	return test_done();
}
