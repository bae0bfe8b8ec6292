/* SPDX-License-Identifier: MIT */
/*
 * What the enforcement pass learns of the cgroup, and what it tells it, through the shared
 * segment and the cgroup's files (the pass itself, enforce.c, touches neither):
 * - the kernel's view: one process of the cgroup per period re-reads the limits and reads
 *   memory.numa_stat (v2), sums it per tier and publishes it in the segment (observed,
 *   untracked = observed - charged). Without numa_stat (cgroup v1, no cgroup) the allocator's
 *   charges stand in for the truth;
 * - the agent's alarm (tierallocd saw the kernel promote into a tier at its share) and its
 *   promotion counts;
 * - the figures the planner works from (struct ta_enforce_in);
 * - memory.reclaim, counted in the segment; the gate's state, published for tieralloc-stat.
 */
#include <string.h>

#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"
#include "quota/shm.h"

_Atomic uint64_t ta_agent_alarms;

bool ta_quota_active(void)
{
	return atomic_load_explicit(&ta_shm.active, memory_order_acquire);
}

uint64_t ta_quota_observe_gen(void)
{
	return atomic_load(&ta_shm.hdr->observe_gen);
}

void ta_quota_publish_gated(const bool gated[TA_MAX_TIERS])
{
	if (!ta_quota_active())
		return;
	for (unsigned t = 0; t < ta_ntiers; t++)
		atomic_store(&ta_shm.tiers[t].gated, gated[t] ? 1 : 0);
}

static void publish_observed(const uint64_t obs[TA_MAX_TIERS], uint64_t now_real)
{
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		uint64_t charged = atomic_load(&r->charged);
		atomic_store(&r->observed, obs[t]);
		atomic_store(&r->untracked, obs[t] > charged ? obs[t] - charged : 0);
		atomic_store(&r->observed_at_ns, now_real);
	}
	atomic_fetch_add(&ta_shm.hdr->observe_gen, 1);
}

/* The agent's alarm, if it is new: one process of the cgroup takes each. */
bool ta_quota_take_alarm(void)
{
	struct ta_shm_agent *agent = ta_shm.agent;
	if (agent == NULL)
		return false;
	uint64_t alarm = atomic_load(&agent->alarm), taken = atomic_load(&agent->alarm_taken);
	if (alarm == taken || !atomic_compare_exchange_strong(&agent->alarm_taken, &taken, alarm))
		return false;
	atomic_fetch_add(&ta_agent_alarms, 1);
	return true;
}

/* One process per period reads the cgroup's limits and usage (or whoever took an alarm, at once);
 * false when another one has the turn. */
bool ta_quota_observe(bool now_please)
{
	struct ta_shm_header *h = ta_shm.hdr;
	uint64_t now = ta_monotonic_ns();
	uint64_t last = atomic_load(&h->observe_claim_ns);
	if (now_please)
		atomic_store(&h->observe_claim_ns, now);
	else if (now - last < TA_ENFORCE_PERIOD_NS ||
		 !atomic_compare_exchange_strong(&h->observe_claim_ns, &last, now))
		return false;
	/* The limits with the usage: a lowered memory.max is seen within this period, not the
	 * limits' own (a second), which was most of the time to converge after it (bench
	 * run-converge.sh). The planner reads the same files for memory.high: no new cost. */
	ta_shm_refresh_limits(true);
	uint64_t obs[TA_MAX_TIERS] = { 0 };
	uint64_t per_node[TA_CGROUP_NODES];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now_real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (ta_cgroup_numa_stat("", &ta_shm.cg, per_node) == 0) {
		for (unsigned t = 0; t < ta_ntiers; t++)
			for (unsigned node = 0; node < TA_CGROUP_NODES; node++)
				if (ta_topo.tier[t].nodes & (1ull << node))
					obs[t] += per_node[node];
	} else {
		/* No kernel view per node: the charges are all we know. */
		for (unsigned t = 0; t < ta_ntiers; t++)
			obs[t] = atomic_load(&ta_shm.tiers[t].charged);
		now_real = 0;
	}
	publish_observed(obs, now_real);
	return true;
}

