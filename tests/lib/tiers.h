/* SPDX-License-Identifier: MIT */
/*
 * What the unit tests of charging read and set, per tier: the charge, the live bytes, the limit,
 * and "settle" (this thread's cache back to the runs, everything held and unused given back), so
 * that a case starts from what the tiers really use. Needs internal.h and test.h before it.
 */
#ifndef TA_TEST_TIERS_H
#define TA_TEST_TIERS_H

static TEST_UNUSED uint64_t charged(int tier)
{
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	if (tieralloc_tier_stats(tier, &s) != 0)
		test_hard("tieralloc_tier_stats(%d)", tier);
	return s.charged;
}

static TEST_UNUSED uint64_t live(int tier)
{
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	if (tieralloc_tier_stats(tier, &s) != 0)
		test_hard("tieralloc_tier_stats(%d)", tier);
	return s.bytes_live;
}

static TEST_UNUSED void set_limit(int tier, uint64_t bytes)
{
	char name[32];
	snprintf(name, sizeof(name), "tier.%d.limit", tier);
	if (tieralloc_ctl_set(name, &bytes, sizeof(bytes)) != 0)
		test_hard("ctl_set %s", name);
}

static TEST_UNUSED void settle(void)
{
	tieralloc_ctl_set("thread.flush", NULL, 0);
	for (unsigned t = 0; t < ta_ntiers; t++)
		ta_give_back(t);
}

/* memkind started, so that its late start (src/alloc/backend.c; what it faults in joins tier 0's
 * start-up charge) does not land in the middle of a case's books. */
static TEST_UNUSED void backend_started(void)
{
	void *p = ta_backend_alloc(0, 4096, 16, false);
	if (p == NULL || !ta_backend_memkind_started())
		test_hard("memkind did not start");
	ta_backend_free(0, p, 4096);
}

#endif /* TA_TEST_TIERS_H */
