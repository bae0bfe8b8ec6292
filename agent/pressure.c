/* SPDX-License-Identifier: MIT */
/*
 * Reclaim for priority (tierallocd --reclaim-for-priority; issue 17 policy 1, seed 001): when a
 * high-priority cgroup shows pressure, which lower-priority siblings to reclaim from, and how
 * much. Pure: the agent (tierallocd.c) reads the control files (cgctl.c) and writes
 * memory.reclaim; the unit tests call it with fixtures.
 *
 * - Pressure is any of, since the last round: PSI "some" stall of at least psi_us, a
 *   memory.events high or max event, refaults of at least `refaults` pages, allocations steered
 *   below the fast tier. A counter that went backwards (a cgroup made again under the same
 *   path) or a cgroup seen for the first time counts as no pressure. A thrashing cgroup's
 *   signals come in bursts, with quiet rounds between them (in the guest, one round in two or
 *   three at 100 ms): it stays pressured for `hold` rounds after its last signal, so that a
 *   request under way is not dropped and asked again at every gap.
 * - Ahead of pressure: a cgroup growing by at least grow_min a round, whose parent's room (its
 *   limit less its usage) would be gone within `ahead` rounds at that pace, is pressured before
 *   it stalls: its lower siblings are reclaimed while its page faults still find free pages in
 *   the parent, instead of reclaiming its own pages (and refaulting them) at the limit.
 * - Siblings are cgroups of one group (the same parent: they share its memory.max, which is
 *   where taking from one gives to the other). Only strictly lower priorities are reclaimed: two
 *   of one priority never take from each other.
 * - A round takes at most `step` bytes per group: reclaim costs the victim CPU and refaults,
 *   and the next round sees whether the pressure went away. Lowest priority first, and within a
 *   priority the one with the most above its floor; nothing below max(memory.low, memory.min).
 */
#include "agent.h"

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

static uint64_t above_floor(const struct ta_press_cg *c)
{
	uint64_t floor = c->now.low > c->now.min ? c->now.low : c->now.min;
	return sub0(c->now.current, floor);
}

unsigned ta_press_plan(struct ta_press_cg *cg, unsigned n, const struct ta_press_config *cfg)
{
	if (n > TA_PRESS_MAX)
		n = TA_PRESS_MAX;
	for (unsigned i = 0; i < n; i++) {
		cg[i].why = pressure_of(&cg[i], cfg);
		if (cg[i].why != 0)
			cg[i].calm = 0;
		else if (cg[i].calm < UINT32_MAX)
			cg[i].calm++;
		if (cg[i].why == 0 && cg[i].have_prev && cg[i].calm < cfg->hold)
			cg[i].why = TA_PRESS_LINGER;
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
			if (cg[j].group == cg[i].group && cg[j].why != 0 &&
			    (high < 0 || cg[j].priority > cg[high].priority))
				high = (int)j;
		if (high < 0)
			continue;
		uint64_t budget = cfg->step;
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
	return victims;
}
