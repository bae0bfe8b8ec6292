/* SPDX-License-Identifier: MIT */
/*
 * The lending policy (tierallocd --lend, issue 15): from the cgroups that share a tier, their
 * shares, usage, wishes and priorities, which loans each one holds this round. Pure: the agent
 * (lender.c) gathers the figures from the segments and writes the loans back; the unit tests
 * call it with fixtures.
 *
 * - A cgroup that wants no more than its share lends its idle part: share - used - reserve (the
 *   reserve stays free for its own growth). One that wants more lends nothing, nor does one
 *   that asked for its share back lately (holds; the agent decides when, lender.c).
 * - Wanting more: it was steered away from the tier lately, or holds a loan already; its wish is
 *   what it has on the tier plus what it placed below, less its share.
 * - Priority classes borrow in turn, highest first, and only from lenders of their own priority
 *   or lower (a lower-priority cgroup never takes from a higher one's share); each class uses the
 *   highest-priority lenders first, which the classes after it may not use. Within a class,
 *   idle capacity goes in proportion to the shares (water-filling: what one does not want is
 *   shared among the others).
 * - Every round starts from scratch, so an owner whose usage grows shrinks the pool, and the
 *   lowest classes lose their loans first.
 * - Loans never exceed what is free: the new part of the loans (beyond what borrowers already
 *   hold on the tier) is bounded by the tier's free memory.
 * - Yields (TA_LEND_YIELD, the priority policy): what a class still wishes once the idle shares
 *   are gone is taken from the shares of strictly lower priorities, lowest first, never below
 *   their floor (low/min share). A yield lowers the giver's high and max, so its enforcement
 *   demotes its coldest memory; the taker's loan from it is bounded by free memory like any
 *   other, so it grows as the demotion frees the tier, a round or two later.
 */
#include <string.h>

#include "agent.h"

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Share `avail` among the class's borrowers (cls[i] true) in proportion to their shares, none
 * above its wish; returns what was given. */
static uint64_t water_fill(struct ta_lend_cg *cg, unsigned n, const bool *cls, const uint64_t *wish,
			   uint64_t avail)
{
	uint64_t given = 0;
	bool full[TA_LEND_MAX];
	for (unsigned i = 0; i < n; i++)
		full[i] = !cls[i] || cg[i].loan >= wish[i];
	for (unsigned round = 0; round <= n && avail > given; round++) {
		unsigned __int128 weights = 0;
		for (unsigned i = 0; i < n; i++)
			if (!full[i])
				weights += cg[i].share > 0 ? cg[i].share : 1;
		if (weights == 0)
			break;
		uint64_t left = avail - given, handed = 0;
		for (unsigned i = 0; i < n; i++) {
			if (full[i])
				continue;
			uint64_t w = cg[i].share > 0 ? cg[i].share : 1;
			uint64_t part = (uint64_t)((unsigned __int128)left * w / weights);
			uint64_t need = wish[i] - cg[i].loan;
			if (part >= need) {
				part = need;
				full[i] = true;
			}
			cg[i].loan += part;
			handed += part;
		}
		given += handed;
		if (handed == 0) {
			/* Rounding left crumbs: the first one not full takes them. */
			for (unsigned i = 0; i < n && avail > given; i++) {
				if (full[i])
					continue;
				uint64_t more = min64(avail - given, wish[i] - cg[i].loan);
				cg[i].loan += more;
				given += more;
			}
			break;
		}
	}
	return given;
}

/* Yields from the cgroups below priority p for want bytes: lowest priority first, then the one
 * with most above its floor; returns what was yielded. */
