/* SPDX-License-Identifier: MIT */
/*
 * Lending of idle fast-tier shares (issue 15).
 * - The policy's arithmetic (agent/lend.c, ta_lend_plan) on fixtures: an idle share lent less the
 *   reserve, taken back as the owner grows (all of it once the owner asks for its share back),
 *   bounded by free memory, by priority (higher first, never from a higher one's share, lower
 *   revoked first), equal priorities in proportion to their shares, exited containers out of it.
 * - Yields (issue 17, the priority policy's tier side): once no idle share is left, a higher
 *   priority that still wants the tier takes it from lower priorities' shares, lowest first,
 *   never below their floor, only from segments that honour it; its loan from them bounded by
 *   free memory.
 * - The library's side, on a real segment (TIERALLOC_SHM_NAME): the lending block's bounds, a
 *   loan raising high and max for charging while unexpired and no longer once expired, the
 *   enforcement's view counting it, and TIERALLOC_PRIORITY recorded in the segment; a yield
 *   lowering high and max for charging and for the enforcement, which sheds what was given,
 *   never below the tier's low share, and no longer once expired.
 * The guest's end-to-end part is tests/guest/lending.sh.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "enforce/enforce.h"
#include "internal.h"
#include "quota/shm.h"
#include "test.h"

#define MiB ((uint64_t)1 << 20)
#define BIG (64ull << 30)

static struct ta_lend_cg cgs(uint64_t share, uint64_t used, uint64_t below, bool wants)
{
	return (struct ta_lend_cg){
		.share = share, .used = used, .below = below, .wants = wants, .live = true
	};
}

static void test_idle_share_lent(void)
{
	test_context("issue 6(a): A holds 50M of 300M, B wants 400M more: the idle part less the "
		     "reserve");
	struct ta_lend_cg c[2] = { cgs(300 * MiB, 50 * MiB, 0, false),
				   cgs(300 * MiB, 300 * MiB, 400 * MiB, true) };
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 186 * MiB);
	expect_eq(c[0].lent, 186 * MiB);
	expect_eq(c[0].loan, 0);
	expect_eq(c[1].lent, 0);

	test_context("a wish smaller than the idle share: only the wish");
	c[1] = cgs(300 * MiB, 300 * MiB, 20 * MiB, true);
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 20 * MiB);
	expect_eq(c[0].lent, 20 * MiB);

	test_context("no wish without being steered away or holding a loan");
	c[1] = cgs(300 * MiB, 300 * MiB, 400 * MiB, false);
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);

	test_context("a loan held keeps its wish alive (what it holds over its share, and below)");
	c[1] = cgs(300 * MiB, 486 * MiB, 214 * MiB, false);
	c[1].loan_before = 186 * MiB;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 186 * MiB);

	test_context("the owner grows: the loan shrinks to what stays idle above the reserve");
	c[0].used = 200 * MiB;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 36 * MiB);
	expect_eq(c[0].lent, 36 * MiB);
	c[0].used = 250 * MiB;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);
	expect_eq(c[0].lent, 0);

	test_context("an owner that asked for its share back lends nothing, however idle");
	c[0].used = 80 * MiB;
	c[0].holds = true;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);
	expect_eq(c[0].lent, 0);
	test_context("...while another idle owner still lends");
	struct ta_lend_cg h[3] = { cgs(300 * MiB, 80 * MiB, 0, false), cgs(300 * MiB, 0, 0, false),
				   cgs(300 * MiB, 300 * MiB, 400 * MiB, true) };
	h[0].holds = true;
	ta_lend_plan(h, 3, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(h[2].loan, 236 * MiB);
	expect_eq(h[1].lent, 236 * MiB);
	expect_eq(h[0].lent, 0);
	c[0].holds = false;

	test_context("a reserve larger than the share: nothing lent");
	c[0].used = 0;
	ta_lend_plan(c, 2, BIG, 400 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);
	test_context("%s", "");
}

static void test_free_bound(void)
{
	test_context("loans never exceed what is free");
	struct ta_lend_cg c[2] = { cgs(300 * MiB, 0, 0, false),
				   cgs(300 * MiB, 300 * MiB, 400 * MiB, true) };
	ta_lend_plan(c, 2, 50 * MiB, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 50 * MiB);
	expect_eq(c[0].lent, 50 * MiB);
	test_context("what a borrower already holds over its share is not taken from the free");
	c[1].used = 400 * MiB;
	c[1].loan_before = 100 * MiB;
	ta_lend_plan(c, 2, 0, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 100 * MiB);
	ta_lend_plan(c, 2, 30 * MiB, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 130 * MiB);
	test_context("%s", "");
}

static void test_priority(void)
{
	test_context("issue 6(b): two borrowers, priorities 10 and 0, one idle share: 10 first");
	struct ta_lend_cg c[3] = { cgs(300 * MiB, 0, 0, false),
				   cgs(300 * MiB, 300 * MiB, 200 * MiB, true),
				   cgs(300 * MiB, 300 * MiB, 200 * MiB, true) };
	c[1].priority = 10;
	ta_lend_plan(c, 3, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 200 * MiB);
	expect_eq(c[2].loan, 36 * MiB);
	expect_eq(c[0].lent, 236 * MiB);

	test_context("the owner grows: the lower priority's loan goes first");
	c[0].used = 100 * MiB;
	ta_lend_plan(c, 3, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[1].loan, 136 * MiB);
	expect_eq(c[2].loan, 0);

	test_context("a lower priority never takes from a higher one's share");
	struct ta_lend_cg d[2] = { cgs(300 * MiB, 0, 0, false),
				   cgs(300 * MiB, 300 * MiB, 200 * MiB, true) };
	d[0].priority = 5;
	ta_lend_plan(d, 2, BIG, 0, TA_LEND_IDLE);
	expect_eq(d[1].loan, 0);
	expect_eq(d[0].lent, 0);
	test_context("...but a higher one takes from a lower one's");
	d[0].priority = 0;
	d[1].priority = 5;
	ta_lend_plan(d, 2, BIG, 0, TA_LEND_IDLE);
	expect_eq(d[1].loan, 200 * MiB);

	test_context("a class uses the lenders the classes after it may not use first");
	/* Lenders H (priority 10, idle 100) and L (priority 0, idle 100); borrowers X (10, wants
	 * 100) and Y (0, wants 100): X takes H's, Y gets L's. */
	struct ta_lend_cg e[4] = { cgs(100 * MiB, 0, 0, false), cgs(100 * MiB, 0, 0, false),
				   cgs(100 * MiB, 100 * MiB, 100 * MiB, true),
				   cgs(100 * MiB, 100 * MiB, 100 * MiB, true) };
	e[0].priority = 10;
	e[2].priority = 10;
	ta_lend_plan(e, 4, BIG, 0, TA_LEND_IDLE);
	expect_eq(e[2].loan, 100 * MiB);
	expect_eq(e[3].loan, 100 * MiB);
	expect_eq(e[0].lent, 100 * MiB);
	expect_eq(e[1].lent, 100 * MiB);
	test_context("%s", "");
}

