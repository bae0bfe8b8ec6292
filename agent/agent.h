/* SPDX-License-Identifier: MIT */
/*
 * The agent's parts: what it read from the BPF map (tierallocd.c), how it sums that per tier of
 * a cgroup's segment and when it raises the alarm (tally.c, pure), and the segments it finds and
 * writes (segments.c, trust.c, publish.c, lender.c, snapshot.c: segset.h says which does what),
 * with the lending policy they run. The other parts have headers of their own: reclaim.h,
 * protector.h, lease.h, cgctl.h, damon.h, metrics.h, migcount.h, steals.h, options.h.
 */
#ifndef TA_AGENT_H
#define TA_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- lend.c: the lending policy (--lend), pure ---- */
#define TA_LEND_MAX 1024 /* cgroups sharing a tier in one plan (the agent keeps at most 1024) */
struct ta_lend_cg {
	/* In: one cgroup's figures for the tier. */
	uint64_t share;	      /* its high share of the tier */
	uint64_t used;	      /* bytes it has on the tier (the larger of observed and charged) */
	uint64_t below;	      /* bytes it charged to slower tiers: what it could place here */
	uint64_t loan_before; /* the loan it holds now */
	uint32_t priority;    /* TIERALLOC_PRIORITY, higher first */
	bool wants;	      /* it was steered away from the tier since the last round */
	bool live;	      /* a process of it is alive */
	bool holds;	      /* it asked for its share back lately: it lends nothing */
	bool can_yield;	      /* its processes honour a yield (segment ABI minor 6) */
	uint64_t floor;	      /* its low (or min) share of the tier: a yield stops there */
	/* Out. */
	uint64_t loan;	  /* what it borrows this round */
	uint64_t lent;	  /* what of its idle share is lent to others */
	uint64_t yielded; /* what of its share it gives to a higher priority (TA_LEND_YIELD) */
};
enum {
	TA_LEND_IDLE = 1u << 0,	 /* idle shares are lent (--lend) */
	TA_LEND_YIELD = 1u << 1, /* lower priorities yield used share (--reclaim-for-priority) */
};
/* The loans of one round for n cgroups sharing a tier whose nodes have free_bytes free; each
 * lender keeps reserve bytes of its idle share for its own growth. flags: TA_LEND_*. */
void ta_lend_plan(struct ta_lend_cg *cg, unsigned n, uint64_t free_bytes, uint64_t reserve,
		  unsigned flags);

/* A cgroup's priority for the policies: the operator's (--priority) when it names the cgroup,
 * whatever the cgroup declares; else what its segment declares (TIERALLOC_PRIORITY: a value
 * above TA_SHM_LEND_PRIORITY_MAX is none, 0), never above the operator's ceiling for declared
 * priorities (--priority-ceiling). */
uint32_t ta_agent_priority_of(bool have_operator, uint32_t operator_priority, uint32_t declared,
			      uint32_t ceiling);
/* The ceiling's default: a container ranks itself above nobody unless the operator says so. */
#define TA_AGENT_PRIORITY_CEILING_DEFAULT 0u
struct ta_agent_priority;
/* What lending and reclaim rank cgroups by: the operator's priorities by cgroup path
 * (--priority), which override what a container declares for itself with TIERALLOC_PRIORITY,
 * and the most a container may declare (--priority-ceiling; ta_agent_priority_of). */
struct ta_agent_priorities {
	const struct ta_agent_priority *list;
	unsigned n;
	uint32_t ceiling;
};

/* ---- the segment set (segments.c and the files of segset.h) ---- */
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
/* The known segments in Prometheus' text format (common/prom.c), read now (each segment's header,
 * tiers, slots and access block, and the /proc entry of each process in its slots), and the
 * number of segments kept: 0, or -1 on a write error or without memory. */
int ta_agent_segments_metrics(struct ta_agent_segments *set, FILE *f);
/* Lending (--lend): each call is one round over the known segments that have a lending block.
 * Per tier (the last excepted) and set of nodes, the cgroups' figures go through ta_lend_plan
 * (lend.c); the loans are written with an expiry the next round renews, and a cgroup whose loan
 * was cut has its alarm raised and its workers woken, so that it demotes the excess at once. */
#define TA_AGENT_MAX_PRIORITIES 64
struct ta_agent_priority {
	const char *cgroup; /* a cgroup's path, canonical ("/sys/fs/cgroup/...", no "//", "." or
			     * "..", no trailing "/") */
	uint32_t priority;
};
/* The operator's entry for the cgroup at path (canonical, as the kernel gives it) whose
 * directory is (dev, id): the first that names the same path once canonical, or a directory with
 * the same device and inode (another spelling, another mount). Its index, or -1. */
