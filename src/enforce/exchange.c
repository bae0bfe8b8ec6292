/* SPDX-License-Identifier: MIT */
/*
 * Exchange: memory that is hot in a lower tier moves up, and cold memory of the faster tier moves
 * down to make room for it, within the faster tier's high share. It runs in the enforcement pass
 * after each new access sample (access.c), never with an allocator lock held.
 *
 * The room is taken the way an allocation takes it: the faster tier is charged for the range
 * before its pages move (ta_charge at the high level, refused past the share), and that
 * reservation is dropped once the move carried the range's own charge up. Two processes of the
 * cgroup therefore cannot both fill the same room, and the share is never passed by promotion.
 * When the charge is refused, the coldest range of the faster tier goes down first, and only if
 * it is clearly colder than the hot one (TA_HEAT_COLD), so that two warm ranges never swap back
 * and forth. At most EXCHANGE_MAX bytes move up per pass, as many down.
 */
#include "enforce/enforce.h"

#define EXCHANGE_MAX   ((uint64_t)128 << 20)
#define MAX_CANDIDATES 256
#define MAX_VICTIMS    256

/* Make room in tier up for bytes by demoting its coldest ranges to tier down; true when the
 * charge for bytes now fits. */
static bool make_room(unsigned up, unsigned down, uint64_t bytes, struct ta_cold_range *victims,
		      unsigned nvictims, unsigned *next, uint64_t *moved_down)
{
	while (!ta_charge(up, bytes, TA_LIMIT_HIGH, false)) {
		if (*next >= nvictims || *moved_down >= EXCHANGE_MAX)
			return false;
		struct ta_cold_range *v = &victims[(*next)++];
		if (!ta_heat_known(v->heat) || v->heat >= TA_HEAT_COLD)
			return false; /* nothing clearly colder is left: the rest is released below
				       */
		uint64_t c = ta_move_range(v, up, down);
		*moved_down += c;
		atomic_fetch_add(&ta_access_tiers[up].exchanged_down, c);
		ta_quota_count_exchange(up, 0, c);
	}
	return true;
}

static uint64_t exchange_into(unsigned up)
{
	static struct ta_cold_range hot[MAX_CANDIDATES], victims[MAX_VICTIMS];
	uint64_t moved_up = 0, moved_down = 0;
	unsigned nvictims = 0, next_victim = 0;
	bool victims_taken = false;
	for (unsigned down = up + 1; down < ta_ntiers && moved_up < EXCHANGE_MAX; down++) {
		unsigned n = ta_cold_collect(down, hot, MAX_CANDIDATES, true);
		for (unsigned i = 0; i < n; i++) {
			struct ta_cold_range *r = &hot[i];
			/* Hottest first: once one is not hot, none after it is. */
			if (moved_up >= EXCHANGE_MAX || !ta_access_is_hot(r->heat) ||
			    r->charge == 0) {
				ta_cold_release(r, -1, -1);
				continue;
			}
			if (!victims_taken) {
				nvictims = ta_cold_collect(up, victims, MAX_VICTIMS, false);
				victims_taken = true;
			}
			if (!make_room(up, down, r->charge, victims, nvictims, &next_victim,
				       &moved_down)) {
				ta_cold_release(r, -1, -1);
				continue;
			}
			uint64_t reserved = r->charge;
			uint64_t c = ta_move_range(r, down, up);
			ta_uncharge(up, reserved);
			moved_up += c;
			atomic_fetch_add(&ta_access_tiers[up].promoted, c);
			ta_quota_count_exchange(up, c, 0);
		}
	}
	for (unsigned i = next_victim; i < nvictims; i++)
		ta_cold_release(&victims[i], -1, -1);
	return moved_up;
}

uint64_t ta_exchange_tiers(void)
{
	uint64_t moved = 0;
	for (unsigned up = 0; up + 1 < ta_ntiers; up++)
		moved += exchange_into(up);
	return moved;
}

uint64_t ta_exchange(void)
{
	/* Only under a quota: without one, memory sits in a lower tier because it was asked for
	 * there (tieralloc_malloc_tier), not because a share pushed it. */
	if (!ta_access_active() || ta_opts.enforce == TA_ENFORCE_OFF || !ta_quota_active())
		return 0;
	return ta_exchange_tiers();
}
