/* SPDX-License-Identifier: MIT */
/*
 * The agent's arithmetic, kept pure for the unit tests: the BPF map's counts summed per tier of a
 * segment, and the rule for the alarm that makes the cgroup's workers act at once.
 */
#include <linux/types.h>

#include "agent.h"
#include "migrations.h"

void ta_agent_tally(const struct ta_agent_count *counts, size_t n, uint64_t cgroup_id,
		    const uint64_t *nodes, unsigned ntiers, uint64_t out[][TA_AGENT_NKINDS])
{
	for (unsigned t = 0; t < ntiers; t++)
		for (unsigned k = 0; k < TA_AGENT_NKINDS; k++)
			out[t][k] = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ta_agent_count *c = &counts[i];
		if (c->cgroup_id != cgroup_id || c->node < 0 || c->node >= 64)
			continue;
		unsigned kind;
		switch (c->reason) {
		case TA_BPF_PROMOTE:
			kind = TA_AGENT_PROMOTED;
			break;
		case TA_BPF_DEMOTE:
			kind = TA_AGENT_DEMOTED;
			break;
		case TA_BPF_MBIND:
		case TA_BPF_MOVE_PAGES:
			kind = TA_AGENT_MOVED;
			break;
		default:
			continue;
		}
		/* kswapd and move_pages(2) run anywhere: their CPU's node says nothing. */
		if (c->flags != TA_BPF_NODE_EXACT && kind != TA_AGENT_PROMOTED)
			continue;
		for (unsigned t = 0; t < ntiers; t++) {
			if (nodes[t] & (1ull << c->node)) {
				out[t][kind] += c->pages;
				break;
			}
		}
	}
}

bool ta_agent_alarm(uint64_t promoted_bytes, uint64_t observed, uint64_t high, bool gated)
{
	if (promoted_bytes == 0)
		return false;
	if (gated)
		return true;
	if (high == TA_SHM_UNLIMITED)
		return false;
	uint64_t close_at = high - ta_shm_gate_margin(high) / 2;
	return observed + promoted_bytes >= close_at;
}