static uint64_t yield_for(struct ta_lend_cg *cg, unsigned n, uint32_t p, uint64_t want)
{
	uint64_t got = 0;
	while (got < want) {
		int best = -1;
		uint64_t best_room = 0;
		for (unsigned i = 0; i < n; i++) {
			const struct ta_lend_cg *c = &cg[i];
			if (!c->live || !c->can_yield || c->priority >= p)
				continue;
			uint64_t room = sub0(c->share, c->floor + c->lent + c->yielded);
			if (room == 0)
				continue;
			if (best < 0 || c->priority < cg[best].priority ||
			    (c->priority == cg[best].priority && room > best_room)) {
				best = (int)i;
				best_room = room;
			}
		}
		if (best < 0)
			break;
		uint64_t take = min64(want - got, best_room);
		cg[best].yielded += take;
		got += take;
	}
	return got;
}

void ta_lend_plan(struct ta_lend_cg *cg, unsigned n, uint64_t free_bytes, uint64_t reserve,
		  unsigned flags)
{
	if (n > TA_LEND_MAX)
		n = TA_LEND_MAX;
	uint64_t wish[TA_LEND_MAX], idle[TA_LEND_MAX];
	uint64_t budget = free_bytes;
	for (unsigned i = 0; i < n; i++) {
		struct ta_lend_cg *c = &cg[i];
		c->loan = 0;
		c->lent = 0;
		c->yielded = 0;
		wish[i] = idle[i] = 0;
		if (!c->live)
			continue; /* an exited container neither borrows nor lends */
		uint64_t total = c->used;
		if (c->wants || c->loan_before > 0)
			total += c->below;
		wish[i] = sub0(total, c->share);
		if (wish[i] == 0 && !c->holds && (flags & TA_LEND_IDLE))
			idle[i] = sub0(c->share, c->used + reserve);
		/* What a borrower holds over its share is on the tier already, not taken from
		 * what is free. */
		budget += min64(c->loan_before, sub0(c->used, c->share));
	}
	/* Priority classes, highest first. */
	uint64_t done_above = UINT64_MAX; /* classes above this priority are done */
	for (;;) {
		uint32_t p = 0;
		bool any = false;
		for (unsigned i = 0; i < n; i++)
			if (wish[i] > 0 && cg[i].priority < done_above &&
			    (!any || cg[i].priority > p)) {
				p = cg[i].priority;
				any = true;
			}
		if (!any)
			break;
		done_above = p;
		bool cls[TA_LEND_MAX];
		uint64_t avail = 0;
		for (unsigned i = 0; i < n; i++) {
			cls[i] = wish[i] > 0 && cg[i].priority == p;
			if (cg[i].priority <= p)
				avail += idle[i];
		}
		avail = min64(avail, budget);
		uint64_t given = water_fill(cg, n, cls, wish, avail);
		budget -= given;
		/* Taken from the lenders this class may use, highest priority first. */
		while (given > 0) {
			int best = -1;
			for (unsigned i = 0; i < n; i++)
				if (idle[i] > 0 && cg[i].priority <= p &&
				    (best < 0 || cg[i].priority > cg[best].priority))
					best = (int)i;
			if (best < 0)
				break;
			uint64_t take = min64(given, idle[best]);
			idle[best] -= take;
			cg[best].lent += take;
			given -= take;
		}
		if (!(flags & TA_LEND_YIELD))
			continue;
		uint64_t want = 0;
		for (unsigned i = 0; i < n; i++)
			if (cls[i])
				want += sub0(wish[i], cg[i].loan);
		if (want == 0)
			continue;
		uint64_t yielded = yield_for(cg, n, p, want);
		budget -= water_fill(cg, n, cls, wish, min64(yielded, budget));
	}
}

uint32_t ta_agent_priority_of(bool have_operator, uint32_t operator_priority, uint32_t declared,
			      uint32_t ceiling)
{
	if (have_operator)
		return operator_priority <= TA_SHM_LEND_PRIORITY_MAX ? operator_priority
								     : TA_SHM_LEND_PRIORITY_MAX;
	if (declared > TA_SHM_LEND_PRIORITY_MAX)
		declared = 0; /* not a value the library writes */
	return declared < ceiling ? declared : ceiling;
}
