/* SPDX-License-Identifier: MIT */
/*
 * Freed large objects kept for reuse (src/alloc/keep.c): their pages stay with the tier's kind and
 * their bytes stay charged to the tier; a large allocation takes its charge from what is kept; what
 * is kept is given back (purged, uncharged) past its bound, under quota pressure and with age. Two
 * logical tiers on node 0 (TIERALLOC_TIERS="0;0").
 */
#include <time.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)

static void touch(char *p, size_t n)
{
	for (size_t o = 0; o < n; o += 4096)
		p[o] = 1;
}

/* A freed block stays charged, kept; the next one of its size takes that charge. */
static void test_reuse(void)
{
	test_context("free keeps the charge");
	ta_keep_release(0);
	uint64_t base = charged(0), live0 = live(0);
	char *p = tieralloc_malloc_tier(0, 4 * MiB);
	touch(p, 4 * MiB);
	uint64_t with = charged(0);
	expect_ge(with, base + 4 * MiB);
	tieralloc_free(p);
	expect_eq(live(0), live0);
	/* Still charged; the look after the free set the charge to what the kind holds: the block
	 * and a little more (pages of earlier blocks). */
	expect_ge(charged(0), with);
	expect_le(charged(0), with + 256 * KiB);
	expect_ge(ta_keep_bytes(0), 4 * MiB);
	expect_le(ta_keep_bytes(0), 4 * MiB + 256 * KiB);

	test_context("the next block of the size takes the kept charge");
	uint64_t kept = ta_keep_bytes(0), before = charged(0), freed_ns = ta_monotonic_ns();
	char *q = tieralloc_malloc_tier(0, 4 * MiB);
	touch(q, 4 * MiB);
	if (ta_monotonic_ns() - freed_ns < 1000000000ull) {
		expect_eq(ta_keep_bytes(0), kept - 4 * MiB);
		expect_eq(charged(0), before);
	} else {
		/* A loaded machine paused us a second: what was kept aged out (test_age). */
		printf("reuse: over a second between free and malloc; the kept charge aged out\n");
		expect_eq(ta_keep_bytes(0), 0);
	}
	tieralloc_free(q);
	ta_keep_release(0);
	test_context("%s", "");
}

/* Past the bound (8 MiB for a tier holding little), everything kept is given back. */
static void test_bound(void)
{
	test_context("past the bound");
	ta_keep_release(0);
	uint64_t released = ta_keep_released(0), base = charged(0);
	char *b[3];
	for (unsigned i = 0; i < 3; i++) {
		b[i] = tieralloc_malloc_tier(0, 4 * MiB);
		touch(b[i], 4 * MiB);
	}
	for (unsigned i = 0; i < 3; i++)
		tieralloc_free(b[i]);
	/* 12 MiB freed: the look after the third block found more than 8 MiB held. */
	expect_gt(ta_keep_released(0), released);
	expect_le(ta_keep_bytes(0), 8 * MiB);
	expect_le(charged(0), base + 8 * MiB);
	ta_keep_release(0);
	expect_eq(ta_keep_bytes(0), 0);
	test_context("%s", "");
}

/* A refused charge gives back what the tier keeps, and the allocation stays in the tier. */
static void test_pressure(void)
{
	test_context("quota pressure");
	ta_keep_release(0);
	char *p = tieralloc_malloc_tier(0, 4 * MiB);
	touch(p, 4 * MiB);
	tieralloc_free(p);
	uint64_t kept = ta_keep_bytes(0);
	expect_ge(kept, 4 * MiB);
	/* No room above what tier 0 holds, kept bytes included. */
	set_limit(0, charged(0));
	/* 3000-byte objects: a class no free object exists of, so a run must be charged. */
	void *small = tieralloc_malloc(3000);
	expect_eq(tieralloc_tier_of(small), 0);
	expect_eq(ta_keep_bytes(0), 0);
	expect_le(charged(0), kept + charged(0));
	tieralloc_free(small);
	/* A large one within what is kept needs no room: it takes the kept charge. */
	set_limit(0, UINT64_MAX);
	p = tieralloc_malloc_tier(0, 2 * MiB);
	touch(p, 2 * MiB);
	tieralloc_free(p);
	set_limit(0, charged(0));
	uint64_t released = ta_keep_released(0);
	void *big = tieralloc_malloc(1 * MiB);
	expect_eq(tieralloc_tier_of(big), 0);
	/* Nothing given back for it; the other MiB kept goes back, as the tier has no room
	 * (test_headroom). */
	expect_eq(ta_keep_released(0), released + 1 * MiB);
	expect_eq(ta_keep_bytes(0), 0);
	tieralloc_free(big);
	set_limit(0, UINT64_MAX);
	ta_keep_release(0);
	test_context("%s", "");
}