static void test_proportional(void)
{
	test_context("equal priorities share in proportion to their shares");
	struct ta_lend_cg c[3] = { cgs(300 * MiB, 0, 0, false),
				   cgs(200 * MiB, 200 * MiB, 1000 * MiB, true),
				   cgs(100 * MiB, 100 * MiB, 1000 * MiB, true) };
	ta_lend_plan(c, 3, BIG, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 200 * MiB);
	expect_eq(c[2].loan, 100 * MiB);
	test_context("what one does not want goes to the other");
	c[1].below = 50 * MiB;
	ta_lend_plan(c, 3, BIG, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 50 * MiB);
	expect_eq(c[2].loan, 250 * MiB);
	expect_eq(c[0].lent, 300 * MiB);
	test_context("%s", "");
}

static void test_exited(void)
{
	test_context("an exited borrower holds nothing; an exited owner lends nothing");
	struct ta_lend_cg c[2] = { cgs(300 * MiB, 0, 0, false),
				   cgs(300 * MiB, 300 * MiB, 400 * MiB, true) };
	c[1].live = false;
	c[1].loan_before = 100 * MiB;
	ta_lend_plan(c, 2, BIG, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);
	expect_eq(c[0].lent, 0);
	c[1].live = true;
	c[0].live = false;
	ta_lend_plan(c, 2, BIG, 0, TA_LEND_IDLE);
	expect_eq(c[1].loan, 0);
	test_context("%s", "");
}

