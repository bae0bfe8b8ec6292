/* SPDX-License-Identifier: MIT */
/*
 * The agent's loans and yields (tierallocd --lend, --reclaim-for-priority), as a process of the
 * borrowing or yielding cgroup reads them from the segment's lending block: a loan raises a
 * tier's high and max, a yield lowers them, never below the cgroup's own floor, and both end
 * when the agent stops renewing them (expires_ns).
 */
#include "base/base.h"
#include "quota/quota.h"
#include "quota/shm.h"

static bool lend_terms_at(const struct ta_shm_lend *lend, unsigned t, uint64_t now_ns,
			  uint64_t *loan, uint64_t *yielded)
{
	*loan = *yielded = 0;
	if (lend == NULL || t >= TA_SHM_MAX_TIERS)
		return false;
	struct ta_shm_lend *l = (struct ta_shm_lend *)lend;
	if (now_ns >= atomic_load_explicit(&l->expires_ns, memory_order_acquire))
		return false;
	*loan = atomic_load_explicit(&l->tier[t].loan, memory_order_relaxed);
	*yielded = atomic_load_explicit(&l->tier[t].yielded, memory_order_relaxed);
	return *loan != 0 || *yielded != 0;
}

bool ta_shm_lend_terms(unsigned t, uint64_t *loan, uint64_t *yielded)
{
	*loan = *yielded = 0;
	if (!atomic_load_explicit(&ta_shm.active, memory_order_acquire) || ta_shm.lend == NULL)
		return false;
	/* Only a few loads when no agent ever lent: no clock read on that path. */
	if (atomic_load_explicit(&ta_shm.lend->expires_ns, memory_order_relaxed) == 0)
		return false;
	return lend_terms_at(ta_shm.lend, t, ta_monotonic_ns(), loan, yielded);
}

uint64_t ta_shm_lend_limit(uint64_t limit, uint64_t loan, uint64_t yielded, uint64_t floor)
{
	uint64_t raised = limit > UINT64_MAX - loan ? UINT64_MAX : limit + loan;
	/* The segment is its owner's to write: whatever it says, a yield stops at the floor. */
	if (raised <= floor)
		return raised;
	return raised - floor > yielded ? raised - yielded : floor;
}

uint64_t ta_shm_lend_floor(const uint64_t limit[TA_NLIMITS])
{
	return limit[TA_LIMIT_LOW] > limit[TA_LIMIT_MIN] ? limit[TA_LIMIT_LOW]
							 : limit[TA_LIMIT_MIN];
}