/* Freed pages left over when a block did not fit in them are kept only within the tier's room. */
static void test_no_room(void)
{
	test_context("freed pages beyond the tier's room go back");
	set_limit(0, UINT64_MAX);
	ta_keep_release(0);
	char *a = tieralloc_malloc_tier(0, 4 * MiB);
	char *guard = tieralloc_malloc_tier(0, 128 * KiB);
	touch(a, 4 * MiB);
	tieralloc_free(a);
	expect_ge(ta_keep_bytes(0), 4 * MiB);
	uint64_t released = ta_keep_released(0);
	/* No room above what tier 0 holds now. An explicit request is placed whatever the limit
	 * and takes the kept charge, but not the kept pages: 8 MiB do not fit in a's 4. Those
	 * pages are then held without a charge the quota allows: they go back. */
	set_limit(0, charged(0));
	char *b = tieralloc_malloc_tier(0, 8 * MiB);
	expect_true(b != NULL && b != a);
	expect_eq(ta_keep_bytes(0), 0);
	expect_eq(ta_lheap_dirty(0), 0);
	expect_ge(ta_keep_released(0), released + 4 * MiB);
	/* Within the room, they stay. */
	set_limit(0, UINT64_MAX);
	tieralloc_free(b);
	expect_ge(ta_keep_bytes(0), 8 * MiB);
	tieralloc_free(guard);
	ta_keep_release(0);
	test_context("%s", "");
}

/* Kept pages never take the last 8 MiB of the tier's room (keep.c, headroom): a cgroup at its
 * limit needs them for what is not charged. */
static void test_headroom(void)
{
	test_context("kept pages leave 8 MiB of the tier's room");
	set_limit(0, UINT64_MAX);
	ta_keep_release(0);
	char *live = tieralloc_malloc_tier(0, 24 * MiB); /* the bound: over what is freed */
	char *a = tieralloc_malloc_tier(0, 16 * MiB);
	touch(live, 24 * MiB);
	touch(a, 16 * MiB);
	set_limit(0, charged(0) + 4 * MiB);
	uint64_t released = ta_keep_released(0);
	tieralloc_free(a);
	/* 4 MiB of room: 4 MiB of the 16 freed go back, the rest is kept. */
	expect_ge(ta_keep_bytes(0), 11 * MiB);
	expect_le(ta_keep_bytes(0), 12 * MiB);
	expect_eq(ta_lheap_dirty(0), ta_keep_bytes(0));
	expect_ge(ta_keep_released(0), released + 4 * MiB);
	expect_ge(ta_charge_room_bytes(0, TA_LIMIT_HIGH), 8 * MiB);
	/* Over the share (a lowered limit, forced charges), by however much: none is kept. */
	char *c = tieralloc_malloc_tier(0, 16 * MiB);
	touch(c, 16 * MiB);
	set_limit(0, charged(0) - 12 * MiB);
	tieralloc_free(c);
	expect_eq(ta_keep_bytes(0), 0);
	expect_eq(ta_lheap_dirty(0), 0);
	/* With the room there, a free keeps all of it. */
	set_limit(0, UINT64_MAX);
	char *b = tieralloc_malloc_tier(0, 4 * MiB);
	touch(b, 4 * MiB);
	uint64_t before = ta_keep_bytes(0);
	tieralloc_free(b);
	expect_eq(ta_keep_bytes(0), before + 4 * MiB);
	tieralloc_free(live);
	ta_keep_release(0);
	test_context("%s", "");
}

/* Kept over a second with nothing kept since: given back by the next slow path. */
static void test_age(void)
{
	test_context("age");
	ta_keep_release(0);
	char *p = tieralloc_malloc_tier(0, 2 * MiB);
	touch(p, 2 * MiB);
	tieralloc_free(p);
	expect_gt(ta_keep_bytes(0), 0);
	struct timespec ts = { 1, 300 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	void *q = tieralloc_malloc(5 * MiB); /* a slow path */
	expect_eq(ta_keep_bytes(0), 0);
	tieralloc_free(q);
	ta_keep_release(0);
	ta_keep_release(1);
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
	test_reuse();
	test_bound();
	test_pressure();
	test_no_room();
	test_headroom();
	test_age();
	return test_done();
}
