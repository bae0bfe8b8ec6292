/* SPDX-License-Identifier: MIT */
/*
 * Filling: pages of the program's own mappings (alloc/maps.c) that sit in a lower tier while the
 * faster one has room under its high share move up, hottest first. Malloc'd memory needs no such
 * step: each run is charged before it is placed, so it lands where steering sends it. A mapped
 * page lands where the process's pick pointed when it was faulted, and the pick follows samples:
 * between two, a runtime's heap (and its collector moving objects to pages faulted under an
 * older pick) can leave a container below its share with its memory in the slow tier. Filling
 * puts those pages where an allocation would have gone.
 *
 * The room is taken as exchange.c takes it: the faster tier is charged before the pages move,
 * refused past the share, so two processes of the cgroup never fill the same room. Each move
 * also reserves a slack (what the program grew by between its last two samples, TA_FILL_SLACK at
 * least), and the cgroup's last reading (memory.numa_stat) must leave that much too, so that
 * filling stops below the share and the next faults do not push the tier over it into a
 * demotion (no back and forth). It runs once per reading and sample (enforce.c),
 * at most FILL_MAX bytes.
 */
#include "enforce/enforce.h"

#define FILL_MAX       ((uint64_t)128 << 20)
#define MAX_CANDIDATES 1024

/* What the cgroup's reading leaves below the tier's high share, less the slack: the kernel's
 * count holds what no charge does (the program's other pages), and filling past it would only
 * be demoted again at the next pass. */
static uint64_t observed_room(const struct ta_enforce_in *in, unsigned t, uint64_t slack)
{
	uint64_t high = in->limit[t][TA_LIMIT_HIGH];
	if (high == UINT64_MAX)
		return UINT64_MAX;
	uint64_t used = in->observed[t] + slack;
	return used < high ? high - used : 0;
}

uint64_t ta_fill_tiers(void)
{
	static struct ta_cold_range win[MAX_CANDIDATES]; /* the pass runs one at a time */
	struct ta_enforce_in in;
	ta_quota_view(&in);
	/* Room for the program's growth until the next sample stays free: filled, it would send
	 * the next faults past the share. Not the pick's margin (8 MiB at least, maps.c, place): a
	 * container that filled stopped that far below one whose own faults took its share, 1.053
	 * apart for two JVMs idle after building (runtimes.java.fair, bound 1.05). */
	uint64_t slack = atomic_load(&ta_maps_growth);
	if (slack < TA_FILL_SLACK)
		slack = TA_FILL_SLACK;
	uint64_t filled = 0;
	for (unsigned up = 0; up + 1 < ta_ntiers; up++) {
		uint64_t room = observed_room(&in, up, slack), into = 0;
		for (unsigned down = up + 1; down < ta_ntiers && filled < FILL_MAX; down++) {
			unsigned n = ta_cold_collect(down, win, MAX_CANDIDATES, true);
			bool full = false;
			for (unsigned i = 0; i < n; i++) {
				struct ta_cold_range *r = &win[i];
				if (full || filled >= FILL_MAX || r->kind != TA_RANGE_MAPPED ||
				    r->charge == 0 || into + r->charge > room) {
					ta_cold_release(r, -1, -1);
					continue;
				}
				uint64_t reserved = r->charge + slack;
				if (!ta_charge(up, reserved, TA_LIMIT_HIGH, false)) {
					full = true; /* the rest would not fit either */
					continue;
				}
				uint64_t c = ta_move_range(r, down, up);
				ta_uncharge(up, reserved);
				filled += c;
				into += c;
			}
		}
	}
	return filled;
}

uint64_t ta_fill(void)
{
	/* Only under a quota, and only when the program maps memory of its own. */
	if (ta_opts.enforce == TA_ENFORCE_OFF || !ta_quota_active() ||
	    !atomic_load_explicit(&ta_maps_recorded, memory_order_relaxed))
		return 0;
	return ta_fill_tiers();
}
