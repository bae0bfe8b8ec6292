/* SPDX-License-Identifier: MIT */
/*
 * Runs whose objects all came back (src/alloc/arena.c): they stay charged to their tier and are
 * given back to the kernel (pages dropped, charge returned) after a second empty, at once under
 * quota pressure, and never while an object of theirs is out; their pages then serve the tier's
 * next runs of any class. A chunk demoted with empty runs on it keeps the books: once everything is
 * freed and given back, both tiers hold what they held before. Where a chunk's upper half may be a
 * transparent huge page (THP "always"), its runs stay resident and charged until the whole half
 * is free, and then it goes back at once, also after a demotion. Two logical tiers on node 0.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)
#define N   4096

static void *obj[N];

static struct tieralloc_tier_stats stats(int tier)
{
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	if (tieralloc_tier_stats(tier, &s) != 0)
		test_hard("tieralloc_tier_stats(%d)", tier);
	return s;
}

/* What the tier gave back, as a program reads it. */
static uint64_t purged(int tier)
{
	char name[32];
	uint64_t v = 0;
	size_t len = sizeof(v);
	snprintf(name, sizeof(name), "tier.%d.purged", tier);
	if (tieralloc_ctl_get(name, &v, &len) != 0)
		test_hard("ctl_get %s", name);
	return v;
}

static unsigned resident_pages(void *p, size_t len)
{
	long psz = sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(psz - 1);
	size_t n = ((uintptr_t)p + len - lo + (size_t)psz - 1) / (size_t)psz;
	unsigned char vec[64];
	if (n > sizeof(vec) || mincore((void *)lo, n * (size_t)psz, vec) != 0)
		return 0;
	unsigned in = 0;
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	return in;
}

static void alloc_all(size_t size, int tier)
{
	for (unsigned i = 0; i < N; i++) {
		obj[i] = tier >= 0 ? tieralloc_malloc_tier(tier, size) : tieralloc_malloc(size);
		if (obj[i] == NULL)
			test_hard("allocation %u of %zu failed", i, size);
		memset(obj[i], 0x5a, size);
	}
}

static void free_all(void)
{
	for (unsigned i = 0; i < N; i++) {
		tieralloc_free(obj[i]);
		obj[i] = NULL;
	}
}

static void test_give_back(void)
{
	test_context("empty runs stay charged, then go back");
	settle();
	uint64_t base = stats(0).charged;
	alloc_all(1024, 0); /* 4 MiB of 1 KiB objects */
	uint64_t with = stats(0).charged;
	expect_ge(with, base + N * 1024);
	void *first = obj[0];
	free_all();
	tieralloc_ctl_set("thread.flush", NULL, 0);
	expect_eq(stats(0).charged, with);
	uint64_t p0 = purged(0);
	uint64_t back = ta_arena_purge(0, 0);
	expect_ge(back, N * 1024);
	expect_eq(stats(0).charged, with - back);
	expect_eq(purged(0), p0 + back);
	/* Its pages are gone from the process. */
	expect_eq(resident_pages(first, 1024), 0);

	test_context("their pages serve the next runs of another class");
	uint64_t chunks = atomic_load(&ta_arenas[0].nchunks);
	alloc_all(512, 0); /* 2 MiB of 512-byte objects: fits in the holes */
	expect_eq(atomic_load(&ta_arenas[0].nchunks), chunks);
	free_all();
	settle();
	expect_eq(stats(0).charged, base);
	test_context("%s", "");
}

static void test_kept_while_in_use(void)
{
	test_context("a run with an object out is not given back");
	settle();
	alloc_all(2048, 0);
	/* Runs the last refill took objects of that were never handed out are empty: gone first. */
	tieralloc_ctl_set("thread.flush", NULL, 0);
	ta_arena_purge(0, 0);
	/* Keep one object of every run (a 2 KiB run is one page, eight objects): none empty. Which
	 * objects share a run depends on how refills took them, so the page says. */
	static uintptr_t kept_page[N];
	unsigned nkept = 0;
	for (unsigned i = 0; i < N; i++) {
		uintptr_t page = (uintptr_t)obj[i] >> TA_PAGE_SHIFT;
		bool seen = false;
		for (unsigned k = 0; k < nkept && !seen; k++)
			seen = kept_page[k] == page;
		if (!seen) {
			kept_page[nkept++] = page;
			continue;
		}
		tieralloc_free(obj[i]);
		obj[i] = NULL;
	}
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t before = stats(0).charged;
	ta_arena_purge(0, 0);
	expect_eq(stats(0).charged, before);
	for (unsigned i = 0; i < N; i++)
		for (unsigned k = 0; obj[i] != NULL && k < 2048; k++)
			if (((unsigned char *)obj[i])[k] != 0x5a) {
				expect_true(!"a kept object lost its contents");
				break;
			}
	free_all();
	settle();
	test_context("%s", "");
}

