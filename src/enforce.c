/* SPDX-License-Identifier: MIT */
/*
 * Enforcement when a quota breaks anyway (limits lowered at run time, the kernel's own placement
 * and migrations, page cache): one pass reconciles with the kernel, demotes, reclaims and gates.
 *
 * - Observe: one process of the cgroup per period reads memory.numa_stat (v2), sums it per tier
 *   and publishes it in the segment (observed, untracked = observed - charged). Without
 *   numa_stat (cgroup v1, no cgroup) the allocator's charges stand in for the truth.
 * - Plan (ta_enforce_plan, pure): a tier over its high share (never counting below its low/min
 *   floor) sheds the excess into lower tiers with headroom under their high share, the rest to
 *   memory.reclaim; so does the cgroup's total over memory.high. While the agent sees the kernel
 *   promote into a tier whose gate is shut, the tier sheds down to where the gate shut instead.
 * Each process takes the part of the excess proportional to its charge in the tier, so that two
 * processes do not both demote the whole of it.
 * - Act: demote (demote.c), write memory.reclaim, gate promotions (gate.c). Each process acts
 *   once per reading.
 * - The agent's alarm (tierallocd saw the kernel promote into a tier at its share) skips the
 *   wait for the period: the process that takes it reads the cgroup's usage at once and wakes the
 *   others to act on that reading.
 * The pass never runs twice at once in a process, and never with an allocator lock held.
 */
#include <string.h>

#include "cgroup.h"
#include "internal.h"
#include "shm.h"

_Atomic bool ta_enforce_wanted;
static _Atomic bool pass_running;
static uint64_t acted_gen; /* the reading this process last acted on */
static _Atomic uint64_t inline_last_ns;
_Atomic uint64_t ta_agent_alarms;

static uint64_t part_of(uint64_t whole, uint64_t mine, uint64_t all)
{
	if (whole == 0 || mine == 0 || all == 0)
		return 0;
	if (mine >= all)
		return whole;
	return (uint64_t)((unsigned __int128)whole * mine / all);
}

void ta_enforce_plan(const struct ta_enforce_in *in, struct ta_enforce_plan *out)
{
	memset(out, 0, sizeof(*out));
	unsigned n = in->ntiers < TA_MAX_TIERS ? in->ntiers : TA_MAX_TIERS;
	uint64_t room[TA_MAX_TIERS], close_at[TA_MAX_TIERS];
	for (unsigned t = 0; t < n; t++) {
		uint64_t high = in->limit[t][TA_LIMIT_HIGH];
		room[t] = in->observed[t] < high ? high - in->observed[t] : 0;
		uint64_t margin = ta_shm_gate_margin(high);
		uint64_t open_below = high - margin;
		close_at[t] = high - margin / 2;
		out->gate[t] =
		    in->gated[t] ? in->observed[t] >= open_below : in->observed[t] >= close_at[t];
	}
	uint64_t cg_reclaim = 0, cg_total = 0, my_total = 0;
	for (unsigned t = 0; t < n; t++) {
		cg_total += in->cg_charged[t];
		my_total += in->my_charged[t];
		uint64_t target = in->limit[t][TA_LIMIT_HIGH];
		/* The kernel promotes into a shut tier what the gate cannot hold back (memory
		 * tieralloc does not place): demote down to where the gate shut, so that the
		 * promotions still under way land below the share instead of over it. */
		if (in->promoting[t] && out->gate[t] && target != UINT64_MAX)
			target = close_at[t];
		/* seed 000: low and min are tier-aware too; demotion stops at them. */
		if (in->limit[t][TA_LIMIT_LOW] > target)
			target = in->limit[t][TA_LIMIT_LOW];
		if (in->limit[t][TA_LIMIT_MIN] > target)
			target = in->limit[t][TA_LIMIT_MIN];
		if (target == UINT64_MAX || in->observed[t] <= target)
			continue;
		uint64_t excess = in->observed[t] - target;
		for (unsigned b = t + 1; b < n && excess > 0; b++) {
			uint64_t d = excess < room[b] ? excess : room[b];
			room[b] -= d;
			excess -= d;
			uint64_t mine = part_of(d, in->my_charged[t], in->cg_charged[t]);
			/* A process cannot demote more than it has there. */
			if (mine > in->my_charged[t])
				mine = in->my_charged[t];
			out->demote[t][b] = mine;
		}
		cg_reclaim += excess;
		out->reclaim[t] = part_of(excess, in->my_charged[t], in->cg_charged[t]);
	}
	if (in->current != UINT64_MAX && in->cg_high != UINT64_MAX && in->current > in->cg_high) {
		uint64_t over = in->current - in->cg_high;
		if (over > cg_reclaim)
			out->reclaim_total = part_of(over - cg_reclaim, my_total, cg_total);
	}
}

