/* SPDX-License-Identifier: MIT */
/*
 * Access-aware tiering's parts that need no second NUMA node (the guest tests the rest, with
 * real soft-dirty bits: tests/guest/enforce.sh, enforce.hot.*):
 * - counting pagemap entries and folding samples into a heat (src/enforce/access.c);
 * - the ranking: heat first, age second, unsampled ranges as hottest (cold.c);
 * - the exchange (exchange.c): hot ranges of tier 1 up into tier 0, tier 0's cold ranges down
 *   to make room, never past tier 0's limit, contents intact; nothing moves when what tier 0
 *   holds is not clearly colder;
 * - the source's probe: on a kernel without soft-dirty bits, the fallback says why.
 * Two logical tiers of node 0 (TIERALLOC_TIERS="0;0"): the moves are real mbind and move_pages
 * calls, to the same node. Enforcement is off, so that no worker moves anything meanwhile.
 */
#include "internal.h"
#include "test.h"
#include "tiers.h"

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)

#define PRESENT (1ull << 63)
#define DIRTY	(1ull << 55)

static void test_count(void)
{
	test_context("pagemap entries");
	const uint64_t e[] = { PRESENT | DIRTY,	      PRESENT, DIRTY, 0, PRESENT | DIRTY | 0x1234,
			       PRESENT | (1ull << 62) };
	uint64_t present = 0, written = 0;
	ta_access_count(e, sizeof(e) / sizeof(e[0]), &present, &written);
	/* A dirty bit on an absent page (swapped out, or never there) is not counted. */
	expect_eq(present, 4);
	expect_eq(written, 2);
	present = written = 0;
	ta_access_count(e, 0, &present, &written);
	expect_eq(present, 0);
	expect_eq(written, 0);
	test_context("%s", "");
}

static void test_heat(void)
{
	test_context("heat");
	expect_eq(ta_access_heat(0, 100, 100), TA_HEAT_MAX);
	expect_eq(ta_access_heat(0, 100, 0), 1);
	expect_eq(ta_access_heat(0, 0, 0), 1);		   /* nothing present: cold, and known */
	expect_eq(ta_access_heat(0, 10, 50), TA_HEAT_MAX); /* clamped */
	/* Written all the time, then never: below the exchange's cold line after one sample. */
	uint32_t h = ta_access_heat(0, 256, 256);
	h = ta_access_heat(h, 256, 0);
	expect_lt(h, TA_HEAT_COLD);
	expect_true(!ta_access_is_hot(h));
	/* Cold, then written: hot after one sample. */
	h = ta_access_heat(ta_access_heat(0, 256, 0), 256, 256);
	expect_gt(h, TA_HEAT_HOT);
	expect_true(ta_access_is_hot(h));
	/* Half written, steadily: stays between. */
	h = 0;
	for (int i = 0; i < 10; i++)
		h = ta_access_heat(h, 100, 50);
	expect_eq(h, 501);
	expect_true(!ta_access_is_hot(h));
	/* Unknown (new, or moved since the last sample): neither hot nor cold; the next sample
	 * starts afresh. */
	expect_true(!ta_heat_known(0));
	expect_true(!ta_heat_known(TA_HEAT_MOVED));
	expect_true(!ta_access_is_hot(0));
	expect_true(!ta_access_is_hot(TA_HEAT_MOVED));
	expect_eq(ta_access_heat(TA_HEAT_MOVED, 100, 0), 1);
	test_context("%s", "");
}

/* The agent's readings: up at once, down by half a file, so that a read range DAMON missed in
 * one aggregation stays above what was never touched. */
