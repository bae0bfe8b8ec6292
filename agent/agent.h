/* SPDX-License-Identifier: MIT */
/*
 * The agent's parts: what it read from the BPF map (tierallocd.c), how it sums that per tier of
 * a cgroup's segment and when it raises the alarm (tally.c, pure), and the segments it finds and
 * writes (segments.c).
 */
#ifndef TA_AGENT_H
#define TA_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tieralloc/shm_abi.h"

/* One entry of the BPF map: pages migrated for a cgroup, to a node, for a reason. */
struct ta_agent_count {
	uint64_t cgroup_id;
	int32_t node;	 /* -1: unknown */
	uint16_t reason; /* enum ta_bpf_reason */
	uint16_t flags;	 /* enum ta_bpf_node_flags */
	uint64_t pages;
};

enum { TA_AGENT_PROMOTED = 0, TA_AGENT_DEMOTED = 1, TA_AGENT_MOVED = 2, TA_AGENT_NKINDS = 3 };

/* Pages per destination tier and kind for one cgroup: out[t][kind]. nodes[t] is tier t's node
 * mask (from the segment). A destination taken from the migrating CPU's node counts only for
 * promotions, the one kind that migrates on the destination's CPU. */
void ta_agent_tally(const struct ta_agent_count *counts, size_t n, uint64_t cgroup_id,
		    const uint64_t *nodes, unsigned ntiers, uint64_t out[][TA_AGENT_NKINDS]);

/* The alarm's rule: pages were promoted into the tier (promoted_bytes > 0) while its gate is shut
 * or its usage (observed, plus what was just promoted) is within half a gate margin of its high
 * share. */
bool ta_agent_alarm(uint64_t promoted_bytes, uint64_t observed, uint64_t high, bool gated);

/* ---- segments.c ---- */
/*
 * What a rescan may cost, and what the agent keeps. The segments are their users' files, so any
 * user could otherwise make the agent (root) open and read without end, or hold a descriptor for
 * each of their files until it has none left for a real container's segment.
 */
struct ta_agent_limits {
	unsigned max_segments;	/* kept at once: each holds a descriptor and a mapping */
	unsigned max_per_uid;	/* kept at once, of one owner other than root */
	unsigned opens_per_uid; /* files opened per rescan, of one owner other than root */
	unsigned opens_per_dir; /* files opened per rescan and directory, owners other than root */
	unsigned retry_rescans; /* a refused file is looked at again after this many rescans */
	unsigned max_refused;	/* refused files remembered (a file changed is looked at again) */
};
extern const struct ta_agent_limits ta_agent_default_limits;

/* What a file costs at most to be looked at: its header, tier records and agent block, and,
 * when a limit is reached, its slots (the pids whose liveness decides which segment is kept). */
#define TA_AGENT_READ_MAX (4096 + 65536)

/* The work of the last rescan. */
struct ta_agent_scan_stats {
	unsigned entries; /* directory entries named tieralloc-*: one fstatat each, nothing more */
	unsigned opened;  /* files opened for reading (never one in the refused list) */
	unsigned
	    deferred; /* left for a later rescan: their owner's or directory's opens were spent */
	unsigned refused; /* opened and not kept (invalid, or a limit reached), and remembered */
	unsigned
	    evicted; /* kept segments dropped for a better one (root's, or with live processes) */
	uint64_t bytes_read;
	unsigned kept; /* segments kept after the rescan */
};

struct ta_agent_segments;
struct ta_agent_segments *ta_agent_segments_new(const char *const *dirs, bool scan_proc);
/* Replace the default limits (before the first rescan). */
void ta_agent_segments_set_limits(struct ta_agent_segments *set, const struct ta_agent_limits *l);
void ta_agent_segments_stats(const struct ta_agent_segments *set, struct ta_agent_scan_stats *out);
/* Find segments not yet known, drop those gone. */
void ta_agent_segments_rescan(struct ta_agent_segments *set, bool verbose);
/* Write the counts into the known segments, raise alarms; returns the number written. only:
 * just the segments of these cgroups (an alert: the rates are left as they were), or NULL: all
 * (the periodic write). */
unsigned ta_agent_segments_publish(struct ta_agent_segments *set,
				   const struct ta_agent_count *counts, size_t n,
				   const uint64_t *only, size_t nonly, uint32_t flags,
				   uint32_t interval_ms, bool verbose);
/* Whether a known segment belongs to this cgroup. */
bool ta_agent_segments_has(const struct ta_agent_segments *set, uint64_t cgroup_id);
void ta_agent_segments_free(struct ta_agent_segments *set);

#endif /* TA_AGENT_H */