/* ---- observing ---- */

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
static bool take_agent_alarm(void)
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

/* One process per period reads the cgroup's usage (or whoever took an alarm, at once); false when
 * another one has the turn. */
static bool observe(bool now_please)
{
	struct ta_shm_header *h = ta_shm.hdr;
	uint64_t now = ta_monotonic_ns();
	uint64_t last = atomic_load(&h->observe_claim_ns);
	if (now_please)
		atomic_store(&h->observe_claim_ns, now);
	else if (now - last < TA_ENFORCE_PERIOD_NS ||
		 !atomic_compare_exchange_strong(&h->observe_claim_ns, &last, now))
		return false;
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

/* ---- acting ---- */

/* Ask the kernel for bytes back; counted on tier's record (the cgroup's total: the last tier). */
static void reclaim(uint64_t bytes, unsigned tier)
{
	if (bytes == 0)
		return;
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
		return;
	}
	/* -EAGAIN: the kernel found less to reclaim than asked; the next reading shows it. */
	atomic_fetch_add(&ta_arenas[tier].reclaim_asked, bytes);
	atomic_fetch_add(&ta_shm.tiers[tier].reclaim_asked, bytes);
	atomic_fetch_add(&ta_shm.tiers[tier].reclaims, 1);
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

static void gather(struct ta_enforce_in *in)
{
	memset(in, 0, sizeof(*in));
	in->ntiers = ta_ntiers;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		in->observed[t] = atomic_load(&r->observed);
		/* High and max are at most the tier's capacity (shm.c): room is real. */
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			in->limit[t][k] = atomic_load(&r->limit[k]);
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

bool ta_enforce_pass(void)
{
	if (!atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		return false;
	if (atomic_exchange(&pass_running, true))
		return false;
	bool acted = false;
	ta_shm_refresh_limits(false);
	bool alarmed = take_agent_alarm();
	if (observe(alarmed) && alarmed)
		ta_shm_wake_others();
	uint64_t gen = atomic_load(&ta_shm.hdr->observe_gen);
	if (gen != acted_gen) {
		acted_gen = gen;
		struct ta_enforce_in in;
		struct ta_enforce_plan plan;
		gather(&in);
		ta_enforce_plan(&in, &plan);
		/* A tier this process may not fill (TIERALLOC_PROCESS_LIMIT) is shut to its
		 * promotions too, whatever room the cgroup has. */
		for (unsigned t = 0; t < ta_ntiers; t++) {
			uint64_t limit = atomic_load(&ta_arenas[t].limit);
			if (limit != UINT64_MAX &&
			    atomic_load(&ta_arenas[t].charged) + ta_shm_gate_margin(limit) / 2 >=
				limit)
				plan.gate[t] = true;
		}
		/* The gate first: closing it takes back what the kernel promoted, which this
		 * reading still counts; demoting for it as well would demote twice. */
		bool closed = ta_gate_update(plan.gate);
		if (!closed && ta_opts.enforce != TA_ENFORCE_OFF) {
			for (unsigned a = 0; a < ta_ntiers; a++) {
				for (unsigned b = a + 1; b < ta_ntiers; b++)
					if (plan.demote[a][b] > 0)
						ta_demote(a, b, plan.demote[a][b]);
				reclaim(plan.reclaim[a], a);
			}
			reclaim(plan.reclaim_total, ta_ntiers - 1);
		}
		acted = true;
	}
	atomic_store(&pass_running, false);
	return acted;
}

void ta_enforce_poke(void)
{
	/* Quotas, or the kernel let loose on lower tiers (TIERALLOC_PROMOTION=always). */
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed) &&
	    ta_opts.promotion != TA_PROMOTION_ALWAYS)
		return;
	switch (ta_opts.enforce) {
	case TA_ENFORCE_OFF:
		/* No demotion or reclaim; the gate, if any, still needs the worker. */
		if (ta_opts.promotion == TA_PROMOTION_NEVER)
			return;
		ta_worker_start();
		return;
	case TA_ENFORCE_DEFERRED:
		ta_worker_start();
		return;
	case TA_ENFORCE_INLINE: {
		/* On the allocating thread, whatever locks the program holds: the mode exists to be
		 * measured against the deferred one (seed 003). */
		uint64_t now = ta_monotonic_ns(), last = atomic_load(&inline_last_ns);
		if (now - last >= TA_ENFORCE_PERIOD_NS &&
		    atomic_compare_exchange_strong(&inline_last_ns, &last, now))
			ta_enforce_pass();
		return;
	}
	}
}

void ta_enforce_fork_child(void)
{
	atomic_store(&pass_running, false);
	ta_worker_fork_child();
}
