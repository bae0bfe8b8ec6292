/* SPDX-License-Identifier: MIT */
/*
 * Where tieralloc-stat finds segments, and whether their processes live (stat_scan.c): the
 * /dev/shm of every mount namespace the caller may read, each file once, and a slot's process
 * checked by pid and start time in the /proc of the segment's own namespace.
 */
#ifndef TA_STAT_SCAN_H
#define TA_STAT_SCAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A /dev/shm directory and the /proc that shows its processes. */
struct ta_place {
	int dirfd;     /* the directory, open (O_PATH is not enough for openat of files) */
	char dir[64];  /* "/dev/shm", or "/proc/<pid>/root/dev/shm" */
	char proc[64]; /* "/proc", "/proc/<pid>/root/proc", or "" when none could be trusted */
	int via_pid;   /* 0: our own mount namespace; else the pid it was seen through */
};

/* Called for each regular file of a segment's possible size, once per (st_dev, st_ino). */
typedef void ta_scan_fn(const struct ta_place *p, const char *name, void *ctx);

/* Our own dir first, then the /dev/shm of every other mount namespace (through
 * /proc/<pid>/root); what cannot be read (permissions, a process that ended) is skipped. */
void ta_scan(const char *own_dir, ta_scan_fn *fn, void *ctx);

/* Whether the slot's process lives: false only when <proc>/<pid> is missing, a zombie, or a
 * process with another start time (the pid was reused); true when it cannot be told (no proc,
 * unreadable), so that nothing is called dead on a guess. */
bool ta_slot_alive(const char *proc, uint32_t pid, uint64_t start_time);

/* Whether a process whose maps this caller may read maps the file (dev, ino). */
bool ta_file_mapped(dev_t dev, ino_t ino);

#endif /* TA_STAT_SCAN_H */
