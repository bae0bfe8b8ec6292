/* SPDX-License-Identifier: MIT */
/*
 * The registry of a program's own anonymous mappings (src/alloc/maps.c): ranges recorded, merged
 * with their neighbours, cut by unmaps (in the middle too), replaced by a fixed mapping, and a
 * full registry that refuses and counts what it cannot keep instead of growing. Then the
 * sampler's residency per node (place.c) on a mapping of this process's own. Then the charge
 * that follows a sample (quota/charge.c): by the difference between samples, to this process's
 * books, its slot and the tier, moving between tiers without wrapping, and in a forked child
 * only what it adds to what its parent charges, and when pages move between tiers; and the probe
 * placement picks a tier with. And the windows a sample cuts the ranges into, for ranking and
 * moving (enforce/).
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "quota/shm.h"
#include "test.h"

#define P 4096u

static struct ta_maps_range store[8];

static struct ta_maps fresh(unsigned cap)
{
	memset(store, 0, sizeof(store));
	struct ta_maps m = { .r = store, .cap = cap };
	return m;
}

/* The ranges as text, "[a,b) [c,d)" in pages, for one expectation per state. */
static const char *shape(const struct ta_maps *m)
{
	static char buf[256];
	size_t pos = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < m->n && pos < sizeof(buf) - 32; i++)
		pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%s[%lu,%lu)", i ? " " : "",
					(unsigned long)(m->r[i].start / P),
					(unsigned long)(m->r[i].end / P));
	return buf;
}

static void expect_shape(const struct ta_maps *m, const char *want, uint64_t pages)
{
	if (strcmp(shape(m), want) != 0) {
		test_context("ranges %s, expected %s", shape(m), want);
		expect_true(false);
		test_context("%s", "");
	}
	expect_eq(m->bytes, pages * P);
}

static void test_merge(void)
{
	test_context("neighbours merge, in any order");
	struct ta_maps m = fresh(8);
	expect_true(ta_maps_insert(&m, 10 * P, 20 * P));
	expect_true(ta_maps_insert(&m, 30 * P, 40 * P));
	expect_shape(&m, "[10,20) [30,40)", 20);
	expect_true(ta_maps_insert(&m, 20 * P, 30 * P)); /* fills the gap: one range */
	expect_shape(&m, "[10,40)", 30);
	expect_true(ta_maps_insert(&m, 5 * P, 10 * P));
	expect_true(ta_maps_insert(&m, 40 * P, 41 * P));
	expect_shape(&m, "[5,41)", 36);
	test_context("a range over a recorded one replaces it (MAP_FIXED)");
	expect_true(ta_maps_insert(&m, 8 * P, 12 * P));
	expect_shape(&m, "[5,41)", 36);
	expect_true(ta_maps_overlaps(&m, 40 * P, 50 * P));
	expect_true(!ta_maps_overlaps(&m, 41 * P, 50 * P));
	expect_true(!ta_maps_overlaps(&m, 0, 5 * P));
	test_context("%s", "");
}

static void test_erase(void)
{
	test_context("unmaps: a middle, an edge, several ranges at once, nothing");
	struct ta_maps m = fresh(8);
	ta_maps_insert(&m, 10 * P, 40 * P);
	ta_maps_erase(&m, 20 * P, 25 * P); /* a hole: two ranges */
	expect_shape(&m, "[10,20) [25,40)", 25);
	ta_maps_erase(&m, 5 * P, 12 * P); /* the left edge */
	expect_shape(&m, "[12,20) [25,40)", 23);
	ta_maps_erase(&m, 38 * P, 45 * P); /* the right edge */
	expect_shape(&m, "[12,20) [25,38)", 21);
	ta_maps_erase(&m, 15 * P, 30 * P); /* across the gap */
	expect_shape(&m, "[12,15) [30,38)", 11);
	ta_maps_erase(&m, 50 * P, 60 * P); /* nothing there */
	ta_maps_erase(&m, 20 * P, 20 * P); /* empty */
	expect_shape(&m, "[12,15) [30,38)", 11);
	ta_maps_erase(&m, 0, 100 * P);
	expect_shape(&m, "", 0);
	test_context("%s", "");
}