static void test_heat_agent(void)
{
	test_context("heat from the agent's file");
	expect_eq(ta_access_heat_agent(0, 1000), TA_HEAT_MAX);
	expect_eq(ta_access_heat_agent(0, 0), 1);
	expect_eq(ta_access_heat_agent(0, 5000), TA_HEAT_MAX); /* clamped */
	expect_eq(ta_access_heat_agent(TA_HEAT_MOVED, 0), 1);
	uint32_t never = ta_access_heat_agent(ta_access_heat_agent(0, 0), 0);
	expect_eq(never, 1);
	/* Hot, then one empty reading: no longer hot, still far above the untouched. */
	uint32_t h = ta_access_heat_agent(TA_HEAT_MAX, 0);
	expect_true(!ta_access_is_hot(h));
	expect_gt(h, TA_HEAT_COLD);
	/* Empty again and again: down to the untouched's heat in about ten files. */
	int files = 1;
	while (h > never && files < 20) {
		h = ta_access_heat_agent(h, 0);
		files++;
	}
	expect_eq(h, never);
	expect_true(files >= 8 && files <= 12);
	/* Cold, then read: as hot as the reading at once. */
	expect_eq(ta_access_heat_agent(1, 800), 801);
	/* A reading below the faded heat does not lower it past half-way. */
	expect_eq(ta_access_heat_agent(801, 200), 501);
	test_context("%s", "");
}

static void set_heat(void *p, uint32_t heat)
{
	struct ta_large *l = ta_large_find(p);
	if (l == NULL)
		test_hard("no record for %p", p);
	l->heat = heat;
}

static int index_of(void *const *blocks, unsigned n, const void *addr)
{
	for (unsigned i = 0; i < n; i++)
		if (blocks[i] == addr)
			return (int)i;
	return -1;
}

/* Heat first, then age, unsampled last; hottest=true gives the reverse. */
static void test_rank(void)
{
	enum { N = 5 };
	void *b[N];
	for (unsigned i = 0; i < N; i++) {
		b[i] = tieralloc_malloc_tier(0, 1 * MiB);
		memset(b[i], (int)i, 1 * MiB);
		struct timespec ts = { 0, 2 * 1000 * 1000 }; /* distinct ages, in ms */
		nanosleep(&ts, NULL);
	}
	/* b0 oldest. Expected order, coldest first: b1 (50), b0 (300, older), b3 (300), b2 (900),
	 * b4 (never sampled: just made, as hot as can be). */
	set_heat(b[0], 300);
	set_heat(b[1], 50);
	set_heat(b[2], 900);
	set_heat(b[3], 300);
	set_heat(b[4], 0);
	const int want[N] = { 1, 0, 3, 2, 4 };
	for (int hottest = 0; hottest < 2; hottest++) {
		test_context("ranking, %s first", hottest ? "hottest" : "coldest");
		static struct ta_cold_range r[64];
		unsigned n = ta_cold_collect(0, r, 64, hottest);
		int seen[N], k = 0;
		for (unsigned i = 0; i < n; i++) {
			int at = r[i].kind == TA_RANGE_LARGE ? index_of(b, N, r[i].addr) : -1;
			if (at >= 0 && k < N)
				seen[k++] = at;
			ta_cold_release(&r[i], -1, -1);
		}
		expect_eq(k, N);
		for (int i = 0; i < k; i++)
			expect_eq(seen[i], want[hottest ? N - 1 - i : i]);
	}
	for (unsigned i = 0; i < N; i++)
		tieralloc_free(b[i]);
	test_context("%s", "");
}

static bool holds(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != v || p[i + 4095] != v)
			return false;
	return true;
}

static uint64_t ctl_u64(const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof(v);
	if (tieralloc_ctl_get(name, &v, &len) != 0)
		test_hard("ctl %s", name);
	return v;
}