/* ---- the library's side ---- */

static char shm_name_var[64];

static void test_yield(void)
{
	test_context("issue 17: H (priority 10) steered away, L (0) uses its whole share: L yields "
		     "what H wants, H borrows it");
	struct ta_lend_cg c[2] = { cgs(300 * MiB, 300 * MiB, 0, false),
				   cgs(300 * MiB, 300 * MiB, 100 * MiB, true) };
	c[0].can_yield = c[1].can_yield = true;
	c[1].priority = 10;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE | TA_LEND_YIELD);
	expect_eq(c[0].yielded, 100 * MiB);
	expect_eq(c[1].loan, 100 * MiB);
	expect_eq(c[1].yielded, 0);
	expect_eq(c[0].lent, 0);

	test_context("without TA_LEND_YIELD (--lend alone) nobody yields");
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_IDLE);
	expect_eq(c[0].yielded, 0);
	expect_eq(c[1].loan, 0);

	test_context("the loan waits for free memory; the yield does not (it makes it free)");
	ta_lend_plan(c, 2, 0, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[0].yielded, 100 * MiB);
	expect_eq(c[1].loan, 0);
	ta_lend_plan(c, 2, 40 * MiB, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[1].loan, 40 * MiB);

	test_context("never below the floor (the tier's low share)");
	c[0].floor = 250 * MiB;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[0].yielded, 50 * MiB);
	expect_eq(c[1].loan, 50 * MiB);
	c[0].floor = 0;

	test_context("equal priorities never yield to each other");
	c[1].priority = 0;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[0].yielded, 0);
	expect_eq(c[1].loan, 0);
	c[1].priority = 10;

	test_context("a segment whose processes cannot yield (before minor 6) is not asked");
	c[0].can_yield = false;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[0].yielded, 0);
	expect_eq(c[1].loan, 0);
	c[0].can_yield = true;

	test_context("an exited container yields nothing");
	c[0].live = false;
	ta_lend_plan(c, 2, BIG, 64 * MiB, TA_LEND_YIELD);
	expect_eq(c[0].yielded, 0);
	c[0].live = true;

	test_context("idle shares first, then yields, lowest priority first");
	/* I idle (priority 0, lends 100 above the reserve 0), M (5) and L (0) full; H (10) wants
	 * 250: 100 from I's idle, then 150 yielded by L (0) before M (5). */
	struct ta_lend_cg d[4] = { cgs(100 * MiB, 0, 0, false), cgs(200 * MiB, 200 * MiB, 0, false),
				   cgs(200 * MiB, 200 * MiB, 0, false),
				   cgs(100 * MiB, 100 * MiB, 250 * MiB, true) };
	for (unsigned i = 0; i < 4; i++)
		d[i].can_yield = true;
	d[1].priority = 5;
	d[3].priority = 10;
	ta_lend_plan(d, 4, BIG, 0, TA_LEND_IDLE | TA_LEND_YIELD);
	expect_eq(d[0].lent, 100 * MiB);
	expect_eq(d[2].yielded, 150 * MiB);
	expect_eq(d[1].yielded, 0);
	expect_eq(d[3].loan, 250 * MiB);
	test_context("more than the lowest can give: the next priority up gives the rest");
	d[3].below = 450 * MiB;
	ta_lend_plan(d, 4, BIG, 0, TA_LEND_IDLE | TA_LEND_YIELD);
	expect_eq(d[2].yielded, 200 * MiB);
	expect_eq(d[1].yielded, 150 * MiB);
	expect_eq(d[3].loan, 450 * MiB);
	test_context("when H is gone, every yield ends");
	d[3].live = false;
	ta_lend_plan(d, 4, BIG, 0, TA_LEND_IDLE | TA_LEND_YIELD);
	expect_eq(d[1].yielded + d[2].yielded, 0);
	test_context("%s", "");
}