static void test_full(void)
{
	test_context("a full registry refuses and counts, and stays bounded");
	struct ta_maps m = fresh(3);
	ta_maps_insert(&m, 0 * P, 1 * P);
	ta_maps_insert(&m, 2 * P, 3 * P);
	ta_maps_insert(&m, 4 * P, 5 * P);
	expect_true(!ta_maps_insert(&m, 6 * P, 7 * P));
	expect_eq(m.n, 3);
	expect_eq(m.refused, 1);
	expect_eq(m.refused_bytes, P);
	expect_shape(&m, "[0,1) [2,3) [4,5)", 3);
	test_context("... a neighbour still merges when full");
	expect_true(ta_maps_insert(&m, 5 * P, 6 * P));
	expect_shape(&m, "[0,1) [2,3) [4,6)", 4);
	test_context("... a hole that needs a fourth range keeps the left part only");
	ta_maps_insert(&m, 10 * P, 20 * P);
	expect_eq(m.refused, 2);
	struct ta_maps n = fresh(2);
	ta_maps_insert(&n, 0, 1 * P);
	ta_maps_insert(&n, 10 * P, 20 * P);
	ta_maps_erase(&n, 12 * P, 14 * P);
	expect_shape(&n, "[0,1) [10,12)", 3);
	expect_eq(n.refused, 1);
	expect_eq(n.refused_bytes, 6 * P);
	test_context("%s", "");
}

static void test_resident(void)
{
	test_context("the sampler's residency of a mapping of our own");
	size_t len = 64 * P;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		test_hard("mmap");
	uint64_t per_node[TA_MAX_NODES] = { 0 };
	expect_eq(ta_resident_nodes((uintptr_t)p, len, per_node), 0);
	for (size_t i = 0; i < 10; i++)
		p[i * P * 3] = 1; /* pages 0, 3, ... 27 */
	uint64_t found = ta_resident_nodes((uintptr_t)p, len, per_node);
	expect_eq(found, 10);
	uint64_t sum = 0;
	for (unsigned node = 0; node < TA_MAX_NODES; node++)
		sum += per_node[node];
	expect_eq(sum, 10 * P);
	test_context("... a PROT_NONE reservation costs nothing until opened and touched");
	expect_eq(mprotect(p, len, PROT_NONE), 0);
	madvise(p, len, MADV_DONTNEED);
	expect_eq(ta_resident_nodes((uintptr_t)p, len, per_node), 0);
	test_context("... an unmapped range reads as nothing, not as an error");
	munmap(p, len);
	expect_eq(ta_resident_nodes((uintptr_t)p, len, per_node), 0);
	test_context("%s", "");
}

#define MiB ((uint64_t)1 << 20)
static _Alignas(64) unsigned char seg[TA_SHM_SEG_SIZE];

static void expect_charged(unsigned slot, unsigned t, uint64_t in_slot, uint64_t in_tier)
{
	expect_eq(atomic_load(&ta_shm.slots[slot].charged[t]), in_slot);
	expect_eq(atomic_load(&ta_shm.tiers[t].charged), in_tier);
}

