/* SPDX-License-Identifier: MIT */
/*
 * A thread's cache of free objects (src/alloc/tcache.c, alloc.c, arena.c): a class's first refill
 * takes 8 objects and each later one twice as many, up to half the class's cap, so that a class a
 * thread uses little holds few objects and touches few slots; fresh objects go out lowest address
 * first, so a class fills its run upward (one partly touched page at its top, not one at each end
 * of every refill); and no class caches more than 256 objects or about 128 KiB. A bin's slot array
 * gets 16 slots when its class is first used and doubles them as the class is used (the slots of
 * ~120 classes in use touched every page of fixed arrays: 88 KiB in a process holding 4 MiB of
 * mixed sizes); the bins of classes a thread never uses are never written. A full bin keeps
 * half, unless the thread allocated nothing in the tier since its last full bin: then it gives
 * all back (a thread that only frees another's objects holds 16 per class, not the cap).
 */
#include <pthread.h>

#include "internal.h"
#include "test.h"

#define SIZE 1088 /* a class nothing else in this process uses */

static void *fresh_thread(void *arg)
{
	(void)arg;
	unsigned cls = ta_size_class(SIZE);
	char *first = tieralloc_malloc(SIZE);
	struct ta_tcache *tc = ta_tls;
	if (first == NULL || tc == NULL)
		test_hard("no object or no cache");
	int tier = tieralloc_tier_of(first);
	struct ta_bin *bin = &tc->bins[tier][cls];
	unsigned full = ta_class_cache_cap[cls];
	test_context("first refill: 8 objects, one handed out, in 16 slots");
	expect_eq(bin->count, 7);
	expect_eq(bin->fill, 16);
	expect_eq(bin->cap, 16);
	test_context("an unused class has no slots, and its bin was never written");
	struct ta_bin *unused = &tc->bins[tier][ta_size_class(SIZE + 512)];
	expect_eq(unused->cap, 0);
	expect_true(unused->slots == NULL);
	test_context("the next class used takes the slots right after");
	void *other = tieralloc_malloc(SIZE + 1024);
	struct ta_bin *next = &tc->bins[tier][ta_size_class(SIZE + 1024)];
	expect_true(other != NULL);
	expect_true(next->slots == bin->slots + 16);
	tieralloc_free(other);
	test_context("fresh objects go out lowest first");
	char *prev = first;
	for (unsigned i = 1; i < 8; i++) {
		char *p = tieralloc_malloc(SIZE);
		expect_true(p == prev + ta_class_size[cls]);
		prev = p;
	}
	test_context("each refill takes twice as many, up to half the cap");
	unsigned expect_fill = 16, refills = 0;
	while (expect_fill < full / 2 && refills < 16) {
		(void)tieralloc_malloc(SIZE); /* the bin was empty: a refill of expect_fill */
		expect_eq(bin->count, expect_fill - 1);
		expect_ge(bin->cap, expect_fill); /* the slots grew to hold it */
		expect_fill = expect_fill * 2 < full / 2 ? expect_fill * 2 : full / 2;
		expect_eq(bin->fill, expect_fill);
		for (unsigned left = bin->count; left > 0; left--)
			(void)tieralloc_malloc(SIZE);
		refills++;
	}
	(void)tieralloc_malloc(SIZE);
	expect_eq(bin->fill, full / 2);
	expect_eq(bin->count, full / 2 - 1u);
	test_context(
	    "frees fill the slots up to the class's cap; a thread that allocates keeps half");
	void *held[512], *more[512];
	unsigned n = 0;
	while (n < 2 * full && n < 512) {
		more[n] = tieralloc_malloc(SIZE);
		held[n++] = tieralloc_malloc(SIZE);
	}
	/* Lowest count after the bin was first full: a full bin keeps half and takes the free. */
	unsigned lowest = full;
	bool was_full = false;
	for (unsigned i = 0; i < n; i++) {
		tieralloc_free(held[i]);
		if (i % 16 == 15)
			held[i] = tieralloc_malloc(SIZE); /* an allocation in the tier */
		else
			held[i] = NULL;
		if (bin->count == full)
			was_full = true;
		else if (was_full && bin->count < lowest)
			lowest = bin->count;
	}
	expect_eq(bin->cap, full);
	expect_true(was_full);
	expect_ge(lowest, full / 2 - 1);
	test_context("a thread that only frees gives a full bin back whole (a consumer's)");
	/* The first full bin since the allocations above keeps half; the next one, with no
	 * allocation in between, gives all back and takes the free: one object left. */
	lowest = full;
	was_full = false;
	for (unsigned i = 0; i < n; i++) {
		tieralloc_free(more[i]);
		if (bin->count == full)
			was_full = true;
		else if (was_full && bin->count < lowest)
			lowest = bin->count;
	}
	expect_true(was_full);
	expect_eq(lowest, 1);
	expect_le(bin->count, full);
	test_context("%s", "");
	return NULL; /* the objects stay allocated: the test ends */
}

int main(int argc, char **argv)
{
	/* Class runs: packed objects (a young process's first medium ones) are test_pack's. */
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_PACK=0", NULL };
	test_reexec_with_env(argv, env);
	for (unsigned c = 0; c < TA_NCLASSES; c++) {
		test_context("class %u (%u bytes): cap %u", c, ta_class_size[c],
			     ta_class_cache_cap[c]);
		expect_le(ta_class_cache_cap[c], 256);
		expect_ge(ta_class_cache_cap[c], 4);
		if (ta_class_cache_cap[c] > 4)
			expect_le((uint64_t)ta_class_cache_cap[c] * ta_class_size[c], 128 * 1024);
	}
	test_context("%s", "");
	pthread_t th;
	if (pthread_create(&th, NULL, fresh_thread, NULL) != 0)
		test_hard("pthread_create");
	pthread_join(th, NULL);
	return test_done();
}
