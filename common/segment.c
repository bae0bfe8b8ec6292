/* SPDX-License-Identifier: MIT */
/* What the readers make of a segment's bytes: see segment.h. */
#include "segment.h"

#include <string.h>

#include "base/base.h"
#include "quota/shm.h"

/* The fields are the processes' to write while they are read: atomic loads, through a pointer
 * the readers hold as const. */
static uint64_t ld(const _Atomic uint64_t *p)
{
	return atomic_load((_Atomic uint64_t *)p);
}

bool ta_seg_size_ok(off_t size)
{
	return size >= (off_t)sizeof(struct ta_shm_header) && size <= TA_SEG_MAX_BYTES;
}

int ta_seg_header_ok(const struct ta_shm_header *h, size_t size, const char **why)
{
	if (atomic_load(&((struct ta_shm_header *)h)->state) != TA_SHM_READY) {
		*why = "not ready (its creator has not finished it)";
		return -1;
	}
	return ta_shm_validate(h, size, why);
}

bool ta_seg_has_enforcement(uint16_t abi_minor, uint32_t tier_size)
{
	return abi_minor >= 1 && tier_size >= sizeof(struct ta_shm_tier);
}

void ta_seg_prom_tier(const struct ta_shm_tier *r, bool enforcement, struct ta_prom_tier *pt)
{
	size_t nlen = strnlen(r->name, sizeof(r->name));
	memcpy(pt->name, r->name, nlen);
	pt->name[nlen] = '\0';
	pt->nodes = ld(&r->nodes);
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		pt->limit[k] = ld(&r->limit[k]);
	pt->capacity = ld(&r->capacity);
	pt->share_ppm = atomic_load(&((struct ta_shm_tier *)r)->share_ppm);
	pt->charged = ld(&r->charged);
	pt->peak = ld(&r->peak);
	pt->steered_away = ld(&r->steered_away);
	pt->overflowed = ld(&r->overflowed);
	pt->refused_max = ld(&r->exhausted);
	pt->reclaimed = ld(&r->reclaimed);
	pt->have_enforcement = enforcement;
	if (enforcement) {
		pt->untracked = ld(&r->untracked);
		pt->demoted = ld(&r->demoted);
		pt->reclaim_asked = ld(&r->reclaim_asked);
		pt->reclaims = ld(&r->reclaims);
		pt->gated = ld(&r->gated);
	}
}

bool ta_seg_lend_live(const struct ta_shm_lend *l)
{
	return ta_monotonic_ns() < ld(&l->expires_ns);
}

uint32_t ta_seg_priority(const struct ta_shm_lend *l)
{
	uint32_t p = atomic_load(&((struct ta_shm_lend *)l)->priority);
	return p <= TA_SHM_LEND_PRIORITY_MAX ? p : 0;
}

void ta_seg_prom_lend(const struct ta_shm_lend *l, bool live, unsigned ntiers,
		      struct ta_prom_segment *p)
{
	p->have_priority = true;
	p->priority = ta_seg_priority(l);
	for (unsigned t = 0; t < ntiers; t++) {
		struct ta_prom_tier *pt = &p->tier[t];
		pt->have_lend = true;
		pt->loan = live ? ld(&l->tier[t].loan) : 0;
		pt->lent = live ? ld(&l->tier[t].lent) : 0;
		pt->yielded = live ? ld(&l->tier[t].yielded) : 0;
		pt->taken_back = ld(&l->tier[t].taken_back);
		pt->take_backs = ld(&l->tier[t].take_backs);
	}
}

void ta_seg_prom_exchange(const struct ta_shm_access *acc, unsigned t, struct ta_prom_tier *pt)
{
	pt->exchange_promoted = ld(&acc->promoted[t]);
	pt->exchange_down = ld(&acc->exchanged_down[t]);
}
