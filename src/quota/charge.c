/* SPDX-License-Identifier: MIT */
/*
 * Charging and steering: the one owner of what a process charges to each tier (its own books,
 * its slot and the cgroup's counters in the shared segment), of the threads' stocks of
 * pre-charged bytes, and of the choice of a tier for an allocation (charge.h).
 *
 * Order of updates: this process's counter, then the segment (tier, then slot: ta_shm_charge
 * below); a charge the segment refuses is taken back from the process's counter. A forked child's
 * heap is its parent's, shared copy-on-write: the kernel counts those pages once and the parent's
 * slot holds their charge, so what the child gives back of it comes out of `inherited`, never out
 * of the segment (it would wrap the child's slot and take the parent's charge off the tier).
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "quota/charge.h"
#include "quota/quota.h"
#include "quota/shm.h"

struct ta_tier_charge ta_charges[TA_MAX_TIERS];
static _Atomic uint64_t inherited[TA_MAX_TIERS];
_Atomic bool ta_enforce_wanted;
_Atomic bool ta_limits_wanted;
/* Set by a kick, cleared when the worker starts a pass: every thread that finds a tier full
 * kicks, and one wake-up per pass is enough (no futex call on each of their slow paths). */
static _Atomic bool kick_pending;

void ta_charge_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS])
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		atomic_store(&ta_charges[t].limit, t < ntiers ? limits[t] : 0);
}

bool ta_charge(unsigned tier, uint64_t bytes, int level, bool force)
{
	struct ta_tier_charge *c = &ta_charges[tier];
	uint64_t limit = atomic_load_explicit(&c->limit, memory_order_relaxed);
	uint64_t now = atomic_fetch_add(&c->charged, bytes) + bytes;
	if (now > limit && !force) {
		atomic_fetch_sub(&c->charged, bytes);
		return false;
	}
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire) &&
	    !ta_shm_charge(tier, bytes, level, force)) {
		atomic_fetch_sub(&c->charged, bytes);
		return false;
	}
	return true;
}

void ta_charge_note_peak(unsigned tier)
{
	struct ta_tier_charge *c = &ta_charges[tier];
	uint64_t now = atomic_load_explicit(&c->charged, memory_order_relaxed);
	uint64_t peak = atomic_load_explicit(&c->peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now))
		;
}

void ta_charge_fork_inherit(void)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		atomic_store(&inherited[t], atomic_load(&ta_charges[t].charged));
}

/* Up to bytes of the tier's inherited charge, used up; returns how much. */
static uint64_t take_inherited(unsigned tier, uint64_t bytes)
{
	uint64_t have = atomic_load_explicit(&inherited[tier], memory_order_relaxed);
	for (;;) {
		uint64_t take = have < bytes ? have : bytes;
		if (take == 0 || atomic_compare_exchange_weak(&inherited[tier], &have, have - take))
			return take;
	}
}

void ta_uncharge(unsigned tier, uint64_t bytes)
{
	atomic_fetch_sub(&ta_charges[tier].charged, bytes);
	uint64_t own = bytes - take_inherited(tier, bytes);
	if (own != 0 && atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		ta_shm_uncharge(tier, own);
}

void ta_charge_move(unsigned from, unsigned to, uint64_t bytes)
{
	atomic_fetch_sub(&ta_charges[from].charged, bytes);
	atomic_fetch_add(&ta_charges[to].charged, bytes);
	ta_charge_note_peak(to);
	/* Inherited memory moves as inherited: its charge stays the parent's. */
	uint64_t kin = take_inherited(from, bytes), own = bytes - kin;
	atomic_fetch_add(&inherited[to], kin);
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire)) {
		if (own != 0) {
			ta_shm_uncharge(from, own);
			ta_shm_charge(to, own, TA_LIMIT_MAX, true);
		}
		atomic_fetch_add(&ta_shm.tiers[from].demoted, bytes);
	}
}

/* ---- the program's own mappings (docs/runtimes.md) ---- */

