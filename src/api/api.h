/* SPDX-License-Identifier: MIT */
/*
 * The top layer (src/api/): initialisation, the public API, the ctl tree and the summary. It
 * may call every layer.
 */
#ifndef TA_API_H
#define TA_API_H

#include <sys/types.h>

#include "alloc/alloc.h"
#include "base/base.h"
#include "enforce/enforce.h"
#include "quota/charge.h"
#include "quota/quota.h"

/* ---- init.c: state machine, constructor, fork ---- */
/* Run the one-time initialisation if nobody has; returns the resulting state. */
int ta_init(void);

/* ---- stats.c: statistics and the ctl tree (tieralloc_ctl_get/_set) ---- */
int ta_stats_tier(unsigned tier, struct tieralloc_tier_stats *out);
int ta_ctl_get(const char *name, void *out, size_t *len);
int ta_ctl_set(const char *name, const void *in, size_t len);

/* ---- maps.c: the preload's mmap, munmap and mremap (caller: the call's return address) ---- */
void *ta_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *caller);
int ta_munmap(void *addr, size_t len, const void *caller);
void *ta_mremap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
		const void *caller);

/* ---- summary.c: per-process summary at exit (TIERALLOC_SUMMARY) ---- */
void ta_summary_write(const char *dest);

#endif /* TA_API_H */
