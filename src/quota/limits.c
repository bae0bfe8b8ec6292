/* SPDX-License-Identifier: MIT */
/*
 * The cgroup's limits in the segment: memory.{min,low,high,max}, read from the cgroup's files
 * and split per tier by each tier's share (or TIERALLOC_TIER_LIMITS / TIERALLOC_SPLIT, quota.c),
 * re-read by one process of the cgroup per period; a change bumps the header's generation,
 * which the other processes' steering and enforcement watch.
 */
#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"
#include "quota/shm.h"

#define LIMITS_REFRESH_NS (1000 * 1000 * 1000ull)

static __thread unsigned limit_reads_here;

unsigned ta_shm_limit_reads_here(void)
{
	return limit_reads_here;
}

bool ta_shm_limits_stale(void)
{
	uint64_t last = atomic_load_explicit(&ta_shm.hdr->limits_read_ns, memory_order_relaxed);
	return ta_monotonic_ns() - last >= 2 * LIMITS_REFRESH_NS;
}

void ta_shm_refresh_limits(bool now)
{
	if (!ta_shm_check(now))
		return;
	struct ta_shm_header *h = ta_shm.hdr;
	uint64_t t_now = ta_monotonic_ns();
	uint64_t last = atomic_load_explicit(&h->limits_read_ns, memory_order_relaxed);
	if (!now && t_now - last < LIMITS_REFRESH_NS)
		return;
	/* One process of the cgroup re-reads per period. */
	if (!now && !atomic_compare_exchange_strong(&h->limits_read_ns, &last, t_now))
		return;
	atomic_store(&h->limits_read_ns, t_now);
	limit_reads_here++;
	/* Processes that exited leave their slot to be taken back by a peer: no exit-time detach,
	 * which would race with the process's other threads still charging. Not again right
	 * after attaching (start-up reads the limits at once): a look costs a /proc read per
	 * live process of the container. */
	if (t_now - atomic_load(&ta_shm.reclaimed_ns) >= LIMITS_REFRESH_NS)
		ta_shm_reclaim_dead(&ta_shm);
	uint64_t cg[TA_NLIMITS];
	if (ta_cgroup_read_limits("", &ta_shm.cg, cg) != 0) {
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			cg[k] = k <= TA_LIMIT_LOW ? 0 : TA_SHM_UNLIMITED;
	}
	bool changed = false;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		uint64_t cap = atomic_load(&r->capacity), v[TA_NLIMITS];
		for (unsigned k = 0; k < TA_NLIMITS; k++) {
			if (!ta_quota_override(t, k, &v[k]))
				v[k] = ta_cgroup_split(cg[k], ta_quota_share(t));
			/* No limit anywhere means the tier's capacity. */
			if (k >= TA_LIMIT_HIGH && v[k] > cap)
				v[k] = cap;
		}
		/* Steering tries high first: a high above max (memory.high is "max" by default)
		 * would let the max pass unchecked. */
		if (v[TA_LIMIT_HIGH] > v[TA_LIMIT_MAX])
			v[TA_LIMIT_HIGH] = v[TA_LIMIT_MAX];
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			if (atomic_exchange(&r->limit[k], v[k]) != v[k])
				changed = true;
		atomic_store(&r->share_ppm, ta_quota_share(t));
	}
	if (changed) {
		atomic_fetch_add(&h->generation, 1);
		ta_log(
		    TA_LOG_DEBUG, "limits: at %llu ms tier 0 high %llu KiB (changed)",
		    (unsigned long long)(t_now / 1000000u),
		    (unsigned long long)(atomic_load(&ta_shm.tiers[0].limit[TA_LIMIT_HIGH]) >> 10));
	}
}