/* What this process charges now for the resident pages of its recorded mappings, per tier. A
 * forked child starts with its parent's figure, which its inherited charge covers: the pages are
 * the parent's (copy-on-write) and stay charged in the parent's slot; only what the child adds
 * reaches its own slot, and what it gives back comes out of `inherited` first. */
static _Atomic uint64_t mapped_charged[TA_MAX_TIERS];

void ta_charge_mapped(const uint64_t resident[TA_MAX_TIERS], unsigned ntiers)
{
	/* Rises first, falls second: pages that moved between tiers since the last sample are
	 * counted in both for a moment, never in neither, and no counter goes below zero. Forced:
	 * the pages are already there; a tier past its share is enforcement's to act on. */
	for (unsigned t = 0; t < ntiers && t < TA_MAX_TIERS; t++) {
		uint64_t had = atomic_load(&mapped_charged[t]);
		if (resident[t] > had) {
			ta_charge(t, resident[t] - had, TA_LIMIT_MAX, true);
			atomic_store(&mapped_charged[t], resident[t]);
			ta_charge_note_peak(t);
		}
	}
	for (unsigned t = 0; t < ntiers && t < TA_MAX_TIERS; t++) {
		uint64_t had = atomic_load(&mapped_charged[t]);
		if (resident[t] < had) {
			atomic_store(&mapped_charged[t], resident[t]);
			ta_uncharge(t, had - resident[t]);
		}
	}
}

bool ta_charge_room(unsigned tier, int level)
{
	/* A charge of nothing: the same tests as any charge (this process's limit, the cgroup's
	 * share with the agent's loan or yield), and nothing left behind. */
	return ta_charge(tier, 0, level, false);
}

bool ta_charge_shared(void)
{
	return atomic_load_explicit(&ta_shm.active, memory_order_acquire);
}

uint64_t ta_charge_mapped_now(unsigned tier)
{
	return tier < TA_MAX_TIERS ? atomic_load(&mapped_charged[tier]) : 0;
}

void ta_charge_mapped_moved(unsigned from, unsigned to, uint64_t bytes)
{
	if (from >= TA_MAX_TIERS || to >= TA_MAX_TIERS)
		return;
	/* Never more than the figure holds: a page the last sample did not see (faulted since) is
	 * charged by the next one, where it now is. */
	uint64_t had = atomic_load(&mapped_charged[from]);
	if (bytes > had)
		bytes = had;
	atomic_store(&mapped_charged[from], had - bytes);
	atomic_fetch_add(&mapped_charged[to], bytes);
	ta_charge_move(from, to, bytes);
}

/* ---- what the enforcement worker is asked to look at ---- */

void ta_charge_note_limits(void)
{
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire) &&
	    !atomic_load_explicit(&ta_limits_wanted, memory_order_relaxed) && ta_shm_limits_stale())
		atomic_store(&ta_limits_wanted, true);
}

void ta_charge_kick(void)
{
	if (atomic_load_explicit(&kick_pending, memory_order_relaxed) ||
	    atomic_exchange(&kick_pending, true))
		return;
	int flags;
	_Atomic uint32_t *word = ta_shm_wake_word(&flags);
	atomic_fetch_add(word, 1);
	syscall(SYS_futex, word, FUTEX_WAKE | flags, 1, NULL, NULL, 0);
}

void ta_charge_kick_taken(void)
{
	atomic_store(&kick_pending, false);
}

/* ---- stocks ---- */

void ta_stock_init(struct ta_stock *s)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		s->bytes[t] = 0;
	s->high = (int64_t)(2 * ta_opts.charge_batch);
}

/* Stores the owner's count so that readers elsewhere (statistics) see a whole value. */
static void stock_set(struct ta_stock *s, unsigned tier, int64_t v)
{
	__atomic_store_n(&s->bytes[tier], v, __ATOMIC_RELAXED);
}