static void test_block_bounds(void)
{
	test_context("lending block: the library's segment has one");
	expect_true(ta_shm.lend != NULL);
	expect_true((char *)ta_shm.lend == (char *)ta_shm.hdr + TA_SHM_LEND_OFF);
	struct ta_shm_header h;
	memcpy(&h, ta_shm.hdr, sizeof(h));
	test_context("lending block: a good header");
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) != NULL);
	test_context("lending block: past the end, misaligned, over the slots, too small");
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE - 64) == NULL);
	h.lend_off += 8;
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) == NULL);
	h.lend_off = TA_SHM_SLOTS_OFF;
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) == NULL);
	h.lend_off = TA_SHM_LEND_OFF;
	h.lend_size = 64;
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) == NULL);
	h.lend_size = sizeof(struct ta_shm_lend);
	test_context("lending block: none before minor 5, nor in a header of minor 4's size");
	h.abi_minor = 4;
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) == NULL);
	h.abi_minor = TA_SHM_ABI_MINOR;
	h.header_size = 400;
	expect_true(ta_shm_lend_block(&h, TA_SHM_SEG_SIZE) == NULL);
	test_context("%s", "");
}

static void test_priority_recorded(void)
{
	test_context("TIERALLOC_PRIORITY=7 is recorded in the segment");
	expect_eq(atomic_load(&ta_shm.lend->priority), 7);
	expect_true(atomic_load(&ta_shm.lend->flags) & TA_SHM_LEND_PRIORITY_SET);
	test_context("TIERALLOC_PRIORITY values");
	expect_eq(ta_priority_value("1000"), 1000);
	expect_eq(ta_priority_value("0"), 0);
	expect_eq(ta_priority_value("1001"), 0);
	test_context("%s", "");
}

static uint64_t loan_now(unsigned t)
{
	uint64_t loan, yielded;
	ta_shm_lend_terms(t, &loan, &yielded);
	return loan;
}