static void test_age(void)
{
	test_context("given back after a second empty, by the next slow path");
	settle();
	alloc_all(4096, 0);
	free_all();
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t p0 = purged(0), with = stats(0).charged, emptied_ns = ta_monotonic_ns();
	/* Not yet: just emptied (unless a loaded machine paused us a second meanwhile). */
	void *q = tieralloc_malloc(3000); /* a slow path: a class with nothing cached */
	if (ta_monotonic_ns() - emptied_ns < 1000000000ull)
		expect_eq(purged(0), p0);
	else
		printf("age: over a second after emptying; 'not yet' not judged\n");
	tieralloc_free(q);
	struct timespec ts = { 1, 300 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	q = tieralloc_malloc(2500); /* another class, another slow path */
	expect_gt(purged(0), p0);
	expect_lt(stats(0).charged, with);
	tieralloc_free(q);
	settle();
	test_context("%s", "");
}

static void test_pressure(void)
{
	test_context("quota pressure gives empty runs back at once");
	settle();
	alloc_all(1024, 0);
	free_all();
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t p0 = purged(0);
	set_limit(0, stats(0).charged); /* no room above what tier 0 holds */
	void *q = tieralloc_malloc(6000);
	expect_eq(tieralloc_tier_of(q), 0);
	expect_gt(purged(0), p0);
	tieralloc_free(q);
	set_limit(0, UINT64_MAX);
	settle();
	test_context("%s", "");
}

static void test_trim(void)
{
	test_context("malloc_trim and ctl purge give back at once");
	settle();
	alloc_all(1024, 0);
	free_all(); /* some stay in this thread's cache: trim flushes them first */
	uint64_t p0 = purged(0), with = stats(0).charged;
	expect_eq(ta_trim(0), 1);
	expect_ge(purged(0) - p0, N * 1024);
	expect_le(stats(0).charged, with - N * 1024);
	expect_eq(ta_trim(0), 0); /* nothing left to give */
	alloc_all(2048, 0);
	free_all();
	p0 = purged(0);
	expect_eq(tieralloc_ctl_set("purge", NULL, 0), 0);
	expect_ge(purged(0) - p0, N * 2048);
	settle();
	test_context("%s", "");
}

static void test_demoted_books(void)
{
	test_context("a demoted chunk with empty runs keeps the books");
	settle();
	uint64_t base0 = stats(0).charged, base1 = stats(1).charged;
	/* Enough for several chunks, so that some are not the one runs are cut from. */
	void *big[4];
	for (unsigned i = 0; i < 4; i++) {
		alloc_all(4096, 0); /* 16 MiB per round */
		for (unsigned k = 0; k < N; k++) {
			if (k % 2 != 0) {
				tieralloc_free(obj[k]);
				obj[k] = NULL;
			}
		}
		big[i] = NULL;
		/* Keep the even ones of this round alive in a chain. */
		void **keep = tieralloc_malloc(N / 2 * sizeof(void *));
		for (unsigned k = 0; k < N / 2; k++)
			keep[k] = obj[2 * k];
		big[i] = keep;
	}
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t held0 = stats(0).charged, held1 = stats(1).charged;
	uint64_t moved = ta_demote(0, 1, UINT64_MAX);
	/* The charge moves with the chunks, whole: nothing lost, nothing made up. */
	expect_gt(moved, 0);
	expect_eq(stats(0).charged, held0 - moved);
	expect_eq(stats(1).charged, held1 + moved);
	/* Every object intact, then everything freed and given back: both tiers where they
	 * started. */
	for (unsigned i = 0; i < 4; i++) {
		void **keep = big[i];
		for (unsigned k = 0; k < N / 2; k++) {
			unsigned char *o = keep[k];
			if (o[0] != 0x5a || o[4095] != 0x5a)
				expect_true(!"a demoted object lost its contents");
			tieralloc_free(o);
		}
		tieralloc_free(keep);
	}
	settle();
	expect_eq(stats(0).charged, base0);
	expect_eq(stats(1).charged, base1);
	test_context("%s", "");
}

/* Bytes of free pages kept in huge halves that are partly in use, over both tiers' chunks. */
static uint64_t idle_bytes(void)
{
	uint64_t idle = 0;
	for (unsigned t = 0; t < 2; t++)
		for (struct ta_chunk *k = ta_arenas[t].chunks; k != NULL; k = k->next)
			idle += (uint64_t)k->pages_idle * TA_PAGE_SIZE;
	printf("huge halves: %llu bytes idle at the end\n", (unsigned long long)idle);
	return idle;
}

static unsigned page_in_chunk(const void *p)
{
	return (unsigned)(((uintptr_t)p & (TA_CHUNK_SIZE - 1)) >> TA_PAGE_SHIFT);
}

static void test_huge_halves(void)
{
	test_context("a huge upper half goes back whole, when all of it is free");
	settle();
	uint64_t base0 = stats(0).charged, base1 = stats(1).charged;
	ta_arena_set_huge_halves(true, 0);  /* every new chunk, whatever this host's THP mode */
	enum { SIZE = 16384, COUNT = 700 }; /* a page each: more than two chunks */
	static void *o[COUNT];
	for (unsigned i = 0; i < COUNT; i++) {
		o[i] = tieralloc_malloc_tier(0, SIZE);
		if (o[i] == NULL)
			test_hard("allocation %u failed", i);
		memset(o[i], 0x3c, SIZE);
	}
	/* A chunk cut whole from this test's objects, made after the switch. */
	struct ta_chunk *c = NULL;
	for (unsigned i = COUNT - 1; i-- > 0 && c == NULL;) {
		struct ta_chunk *cand = (struct ta_chunk *)((uintptr_t)o[i] & ~(TA_CHUNK_SIZE - 1));
		unsigned mine = 0;
		for (unsigned k = 0; k < COUNT; k++)
			mine += (struct ta_chunk *)((uintptr_t)o[k] & ~(TA_CHUNK_SIZE - 1)) == cand;
		if (cand->huge_half && mine == TA_CHUNK_PAGES - 1)
			c = cand;
	}
	ta_arena_set_huge_halves(false, 16);
	if (c == NULL)
		test_hard("no chunk of %u objects of %d bytes", (unsigned)TA_CHUNK_PAGES - 1, SIZE);
	/* Closed with every run handed out: its upper half may be huge, its lower half never; the
	 * current chunk's upper half not yet (its uncut end would fault with the first object). */
	char *upper = (char *)c + TA_CHUNK_SIZE / 2;
	struct ta_chunk *cur = ta_arenas[0].cur;
	expect_true(c != cur);
	expect_eq(test_thp_advice(upper), 'h');
	expect_eq(test_thp_advice(c), 'n');
	expect_eq(test_thp_advice((char *)cur + TA_CHUNK_SIZE / 2), 'n');
	/* All of the lower half and all but one of the upper half freed (a run may straddle the
	 * two: its lower pages go, its upper ones stay). */
	void *kept = NULL, *low = NULL, *up = NULL;
	for (unsigned i = 0; i < COUNT; i++) {
		if ((struct ta_chunk *)((uintptr_t)o[i] & ~(TA_CHUNK_SIZE - 1)) != c)
			continue;
		if (page_in_chunk(o[i]) >= TA_HALF_PAGES + 16 && kept == NULL) {
			kept = o[i];
			o[i] = NULL;
			continue;
		}
		if (page_in_chunk(o[i]) >= TA_HALF_PAGES)
			up = o[i];
		else
			low = o[i];
		tieralloc_free(o[i]);
		o[i] = NULL;
	}
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t with = stats(0).charged;
	uint64_t back = ta_arena_purge(0, 0);
	expect_ge(back, (uint64_t)(TA_HALF_PAGES - 1) * TA_PAGE_SIZE);
	expect_eq(stats(0).charged, with - back);
	expect_eq(resident_pages(low, SIZE), 0);
	/* The upper half's free pages stay, charged, idle: taken by new runs like holes. */
	expect_eq(resident_pages(up, SIZE), SIZE / 4096);
	expect_eq(c->pages_idle + ta_class_run_pages(ta_chunk_class_of(kept)), TA_HALF_PAGES);
	expect_eq(((unsigned char *)kept)[SIZE - 1], 0x3c);

	test_context("a demoted chunk's idle pages move with its charge");
	uint64_t held0 = stats(0).charged, held1 = stats(1).charged;
	uint64_t moved = ta_demote(0, 1, UINT64_MAX);
	expect_eq(c->tier, 1);
	expect_eq(stats(0).charged, held0 - moved);
	expect_eq(stats(1).charged, held1 + moved);

	test_context("the half's last run frees it all");
	tieralloc_free(kept);
	tieralloc_ctl_set("thread.flush", NULL, 0);
	uint64_t with1 = stats(1).charged;
	back = ta_arena_purge(1, 0);
	expect_ge(back, (uint64_t)TA_HALF_PAGES * TA_PAGE_SIZE);
	expect_eq(stats(1).charged, with1 - back);
	expect_eq(c->pages_idle, 0);
	expect_eq(resident_pages(up, SIZE), 0);
	expect_eq(resident_pages(kept, SIZE), 0);
	expect_eq(test_thp_advice(upper), 'n'); /* back whole: huge again only once full again */
	for (unsigned i = 0; i < COUNT; i++) {
		if (o[i] != NULL && ((unsigned char *)o[i])[0] != 0x3c)
			expect_true(!"an object lost its contents");
		tieralloc_free(o[i]);
	}
	settle();
	/* Everything went back but the idle pages of halves that something else of this process
	 * (a stdio buffer, say) took a run in meanwhile: those stay charged, by design. */
	expect_le(stats(0).charged + stats(1).charged, base0 + base1 + idle_bytes());
	expect_ge(stats(0).charged + stats(1).charged, base0 + base1);
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	/* Class runs, which go back to the kernel: packed ones never do (test_pack's). */
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", "TIERALLOC_PACK=0", NULL };
	test_reexec_with_env(argv, env);
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	test_give_back();
	test_kept_while_in_use();
	test_age();
	test_pressure();
	test_trim();
	test_demoted_books();
	test_huge_halves();
	return test_done();
}
