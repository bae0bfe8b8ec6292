/* SPDX-License-Identifier: MIT */
/*
 * Reclaim for priority (tierallocd --reclaim-for-priority; issue 17 policy 1, seed 001): when a
 * high-priority cgroup shows pressure, which lower-priority siblings to reclaim from, and how
 * much. Pure: the agent (tierallocd.c) reads the control files (cgctl.c) and writes
 * memory.reclaim; the unit tests call it with fixtures.
 *
 * - Pressure is any of, since the last round: PSI "some" stall of at least psi_us, a
 *   memory.events high or max event, refaults of at least `refaults` pages, allocations steered
 *   below the fast tier. Steering alone is shown but reclaims nothing: it is the fast tier that
 *   lacks room, not the cgroup's memory, and lower priorities yield their fast-tier shares for
 *   it instead (lend.c), so that their coldest memory is demoted, not reclaimed. A counter
 *   that went backwards (a cgroup made again under the same path) or a cgroup seen for the
 *   first time counts as no pressure. A thrashing cgroup's signals come in bursts, with quiet
 *   rounds between them (in the guest, one round in two or three at 100 ms): it stays
 *   pressured for `hold` rounds after its last signal, so that a request under way is not
 *   dropped and asked again at every gap.
 * - Ahead of pressure: a cgroup growing by at least grow_min a round, whose parent's room (its
 *   limit less its usage) would be gone within `ahead` rounds at that pace, is pressured before
 *   it stalls: its lower siblings are reclaimed while its page faults still find free pages in
 *   the parent, instead of reclaiming its own pages (and refaulting them) at the limit.
 * - Siblings are cgroups of one group (the same parent: they share its memory.max, which is
 *   where taking from one gives to the other). Only strictly lower priorities are reclaimed: two
 *   of one priority never take from each other.
 * - How much a round takes per group: what the parent lacks of the room the pressured cgroup
 *   wants, that is a step or, growing, its growth of the last round for `ahead` rounds
 *   (whichever is more, at most four steps), less the parent's room now; a step when the parent
 *   has no limit. Reclaim costs the victim CPU and refaults, so no more than the room wanted:
 *   a parent with a step free gives the pressured one nothing more to gain. Lowest priority
 *   first, and within a priority the one with the most above its floor; nothing below
 *   max(memory.low, memory.min).
 * - Caps (memory.high): reclaim alone does not keep the room it made. A harvested job that
 *   keeps touching its memory faults it back within the round, from the same parent, and the
 *   pressured one finds the parent full again (measured in the guest: the pressured job took
 *   1.5 s with reclaim against 1.0 s alone). So a cgroup reclaimed is also held at memory.high
 *   = its usage less what it gives: its own faults then reclaim its own pages, and the kernel
 *   throttles it, instead of taking from the parent. A cap only goes down while a higher
 *   priority of its group is pressured; once none is, it rises by what the parent has free
 *   beyond one step (kept for the high-priority one's growth) and is lifted when it reaches
 *   the cgroup's own memory.high or stands a step above its usage (it no longer binds), or
 *   at once when the parent has no limit. It rises by a quarter step a round at least: the
 *   parent may stay full without anyone needing it (a job that ended leaves its page cache
 *   charged), and a cap that waited for room would then starve the capped job for good (seed
 *   001's file workload did: lo crawled at its cap after hi had ended). If the higher
 *   priority needs it again, its pressure lowers the cap again.
 * - A cap stays TA_PRESS_CAP_MARGIN above a floor: the kernel's reclaim at memory.high
 *   overshoots while the capped job keeps faulting (lo fell 12 MiB under a cap in the 6.12
 *   guest), and memory.low does not hold against it (the capped cgroup is the root of that
 *   reclaim). Without a floor a cap may go down to 0, which throttles every fault of the
 *   capped job while a higher priority is pressured: seed 001's pressured job reads a file as
 *   large as its parent over and over, and a least cap of 4 MiB left it missing on every page
 *   (a cyclic scan larger than memory, LRU's worst case): 0.96x with it, 3.94x without.
 * - A cap goes down TA_PRESS_CAP_DESCENT a write below the usage (ta_press_cap_next). Each
 *   memory.high write reclaims the whole gap in one call, and Linux 6.12's multi-gen LRU does
 *   not end a cgroup's reclaim at its target (it finishes each scan, for fairness between
 *   cgroups): memory.high lowered from 160 to 80 MiB at once left the cgroup at 31-55 MiB in
 *   the 6.12 guest, under its memory.low of 64 MiB, which that reclaim does not heed. Written
 *   4 MiB at a time, the overshoot is a part of 4 MiB, well inside the margin.
 */
#include "agent.h"
#include "reclaim.h"

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static unsigned pressure_of(const struct ta_press_cg *c, const struct ta_press_config *cfg)
{
	if (!c->have_prev)
		return 0;
	const struct ta_press_sample *a = &c->prev, *b = &c->now;
	unsigned why = 0;
	if (b->psi_us > a->psi_us && b->psi_us - a->psi_us >= cfg->psi_us && cfg->psi_us > 0)
		why |= TA_PRESS_PSI;
	if (b->events > a->events)
		why |= TA_PRESS_EVENTS;
	if (b->refaults > a->refaults && b->refaults - a->refaults >= cfg->refaults &&
	    cfg->refaults > 0)
		why |= TA_PRESS_REFAULT;
	if (b->steered > a->steered)
		why |= TA_PRESS_STEERED;
	uint64_t grew = sub0(b->current, a->current);
	if (cfg->ahead > 0 && cfg->grow_min > 0 && grew >= cfg->grow_min && c->room != UINT64_MAX &&
	    c->room / cfg->ahead < grew)
		why |= TA_PRESS_GROWING;
	return why;
}