static void test_loan_steers(void)
{
	struct ta_shm_tier *r = &ta_shm.tiers[0];
	struct ta_shm_lend *l = ta_shm.lend;
	uint64_t base = atomic_load(&r->charged);
	uint64_t saved[TA_NLIMITS];
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		saved[k] = atomic_load(&r->limit[k]);
	atomic_store(&r->limit[TA_LIMIT_HIGH], base + 10 * MiB);
	atomic_store(&r->limit[TA_LIMIT_MAX], base + 10 * MiB);
	atomic_store(&r->untracked, 0);
	test_context("without a loan, high and max hold");
	expect_true(!ta_shm_charge(0, 20 * MiB, TA_LIMIT_HIGH, false));
	expect_true(!ta_shm_charge(0, 20 * MiB, TA_LIMIT_MAX, false));
	test_context("a live loan raises high and max alike");
	atomic_store(&l->tier[0].loan, 16 * MiB);
	atomic_store(&l->expires_ns, ta_monotonic_ns() + 60ull * 1000000000u);
	expect_eq(loan_now(0), 16 * MiB);
	expect_eq(loan_now(1), 0);
	expect_true(ta_shm_charge(0, 20 * MiB, TA_LIMIT_HIGH, false));
	ta_shm_uncharge(0, 20 * MiB);
	expect_true(ta_shm_charge(0, 20 * MiB, TA_LIMIT_MAX, false));
	ta_shm_uncharge(0, 20 * MiB);
	test_context("no further than the loan");
	expect_true(!ta_shm_charge(0, 30 * MiB, TA_LIMIT_MAX, false));
	test_context("the enforcement's view counts the loan in high and max");
	struct ta_enforce_in in;
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 26 * MiB);
	expect_eq(in.limit[0][TA_LIMIT_MAX], base + 26 * MiB);
	expect_eq(in.loan[0], 16 * MiB);
	test_context("an expired loan counts for nothing");
	atomic_store(&l->expires_ns, ta_monotonic_ns() - 1);
	expect_eq(loan_now(0), 0);
	expect_true(!ta_shm_charge(0, 20 * MiB, TA_LIMIT_HIGH, false));
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 10 * MiB);
	test_context("and so the excess is the enforcement's to shed");
	in.observed[0] = base + 26 * MiB;
	in.cg_charged[0] = in.my_charged[0] = base + 26 * MiB;
	struct ta_enforce_plan plan;
	ta_enforce_plan(&in, &plan);
	expect_eq(plan.demote[0][1] + plan.reclaim[0], 16 * MiB);
	test_context("a loan near UINT64_MAX does not wrap the limit");
	atomic_store(&l->tier[0].loan, UINT64_MAX - 1);
	atomic_store(&l->expires_ns, ta_monotonic_ns() + 60ull * 1000000000u);
	expect_true(ta_shm_charge(0, 1 * MiB, TA_LIMIT_MAX, false));
	ta_shm_uncharge(0, 1 * MiB);
	atomic_store(&l->tier[0].loan, 0);
	atomic_store(&l->expires_ns, 0);
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		atomic_store(&r->limit[k], saved[k]);
	test_context("%s", "");
}

static void test_yield_steers(void)
{
	struct ta_shm_tier *r = &ta_shm.tiers[0];
	struct ta_shm_lend *l = ta_shm.lend;
	uint64_t base = atomic_load(&r->charged);
	uint64_t saved[TA_NLIMITS];
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		saved[k] = atomic_load(&r->limit[k]);
	atomic_store(&r->limit[TA_LIMIT_LOW], base + 4 * MiB);
	atomic_store(&r->limit[TA_LIMIT_MIN], 0);
	atomic_store(&r->limit[TA_LIMIT_HIGH], base + 40 * MiB);
	atomic_store(&r->limit[TA_LIMIT_MAX], base + 40 * MiB);
	atomic_store(&r->untracked, 0);
	test_context("issue 17: without a yield, 30 MiB fit under high and max");
	expect_true(ta_shm_charge(0, 30 * MiB, TA_LIMIT_HIGH, false));
	ta_shm_uncharge(0, 30 * MiB);
	test_context("a live yield of 20 MiB lowers high and max alike");
	atomic_store(&l->tier[0].yielded, 20 * MiB);
	atomic_store(&l->expires_ns, ta_monotonic_ns() + 60ull * 1000000000u);
	expect_true(!ta_shm_charge(0, 30 * MiB, TA_LIMIT_HIGH, false));
	expect_true(!ta_shm_charge(0, 30 * MiB, TA_LIMIT_MAX, false));
	expect_true(ta_shm_charge(0, 20 * MiB, TA_LIMIT_MAX, false));
	ta_shm_uncharge(0, 20 * MiB);
	test_context("the enforcement's view: high and max lowered, the rest is to shed");
	struct ta_enforce_in in;
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 20 * MiB);
	expect_eq(in.limit[0][TA_LIMIT_MAX], base + 20 * MiB);
	expect_eq(in.yielded[0], 20 * MiB);
	in.observed[0] = base + 36 * MiB;
	in.cg_charged[0] = in.my_charged[0] = base + 36 * MiB;
	struct ta_enforce_plan plan;
	ta_enforce_plan(&in, &plan);
	expect_eq(plan.demote[0][1] + plan.reclaim[0], 16 * MiB);
	test_context("a yield larger than the share stops at the tier's low share");
	atomic_store(&l->tier[0].yielded, UINT64_MAX - 1);
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 4 * MiB);
	expect_true(ta_shm_charge(0, 4 * MiB, TA_LIMIT_HIGH, false));
	ta_shm_uncharge(0, 4 * MiB);
	expect_true(!ta_shm_charge(0, 5 * MiB, TA_LIMIT_HIGH, false));
	test_context("a loan and a yield together: the loan raises, the yield lowers");
	atomic_store(&l->tier[0].loan, 10 * MiB);
	atomic_store(&l->tier[0].yielded, 30 * MiB);
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 20 * MiB);
	test_context("an expired yield counts for nothing");
	atomic_store(&l->expires_ns, ta_monotonic_ns() - 1);
	expect_true(ta_shm_charge(0, 30 * MiB, TA_LIMIT_HIGH, false));
	ta_shm_uncharge(0, 30 * MiB);
	ta_quota_view(&in);
	expect_eq(in.limit[0][TA_LIMIT_HIGH], base + 40 * MiB);
	expect_eq(in.yielded[0], 0);
	atomic_store(&l->tier[0].loan, 0);
	atomic_store(&l->tier[0].yielded, 0);
	atomic_store(&l->expires_ns, 0);
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		atomic_store(&r->limit[k], saved[k]);
	test_context("%s", "");
}

