/* SPDX-License-Identifier: MIT */
/*
 * The kernel's page migrations, counted per cgroup, reason and destination node by
 * bpf/migrations.bpf.c: loading it, reading its counts, and its promotion alerts (a ring buffer
 * that names the cgroups whose promotions just crossed the program's threshold).
 */
#ifndef TA_MIGCOUNT_H
#define TA_MIGCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"

struct ta_migcount;

/* Load and attach the programs (kernel BTF at btf), with the kprobe that gives exact destination
 * nodes when this kernel can attach there: NULL with errno set when they cannot load. warn
 * receives a line when the alerts are not available (else ""): the counts still are. */
struct ta_migcount *ta_migcount_open(const char *btf, char *warn, size_t warnlen);
/* Whether the destinations come from migrate_pages()'s arguments (else the migrating CPU's node).
 */
bool ta_migcount_exact(const struct ta_migcount *m);
/* The whole map, into counts (at most TA_BPF_MAX_KEYS entries): how many. */
size_t ta_migcount_read(struct ta_migcount *m, struct ta_agent_count *counts);
/* Readable (poll: POLLIN) when alerts wait; -1 without alerts. */
int ta_migcount_alerts_fd(const struct ta_migcount *m);
/* Take the waiting alerts: the cgroup ids they name, each once, at most max. */
size_t ta_migcount_alerts(struct ta_migcount *m, uint64_t *ids, size_t max);
/* One line per count on stdout (--print), then their number. */
void ta_migcount_print(const struct ta_agent_count *counts, size_t n);
/* BPF's own accounting of the programs' cost (--stats: the caller enabled the statistics). */
void ta_migcount_print_stats(struct ta_migcount *m);
/* Detach and free; NULL: nothing. */
void ta_migcount_close(struct ta_migcount *m);

#endif
