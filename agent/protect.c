/* SPDX-License-Identifier: MIT */
/*
 * Policy 2's decision (tierallocd --protect, issue 17, seed 004), pure. The seed's user-space arm
 * raises memory.low after it sees the victim's usage fall: by then the pass that stole has run.
 * This one is pre-emptive: while a request stands, memory.low is kept at the usage it follows
 * plus headroom, so the next pass finds the victim protected already; the seed's signal, a fall
 * rate of memory.current, decides what that usage is:
 * - growth is followed at once (a write whenever the usage eats half the headroom);
 * - a fall at or above cfg->fall_rate is stealing: the peak is held (protection stays where the
 *   working set was, so that it comes back under protection) for cfg->hold_ns; so is any fall
 *   while the kernel tells of reclaim taking the victim's pages (ta_protect_stolen, BPF);
 * - otherwise a smaller usage is the victim's own doing: the gap halves every cfg->decay_ns, and
 *   memory.low follows it down in steps of at least cfg->step.
 * The request never goes below the memory.low found (the administrator's) nor above the cap.
 */

#include <string.h>

#include "protect.h"

const struct ta_protect_cfg ta_protect_default_cfg = {
	.fall_rate = 1ull << 20, /* 256 pages/s: a 4 KiB page per 5 ms sample does not count */
	.headroom_min = 4ull << 20,
	.headroom_shift = 3, /* an eighth of the usage */
	.hold_ns = 10ull * 1000000000,
	.decay_ns = 2ull * 1000000000,
	.step = 1ull << 20,
};

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

void ta_protect_init(struct ta_protect_state *s, uint64_t original)
{
	memset(s, 0, sizeof(*s));
	s->original = s->written = original;
}

static uint64_t headroom(const struct ta_protect_cfg *cfg, uint64_t usage)
{
	return max64(cfg->headroom_min, usage >> cfg->headroom_shift);
}

void ta_protect_stolen(const struct ta_protect_cfg *cfg, struct ta_protect_state *s,
		       uint64_t now_ns)
{
	s->steals++;
	if (now_ns + cfg->hold_ns > s->hold_until_ns)
		s->hold_until_ns = now_ns + cfg->hold_ns;
}

enum ta_protect_why ta_protect_sample(const struct ta_protect_cfg *cfg, struct ta_protect_state *s,
				      uint64_t usage, uint64_t cap, uint64_t now_ns,
				      uint64_t *value)
{
	s->samples++;
	if (s->last_ns != 0 && now_ns > s->last_ns && usage < s->last_usage) {
		unsigned __int128 rate = (unsigned __int128)(s->last_usage - usage) * 1000000000u /
					 (now_ns - s->last_ns);
		if (rate >= cfg->fall_rate) {
			s->falls++;
			s->hold_until_ns = now_ns + cfg->hold_ns;
		}
	}
	s->last_usage = usage;
	s->last_ns = now_ns;
	if (usage >= s->peak) {
		s->peak = usage;
		s->decayed_ns = now_ns;
	} else if (now_ns < s->hold_until_ns) {
		s->decayed_ns = now_ns;
	} else {
		while (now_ns - s->decayed_ns >= cfg->decay_ns && s->peak > usage) {
			s->peak = usage + (s->peak - usage) / 2;
			s->decayed_ns += cfg->decay_ns;
		}
		if (now_ns - s->decayed_ns >= cfg->decay_ns)
			s->decayed_ns = now_ns;
	}
	uint64_t room = headroom(cfg, s->peak);
	uint64_t target = s->peak > UINT64_MAX - room - TA_PROTECT_PAGE
			      ? UINT64_MAX - TA_PROTECT_PAGE
			      : s->peak + room;
	/* Whole pages: the kernel keeps memory.low in pages and reads back a rounded value, which
	 * must compare equal to what was written (the lease keeper checks that before it
	 * restores). */
	target = (target + TA_PROTECT_PAGE - 1) / TA_PROTECT_PAGE * TA_PROTECT_PAGE;
	if (target > cap) {
		target = cap;
		s->capped++;
	}
	target = max64(target, s->original);
	enum ta_protect_why why = TA_PROTECT_NONE;
	if (target > s->written) {
		/* Raised once the usage has eaten half the headroom: a write per half headroom of
		 * growth, not per page. A cap or the original reached is written as it is. */
		uint64_t half = headroom(cfg, usage) / 2;
		if (usage > s->written || s->written - usage < half || target == cap)
			why = TA_PROTECT_GROW;
	} else if (target < s->written &&
		   (s->written - target >= cfg->step || target == s->original))
		why = TA_PROTECT_DECAY;
	if (why == TA_PROTECT_NONE)
		return why;
	s->written = target;
	s->writes[why]++;
	*value = target;
	return why;
}

uint64_t ta_protect_cap(uint64_t parent_budget, const uint64_t *sibling_claims, unsigned n)
{
	if (parent_budget == UINT64_MAX)
		return UINT64_MAX;
	uint64_t left = parent_budget;
	for (unsigned i = 0; i < n; i++)
		left = sibling_claims[i] >= left ? 0 : left - sibling_claims[i];
	return left;
}
