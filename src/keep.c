/* SPDX-License-Identifier: MIT */
/*
 * Freed large objects kept for reuse, per tier.
 *
 * A large object freed goes back to its tier's memkind kind, whose jemalloc keeps the pages
 * (dirty) and hands them out again, split or merged, to the next large allocations of the tier.
 * memkind's jemalloc gave a freed block of 8 MiB or more back to the kernel at once (so a program
 * freeing and allocating blocks of 5-25 MiB faulted every page of every block anew, 3-10 times
 * glibc's time, all of it system time) and held smaller ones for 10 s without a word to the
 * quotas. backend.c turns its own purging off; keep.c decides, and keeps the books:
 *   - the bytes the kind holds of freed blocks stay charged to their tier (`kept`): a free moves
 *     its bytes from the object to `kept`, and a large allocation takes its charge from `kept`
 *     first. That is an estimate between looks: after every MiB freed in a tier, what the kind
 *     really holds is asked (backend.c, about 10 us) and the charge set to it;
 *   - at a look, past a bound (an eighth of what the tier holds, at least 8 MiB, at most 64 MiB)
 *     everything kept is given back (purged and uncharged): the footprint stays near the
 *     program's own peak. jemalloc cannot give back part of it: a purge drops every freed page;
 *   - with age: when nothing was kept in the tier for a second (checked from slow paths);
 *   - under quota pressure: when a charge for the tier is refused.
 * Demoted or rebound objects are not kept: their pages are dropped when freed (demote.c).
 */
#include "internal.h"

static _Atomic uint64_t kept[TA_MAX_TIERS];
static _Atomic uint64_t kept_ns[TA_MAX_TIERS]; /* when something was last kept */
static _Atomic uint64_t released[TA_MAX_TIERS];
static _Atomic uint64_t freed_since_look[TA_MAX_TIERS];

#define KEEP_MIN    (8ull << 20)
#define KEEP_MAX    (64ull << 20)
#define KEEP_AGE_NS (1000ull * 1000 * 1000)
#define KEEP_LOOK   (1ull << 20) /* bytes freed between looks at what the kind holds */

uint64_t ta_keep_bytes(unsigned tier)
{
	return atomic_load_explicit(&kept[tier], memory_order_relaxed);
}

uint64_t ta_keep_released(unsigned tier)
{
	return atomic_load_explicit(&released[tier], memory_order_relaxed);
}

bool ta_keep_release(unsigned tier)
{
	uint64_t bytes = atomic_exchange(&kept[tier], 0);
	if (bytes == 0)
		return false;
	ta_backend_purge(tier);
	ta_arena_uncharge(tier, bytes);
	atomic_fetch_add(&released[tier], bytes);
	return true;
}

/* What the tier's kind may hold of freed pages. */
static uint64_t bound(unsigned tier)
{
	uint64_t b = atomic_load_explicit(&ta_arenas[tier].charged, memory_order_relaxed) / 8;
	return b < KEEP_MIN ? KEEP_MIN : b > KEEP_MAX ? KEEP_MAX : b;
}

/* What the kind really holds: more than the estimate when a block did not fit where freed ones
 * were and the kind mapped new memory, less when it reused more than the estimate said. */
static void look(unsigned tier)
{
	uint64_t held = ta_backend_dirty_bytes(tier);
	if (held > bound(tier)) {
		ta_keep_release(tier);
		return;
	}
	uint64_t was = atomic_exchange(&kept[tier], held);
	if (held > was)
		ta_arena_charge(tier, held - was, TA_LIMIT_MAX, true);
	else if (was > held)
		ta_arena_uncharge(tier, was - held);
}

void ta_keep_put(unsigned tier, uint64_t bytes)
{
	atomic_fetch_add(&kept[tier], bytes);
	atomic_store_explicit(&kept_ns[tier], ta_monotonic_ns(), memory_order_relaxed);
	uint64_t since = atomic_fetch_add(&freed_since_look[tier], bytes) + bytes;
	if (since >= KEEP_LOOK) {
		atomic_store(&freed_since_look[tier], 0);
		look(tier);
	}
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
