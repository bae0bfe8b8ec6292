/* SPDX-License-Identifier: MIT */
/*
 * Freed large objects kept for reuse, per tier: the books of lheap.c's dirty pages.
 *
 * A large object freed leaves its pages in its tier's heap (lheap.c), dirty, for the next large
 * object of the tier, split or merged. Those pages stay charged to their tier (`kept`): a free
 * moves the object's charge to `kept`, a large allocation takes its charge from `kept` first, and
 * after every heap operation the charge is set to the heap's exact count of dirty pages (a load,
 * no system call). They are given back (MADV_DONTNEED, uncharged):
 *   - past a bound (what the tier holds in use, at least 8 MiB): the highest free pages first,
 *     down to 7/8 of the bound, as a heap trims its top, so that blocks of any size keep finding
 *     pages already faulted in among the live ones;
 *   - all of them when nothing was freed in the tier for a second (checked from slow paths);
 *   - all of them under quota pressure (a charge for the tier refused) and on malloc_trim;
 *   - enough of them that the tier's high share keeps KEEP_HEADROOM free (headroom below).
 * Demoted or rebound objects are not kept: their pages are dropped when freed.
 */
#include "alloc/alloc.h"

static _Atomic uint64_t kept[TA_MAX_TIERS];
static _Atomic uint64_t kept_ns[TA_MAX_TIERS]; /* when something was last kept */
static _Atomic uint64_t released[TA_MAX_TIERS];

#define KEEP_MIN      (8ull << 20)
#define KEEP_AGE_NS   (1000ull * 1000 * 1000)
#define KEEP_HEADROOM (8ull << 20)

uint64_t ta_keep_bytes(unsigned tier)
{
	return atomic_load_explicit(&kept[tier], memory_order_relaxed);
}

uint64_t ta_keep_released(unsigned tier)
{
	return atomic_load_explicit(&released[tier], memory_order_relaxed);
}

/* Make the kept charge what the heap holds dirty now: charge or uncharge the difference. */
static void settle_charge(unsigned tier)
{
	uint64_t held = ta_lheap_dirty(tier);
	uint64_t was = atomic_exchange(&kept[tier], held);
	if (held > was)
		ta_charge(tier, held - was, TA_LIMIT_MAX, true);
	else if (was > held)
		ta_uncharge(tier, was - held);
}

bool ta_keep_release(unsigned tier)
{
	if (atomic_load_explicit(&kept[tier], memory_order_relaxed) == 0 &&
	    ta_lheap_dirty(tier) == 0)
		return false;
	uint64_t purged = ta_lheap_purge(tier, 0);
	atomic_fetch_add(&released[tier], purged);
	/* What was freed meanwhile stays kept, charged. */
	bool had = atomic_load(&kept[tier]) > 0;
	settle_charge(tier);
	return purged > 0 || had;
}

/* What the tier's heap may hold of freed pages: as much as the tier holds in use, at least
 * KEEP_MIN. A heap whose blocks come and go keeps the holes between live blocks, as glibc's does;
 * a tighter bound gave pages back that the next blocks faulted in again (8 live blocks of 5-25
 * MiB: a quarter of the tier, at most 64 MiB, took 4-6 times glibc's time). */
static uint64_t bound(unsigned tier)
{
	uint64_t charged = atomic_load_explicit(&ta_charges[tier].charged, memory_order_relaxed);
	uint64_t held = atomic_load_explicit(&kept[tier], memory_order_relaxed);
	uint64_t in_use = charged > held ? charged - held : 0;
	return in_use < KEEP_MIN ? KEEP_MIN : in_use;
}

/* Kept pages are a cache: they never take the last KEEP_HEADROOM of the tier's high share. The
 * cgroup's memory beyond the charges (page tables, the allocator's metadata, the kernel's own)
 * and the program's next block need it: with both tiers' heaps keeping freed blocks up to their
 * shares, a cgroup whose memory.max was glibc's peak + 3% + 2 MiB (218M) was OOM-killed in 6
 * runs of 12 where glibc fit (footprint.large_glibc, 6.1 guest, host loaded). */
static void headroom(unsigned tier)
{
	uint64_t room = ta_charge_room_bytes(tier, TA_LIMIT_HIGH);
	if (room >= KEEP_HEADROOM)
		return;
	/* At or over the share (forced charges, a lowered limit), by however much: none kept. */
	uint64_t held = ta_lheap_dirty(tier), cut = room == 0 ? held : KEEP_HEADROOM - room;
	if (held == 0)
		return;
	atomic_fetch_add(&released[tier], ta_lheap_purge(tier, held > cut ? held - cut : 0));
	settle_charge(tier);
}

void ta_keep_sync(unsigned tier)
{
	uint64_t held = ta_lheap_dirty(tier), limit = bound(tier);
	if (held > limit) {
		uint64_t purged = ta_lheap_purge(tier, limit - limit / 8);
		atomic_fetch_add(&released[tier], purged);
		held = ta_lheap_dirty(tier);
	}
	uint64_t was = atomic_exchange(&kept[tier], held);
	if (was > held) {
		ta_uncharge(tier, was - held);
	} else if (held > was && !ta_charge(tier, held - was, TA_LIMIT_HIGH, false)) {
		/* More freed pages than were charged: kept only if the tier's high share has room
		 * for them. Otherwise the quota wants the tier's memory, and they go back at once,
		 * all but what was already charged (a block freed into a full tier 0 took 50 MiB
		 * more than glibc there, and an OOM kill where glibc fits). */
		ta_charge(tier, held - was, TA_LIMIT_MAX, true); /* the books say what is held */
		atomic_fetch_add(&released[tier], ta_lheap_purge(tier, was));
		settle_charge(tier);
	}
	headroom(tier);
}

void ta_keep_put(unsigned tier, uint64_t bytes)
{
	atomic_fetch_add(&kept[tier], bytes);
	atomic_store_explicit(&kept_ns[tier], ta_monotonic_ns(), memory_order_relaxed);
	ta_keep_sync(tier);
}

uint64_t ta_keep_take(unsigned tier, uint64_t bytes)
{
	uint64_t have = atomic_load_explicit(&kept[tier], memory_order_relaxed), take;
	for (;;) {
		take = have < bytes ? have : bytes;
		if (take == 0)
			return 0;
		if (atomic_compare_exchange_weak(&kept[tier], &have, have - take))
			break;
	}
	return take;
}

void ta_keep_age(void)
{
	uint64_t now = 0;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		if (atomic_load_explicit(&kept[t], memory_order_relaxed) == 0)
			continue;
		if (now == 0)
			now = ta_monotonic_ns();
		if (now - atomic_load_explicit(&kept_ns[t], memory_order_relaxed) >= KEEP_AGE_NS)
			ta_keep_release(t);
	}
}
