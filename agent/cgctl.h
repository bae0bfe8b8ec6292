/* SPDX-License-Identifier: MIT */
/*
 * Other cgroups' memory control files, for the agent's policies: the agent's one way to them.
 * Read and written through libcgroup (cgctl.c), or by path and descriptor with plain system
 * calls where libcgroup cannot serve (cgfile.c), parsed from their text (cgstat.c, pure); what
 * a policy changes is leased (lease.h). cgroup v2 first; v1 where it has an equivalent. The
 * allocator never uses this (it cannot link libcgroup: it allocates).
 */
#ifndef TA_CGCTL_H
#define TA_CGCTL_H

#include <stddef.h>
#include <stdint.h>

/* ---- cgstat.c: pure ---- */
/* A file holding one number, or "max" (UINT64_MAX): 0, or -1. */
int ta_cgstat_value(const char *text, uint64_t *out);
/* The value of the "KEY VALUE" line (memory.stat, memory.events): 0, or -1 without one. */
int ta_cgstat_key(const char *text, const char *key, uint64_t *out);
/* total= of the KIND ("some" or "full") line of a PSI file (memory.pressure): 0, or -1. */
int ta_cgstat_psi_total(const char *text, const char *kind, uint64_t *out);

/* ---- cgfile.c: plain system calls, no allocation (the lease keeper uses them) ---- */
/* DIR/FILE opened with flags (O_CLOEXEC added): a descriptor, or -1 with errno. */
int ta_cgfile_open(const char *dir, const char *file, int flags);
/* The one value a descriptor's file holds (a number, or "max": UINT64_MAX): 0, or -1. */
int ta_cgfile_get(int fd, uint64_t *v);
/* v ("max" for UINT64_MAX) written over the file: 0, or -1 with errno. */
int ta_cgfile_set(int fd, uint64_t v);
/* DIR/FILE into buf (len >= 2), cut at len - 1: its length, or -1 with errno. */
int ta_cgfile_read(const char *dir, const char *file, char *buf, size_t len);
/* DIR/FILE's one value: 0, or -1. */
int ta_cgfile_value(const char *dir, const char *file, uint64_t *v);

/* ---- cgctl.c: libcgroup ---- */
/* What a sample could read: the figures the hierarchy has. */
enum {
	TA_CG_HAVE_CURRENT = 1u << 0,
	TA_CG_HAVE_LOW = 1u << 1, /* v2 memory.low and memory.min; v1: the soft limit */
	TA_CG_HAVE_PSI = 1u << 2, /* v2 only: v1 has no per-cgroup PSI */
	TA_CG_HAVE_EVENTS = 1u << 3,
	TA_CG_HAVE_REFAULTS = 1u << 4,
};
/* cgroup_init() and where the memory controller is: 0, or -1 with a line in err. */
int ta_cgctl_init(char *err, size_t errlen);
/* 2 or 1: the memory controller's hierarchy (after ta_cgctl_init). */
int ta_cgctl_version(void);
/* Its mount point ("/sys/fs/cgroup" on v2, "/sys/fs/cgroup/memory" on v1). */
const char *ta_cgctl_mount(void);
/* A control file of the cgroup at PATH (absolute, under the mount, or relative to it) into buf,
 * whole or cut at len - 1: its length, or -1 with errno (EINVAL: not under the mount). */
int ta_cgctl_read(const char *path, const char *file, char *buf, size_t len);
/* VALUE written into a control file: 0, or -1 with errno as the write left it. */
int ta_cgctl_write(const char *path, const char *file, const char *value);
struct ta_press_sample;
/* The figures of the reclaim policy: a TA_CG_HAVE_* mask (0: the cgroup is gone). v1:
 * memory.usage_in_bytes, the soft limit as the floor, memory.failcnt as events. */
unsigned ta_cgctl_sample(const char *path, struct ta_press_sample *s);
/* memory.reclaim of BYTES: 0, or -1 with errno (EAGAIN: less was reclaimed; EOPNOTSUPP: v1,
 * which has no proactive reclaim short of memory.force_empty, or a kernel before 5.19). */
int ta_cgctl_reclaim(const char *path, uint64_t bytes);

#endif /* TA_CGCTL_H */
