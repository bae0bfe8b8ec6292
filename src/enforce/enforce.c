/* SPDX-License-Identifier: MIT */
/*
 * Enforcement when a quota breaks anyway (limits lowered at run time, the kernel's own placement
 * and migrations, page cache): one pass reconciles with the kernel, demotes, reclaims and gates.
 *
 * - Observe: one process of the cgroup per period re-reads the cgroup's limits and reads
 *   memory.numa_stat (v2), sums it per tier and publishes both in the segment (observe.c, which is
 *   all the pass knows of the segment): a lowered limit is acted on at the next reading.
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

#include "enforce/enforce.h"

static _Atomic bool pass_running;
static uint64_t acted_gen; /* the reading this process last acted on */
static _Atomic uint64_t inline_last_ns;

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

/* ---- acting ---- */

/* Ask the kernel for bytes back, on tier's record (the cgroup's total: the last tier's). */
static void reclaim(uint64_t bytes, unsigned tier)
{
	int rc = ta_quota_reclaim(bytes, tier);
	/* -EAGAIN: the kernel found less to reclaim than asked; the next reading shows it. */
	if (bytes != 0 && rc != -ENOENT)
		atomic_fetch_add(&ta_arenas[tier].reclaim_asked, bytes);
}

/* Demote, and at debug level say what the reading was and what the move took: the timeline of a
 * convergence (bench/run-converge.sh reads it). */
static void trace_demote(const struct ta_enforce_in *in, unsigned a, unsigned b, uint64_t bytes)
{
	uint64_t t0 = ta_monotonic_ns(), huge0 = ta_place_huge_units_moved();
	uint64_t moved = ta_demote(a, b, bytes);
	if (ta_log_level < TA_LOG_DEBUG)
		return;
	uint64_t t1 = ta_monotonic_ns();
	ta_log(TA_LOG_DEBUG,
	       "enforce: at %llu ms tier %u observed %llu KiB, high %llu KiB: asked %llu KiB to "
	       "tier %u, moved %llu KiB in %llu ms, %llu MiB of it as huge pages",
	       (unsigned long long)(t0 / 1000000u), a, (unsigned long long)(in->observed[a] >> 10),
	       (unsigned long long)(in->limit[a][TA_LIMIT_HIGH] >> 10),
	       (unsigned long long)(bytes >> 10), b, (unsigned long long)(moved >> 10),
	       (unsigned long long)((t1 - t0) / 1000000u),
	       (unsigned long long)(2 * (ta_place_huge_units_moved() - huge0)));
}

bool ta_enforce_pass(void)
{
	if (!ta_quota_active())
		return false;
	if (atomic_exchange(&pass_running, true))
		return false;
	bool acted = false;
	bool alarmed = ta_quota_take_alarm();
	/* The process whose turn it is to read the usage re-reads the limits with it; the others
	 * keep the limits' own period. */
	if (ta_quota_observe(alarmed)) {
		if (alarmed)
			ta_shm_wake_others();
	} else {
		ta_shm_refresh_limits(false);
	}
	uint64_t gen = ta_quota_observe_gen();
	if (gen != acted_gen) {
		acted_gen = gen;
		struct ta_enforce_in in;
		struct ta_enforce_plan plan;
		ta_quota_view(&in);
		ta_enforce_plan(&in, &plan);
		/* A tier this process may not fill (TIERALLOC_PROCESS_LIMIT) is shut to its
		 * promotions too, whatever room the cgroup has. */
		for (unsigned t = 0; t < ta_ntiers; t++) {
			uint64_t limit = atomic_load(&ta_charges[t].limit);
			if (limit != UINT64_MAX &&
			    atomic_load(&ta_charges[t].charged) + ta_shm_gate_margin(limit) / 2 >=
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
						trace_demote(&in, a, b, plan.demote[a][b]);
				reclaim(plan.reclaim[a], a);
			}
			reclaim(plan.reclaim_total, ta_ntiers - 1);
		}
		acted = true;
	}
	/* After each new access sample: hot memory of lower tiers up, within the shares. */
	static uint64_t exchanged_at; /* the sample the last exchange used */
	uint64_t samples = atomic_load(&ta_access_samples);
	if (samples != exchanged_at) {
		exchanged_at = samples;
		if (ta_exchange() > 0)
			acted = true;
	}
	/* After each new sample of the program's own mappings and reading of the cgroup, both
	 * taken since the last fill saw what it moved: what sits below while the faster tier has
	 * room goes up (fill.c). */
	static uint64_t filled_sample, filled_gen; /* what the last fill went by */
	uint64_t maps_samples = atomic_load(&ta_maps_samples);
	if (maps_samples != filled_sample && gen != filled_gen) {
		filled_sample = maps_samples;
		filled_gen = gen;
		if (ta_fill() > 0)
			acted = true;
	}
	atomic_store(&pass_running, false);
	return acted;
}

bool ta_enforce_worker_passes(void)
{
	/* Quotas, or the kernel let loose on lower tiers (TIERALLOC_PROMOTION=always). */
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed) &&
	    ta_opts.promotion != TA_PROMOTION_ALWAYS)
		return false;
	switch (ta_opts.enforce) {
	case TA_ENFORCE_OFF:
		/* No demotion or reclaim; the gate, if any, still needs the worker. */
		return ta_opts.promotion != TA_PROMOTION_NEVER;
	case TA_ENFORCE_DEFERRED:
		return true;
	default: /* inline: the allocating threads run the passes */
		return false;
	}
}

void ta_enforce_poke(void)
{
	/* Limits gone stale: the worker re-reads them, whatever the mode (seed 003: a malloc never
	 * reads cgroup files, nor /proc for dead peers, on the program's thread). A process that
	 * lives less than two periods, or whose peers keep the limits fresh, starts none. */
	if (atomic_load_explicit(&ta_limits_wanted, memory_order_relaxed)) {
		ta_worker_start();
		ta_charge_kick();
	}
	if (ta_enforce_worker_passes()) {
		ta_worker_start();
		return;
	}
	/* A heap of the program's own mappings under a quota: the worker samples where it is. */
	if (atomic_load_explicit(&ta_maps_bytes, memory_order_relaxed) >= TA_MAPS_WORKER_AFTER &&
	    ta_quota_active())
		ta_worker_start();
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed) &&
	    ta_opts.promotion != TA_PROMOTION_ALWAYS)
		return;
	switch (ta_opts.enforce) {
	case TA_ENFORCE_INLINE: {
		/* On the allocating thread, whatever locks the program holds: the mode exists to be
		 * measured against the deferred one (seed 003). */
		uint64_t now = ta_monotonic_ns(), last = atomic_load(&inline_last_ns);
		if (now - last >= TA_ENFORCE_PERIOD_NS &&
		    atomic_compare_exchange_strong(&inline_last_ns, &last, now))
			ta_enforce_pass();
		return;
	}
	default:
		return;
	}
}

void ta_enforce_fork_child(void)
{
	atomic_store(&pass_running, false);
	ta_worker_fork_child();
}
