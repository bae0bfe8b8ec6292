/* SPDX-License-Identifier: MIT */
/*
 * Enforcement (src/enforce/enforce.c, demote.c, cold.c): the plan as a pure function over readings,
 * and demotion's bookkeeping on a real heap. Any host can run the second part:
 * TIERALLOC_TIERS="0;0" makes two tiers of node 0, so mbind(MPOL_MF_MOVE) moves nothing but every
 * other step (choice of ranges, retagging chunks, moving charges, large objects freed mid-demotion)
 * is the real one. The kernel side (pages really changing nodes) is tests/guest/enforce.sh.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "internal.h"
#include "quota/shm.h"
#include "test.h"
#include "tiers.h"

#define MiB ((uint64_t)1 << 20)
#define UNL UINT64_MAX

/* ---- the plan ---- */

static void two_tiers(struct ta_enforce_in *in, uint64_t high0, uint64_t high1)
{
	memset(in, 0, sizeof(*in));
	in->ntiers = 2;
	in->current = UNL;
	in->cg_high = UNL;
	for (unsigned t = 0; t < 2; t++) {
		in->limit[t][TA_LIMIT_HIGH] = t ? high1 : high0;
		in->limit[t][TA_LIMIT_MAX] = t ? high1 : high0;
	}
}

static void test_plan(void)
{
	struct ta_enforce_in in;
	struct ta_enforce_plan p;

	test_context("under every share: nothing to do");
	two_tiers(&in, 100 * MiB, 100 * MiB);
	in.observed[0] = 90 * MiB;
	in.cg_charged[0] = in.my_charged[0] = 80 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 0);
	expect_eq(p.reclaim[0] + p.reclaim[1] + p.reclaim_total, 0);

	test_context("tier 0 over: the excess goes down, one process");
	in.observed[0] = 130 * MiB;
	in.observed[1] = 10 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 30 * MiB);
	expect_eq(p.reclaim[0], 0);

	test_context("two processes share it by their charge");
	in.cg_charged[0] = 120 * MiB;
	in.my_charged[0] = 30 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 30 * MiB / 4);

	test_context("a process cannot demote more than it has");
	in.cg_charged[0] = 10 * MiB;
	in.my_charged[0] = 10 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 10 * MiB);

	test_context("no room below: the rest is reclaimed");
	in.cg_charged[0] = in.my_charged[0] = 120 * MiB;
	in.observed[1] = 90 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 10 * MiB);
	expect_eq(p.reclaim[0], 20 * MiB);

	test_context("half the process's charge: half the reclaim");
	in.cg_charged[0] = 240 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 5 * MiB);
	expect_eq(p.reclaim[0], 10 * MiB);

	test_context("the last tier over: reclaim");
	two_tiers(&in, 100 * MiB, 50 * MiB);
	in.observed[1] = 70 * MiB;
	in.cg_charged[1] = in.my_charged[1] = 60 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.reclaim[1], 20 * MiB);

	test_context("low and min are floors (seed 000)");
	two_tiers(&in, 100 * MiB, 500 * MiB);
	in.limit[0][TA_LIMIT_LOW] = 120 * MiB;
	in.observed[0] = 130 * MiB;
	in.cg_charged[0] = in.my_charged[0] = 130 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 10 * MiB);
	in.limit[0][TA_LIMIT_MIN] = 140 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 0);

	test_context("the cgroup's total over memory.high");
	two_tiers(&in, 500 * MiB, 500 * MiB);
	in.observed[0] = 100 * MiB;
	in.cg_charged[0] = 100 * MiB;
	in.my_charged[0] = 50 * MiB;
	in.current = 300 * MiB;
	in.cg_high = 200 * MiB;
	ta_enforce_plan(&in, &p);
	expect_eq(p.reclaim_total, 50 * MiB);
	expect_eq(p.demote[0][1], 0);

	test_context("unknown usage: no total reclaim");
	in.current = UNL;
	ta_enforce_plan(&in, &p);
	expect_eq(p.reclaim_total, 0);

	test_context("unlimited tiers: nothing, and no gate");
	two_tiers(&in, UNL, UNL);
	in.observed[0] = 1ull << 40;
	in.cg_charged[0] = in.my_charged[0] = 1ull << 40;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 0);
	expect_eq(p.reclaim[0], 0);
	expect_true(!p.gate[0]);

	test_context("the gate closes half a margin below the share, opens a margin below");
	uint64_t high = 160 * MiB, margin = ta_shm_gate_margin(high);
	expect_eq(margin, 20 * MiB);
	two_tiers(&in, high, UNL);
	in.observed[0] = high - margin / 2 - 1;
	ta_enforce_plan(&in, &p);
	expect_true(!p.gate[0]);
	in.observed[0] = high - margin / 2;
	ta_enforce_plan(&in, &p);
	expect_true(p.gate[0]);
	in.gated[0] = true;
	in.observed[0] = high - margin;
	ta_enforce_plan(&in, &p);
	expect_true(p.gate[0]);
	in.observed[0] = high - margin - 1;
	ta_enforce_plan(&in, &p);
	expect_true(!p.gate[0]);
	expect_eq(ta_shm_gate_margin(4 * MiB), 4 * MiB);
	expect_eq(ta_shm_gate_margin(1ull << 40), (1ull << 40) / 8);

	test_context("promotions into a shut tier: demote down to where the gate shut");
	two_tiers(&in, high, 512 * MiB);
	in.observed[0] = high - margin / 4;
	in.cg_charged[0] = in.my_charged[0] = 100 * MiB;
	in.gated[0] = true;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 0);
	in.promoting[0] = true;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], margin / 4);
	test_context("promotions into an open tier are welcome");
	in.gated[0] = false;
	in.observed[0] = high - margin / 2 - 1;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], 0);
	test_context("promotions into a shut tier: never below its low share");
	in.gated[0] = true;
	in.observed[0] = high - margin / 4;
	in.limit[0][TA_LIMIT_LOW] = high - margin * 3 / 8;
	ta_enforce_plan(&in, &p);
	expect_eq(p.demote[0][1], margin / 8);
}