static void test_charge_mapped(void)
{
	/* A segment in memory, this process in slot 0, two tiers. */
	ta_shm.tiers = (void *)(seg + TA_SHM_TIERS_OFF);
	ta_shm.slots = (void *)(seg + TA_SHM_SLOTS_OFF);
	ta_shm.nslots = TA_SHM_MAX_SLOTS;
	ta_shm.slot_size = sizeof(struct ta_shm_slot);
	ta_shm.ntiers = 2;
	ta_shm.mine = &ta_shm.slots[0];
	atomic_store(&ta_shm.active, true);
	uint64_t own0 = atomic_load(&ta_charges[0].charged);
	uint64_t r[TA_MAX_TIERS] = { 0 };

	test_context("charge: a sample's resident bytes, to the books, the slot and the tier");
	r[0] = 10 * MiB;
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 10 * MiB, 10 * MiB);
	expect_eq(atomic_load(&ta_charges[0].charged), own0 + 10 * MiB);
	expect_true(atomic_load(&ta_charges[0].peak) >= own0 + 10 * MiB);
	expect_eq(ta_charge_mapped_now(0), 10 * MiB);
	test_context("charge: the same sample again charges nothing more");
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 10 * MiB, 10 * MiB);
	test_context("charge: pages moved to tier 1 leave tier 0");
	r[0] = 4 * MiB;
	r[1] = 6 * MiB;
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 4 * MiB, 4 * MiB);
	expect_charged(0, 1, 6 * MiB, 6 * MiB);
	test_context("charge: everything unmapped, nothing wraps");
	r[0] = r[1] = 0;
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 0, 0);
	expect_charged(0, 1, 0, 0);
	expect_eq(atomic_load(&ta_charges[0].charged), own0);
	test_context("charge: tiers past ntiers are left alone");
	r[2] = 5 * MiB;
	ta_charge_mapped(r, 2);
	expect_eq(atomic_load(&ta_shm.tiers[2].charged), 0);
	expect_eq(ta_charge_mapped_now(2), 0);
	r[2] = 0;

	test_context("charge: a forked child, slot 1, shares its parent's 8 MiB");
	r[0] = 8 * MiB;
	ta_charge_mapped(r, 2);
	ta_charge_fork_inherit();
	ta_shm.mine = &ta_shm.slots[1];
	ta_charge_mapped(r, 2); /* the child's first sample finds the parent's pages */
	expect_charged(1, 0, 0, 8 * MiB);
	expect_charged(0, 0, 8 * MiB, 8 * MiB);
	test_context("charge: what the child gives back of them stays the parent's");
	r[0] = 2 * MiB;
	ta_charge_mapped(r, 2);
	expect_charged(1, 0, 0, 8 * MiB);
	test_context("charge: what the child touches of its own is its own");
	r[0] = 5 * MiB;
	ta_charge_mapped(r, 2);
	expect_charged(1, 0, 3 * MiB, 11 * MiB);

	test_context("room: a charge of nothing, within the high share or not, leaves no trace");
	atomic_store(&ta_shm.tiers[0].limit[TA_LIMIT_HIGH], 16 * MiB);
	atomic_store(&ta_shm.tiers[1].limit[TA_LIMIT_HIGH], UINT64_MAX);
	atomic_store(&ta_charges[0].limit, UINT64_MAX); /* no process limit */
	atomic_store(&ta_charges[1].limit, UINT64_MAX);
	expect_true(ta_charge_room(0, TA_LIMIT_HIGH)); /* 11 MiB of 16 */
	r[0] = 20 * MiB;
	ta_charge_mapped(r, 2);
	expect_true(!ta_charge_room(0, TA_LIMIT_HIGH)); /* 26 MiB */
	expect_true(ta_charge_room(1, TA_LIMIT_HIGH));
	expect_charged(1, 0, 18 * MiB, 26 * MiB);
	atomic_store(&ta_shm.active, false);
	test_context("%s", "");
}

static void test_charge_moved(void)
{
	memset(seg, 0, sizeof(seg));
	ta_shm.tiers = (void *)(seg + TA_SHM_TIERS_OFF);
	ta_shm.slots = (void *)(seg + TA_SHM_SLOTS_OFF);
	ta_shm.nslots = TA_SHM_MAX_SLOTS;
	ta_shm.slot_size = sizeof(struct ta_shm_slot);
	ta_shm.ntiers = 2;
	ta_shm.mine = &ta_shm.slots[0];
	atomic_store(&ta_shm.active, true);
	uint64_t r[TA_MAX_TIERS] = { 0 };

	test_context("moved: pages demoted take their charge to the lower tier");
	r[0] = 10 * MiB;
	ta_charge_mapped(r, 2);
	ta_charge_mapped_moved(0, 1, 4 * MiB);
	expect_charged(0, 0, 6 * MiB, 6 * MiB);
	expect_charged(0, 1, 4 * MiB, 4 * MiB);
	expect_eq(ta_charge_mapped_now(0), 6 * MiB);
	expect_eq(ta_charge_mapped_now(1), 4 * MiB);
	test_context("moved: the next sample, which finds them there, charges nothing twice");
	r[0] = 6 * MiB;
	r[1] = 4 * MiB;
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 6 * MiB, 6 * MiB);
	expect_charged(0, 1, 4 * MiB, 4 * MiB);
	test_context("moved: never more than the tier's figure (pages faulted since the sample)");
	ta_charge_mapped_moved(0, 1, 100 * MiB);
	expect_charged(0, 0, 0, 0);
	expect_charged(0, 1, 10 * MiB, 10 * MiB);
	test_context("moved: up again (filling)");
	ta_charge_mapped_moved(1, 0, 3 * MiB);
	expect_charged(0, 0, 3 * MiB, 3 * MiB);
	expect_charged(0, 1, 7 * MiB, 7 * MiB);
	test_context("moved: all gone, nothing left behind");
	r[0] = r[1] = 0;
	ta_charge_mapped(r, 2);
	expect_charged(0, 0, 0, 0);
	expect_charged(0, 1, 0, 0);
	atomic_store(&ta_shm.active, false);
	test_context("%s", "");
}

/* The window of the last sample at start, or NULL; the windows are given back. */
static bool window_at(uintptr_t start, struct ta_maps_window *out)
{
	struct ta_maps_window *w;
	unsigned n;
	bool found = false;
	if (!ta_maps_windows_take(&w, &n))
		return false;
	for (unsigned i = 0; i < n; i++)
		if (w[i].start == start) {
			*out = w[i];
			found = true;
		}
	ta_maps_windows_give();
	return found;
}