bool ta_quota_first_to_say(const char *line, size_t len)
{
	if (!atomic_load(&ta_shm.active) || ta_shm.snap.abi_minor < 4)
		return true;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)line[i]) * 0x100000001b3ull;
	uint64_t now = ta_monotonic_ns() / 1000000000u;
	_Atomic uint64_t *said = ta_shm.hdr->said;
	for (unsigned i = 0; i < 2; i++) {
		uint64_t v = atomic_load(&said[i]);
		if ((v >> 32) == (h >> 32) && (uint32_t)now - (uint32_t)v < TA_SHM_SAID_WINDOW_S)
			return false;
	}
	/* Not said lately: take a slot that is free or out of the window, and say it. */
	for (unsigned i = 0; i < 2; i++) {
		uint64_t v = atomic_load(&said[i]);
		if (v != 0 && (uint32_t)now - (uint32_t)v < TA_SHM_SAID_WINDOW_S)
			continue;
		if (atomic_compare_exchange_strong(&said[i], &v, TA_SHM_SAID(h, now)))
			break;
	}
	return true;
}

/* Ask the kernel for bytes back; counted on tier's record (the cgroup's total: the last tier). */
int ta_quota_reclaim(uint64_t bytes, unsigned tier)
{
	if (bytes == 0)
		return 0;
	int rc = ta_cgroup_reclaim("", &ta_shm.cg, bytes);
	if (rc == -ENOENT) {
		/* Said once per cgroup (its every process would say the same), in the segment for
		 * tieralloc-stat and at info level: a warning on the program's stderr would change
		 * the output of every program of every cgroup v1 host that breaks a quota. */
		uint64_t said = atomic_fetch_or(&ta_shm.hdr->notices, TA_SHM_NOTICE_NO_RECLAIM);
		if (!(said & TA_SHM_NOTICE_NO_RECLAIM))
			ta_log(
			    TA_LOG_INFO,
			    "enforcement: cannot ask the kernel to reclaim: memory.reclaim needs "
			    "cgroup v2 and Linux >= 5.19 (this cgroup: v%d)",
			    ta_shm.cg.version);
		return rc;
	}
	/* -EAGAIN: the kernel found less to reclaim than asked; the next reading shows it. */
	atomic_fetch_add(&ta_shm.tiers[tier].reclaim_asked, bytes);
	atomic_fetch_add(&ta_shm.tiers[tier].reclaims, 1);
	return rc;
}

/* Which tiers the agent saw the kernel promote into since this process's last pass. The counts
 * start again from zero when the agent restarts (started_ns). */
static void promotions_since_last_pass(bool promoting[TA_MAX_TIERS])
{
	static uint64_t seen[TA_MAX_TIERS], seen_start;
	struct ta_shm_agent *agent = ta_shm.agent;
	if (agent == NULL)
		return;
	uint64_t start = atomic_load(&agent->started_ns);
	for (unsigned t = 0; t < ta_ntiers; t++) {
		uint64_t promoted = atomic_load(&agent->tier[t].promoted);
		promoting[t] = start == seen_start && promoted > seen[t];
		seen[t] = promoted;
	}
	seen_start = start;
}

void ta_quota_view(struct ta_enforce_in *in)
{
	memset(in, 0, sizeof(*in));
	in->ntiers = ta_ntiers;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		in->observed[t] = atomic_load(&r->observed);
		/* High and max are at most the tier's capacity (shm.c): room is real. */
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			in->limit[t][k] = atomic_load(&r->limit[k]);
		/* A loan counts as share while it lasts; once revoked or expired, the excess is
		 * this tier's to shed like any other, cold first. A yield takes from the share:
		 * what it gave is excess at once, shed the same way. */
		uint64_t loan, yielded;
		ta_shm_lend_terms(t, &loan, &yielded);
		uint64_t floor = ta_shm_lend_floor(in->limit[t]);
		for (unsigned k = TA_LIMIT_HIGH; k <= TA_LIMIT_MAX; k++)
			in->limit[t][k] = ta_shm_lend_limit(in->limit[t][k], loan, yielded, floor);
		in->loan[t] = loan;
		in->yielded[t] = yielded;
		in->cg_charged[t] = atomic_load(&r->charged);
		in->gated[t] = atomic_load(&r->gated) != 0;
		in->my_charged[t] = atomic_load(&ta_shm.mine->charged[t]);
	}
	promotions_since_last_pass(in->promoting);
	in->current = UINT64_MAX;
	in->cg_high = UINT64_MAX;
	uint64_t cur, lim[TA_NLIMITS];
	if (ta_cgroup_current("", &ta_shm.cg, &cur) == 0 &&
	    ta_cgroup_read_limits("", &ta_shm.cg, lim) == 0) {
		in->current = cur;
		in->cg_high =
		    lim[TA_LIMIT_HIGH] < lim[TA_LIMIT_MAX] ? lim[TA_LIMIT_HIGH] : lim[TA_LIMIT_MAX];
	}
}