/* ---- demotion on a real heap ---- */

#define NSMALL 4096
#define SMALL  1024
#define NLARGE 8
#define LARGE  (1 * MiB)

static unsigned char *small[NSMALL], *large[NLARGE];

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7);
}

static bool intact(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed * 31 + i * 7))
			return false;
	return true;
}

static void *other_thread(void *arg)
{
	/* Objects cached by another thread when their chunk is demoted. */
	unsigned char **mine = arg;
	for (unsigned i = 0; i < 64; i++)
		mine[i] = tieralloc_malloc_tier(0, SMALL);
	for (unsigned i = 0; i < 64; i += 2)
		tieralloc_free(mine[i]);
	return NULL;
}

static void test_demote(void)
{
	backend_started();
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t base0 = charged(0), base1 = charged(1), live_base = live(0) + live(1);
	for (unsigned i = 0; i < NSMALL; i++) {
		small[i] = tieralloc_malloc_tier(0, SMALL);
		fill(small[i], SMALL, i);
	}
	for (unsigned i = 0; i < NLARGE; i++) {
		large[i] = tieralloc_malloc_tier(0, LARGE);
		fill(large[i], LARGE, 7000 + i);
	}
	unsigned char *theirs[64];
	pthread_t th;
	pthread_create(&th, NULL, other_thread, theirs);
	pthread_join(th, NULL);
	/* Half the small objects freed: central lists and this thread's cache hold some. */
	for (unsigned i = 0; i < NSMALL; i += 2) {
		tieralloc_free(small[i]);
		small[i] = NULL;
	}
	uint64_t before0 = charged(0), before1 = charged(1);

	test_context("demote 3 MiB from tier 0 to tier 1");
	uint64_t moved = ta_demote(0, 1, 3 * MiB);
	expect_true(moved > 0);
	expect_eq(charged(0), before0 - moved);
	expect_eq(charged(1), before1 + moved);
	expect_eq(atomic_load(&ta_arenas[0].demoted), moved);

	test_context("demote everything that can move");
	uint64_t more = ta_demote(0, 1, UINT64_MAX);
	expect_eq(charged(0), before0 - moved - more);
	expect_eq(charged(1), before1 + moved + more);
	unsigned small_down = 0, large_down = 0;
	for (unsigned i = 1; i < NSMALL; i += 2) {
		small_down += tieralloc_tier_of(small[i]) == 1;
		if (!intact(small[i], SMALL, i))
			expect_true(!"a demoted small object changed");
	}
	for (unsigned i = 0; i < NLARGE; i++) {
		large_down += tieralloc_tier_of(large[i]) == 1;
		expect_true(intact(large[i], LARGE, 7000 + i));
	}
	/* Every large object, and the small ones outside the chunk runs are still cut from. */
	expect_eq(large_down, NLARGE);
	expect_true(small_down > 0);
	expect_true(moved + more >= (uint64_t)NLARGE * LARGE + small_down * SMALL);
	test_context("after demotion, new objects and reuse keep the books right");
	void *extra[512];
	for (unsigned i = 0; i < 512; i++)
		extra[i] = tieralloc_malloc(SMALL);
	for (unsigned i = 0; i < 512; i++)
		tieralloc_free(extra[i]);

	test_context("a large object freed while the pass holds it is freed by the pass");
	struct ta_cold_range r[8];
	unsigned n = ta_cold_large_all(1, r, 8);
	expect_eq(n, NLARGE);
	uint64_t held = charged(1);
	unsigned freed = 0;
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < NLARGE; k++)
			if (large[k] != NULL &&
			    ((struct ta_large *)r[i].owner)->user == (void *)large[k] &&
			    freed < 2) {
				tieralloc_free(large[k]);
				large[k] = NULL;
				freed++;
			}
	/* Not freed yet: the pass has them. */
	expect_eq(charged(1), held);
	for (unsigned i = 0; i < n; i++)
		ta_cold_release(&r[i], -1, -1);
	expect_eq(freed, 2);
	expect_eq(charged(1), held - 2 * LARGE);

	test_context("everything freed: the books are back where they started");
	/* Large objects leave their charge when freed; small objects' runs stay charged (free
	 * memory the process holds) in whichever tier their chunk now is. */
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t kept = charged(0) + charged(1), large_left = 0;
	for (unsigned i = 0; i < NLARGE; i++)
		large_left += large[i] != NULL ? LARGE : 0;
	for (unsigned i = 0; i < NSMALL; i++)
		tieralloc_free(small[i]);
	for (unsigned i = 0; i < NLARGE; i++)
		tieralloc_free(large[i]);
	for (unsigned i = 1; i < 64; i += 2)
		tieralloc_free(theirs[i]);
	tieralloc_ctl_set("thread.flush", NULL, 0);
	expect_eq(live(0) + live(1), live_base);
	expect_eq(charged(0) + charged(1), kept - large_left);
	/* The small runs' charge: at least their objects, and nothing charged twice (the 512
	 * extra objects reuse freed ones or add their own runs; the harness's own are a few KiB).
	 */
	uint64_t runs = kept - large_left - base0 - base1;
	printf("small runs charged: %llu bytes for %u objects of %u bytes\n",
	       (unsigned long long)runs, NSMALL + 64, SMALL);
	expect_ge(runs, (uint64_t)(NSMALL + 64) * SMALL);
	expect_le(runs, (uint64_t)(NSMALL + 64 + 512) * SMALL + MiB / 4);
}