static unsigned windows_now(void)
{
	struct ta_maps_window *w;
	unsigned n = 0;
	if (ta_maps_windows_take(&w, &n))
		ta_maps_windows_give();
	return n;
}

static void set_heat(uintptr_t start, uint32_t heat)
{
	struct ta_maps_window *w;
	unsigned n;
	if (!ta_maps_windows_take(&w, &n))
		return;
	for (unsigned i = 0; i < n; i++)
		if (w[i].start == start) {
			w[i].heat = heat;
		}
	ta_maps_windows_give();
}

static void test_windows(void)
{
	/* Two tiers on one node, as the tests' "0;0": a tier's pages are counted once, in the
	 * first tier that has the node, and there is nothing to move between them. */
	unsigned had_ntiers = ta_ntiers;
	uint64_t had_nodes[2] = { ta_topo.tier[0].nodes, ta_topo.tier[1].nodes };
	ta_ntiers = 2;
	ta_topo.tier[0].nodes = ta_topo.tier[1].nodes = 1;
	const uintptr_t W = TA_MAPS_WINDOW;
	char *raw = mmap(NULL, 8 * W, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		test_hard("mmap");
	/* 4 KiB pages, so that what is touched is what mincore says. */
	madvise(raw, 8 * W, MADV_NOHUGEPAGE);
	uintptr_t a = ((uintptr_t)raw + W - 1) & ~(W - 1);
	sigset_t old;
	ta_maps_lock(&old);
	expect_true(ta_maps_insert(&ta_maps, a + W / 2, a + 3 * W));
	ta_maps_unlock(&old);

	test_context("windows: window-aligned pieces of the ranges with pages resident");
	for (unsigned i = 0; i < 10; i++)
		((char *)(a + W / 2))[i * P] = 1;
	memset((char *)(a + 2 * W), 1, W);
	expect_true(ta_maps_sample(true));
	expect_eq(windows_now(), 2);
	struct ta_maps_window w;
	expect_true(window_at(a + W / 2, &w));
	expect_eq(w.len, W / 2);
	expect_eq(w.pages[0], 10);
	expect_eq(w.pages[1], 0); /* node 0 is tier 0's */
	uint64_t first_seen = w.seen_ns;
	expect_ne(first_seen, 0);
	expect_eq(w.heat, 0);
	expect_true(window_at(a + 2 * W, &w));
	expect_eq(w.pages[0], W / P);
	expect_true(!window_at(a + W, &w)); /* nothing resident there */

	test_context("windows: a heat set between samples is carried to the same window");
	set_heat(a + W / 2, 700);
	((char *)(a + W))[0] = 1;
	uint64_t second = ta_monotonic_ns();
	expect_true(ta_maps_sample(true));
	expect_eq(windows_now(), 3);
	expect_true(window_at(a + W / 2, &w));
	expect_eq(w.heat, 700);
	expect_eq(w.seen_ns, first_seen); /* when it was first seen, not again */
	expect_true(window_at(a + W, &w));
	expect_true(w.seen_ns >= second); /* new in this sample */
	expect_eq(w.pages[0], 1);
	expect_true(window_at(a + 2 * W, &w));
	expect_eq(w.seen_ns, first_seen);
	expect_true(first_seen < second);

	test_context("windows: one holder at a time");
	struct ta_maps_window *held;
	unsigned n;
	expect_true(ta_maps_windows_take(&held, &n));
	expect_true(!ta_maps_sample(false));
	expect_eq(ta_maps_move_window(a + W, W, 0, 1, W), 0);
	ta_maps_windows_give();

	test_context("windows: tiers on one node have nothing to move between them");
	expect_eq(ta_maps_move_window(a + 2 * W, W, 0, 1, W), 0);
	expect_true(window_at(a + 2 * W, &w));
	expect_eq(w.pages[0], W / P);

	test_context("windows: unmapped, gone at the next sample");
	ta_maps_lock(&old);
	ta_maps_erase(&ta_maps, a + W / 2, a + 3 * W);
	ta_maps_unlock(&old);
	munmap(raw, 8 * W);
	expect_true(ta_maps_sample(true));
	expect_eq(windows_now(), 0);
	ta_ntiers = had_ntiers;
	ta_topo.tier[0].nodes = had_nodes[0];
	ta_topo.tier[1].nodes = had_nodes[1];
	test_context("%s", "");
}

int main(void)
{
	test_merge();
	test_erase();
	test_full();
	test_resident();
	test_windows();
	test_charge_moved();
	test_charge_mapped();
	return test_done();
}