/* Whether c's pressure is its memory's (not steering alone): that is what reclaim answers. */
static bool pressing(const struct ta_press_cg *c)
{
	return (c->why & ~(unsigned)TA_PRESS_STEERED) != 0;
}

static uint64_t above_floor(const struct ta_press_cg *c)
{
	uint64_t floor = c->now.low > c->now.min ? c->now.low : c->now.min;
	return sub0(c->now.current, floor);
}

/* The bytes a round takes for pressured cgroup c (see the header). */
static uint64_t wanted(const struct ta_press_cg *c, const struct ta_press_config *cfg)
{
	if (c->room == UINT64_MAX)
		return cfg->step;
	uint64_t want = cfg->step, grew = c->have_prev ? sub0(c->now.current, c->prev.current) : 0;
	if (cfg->ahead > 0 && grew > want / cfg->ahead)
		want = grew > UINT64_MAX / cfg->ahead ? UINT64_MAX : grew * cfg->ahead;
	if (want / 4 > cfg->step)
		want = 4 * cfg->step;
	return sub0(want, c->room);
}

static bool higher_pressured(const struct ta_press_cg *cg, unsigned n, unsigned i)
{
	for (unsigned j = 0; j < n; j++)
		if (cg[j].group == cg[i].group && cg[j].priority > cg[i].priority &&
		    pressing(&cg[j]))
			return true;
	return false;
}

/* What cgroup i's cap becomes this round (see the header). */
static uint64_t cap_of(const struct ta_press_cg *cg, unsigned n, unsigned i,
		       const struct ta_press_config *cfg)
{
	const struct ta_press_cg *c = &cg[i];
	uint64_t held = c->cap < c->high_orig ? c->cap : c->high_orig;
	if (c->reclaim > 0) {
		uint64_t floor = c->now.low > c->now.min ? c->now.low : c->now.min;
		if (floor > 0)
			floor += TA_PRESS_CAP_MARGIN;
		uint64_t to = sub0(c->now.current, c->reclaim);
		if (to < floor)
			to = floor;
		return to < held ? to : c->cap;
	}
	if (c->cap == UINT64_MAX || higher_pressured(cg, n, i))
		return c->cap;
	if (c->room == UINT64_MAX)
		return UINT64_MAX;
	/* By the room beyond a step, and by a quarter step at least: a parent kept full by
	 * others' memory (page cache of jobs that ended stays charged) would otherwise hold the
	 * cap for good. Lifted at its own memory.high, or once it is a step above its usage: it
	 * could then take the parent's whole room anyway. */
	uint64_t by = c->room > cfg->step ? c->room - cfg->step : 0;
	if (by < cfg->step / 4)
		by = cfg->step / 4;
	uint64_t raised = c->cap + by;
	bool lift =
	    raised < c->cap || raised >= c->high_orig || c->cap >= c->now.current + cfg->step;
	return lift ? UINT64_MAX : raised;
}

unsigned ta_press_plan(struct ta_press_cg *cg, unsigned n, const struct ta_press_config *cfg)
{
	if (n > TA_PRESS_MAX)
		n = TA_PRESS_MAX;
	for (unsigned i = 0; i < n; i++) {
		cg[i].why = pressure_of(&cg[i], cfg);
		if (pressing(&cg[i]))
			cg[i].calm = 0;
		else if (cg[i].calm < UINT32_MAX)
			cg[i].calm++;
		if (!pressing(&cg[i]) && cg[i].have_prev && cg[i].calm < cfg->hold)
			cg[i].why |= TA_PRESS_LINGER;
		cg[i].reclaim = 0;
		cg[i].for_whom = -1;
	}
	unsigned victims = 0;
	for (unsigned i = 0; i < n; i++) {
		/* The group's highest-priority pressured cgroup, found from its first member. */
		bool first = true;
		for (unsigned j = 0; j < i && first; j++)
			first = cg[j].group != cg[i].group;
		if (!first)
			continue;
		int high = -1;
		for (unsigned j = i; j < n; j++)
			if (cg[j].group == cg[i].group && pressing(&cg[j]) &&
			    (high < 0 || cg[j].priority > cg[high].priority))
				high = (int)j;
		if (high < 0)
			continue;
		uint64_t budget = wanted(&cg[high], cfg);
		while (budget > 0) {
			int best = -1;
			for (unsigned j = i; j < n; j++) {
				if (cg[j].group != cg[i].group ||
				    cg[j].priority >= cg[high].priority || cg[j].reclaim > 0 ||
				    above_floor(&cg[j]) == 0)
					continue;
				if (best < 0 || cg[j].priority < cg[best].priority ||
				    (cg[j].priority == cg[best].priority &&
				     above_floor(&cg[j]) > above_floor(&cg[best])))
					best = (int)j;
			}
			if (best < 0)
				break;
			uint64_t take = above_floor(&cg[best]);
			if (take > budget)
				take = budget;
			cg[best].reclaim = take;
			cg[best].for_whom = high;
			budget -= take;
			victims++;
		}
	}
	for (unsigned i = 0; i < n; i++)
		cg[i].cap_to = cfg->cap ? cap_of(cg, n, i, cfg) : cg[i].cap;
	return victims;
}

uint64_t ta_press_cap_next(uint64_t held, uint64_t usage, uint64_t cap)
{
	uint64_t from = held < usage ? held : usage;
	if (from <= cap || from - cap <= TA_PRESS_CAP_DESCENT)
		return cap; /* a cap that rises, is lifted, or is near */
	return from - TA_PRESS_CAP_DESCENT;
}