/* Whether this kernel collapses a range into a huge page on request (MADV_COLLAPSE, 6.1 on). */
static bool can_collapse(void)
{
	size_t unit = 2 * MiB;
	char *m = mmap(NULL, 2 * unit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return false;
	char *u = (char *)(((uintptr_t)m + unit - 1) & ~(uintptr_t)(unit - 1));
	memset(u, 1, unit);
	bool ok = madvise(u, unit, MADV_HUGEPAGE) == 0 && madvise(u, unit, 25 /* COLLAPSE */) == 0;
	munmap(m, 2 * unit);
	return ok;
}

/* can_collapse, saying why huge moves are not tried where it cannot. */
static bool can_collapse_or_say(void)
{
	if (can_collapse())
		return true;
	printf("this kernel does not collapse ranges on request (MADV_COLLAPSE: %s): huge moves "
	       "not tried\n",
	       strerror(errno));
	return false;
}

/*
 * Huge moves (src/alloc/place.c): forced on, as on Linux 6.1. The chunks of 64 KiB objects have
 * pages no run holds (the end past the last run), which a collapse fills: they go back after the
 * split, so the process holds no more than before, and no huge page is left where the allocator
 * keeps 4 KiB pages.
 */
#define NHUGE	 320 /* 20 MiB of 64 KiB objects: chunks past the first */
#define HUGE_OBJ (64 * 1024)
static void test_huge_moves(void)
{
	test_context("huge moves: 2 MiB units of chunks move as huge pages, then split again");
	if (!can_collapse_or_say())
		return;
	ta_place_set_huge_moves(1);
	static unsigned char *obj[NHUGE];
	for (unsigned i = 0; i < NHUGE; i++) {
		obj[i] = tieralloc_malloc_tier(0, HUGE_OBJ);
		fill(obj[i], HUGE_OBJ, 100 + i);
	}
	tieralloc_ctl_set("thread.flush", NULL, 0);
	/* Which pages of the objects' chunks are absent before the move. */
	enum { SYS_PAGES = TA_CHUNK_SIZE / 4096, HEADER = TA_PAGE_SIZE / 4096 };
	static unsigned char before[NHUGE][SYS_PAGES], after[SYS_PAGES];
	for (unsigned i = 0; i < NHUGE; i++)
		expect_eq(mincore((void *)((uintptr_t)obj[i] & ~(TA_CHUNK_SIZE - 1)), TA_CHUNK_SIZE,
				  before[i]),
			  0);
	unsigned long rss0 = test_rss_anon_kb();
	uint64_t units0 = ta_place_huge_units_moved();
	uint64_t moved = ta_demote(0, 1, UINT64_MAX);
	uint64_t units = ta_place_huge_units_moved() - units0;
	unsigned long rss1 = test_rss_anon_kb();
	printf("huge moves: %llu bytes moved, %llu units as huge pages; RssAnon %lu kB before, %lu "
	       "kB after\n",
	       (unsigned long long)moved, (unsigned long long)units, rss0, rss1);
	expect_true(moved >= (uint64_t)NHUGE * HUGE_OBJ / 2);
	/* Most of the 20 MiB, in units of 2 MiB (the chunk a run is cut from stays). */
	expect_ge(units, 4);
	unsigned down = 0;
	for (unsigned i = 0; i < NHUGE; i++) {
		down += tieralloc_tier_of(obj[i]) == 1;
		if (!intact(obj[i], HUGE_OBJ, 100 + i))
			expect_true(!"an object moved as part of a huge page changed");
	}
	expect_ge(down, NHUGE / 2);
	expect_eq(test_nohuge_huge_kb(), 0);
	/* The zeros a collapse filled in went back: absent before, absent after (from 6.12 a
	 * split maps such pages to the zero page, present to mincore, and RssAnon does not see
	 * them; before, each is a page of RssAnon). */
	unsigned refilled = 0;
	for (unsigned i = 0; i < NHUGE; i++) {
		if (mincore((void *)((uintptr_t)obj[i] & ~(TA_CHUNK_SIZE - 1)), TA_CHUNK_SIZE,
			    after) != 0)
			continue;
		/* The header's page keeps what the collapse filled (its descriptors are written
		 * as runs are cut). */
		for (unsigned p = HEADER; p < SYS_PAGES; p++)
			refilled += !(before[i][p] & 1) && (after[p] & 1);
	}
	expect_eq(refilled, 0);
	expect_le(rss1, rss0 + 64);
	for (unsigned i = 0; i < NHUGE; i++)
		tieralloc_free(obj[i]);
	ta_place_set_huge_moves(-1);
}

/*
 * Large objects side by side (lheap.c): a 2 MiB unit across two of them, both demoted, moves as
 * one huge page (demote.c, move_shared_units), and is split again after. Huge moves off: no unit
 * moves whole, and the objects still go down page by page.
 */
#define NSIDE	 24
#define SIDE_OBJ (1024 * 1024)
static void test_huge_moves_across_objects(void)
{
	test_context("huge moves: units across neighbouring large objects move whole");
	if (!can_collapse_or_say())
		return;
	static unsigned char *obj[NSIDE];
	for (int on = 1; on >= 0; on--) {
		ta_place_set_huge_moves(on);
		for (unsigned i = 0; i < NSIDE; i++) {
			obj[i] = tieralloc_malloc_tier(0, SIDE_OBJ);
			fill(obj[i], SIDE_OBJ, 7 * i + (unsigned)on);
		}
		unsigned touching = 0;
		for (unsigned i = 0; i + 1 < NSIDE; i++)
			touching += obj[i] + SIDE_OBJ == obj[i + 1];
		uint64_t units0 = ta_place_huge_units_moved();
		uint64_t moved = ta_demote(0, 1, UINT64_MAX);
		uint64_t units = ta_place_huge_units_moved() - units0;
		printf("huge moves %s: %u of %u neighbours touch, %llu bytes moved, %llu units as "
		       "huge "
		       "pages\n",
		       on ? "on" : "off", touching, NSIDE - 1, (unsigned long long)moved,
		       (unsigned long long)units);
		/* The heap cuts them side by side from one region: most touch. */
		expect_ge(touching, NSIDE / 2);
		expect_ge(moved, (uint64_t)NSIDE * SIDE_OBJ);
		/* A unit across each second boundary of a run of touching objects. */
		if (on)
			expect_ge(units + 2, touching / 2);
		else
			expect_eq(units, 0);
		for (unsigned i = 0; i < NSIDE; i++) {
			expect_eq(tieralloc_tier_of(obj[i]), 1);
			if (!intact(obj[i], SIDE_OBJ, 7 * i + (unsigned)on))
				expect_true(!"a large object moved as part of a huge page changed");
		}
		expect_eq(test_nohuge_huge_kb(), 0);
		for (unsigned i = 0; i < NSIDE; i++)
			tieralloc_free(obj[i]);
	}
	ta_place_set_huge_moves(-1);
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	test_plan();
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	test_demote();
	test_huge_moves();
	test_huge_moves_across_objects();
	return test_done();
}
