/* SPDX-License-Identifier: MIT */
/*
 * TIERALLOC_ACCESS=agent in the process (src/enforce/access.c), with an access file written here
 * as tierallocd --access damon would write it:
 * - while the file is fresh, heats are the file's alone (a region's rate taken over the part of
 *   it that holds the process's memory) and soft-dirty costs nothing: no bit is cleared (a page
 *   written before a sample still reads written after it), so the process's writes take no
 *   soft-dirty faults (issue 14 item 4);
 * - when the file goes, soft-dirty takes over with one priming period: the bits are cleared and
 *   heats keep the file's values, then written pages rank hot and unwritten ones cold.
 * The agent side (DAMON in the 6.12 guest) is tests/guest/access_agent.sh's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "enforce/heatfile.h"
#include "internal.h"
#include "test.h"
#include "tiers.h"

#define MiB	      ((size_t)1 << 20)
#define OBJ_SIZE      (2 * MiB)
#define PAGEMAP_DIRTY (1ull << 55)

static char heatfile[64];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_pages(unsigned char *p, unsigned char v)
{
	for (size_t off = 0; off < OBJ_SIZE; off += 4096)
		p[off] = v;
}

static bool page_dirty(const void *p)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		test_hard("open /proc/self/pagemap");
	off_t off = (off_t)((uintptr_t)p / 4096 * sizeof(e));
	if (pread(fd, &e, sizeof(e), off) != (ssize_t)sizeof(e))
		test_hard("read pagemap");
	close(fd);
	return (e & PAGEMAP_DIRTY) != 0;
}

static bool overlaps(uintptr_t a, uintptr_t len, const void *obj)
{
	return a < (uintptr_t)obj + OBJ_SIZE && (uintptr_t)obj < a + len;
}

/* The file says hot_obj was accessed in every sample and cold_obj in none; with sparse_obj, a
 * region twice its size (the other half holding nothing of this process's) accessed in half the
 * samples, as DAMON reads memory that is all read but takes half of its address space. Its
 * counts began at window_ns. */
static void write_heatfile(const void *hot_obj, const void *cold_obj, const void *sparse_obj,
			   uint64_t window_ns)
{
	struct ta_heatfile_header h = {
		.pid = (uint32_t)getpid(),
		.start_time = ta_proc_start_time(getpid()),
		.written_ns = now_ns(),
		.window_ns = window_ns,
		.interval_ns = 60ull * 1000000000ull, /* fresh for the whole test */
		.max_accesses = 20,
		.source = TA_HEATFILE_SOURCE_DAMON,
	};
	struct ta_heatfile_region r[3] = {
		{ (uintptr_t)hot_obj, (uintptr_t)hot_obj + OBJ_SIZE, 20, 1 },
		{ (uintptr_t)cold_obj, (uintptr_t)cold_obj + OBJ_SIZE, 0, 1 },
	};
	unsigned n = 2;
	if (sparse_obj != NULL) {
		/* The empty half after the object, or before it when that is where the others are.
		 */
		uintptr_t a = (uintptr_t)sparse_obj;
		if (overlaps(a, 2 * OBJ_SIZE, hot_obj) || overlaps(a, 2 * OBJ_SIZE, cold_obj))
			a -= OBJ_SIZE;
		if (overlaps(a, 2 * OBJ_SIZE, hot_obj) || overlaps(a, 2 * OBJ_SIZE, cold_obj))
			test_hard("no room for a region twice the object's size around %p",
				  sparse_obj);
		r[n++] = (struct ta_heatfile_region){ a, a + 2 * OBJ_SIZE, 10, 1 };
	}
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && r[j].start < r[j - 1].start; j--) {
			struct ta_heatfile_region t = r[j];
			r[j] = r[j - 1];
			r[j - 1] = t;
		}
	static uint64_t buf[TA_HEATFILE_MAX_BYTES / sizeof(uint64_t) + 1];
	size_t len = ta_heatfile_encode(buf, &h, r, n);
	int fd = open(heatfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0400);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		test_hard("write %s", heatfile);
	close(fd);
}

static uint32_t heat_of(void *p)
{
	struct ta_large *l = ta_large_find(p);
	if (l == NULL)
		test_hard("no record for %p", p);
	return l->heat;
}

static bool source_is(const char *prefix)
{
	return strncmp(ta_access_source(), prefix, strlen(prefix)) == 0;
}

/* Ticks until one samples (the period may stretch on a loaded machine); false after 60 s. */
static bool tick_until_sampled(void)
{
	for (int i = 0; i < 600; i++) {
		if (ta_access_tick())
			return true;
		usleep(100 * 1000);
	}
	return false;
}