/* Issue 31: whose word a priority is. The operator's (--priority) stands, above or below what
 * the cgroup declares; a declared one counts up to the operator's ceiling (--priority-ceiling,
 * 0 by default), and a value the library never writes counts as none. */
static void test_priority_of(void)
{
	static const struct {
		bool have_op;
		uint32_t op, declared, ceiling, want;
	} cases[] = {
		{ false, 0, 0, 0, 0 },
		{ false, 0, 1000, 0, 0 },
		{ false, 0, 1000, 100, 100 },
		{ false, 0, 10, 100, 10 },
		{ false, 0, 1000, 1000, 1000 },
		{ false, 0, 1001, 1000, 0 },
		{ false, 0, UINT32_MAX, 1000, 0 },
		{ true, 0, 1000, 1000, 0 },
		{ true, 100, 0, 0, 100 },
		{ true, 100, 1000, 1000, 100 },
		{ true, 5, 1000, 0, 5 },
		{ true, 2000, 0, 0, 1000 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		test_context("priority_of: operator %s%u, declared %u, ceiling %u",
			     cases[i].have_op ? "" : "none ", cases[i].op, cases[i].declared,
			     cases[i].ceiling);
		expect_eq(ta_agent_priority_of(cases[i].have_op, cases[i].op, cases[i].declared,
					       cases[i].ceiling),
			  cases[i].want);
	}
	test_context("%s", "");
	expect_eq(TA_AGENT_PRIORITY_CEILING_DEFAULT, 0);
}

int main(int argc, char **argv)
{
	snprintf(shm_name_var, sizeof(shm_name_var), "TIERALLOC_SHM_NAME=/ta-unit-lend-%d",
		 (int)getpid());
	const char *const env[] = { shm_name_var, "TIERALLOC_ENFORCE=off", "TIERALLOC_PRIORITY=7",
				    NULL };
	test_reexec_with_env(argv, env);
	test_idle_share_lent();
	test_free_bound();
	test_priority();
	test_priority_of();
	test_proportional();
	test_exited();
	test_yield();
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm%s", strchr(shm_name_var, '=') + 1);
	if (!atomic_load(&ta_shm.active)) {
		unlink(path);
		test_skip("no shared segment (%s)", path);
	}
	test_block_bounds();
	test_priority_recorded();
	test_loan_steers();
	test_yield_steers();
	unlink(path);
	return test_done();
}
