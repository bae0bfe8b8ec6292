/* SPDX-License-Identifier: MIT */
/*
 * The top layer (src/api/): initialisation, the public API, the ctl tree and the summary. It
 * may call every layer.
 */
#ifndef TA_API_H
#define TA_API_H

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

/* ---- summary.c: per-process summary at exit (TIERALLOC_SUMMARY) ---- */
void ta_summary_write(const char *dest);

#endif /* TA_API_H */