int main(int argc, char **argv)
{
	static const char *const env[] = {
		"TIERALLOC_TIERS=0;0",	  "TIERALLOC_ENFORCE=off",	   "TIERALLOC_SHM_NAME=off",
		"TIERALLOC_ACCESS=agent", "TIERALLOC_ACCESS_PERIOD=100ms", NULL
	};
	test_reexec_with_env(argv, env);
	snprintf(heatfile, sizeof(heatfile), "/dev/shm/" TA_HEATFILE_PREFIX "%u",
		 (unsigned)getpid());
	unlink(heatfile);
	unsigned char *hot = tieralloc_malloc_tier(0, OBJ_SIZE);
	unsigned char *cold = tieralloc_malloc_tier(0, OBJ_SIZE);
	unsigned char *sparse = tieralloc_malloc_tier(0, OBJ_SIZE);
	if (hot == NULL || cold == NULL || sparse == NULL)
		test_hard("no tier-0 memory");
	write_pages(hot, 1);
	write_pages(cold, 1);
	expect_true(!ta_access_tick()); /* the probe and its priming clear */
	if (source_is("age ("))
		test_skip("this kernel gives no soft-dirty bits: %s", ta_access_source());

	test_context("agent's file fresh");
	write_heatfile(hot, cold, sparse, now_ns());
	write_pages(hot, 2);
	write_pages(cold, 2); /* written, but the file says cold: the file decides */
	expect_true(tick_until_sampled());
	expect_true(source_is("agent (damon)"));
	expect_true(ta_access_is_hot(heat_of(hot)));
	expect_true(!ta_access_is_hot(heat_of(cold)) && ta_heat_known(heat_of(cold)));
	/* Read in half the samples of a region half empty: all of it is hot (heatfile.h). */
	expect_true(ta_access_is_hot(heat_of(sparse)));
	/* No clear under the agent: the write before the sample still shows. */
	expect_true(page_dirty(hot));
	expect_true(page_dirty(cold));
	uint32_t hot_heat = heat_of(hot), cold_heat = heat_of(cold);

	/* The worker looks every period, the agent writes every aggregation: a file already
	 * folded is not folded again, and no sample is counted for it. */
	test_context("one file, folded once");
	uint64_t samples = atomic_load(&ta_access_samples);
	for (int i = 0; i < 5; i++) {
		usleep(120 * 1000);
		expect_true(!ta_access_tick());
	}
	expect_eq(atomic_load(&ta_access_samples), samples);
	expect_eq(heat_of(hot), hot_heat);

	/* DAMON can miss a read range for a whole aggregation: one empty reading leaves it cold
	 * but above what reads empty every time, which goes down first. */
	test_context("one empty reading");
	write_heatfile(cold, hot, NULL, now_ns()); /* hot reads 0 this once */
	expect_true(tick_until_sampled());
	expect_true(!ta_access_is_hot(heat_of(hot)));
	expect_gt(heat_of(hot), TA_HEAT_COLD);
	expect_true(heat_of(cold) > heat_of(hot)); /* cold read accessed: as hot as that at once */
	write_heatfile(hot, cold, sparse, now_ns());
	expect_true(tick_until_sampled());
	expect_true(ta_access_is_hot(heat_of(hot)));
	write_heatfile(hot, cold, sparse, now_ns());
	expect_true(tick_until_sampled());
	expect_true(!ta_access_is_hot(heat_of(cold)));
	hot_heat = heat_of(hot);
	cold_heat = heat_of(cold);

	/* An object made after the counts began was accessed by its making: the file says
	 * nothing of it yet, however hot it reads there; from the next window on it does. */
	test_context("made in the agent's window");
	uint64_t before_young = now_ns();
	unsigned char *young = tieralloc_malloc_tier(0, OBJ_SIZE);
	if (young == NULL)
		test_hard("no tier-0 memory");
	write_pages(young, 4);
	write_heatfile(young, cold, NULL, before_young);
	expect_true(tick_until_sampled());
	expect_true(source_is("agent (damon)"));
	expect_true(!ta_heat_known(heat_of(young)));
	expect_true(!ta_access_is_hot(heat_of(cold)) && ta_heat_known(heat_of(cold)));
	write_heatfile(young, cold, NULL, now_ns());
	expect_true(tick_until_sampled());
	expect_true(ta_access_is_hot(heat_of(young)));
	expect_true(young[0] == 4 && young[OBJ_SIZE - 4096] == 4);
	tieralloc_free(young);
	write_heatfile(hot, cold, sparse, now_ns());
	expect_true(tick_until_sampled());
	hot_heat = heat_of(hot);
	cold_heat = heat_of(cold);

	test_context("agent's file gone");
	unlink(heatfile);
	for (int i = 0; i < 600 && !source_is("soft-dirty (agent:"); i++) {
		expect_true(!ta_access_tick()); /* the priming period samples nothing */
		usleep(100 * 1000);
	}
	expect_true(source_is("soft-dirty (agent: no access file"));
	expect_true(!page_dirty(hot)); /* primed */
	expect_eq(heat_of(hot), hot_heat);
	expect_eq(heat_of(cold), cold_heat);

	test_context("soft-dirty after the agent");
	write_pages(cold, 3); /* now only cold is written */
	expect_true(tick_until_sampled());
	expect_true(ta_access_is_hot(heat_of(cold)));
	expect_true(!ta_access_is_hot(heat_of(hot)));
	test_context("%s", "");
	expect_true(hot[0] == 2 && hot[OBJ_SIZE - 4096] == 2 && cold[4096] == 3); /* intact */
	tieralloc_free(hot);
	tieralloc_free(cold);
	tieralloc_free(sparse);
	return test_done();
}