/* Four cold blocks fill tier 0 to its limit; four hot ones sit in tier 1. */
static void test_exchange(uint32_t cold_heat, bool expect_moves)
{
	enum { N = 4 };
	void *cold[N], *hot[N];
	for (unsigned i = 0; i < N; i++) {
		cold[i] = tieralloc_malloc_tier(0, 1 * MiB);
		hot[i] = tieralloc_malloc_tier(1, 1 * MiB);
		memset(cold[i], 0x10 + (int)i, 1 * MiB);
		memset(hot[i], 0x20 + (int)i, 1 * MiB);
		set_heat(cold[i], cold_heat);
		set_heat(hot[i], 900);
	}
	settle();
	const uint64_t limit = charged(0);
	set_limit(0, limit);
	const uint64_t promoted0 = ctl_u64("tier.0.promoted");
	const uint64_t down0 = ctl_u64("tier.0.exchanged_down");
	uint64_t moved = ta_exchange_tiers();
	unsigned up = 0, down = 0;
	for (unsigned i = 0; i < N; i++) {
		up += tieralloc_tier_of(hot[i]) == 0;
		down += tieralloc_tier_of(cold[i]) == 1;
	}
	printf("exchange (cold heat %u): %llu bytes up, %u hot blocks up, %u cold down\n",
	       cold_heat, (unsigned long long)moved, up, down);
	test_context("exchange, tier 0 full of heat-%u blocks", cold_heat);
	expect_le(charged(0), limit);
	if (expect_moves) {
		expect_eq(up, N);
		expect_eq(down, N);
		expect_eq(moved, N * MiB);
		expect_eq(ctl_u64("tier.0.promoted") - promoted0, N * MiB);
		expect_eq(ctl_u64("tier.0.exchanged_down") - down0, N * MiB);
		/* What moved is unknown until it is sampled again: no move back meanwhile. */
		for (unsigned i = 0; i < N; i++) {
			expect_eq(ta_large_find(hot[i])->heat, TA_HEAT_MOVED);
			expect_eq(ta_large_find(cold[i])->heat, TA_HEAT_MOVED);
		}
		expect_eq(ta_exchange_tiers(), 0);
	} else {
		expect_eq(up, 0);
		expect_eq(down, 0);
		expect_eq(moved, 0);
	}
	for (unsigned i = 0; i < N; i++) {
		expect_true(holds(cold[i], 1 * MiB, (unsigned char)(0x10 + i)));
		expect_true(holds(hot[i], 1 * MiB, (unsigned char)(0x20 + i)));
	}

	/* With room in tier 0, hot blocks go up and nothing comes down. */
	if (expect_moves) {
		test_context("exchange with room in tier 0");
		for (unsigned i = 0; i < N; i++)
			set_heat(cold[i], 900); /* now in tier 1, hot again */
		set_limit(0, UINT64_MAX);
		uint64_t d0 = ctl_u64("tier.0.exchanged_down");
		expect_eq(ta_exchange_tiers(), N * MiB);
		expect_eq(ctl_u64("tier.0.exchanged_down"), d0);
		for (unsigned i = 0; i < N; i++)
			expect_eq(tieralloc_tier_of(cold[i]), 0);
	}
	set_limit(0, UINT64_MAX);
	for (unsigned i = 0; i < N; i++) {
		tieralloc_free(cold[i]);
		tieralloc_free(hot[i]);
	}
	test_context("%s", "");
}

/* The probe runs on the first tick; on a kernel without soft-dirty bits the source says why and
 * heats stay unknown (age decides). */
static void test_source(void)
{
	test_context("access source");
	expect_true(ta_access_tick() == false); /* the probe (and priming clear), no sample */
	const char *src = ta_access_source();
	printf("access source: %s\n", src);
	char via_ctl[128];
	size_t len = sizeof(via_ctl);
	expect_eq(tieralloc_ctl_get("access.source", via_ctl, &len), 0);
	expect_str_eq(via_ctl, src);
	if (strcmp(src, "soft-dirty") == 0) {
		expect_true(!ta_access_active()); /* primed, not sampled */
	} else {
		expect_true(strncmp(src, "age (", 5) == 0);
		expect_true(!ta_access_active());
		expect_true(ta_access_tick() == false);
		expect_eq(ctl_u64("access.samples"), 0);
	}
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	test_count();
	test_heat();
	test_heat_agent();
	test_rank();
	test_exchange(50, true);
	test_exchange(400, false);
	test_source();
	return test_done();
}
