/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat --record FILE: the segments sampled every interval into a CSV file, one row per
 * segment and tier, for tieralloc-plot(1) or a spreadsheet. tieralloc-stat reads the segments
 * (into the snapshots --prometheus formats, prom.h); this file parses the recording's options,
 * keeps the time, writes the rows and stops on a signal, a sample count or a duration.
 */
#ifndef TA_RECORD_H
#define TA_RECORD_H

#include <getopt.h>

#include "prom.h"

/* getopt_long's codes of the recording's options (long only, beyond every char). */
enum {
	TA_OPT_RECORD = 0x100,
	TA_OPT_INTERVAL,
	TA_OPT_SAMPLES,
	TA_OPT_DURATION,
};

#define TA_RECORD_USAGE                                                                            \
	"       tieralloc-stat --record FILE [--interval S] [--samples N] [--duration S] "         \
	"[--name SEGMENT]\n"                                                                       \
	"  --record FILE   append a CSV row per segment and tier to FILE (\"-\": stdout) every\n"  \
	"                  interval until SIGINT or SIGTERM (tieralloc-plot draws it)\n"           \
	"  --interval S    seconds between samples (default 1; decimals allowed)\n"                \
	"  --samples N     stop after N samples\n"                                                 \
	"  --duration S    stop after S seconds\n"

struct ta_record {
	const char *path;      /* NULL: not recording */
	double interval;       /* seconds between samples; 0 until set: 1 */
	unsigned long samples; /* 0: no limit */
	double duration;       /* seconds; 0: no limit */
	bool options_seen;     /* --interval, --samples or --duration given: they need --record */
};

/* Take one of the options above (code, optarg) into r; 0, or -1 after a message on stderr. */
int ta_record_option(struct ta_record *r, int code, const char *arg);

/* The segments as they are now: *segs points to n snapshots, valid until the next call. */
typedef unsigned ta_record_collect(void *arg, const struct ta_prom_segment **segs);

/* Record until a signal (SIGINT, SIGTERM), the sample count or the duration; the exit status: 0,
 * 1 when a write failed, 2 when FILE could not be opened or holds something else. */
int ta_record_run(const struct ta_record *r, ta_record_collect *collect, void *arg);

#endif /* TA_RECORD_H */
