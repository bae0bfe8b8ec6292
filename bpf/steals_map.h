/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the reclaim-watching BPF program (steals.bpf.c) and the agent (agent/steals.c) share.
 * Fixed-width types only; the BPF side gets them from vmlinux.h, the agent from <linux/types.h>.
 */
#ifndef TA_STEALS_MAP_H
#define TA_STEALS_MAP_H

#define TA_STEALS_MAX_WATCHED 64	 /* cgroups watched at once (tierallocd --protect: 8) */
#define TA_STEALS_ALERT_NS    1000000ull /* at most one alert per cgroup per millisecond */

/* Per watched cgroup (the map's value, its key the cgroup v2 id): what reclaim took from its own
 * LRU lists, as the kernel's scan_control counted it. */
struct ta_steals_count {
	__u64 pages;  /* pages reclaimed from the cgroup's lruvecs */
	__u64 passes; /* shrink_lruvec() calls that reclaimed any */
};

#endif /* TA_STEALS_MAP_H */
