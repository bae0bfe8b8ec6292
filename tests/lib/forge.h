/* SPDX-License-Identifier: MIT */
/*
 * The one forge of segment headers for the tests (test_shm, test_shm_fuzz, test_agent,
 * tests/quota/shm_forge): the layout of include/tieralloc/shm_abi.h and the blocks asked for,
 * so that a block added to the ABI is added here once and no copy drifts behind. Only the ABI's
 * header: shm_forge is built without the core.
 */
#ifndef TA_TEST_FORGE_H
#define TA_TEST_FORGE_H

#include <stdint.h>

#include "tieralloc/shm_abi.h"

/* The blocks after the slots, each with its offset and size in the header. */
enum {
	TA_FORGE_AGENT = 1 << 0,
	TA_FORGE_ACCESS = 1 << 1,
	TA_FORGE_LEND = 1 << 2,
	TA_FORGE_ALL = TA_FORGE_AGENT | TA_FORGE_ACCESS | TA_FORGE_LEND,
};

/*
 * Fill the header at seg (TA_SHM_SEG_SIZE bytes at least) as its creator would: magic, ABI
 * minor, the tiers' and slots' layout, and the blocks of mask. seg_size ends at the agent block
 * when there is none (a segment of minor 0 or 1). State, tiers and slots are the caller's: the
 * segment is not ready until it says so.
 */
static inline struct ta_shm_header *ta_forge_header(void *seg, uint16_t minor, unsigned mask)
{
	struct ta_shm_header *h = seg;
	h->magic = TA_SHM_MAGIC;
	h->abi_major = TA_SHM_ABI_MAJOR;
	h->abi_minor = minor;
	h->header_size = sizeof(*h);
	h->seg_size = (mask & TA_FORGE_AGENT) != 0 ? TA_SHM_SEG_SIZE : TA_SHM_AGENT_OFF;
	h->max_slots = TA_SHM_MAX_SLOTS;
	h->max_tiers = TA_SHM_MAX_TIERS;
	h->slot_size = sizeof(struct ta_shm_slot);
	h->slots_off = TA_SHM_SLOTS_OFF;
	h->tier_size = sizeof(struct ta_shm_tier);
	h->tiers_off = TA_SHM_TIERS_OFF;
	if (mask & TA_FORGE_AGENT) {
		h->agent_off = TA_SHM_AGENT_OFF;
		h->agent_size = sizeof(struct ta_shm_agent);
	}
	if (mask & TA_FORGE_ACCESS) {
		h->access_off = TA_SHM_ACCESS_OFF;
		h->access_size = sizeof(struct ta_shm_access);
	}
	if (mask & TA_FORGE_LEND) {
		h->lend_off = TA_SHM_LEND_OFF;
		h->lend_size = sizeof(struct ta_shm_lend);
	}
	return h;
}

#endif /* TA_TEST_FORGE_H */
