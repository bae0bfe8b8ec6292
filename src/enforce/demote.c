/* SPDX-License-Identifier: MIT */
/*
 * Demotion: the coldest of this process's memory in a tier moves to a lower one, charges
 * included (the ranges come ranked from cold.c, the moves are place.c's). It runs in the
 * enforcement pass (the worker thread, or the allocating thread with TIERALLOC_ENFORCE=inline),
 * never with an allocator lock held: a migration of megabytes takes milliseconds, and whoever
 * waits for it must be only the pass.
 */
#include <string.h>

#include "enforce/enforce.h"

/* At info level: a container whose seccomp profile refuses mbind and move_pages (Docker's
 * default without CAP_SYS_NICE) would otherwise print it in every program. */
static void note_failure(int rc)
{
	static _Atomic unsigned reported;
	if (atomic_fetch_add(&reported, 1) < 4)
		ta_log(TA_LOG_INFO, "demotion: mbind or move_pages failed (%d); the range stays",
		       rc);
}

uint64_t ta_move_range(struct ta_cold_range *r, unsigned from, unsigned to)
{
	if (r->kind == TA_RANGE_MAPPED) {
		/* Its pages move, its policy stays (the pick's): charges follow in maps.c. */
		uint64_t moved =
		    ta_maps_move_window((uintptr_t)r->addr, r->len, from, to, r->charge);
		if (moved > 0 && to > from) {
			atomic_fetch_add(&ta_arenas[from].demotions, 1);
			atomic_fetch_add(&ta_arenas[from].demoted, moved);
		}
		return moved;
	}
	/* Where huge pages may stay after a huge move (place.c, "Huge moves"): a chunk's upper half
	 * once open to them, a large object's whole units under THP "always". */
	size_t huge_from = r->len;
	if (r->kind == TA_RANGE_CHUNK &&
	    atomic_load_explicit(&((struct ta_chunk *)r->owner)->upper_huge, memory_order_relaxed))
		huge_from = TA_CHUNK_SIZE / 2;
	else if (r->kind == TA_RANGE_LARGE && ta_lheap_thp_blocks())
		huge_from = 0;
	int rc = ta_demote_range(r->addr, r->len, to, huge_from,
				 r->kind == TA_RANGE_CHUNK ? r->owner : NULL);
	if (rc != 0) {
		note_failure(rc);
		ta_cold_release(r, -1, -1);
		return 0;
	}
	uint64_t charge = r->charge, live = r->charge;
	if (r->kind == TA_RANGE_CHUNK) {
		int64_t c = ta_arena_retag_chunk(r->owner, to, &live);
		if (c < 0)
			return 0; /* became current meanwhile: its pages moved, its charge not */
		/* Its runs' pages, charged when they were cut; never more than the tier holds, so
		 * that no counter can wrap. */
		uint64_t held = atomic_load(&ta_charges[from].charged);
		charge = (uint64_t)c < held ? (uint64_t)c : held;
	} else {
		atomic_fetch_add(&ta_arenas[from].demotions, 1);
	}
	ta_charge_move(from, to, charge);
	if (to > from)
		atomic_fetch_add(&ta_arenas[from].demoted, charge);
	ta_arena_move_live(from, to, live);
	/* Its next sample may see the move's traces, not the program's writes (enforce.h). */
	if (r->kind == TA_RANGE_CHUNK)
		((struct ta_chunk *)r->owner)->heat = TA_HEAT_MOVED;
	else
		ta_large_set_heat(r->owner, TA_HEAT_MOVED);
	ta_cold_release(r, (int)to, -1);
	return charge;
}

/*
 * Large objects lie side by side in their heap (lheap.c), and a 2 MiB unit across two of them is
 * in neither's range: each object's own move takes its part a page at a time, which before Linux
 * 6.3 flushes the TLB once per page (place.c, "Huge moves"): ten 1 MiB objects took 3.5 s in the
 * 6.1 guest. So the units that lie across neighbours all of which this pass demotes go first,
 * each as one huge page; the objects' own moves then find those pages in place. Which objects:
 * those the loop below reaches with its budget when every move succeeds (a failed move only
 * makes it reach further).
 */
static void move_shared_units(struct ta_cold_range *ranges, unsigned n, uint64_t bytes, unsigned to)
{
	static struct ta_cold_range *picked[256];
	unsigned k = 0;
	uint64_t sum = 0;
	for (unsigned i = 0; i < n && sum < bytes && k < 256; i++) {
		sum += ranges[i].charge;
		if (ranges[i].kind == TA_RANGE_LARGE)
			picked[k++] = &ranges[i];
	}
	/* By address (k <= 256, once a pass). */
	for (unsigned i = 1; i < k; i++)
		for (unsigned j = i; j > 0 && picked[j - 1]->addr > picked[j]->addr; j--) {
			struct ta_cold_range *t = picked[j];
			picked[j] = picked[j - 1];
			picked[j - 1] = t;
		}
	/* Each run of objects that touch end to start: a unit across one of its inner boundaries
	 * and inside the run holds only their pages. */
	for (unsigned i = 0; i < k;) {
		uintptr_t run_start = (uintptr_t)picked[i]->addr, last_unit = 0;
		unsigned j = i;
		while (j + 1 < k && (uintptr_t)picked[j]->addr + picked[j]->len ==
					(uintptr_t)picked[j + 1]->addr)
			j++;
		uintptr_t run_end = (uintptr_t)picked[j]->addr + picked[j]->len;
		for (unsigned b = i + 1; b <= j; b++) {
			uintptr_t unit =
			    (uintptr_t)picked[b]->addr & ~(uintptr_t)(TA_HUGE_UNIT - 1);
			if (unit != (uintptr_t)picked[b]->addr && unit >= run_start &&
			    unit + TA_HUGE_UNIT <= run_end && unit != last_unit) {
				ta_demote_unit((void *)unit, to);
				last_unit = unit;
			}
		}
		i = j + 1;
	}
}

uint64_t ta_demote(unsigned from, unsigned to, uint64_t bytes)
{
	static struct ta_cold_range ranges[256]; /* the pass runs one at a time (enforce.c) */
	uint64_t moved = 0, progress = 0;
	unsigned n = ta_cold_collect(from, ranges, 256, false);
	move_shared_units(ranges, n, bytes, to);
	for (unsigned i = 0; i < n; i++) {
		struct ta_cold_range *r = &ranges[i];
		if (progress >= bytes) {
			ta_cold_release(r, -1, -1);
			continue;
		}
		uint64_t charge = ta_move_range(r, from, to);
		if (charge == 0)
			continue;
		moved += charge;
		progress += r->charge;
	}
	return moved;
}