/* A batch more than needed, or only what is needed when that is all the limit leaves. */
static bool stock_refill(struct ta_stock *s, unsigned tier, uint64_t need, int level, bool force)
{
	ta_charge_note_limits();
	uint64_t amount = need + ta_opts.charge_batch;
	if (!ta_charge(tier, amount, level, force)) {
		amount = need;
		if (!ta_charge(tier, amount, level, false))
			return false;
	}
	stock_set(s, tier, s->bytes[tier] + (int64_t)amount);
	return true;
}

bool ta_stock_charge(struct ta_stock *s, unsigned tier, uint64_t bytes, int level, bool force)
{
	if (s == NULL)
		return ta_charge(tier, bytes, level, force);
	if (s->bytes[tier] < (int64_t)bytes && !stock_refill(s, tier, bytes, level, force))
		return false;
	stock_set(s, tier, s->bytes[tier] - (int64_t)bytes);
	return true;
}

void ta_stock_uncharge(struct ta_stock *s, unsigned tier, uint64_t bytes)
{
	if (s == NULL) {
		ta_uncharge(tier, bytes);
		return;
	}
	stock_set(s, tier, s->bytes[tier] + (int64_t)bytes);
	if (s->bytes[tier] <= s->high)
		return;
	/* Above the bound: keep one batch. */
	int64_t give = s->bytes[tier] - (int64_t)ta_opts.charge_batch;
	ta_uncharge(tier, (uint64_t)give);
	stock_set(s, tier, s->bytes[tier] - give);
}

void ta_stock_return(struct ta_stock *s)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++) {
		if (s->bytes[t] > 0)
			ta_uncharge(t, (uint64_t)s->bytes[t]);
		stock_set(s, t, 0);
	}
}

void ta_stock_forget(struct ta_stock *s)
{
	/* Only this process's counter: the segment never saw the child charge it. */
	for (unsigned t = 0; t < TA_MAX_TIERS; t++) {
		if (s->bytes[t] > 0)
			atomic_fetch_sub(&ta_charges[t].charged, (uint64_t)s->bytes[t]);
		s->bytes[t] = 0;
	}
}

/* ---- steering ---- */

/* A thread found tier t at its limit and moves on. */
static void note_full(unsigned t)
{
	atomic_fetch_add(&ta_charges[t].exhausted, 1);
	/* A tier ran out: enforcement has something to look at, now rather than next period. */
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed))
		atomic_store(&ta_enforce_wanted, true);
	ta_charge_kick();
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		atomic_fetch_add(&ta_shm.tiers[t].steered_away, 1);
}

static void note_overflow(unsigned t)
{
	atomic_fetch_add(&ta_charges[t].overflowed, 1);
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		atomic_fetch_add(&ta_shm.tiers[t].overflowed, 1);
}

void *ta_steer(int want_tier, ta_place_fn place, void *ctx, struct ta_placed *out)
{
	bool refused = false;
	void *p;
	if (want_tier >= 0) {
		out->tier = (unsigned)want_tier;
		out->how = 2;
		return place((unsigned)want_tier, TA_LIMIT_MAX, true, &refused, ctx);
	}
	bool passed_one = false; /* a faster tier could not take it */
	for (int level = TA_LIMIT_HIGH; level <= TA_LIMIT_MAX; level++) {
		for (unsigned t = 0; t < ta_ntiers; t++) {
			refused = false;
			p = place(t, level, false, &refused, ctx);
			if (p != NULL) {
				out->tier = t;
				out->how = t > 0 && passed_one ? 1 : 0;
				return p;
			}
			if (refused)
				note_full(t);
			passed_one = true;
		}
	}
	if (ta_opts.on_full == TA_ON_FULL_ENOMEM)
		return NULL;
	/* Every tier is at its max: overflow into the last one. */
	unsigned last = ta_ntiers - 1;
	p = place(last, TA_LIMIT_MAX, true, &refused, ctx);
	if (p != NULL) {
		note_overflow(last);
		out->tier = last;
		out->how = last > 0 ? 1 : 0;
	}
	return p;
}

/* ---- the cgroup's counters in the segment ----
 * Charges arrive here when a run of small objects is cut, when a thread refills or trims its
 * stock for large objects, and when a sample of the mapped memory changed, never per small
 * allocation. */