/* ---- ctl "cgroup.tier.<t>.<field>" ---- */

/* "cgroup.tier.<t>.agent.<field>": pages the kernel migrated into the tier, as the agent counted
 * them; -ENOENT when no agent ever wrote them. */
static int agent_tier_field(unsigned t, const char *field, uint64_t *out)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "agent.promoted", offsetof(struct ta_shm_agent_tier, promoted) },
		{ "agent.demoted", offsetof(struct ta_shm_agent_tier, demoted) },
		{ "agent.moved", offsetof(struct ta_shm_agent_tier, moved) },
	};
	struct ta_shm_agent *agent = ta_shm.agent;
	if (agent == NULL || atomic_load(&agent->written_ns) == 0)
		return -ENOENT;
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcmp(field, fields[i].name) == 0) {
			*out = atomic_load(
			    (_Atomic uint64_t *)((char *)&agent->tier[t] + fields[i].off));
			return 0;
		}
	}
	return -ENOENT;
}

int ta_quota_tier_field(unsigned t, const char *field, uint64_t *out)
{
	static const char *const limits[TA_NLIMITS] = { "min", "low", "high", "max" };
	if (!ta_quota_active() || t >= ta_ntiers)
		return -ENOENT;
	struct ta_shm_tier *r = &ta_shm.tiers[t];
	for (unsigned k = 0; k < TA_NLIMITS; k++) {
		if (strcmp(field, limits[k]) == 0) {
			*out = atomic_load(&r->limit[k]);
			return 0;
		}
	}
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "charged", offsetof(struct ta_shm_tier, charged) },
		{ "peak", offsetof(struct ta_shm_tier, peak) },
		{ "steered_away", offsetof(struct ta_shm_tier, steered_away) },
		{ "overflowed", offsetof(struct ta_shm_tier, overflowed) },
		{ "exhausted", offsetof(struct ta_shm_tier, exhausted) },
		{ "reclaimed", offsetof(struct ta_shm_tier, reclaimed) },
		{ "observed", offsetof(struct ta_shm_tier, observed) },
		{ "untracked", offsetof(struct ta_shm_tier, untracked) },
		{ "demoted", offsetof(struct ta_shm_tier, demoted) },
		{ "reclaim_asked", offsetof(struct ta_shm_tier, reclaim_asked) },
		{ "reclaims", offsetof(struct ta_shm_tier, reclaims) },
		{ "gated", offsetof(struct ta_shm_tier, gated) },
	};
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcmp(field, fields[i].name) == 0) {
			*out = atomic_load((_Atomic uint64_t *)((char *)r + fields[i].off));
			return 0;
		}
	}
	/* This process's own slot: a test's figure that other processes of the cgroup leave alone.
	 */
	if (strcmp(field, "mine") == 0) {
		*out = atomic_load(&ta_shm.mine->charged[t]);
		return 0;
	}
	if (ta_shm_access_field(&ta_shm, t, field, out) == 0)
		return 0;
	return agent_tier_field(t, field, out);
}

void ta_quota_publish_heat(const uint64_t hot[TA_MAX_TIERS], const uint64_t cold[TA_MAX_TIERS])
{
	if (ta_quota_active())
		ta_shm_publish_heat(hot, cold, ta_ntiers);
}

void ta_quota_count_exchange(unsigned tier, uint64_t up, uint64_t down)
{
	if (ta_quota_active())
		ta_shm_count_exchange(tier, up, down);
}
