/* SPDX-License-Identifier: MIT */
/*
 * How tieralloc-stat shows a segment it read (stat_print.c): a section of the table (the default,
 * or every column with --wide), one member of the JSON document (--json), or the snapshot that
 * Prometheus' exposition (--prometheus, prom.c) and --record are written from.
 */
#ifndef TA_STAT_PRINT_H
#define TA_STAT_PRINT_H

#include <stdbool.h>

#include "prom.h"
#include "stat_seg.h"

/* The segment's section of the table: its heading, its tiers, the kernel's migrations, hot and
 * cold bytes and its loans; a line saying why when it is unreadable (s->error). */
void ta_stat_print_table(struct ta_stat_seg *s, bool wide);
/* The segment as one element of the document's "segments" array (first: no comma before). */
void ta_stat_print_json(struct ta_stat_seg *s, bool first);
/* What the exposition shows of a segment that validated: what --json shows, as numbers. */
void ta_stat_snapshot(struct ta_stat_seg *s, struct ta_prom_segment *p);

#endif /* TA_STAT_PRINT_H */
