/* SPDX-License-Identifier: MIT */
/*
 * A segment as its readers see it (segment.c), tieralloc-stat and the agent alike, whatever way
 * each reads it (the tool into a private copy, the agent through the descriptors it keeps): the
 * largest file either opens, whether a header read is one to use, and the exposition's figures
 * (prom.h) of the records read. Each reader still opens the file its own way and with its own
 * checks (docs/security.md); what they make of its bytes is written once here, so that both show
 * a segment the same way.
 */
#ifndef TA_COMMON_SEGMENT_H
#define TA_COMMON_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "prom.h"
#include "tieralloc/shm_abi.h"

/* A larger file is no segment: neither reader opens it for I/O, nor copies or maps it. */
#define TA_SEG_MAX_BYTES (1u << 20)

/* A file of this size (st_size) could be a segment: a header's worth, and not larger than the
 * readers take. */
bool ta_seg_size_ok(off_t size);

/* The header, as read, is a finished segment's (TA_SHM_READY) and validates against the file's
 * size: 0, or -1 with why. */
int ta_seg_header_ok(const struct ta_shm_header *h, size_t size, const char **why);

/* Tier records of this ABI minor and size hold the enforcement counters (not minor 0's). */
bool ta_seg_has_enforcement(uint16_t abi_minor, uint32_t tier_size);

/* A tier record's figures: its name, nodes, limits, share, charge and the counters the record
 * has. What a reader learns elsewhere (the kernel's usage, heat, loans, the agent's counts) is
 * the caller's to add. */
void ta_seg_prom_tier(const struct ta_shm_tier *r, bool enforcement, struct ta_prom_tier *pt);

/* Whether the lending block's loans count now: CLOCK_MONOTONIC before the agent's expiry (a
 * lapsed loan counts as none). */
bool ta_seg_lend_live(const struct ta_shm_lend *l);

/* The priority a lending block holds, 0 when out of range. */
uint32_t ta_seg_priority(const struct ta_shm_lend *l);

/* The lending block's figures into p's first ntiers tiers; live: ta_seg_lend_live(). */
void ta_seg_prom_lend(const struct ta_shm_lend *l, bool live, unsigned ntiers,
		      struct ta_prom_segment *p);

/* Tier t's exchange counts from the access block (ABI minor 3). */
void ta_seg_prom_exchange(const struct ta_shm_access *acc, unsigned t, struct ta_prom_tier *pt);

#endif /* TA_COMMON_SEGMENT_H */
