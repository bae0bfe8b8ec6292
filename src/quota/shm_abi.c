/* SPDX-License-Identifier: MIT */
/*
 * Validation of a shared segment's header against the size of its file: the checks that the
 * allocator (src/quota/shm.c), the tools that only read segments (tieralloc-stat) and the agent
 * (tierallocd) all need, kept apart so that they link it without the allocator.
 */
#include <string.h>

#include "base/base.h"
#include "quota/quota.h"
#include "quota/shm.h"

int ta_shm_validate(const void *seg, size_t size, const char **why)
{
	const struct ta_shm_header *h = seg;
	if (size < sizeof(*h)) {
		*why = "truncated";
		return -EINVAL;
	}
	if (h->magic != TA_SHM_MAGIC) {
		*why = "bad magic";
		return -EINVAL;
	}
	if (h->abi_major != TA_SHM_ABI_MAJOR) {
		*why = "other ABI major version";
		return -EINVAL;
	}
	if (h->seg_size != size || h->header_size < offsetof(struct ta_shm_header, said) ||
	    h->header_size > h->tiers_off) {
		*why = "sizes do not match the file";
		return -EINVAL;
	}
	if (h->tier_size < sizeof(struct ta_shm_tier) ||
	    h->slot_size < sizeof(struct ta_shm_slot) || h->max_tiers < 1 || h->max_tiers > 64 ||
	    h->max_slots < 1 || h->max_slots > 65536) {
		*why = "bad record sizes or counts";
		return -EINVAL;
	}
	uint64_t tiers_end = (uint64_t)h->tiers_off + (uint64_t)h->tier_size * h->max_tiers;
	uint64_t slots_end = (uint64_t)h->slots_off + (uint64_t)h->slot_size * h->max_slots;
	if (tiers_end > size || slots_end > size || h->slots_off < tiers_end ||
	    h->slots_off % 8 != 0 || h->tiers_off % 8 != 0 || h->slot_size % 8 != 0 ||
	    h->tier_size % 8 != 0) {
		*why = "records outside the segment";
		return -EINVAL;
	}
	if (atomic_load_explicit(&((struct ta_shm_header *)h)->ntiers, memory_order_relaxed) >
	    h->max_tiers) {
		*why = "more tiers than records";
		return -EINVAL;
	}
	return 0;
}

struct ta_shm_access *ta_shm_access_block(const struct ta_shm_header *h, size_t size)
{
	if (h->abi_minor < 3 || h->access_off == 0 ||
	    h->access_size < sizeof(struct ta_shm_access) || h->access_off % 64 != 0)
		return NULL;
	uint64_t slots_end = (uint64_t)h->slots_off + (uint64_t)h->slot_size * h->max_slots;
	if (h->access_off < slots_end || (uint64_t)h->access_off + h->access_size > size)
		return NULL;
	return (struct ta_shm_access *)((char *)h + h->access_off);
}

struct ta_shm_agent *ta_shm_agent_block(const struct ta_shm_header *h, size_t size)
{
	if (h->abi_minor < 2 || h->agent_off == 0 || h->agent_size < sizeof(struct ta_shm_agent) ||
	    h->agent_off % 64 != 0)
		return NULL;
	uint64_t slots_end = (uint64_t)h->slots_off + (uint64_t)h->slot_size * h->max_slots;
	if (h->agent_off < slots_end || (uint64_t)h->agent_off + h->agent_size > size)
		return NULL;
	return (struct ta_shm_agent *)((char *)h + h->agent_off);
}

struct ta_shm_lend *ta_shm_lend_block(const struct ta_shm_header *h, size_t size)
{
	/* A header of minor 4 ends before lend_off: what lies there is not ours to read. */
	if (h->abi_minor < 5 || h->header_size < offsetof(struct ta_shm_header, lend_size) + 4 ||
	    h->lend_off == 0 || h->lend_size < sizeof(struct ta_shm_lend) || h->lend_off % 64 != 0)
		return NULL;
	uint64_t slots_end = (uint64_t)h->slots_off + (uint64_t)h->slot_size * h->max_slots;
	if (h->lend_off < slots_end || (uint64_t)h->lend_off + h->lend_size > size)
		return NULL;
	return (struct ta_shm_lend *)((char *)h + h->lend_off);
}

bool ta_proc_stat_parse(const char *text, char *state, uint64_t *start_time)
{
	/* The command (field 2) may hold spaces and ')': count from the last ')'. */
	const char *p = strrchr(text, ')');
	if (p == NULL || p[1] != ' ' || p[2] == '\0')
		return false;
	*state = p[2];
	unsigned field = 2;
	for (; *p != '\0' && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	*start_time = v;
	return field == 22;
}