int ta_agent_priority_find(const struct ta_agent_priority *p, unsigned n, const char *path,
			   uint64_t id, uint64_t dev);
struct ta_agent_lend_config {
	uint64_t reserve;   /* bytes of an idle share kept for its owner's growth */
	uint64_t expiry_ns; /* how long a round's loans hold without the next */
	/* An owner that asks for its share back (its usage grew past what it held while lending,
	 * by an eighth of the reserve, 4 MiB at least) lends nothing until its usage has not grown
	 * for this long: the whole share at once, not loan by loan as it grows. */
	uint64_t hold_ns;
	struct ta_agent_priorities priorities;
	unsigned flags; /* TA_LEND_* */
};
struct ta_agent_lend_stats {
	uint64_t lent_now;	   /* bytes lent at the last round */
	uint64_t granted;	   /* loan increases, bytes */
	uint64_t taken_back;	   /* loan decreases, bytes */
	uint64_t take_backs;	   /* take-backs completed */
	uint64_t take_back_ns_sum; /* their durations */
	uint64_t take_back_ns_max;
	uint64_t take_back_ns_last;
	uint64_t yielded_now; /* bytes yielded to higher priorities at the last round */
	uint64_t yields;      /* yield increases, bytes */
};
/* Lending's timing for rounds of interval_ms, the rest zero: a round's loans hold four intervals
 * (2 s at least), so that they outlive a late round but not a dead agent; an owner that asked
 * keeps its share 20 intervals (5 s at least) after its usage last grew, so that a burst of
 * growth is one take-back, not one per round. */
void ta_agent_lend_tune(struct ta_agent_lend_config *cfg, uint32_t interval_ms);
void ta_agent_segments_lend(struct ta_agent_segments *set, const struct ta_agent_lend_config *cfg,
			    bool verbose);
struct ta_agent_policy;
/* Lending as a policy (policy.h): a round of ta_agent_segments_lend per interval. Its figures
 * are among the segments' metrics (tieralloc_agent_lent_bytes and the rest); it has no status
 * lines, and its stop undoes nothing: the loans lapse at their expiry. 0, or -1 without memory. */
int ta_lender_start(const struct ta_agent_lend_config *cfg, bool verbose,
		    struct ta_agent_policy *out);
void ta_agent_segments_lend_stats(const struct ta_agent_segments *set,
				  struct ta_agent_lend_stats *out);
/* Where the nodes' meminfo files are (tests): /sys/devices/system/node by default. */
void ta_agent_segments_set_node_dir(struct ta_agent_segments *set, const char *dir);
/* Where the agent's own /proc is and where cgroup2 is mounted ("": nowhere), for the segments of
 * its own /dev/shm (tests: fixtures): /proc and the mount /proc/self/mountinfo shows by
 * default. Before the first rescan. */
void ta_agent_segments_set_proc(struct ta_agent_segments *set, const char *proc_dir,
				const char *cg_mount);
/* The cgroups of the known segments (with two tiers or more), for the reclaim policy: at most
 * max. Only a segment whose live, attached processes are in the cgroup its header names (their
 * /proc/PID/cgroup, checked every rescan), and the path and id are the kernel's, not the
 * header's. */
struct ta_agent_cgroup {
	char path[TA_SHM_PATH_MAX + 1]; /* canonical, under the cgroup2 mount */
	uint64_t cgroup_id;		/* its directory's inode */
	uint64_t dev;			/* and device */
	bool have_priority;		/* a lending block: TIERALLOC_PRIORITY */
	uint32_t priority;
	uint64_t steered; /* the fast tier's steered_away (times) */
};
unsigned ta_agent_segments_cgroups(struct ta_agent_segments *set, struct ta_agent_cgroup *out,
				   unsigned max);
/* Whether a known segment belongs to this cgroup. */
bool ta_agent_segments_has(const struct ta_agent_segments *set, uint64_t cgroup_id);
void ta_agent_segments_free(struct ta_agent_segments *set);

/* A live tieralloc process of a kept segment, in the agent's own pid namespace. */
struct ta_agent_proc {
	uint32_t pid;
	uint32_t uid;
	uint64_t start_time; /* /proc/<pid>/stat field 22 */
};
/* The live processes in the slots of the segments found in the agent's own /dev/shm (their
 * pids are the agent's), of the segment's owner (any, for root's segments): at most max, each
 * once. */
unsigned ta_agent_segments_procs(struct ta_agent_segments *set, struct ta_agent_proc *out,
				 unsigned max);

#endif /* TA_AGENT_H */