/* The cgroup's limit for the tier at this level. A loan of the agent's raises high and max
 * alike: the borrower steers into it as into its own share, and its max is its own share's max
 * plus what it borrows. A yield lowers both: the cgroup steers below the tier until its
 * enforcement has demoted what it gave. */
static uint64_t shm_limit(unsigned tier, int level)
{
	struct ta_shm_tier *r = &ta_shm.tiers[tier];
	uint64_t limit = atomic_load_explicit(&r->limit[level], memory_order_relaxed);
	uint64_t loan, yielded;
	if (level >= TA_LIMIT_HIGH && ta_shm_lend_terms(tier, &loan, &yielded)) {
		uint64_t lim[TA_NLIMITS];
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			lim[k] = atomic_load_explicit(&r->limit[k], memory_order_relaxed);
		limit = ta_shm_lend_limit(limit, loan, yielded, ta_shm_lend_floor(lim));
	}
	return limit;
}

uint64_t ta_charge_room_bytes(unsigned tier, int level)
{
	struct ta_tier_charge *c = &ta_charges[tier];
	uint64_t limit = atomic_load_explicit(&c->limit, memory_order_relaxed);
	uint64_t charged = atomic_load_explicit(&c->charged, memory_order_relaxed);
	uint64_t room = limit > charged ? limit - charged : 0;
	if (!atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		return room;
	struct ta_shm_tier *r = &ta_shm.tiers[tier];
	uint64_t used = atomic_load_explicit(&r->charged, memory_order_relaxed);
	uint64_t untracked = atomic_load_explicit(&r->untracked, memory_order_relaxed);
	limit = shm_limit(tier, level);
	used = used + untracked < used ? UINT64_MAX : used + untracked;
	uint64_t shared = limit > used ? limit - used : 0;
	return shared < room ? shared : room;
}

bool ta_shm_charge(unsigned tier, uint64_t bytes, int level, bool force)
{
	struct ta_shm_tier *r = &ta_shm.tiers[tier];
	uint64_t limit = shm_limit(tier, level);
	/* What the kernel sees there beyond the charges (memkind's metadata, page cache, pages it
	 * promoted): intent plus the last observed truth. */
	uint64_t untracked = atomic_load_explicit(&r->untracked, memory_order_relaxed);
	uint64_t now = atomic_fetch_add(&r->charged, bytes) + bytes;
	if ((now > limit || untracked > limit - now) && !force) {
		atomic_fetch_sub(&r->charged, bytes);
		if (level == TA_LIMIT_MAX)
			atomic_fetch_add(&r->exhausted, 1);
		return false;
	}
	atomic_fetch_add_explicit(&ta_shm.mine->charged[tier], bytes, memory_order_relaxed);
	/* Under a real quota, a tier half-way to its high share or a process holding 16 MiB there:
	 * enforcement has something to watch (enforce.c). Not sooner, so that the many short
	 * programs of a container (shells, compilers' drivers) never start a worker thread. */
	uint64_t high = atomic_load_explicit(&r->limit[TA_LIMIT_HIGH], memory_order_relaxed);
	uint64_t mine = atomic_load_explicit(&ta_shm.mine->charged[tier], memory_order_relaxed);
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed) &&
	    high < atomic_load_explicit(&r->capacity, memory_order_relaxed) &&
	    (now + untracked >= high / 2 || mine >= (16ull << 20)))
		atomic_store(&ta_enforce_wanted, true);
	uint64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak(&r->peak, &peak, now))
		;
	return true;
}

/* Slot first, tier second (and the reverse when charging): a process killed between the two
 * leaves the tier over-charged by one batch, never below the sum of the slots, so taking back a
 * dead slot's charges cannot wrap the tier's counter. */
void ta_shm_uncharge(unsigned tier, uint64_t bytes)
{
	atomic_fetch_sub_explicit(&ta_shm.mine->charged[tier], bytes, memory_order_relaxed);
	atomic_fetch_sub(&ta_shm.tiers[tier].charged, bytes);
}
