/* SPDX-License-Identifier: MIT */
/*
 * The agent's parts: what it read from the BPF map (tierallocd.c), how it sums that per tier of
 * a cgroup's segment and when it raises the alarm (tally.c, pure), and the segments it finds and
 * writes (segments.c, trust.c, publish.c, lender.c, snapshot.c: segset.h says which does what).
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

/* ---- pressure.c: reclaim for priority (--reclaim-for-priority, seed 001), pure ---- */
#define TA_PRESS_MAX	     256	   /* cgroups in one plan */
#define TA_PRESS_CAP_MARGIN  (16ull << 20) /* a cap's distance above a floor (pressure.c) */
#define TA_PRESS_CAP_DESCENT (4ull << 20)  /* a cap lowered at most this much a write */
/* What one cgroup's control files said at one round; cumulative counters except current, low
 * and min. */
struct ta_press_sample {
	uint64_t current;  /* memory.current */
	uint64_t low, min; /* memory.low, memory.min: the floor reclaim never goes below */
	uint64_t high;	   /* memory.high (UINT64_MAX: max) */
	uint64_t psi_us;   /* memory.pressure "some" total, microseconds stalled */
	uint64_t events;   /* memory.events high + max */
	uint64_t refaults; /* memory.stat workingset_refault_anon + _file, pages */
	uint64_t steered;  /* times its segment steered away from the fast tier (0 without one) */
};
enum {
	TA_PRESS_PSI = 1u << 0,	    /* stalled at least psi_us this round */
	TA_PRESS_EVENTS = 1u << 1,  /* hit memory.high or memory.max */
	TA_PRESS_REFAULT = 1u << 2, /* refaulted at least `refaults` pages */
	TA_PRESS_STEERED = 1u << 3, /* its allocations were steered below the fast tier */
	TA_PRESS_LINGER = 1u << 4,  /* none of those now, but one within the last `hold` rounds */
	TA_PRESS_GROWING =
	    1u << 5, /* growing into its parent's limit: full within `ahead` rounds */
};
struct ta_press_cg {
	/* In. */
	uint32_t group;	   /* siblings (children of one parent) share a group */
	uint32_t priority; /* higher first */
	bool have_prev;	   /* prev holds the last round's sample */
	uint64_t room;	   /* its parent's limit (memory.max, memory.high) less its usage;
			    * UINT64_MAX: none or unknown */
	unsigned calm;	   /* in and out: rounds since it was last pressured (0: this one) */
	struct ta_press_sample prev, now;
	uint64_t cap;	    /* the memory.high the agent holds it at (UINT64_MAX: none) */
	uint64_t high_orig; /* its memory.high before the agent's cap (UINT64_MAX: max) */
	/* Out. */
	unsigned why;	  /* TA_PRESS_* when it is pressured, 0 otherwise */
	uint64_t reclaim; /* bytes to take from it this round */
	int for_whom;	  /* the pressured cgroup it is reclaimed for (index), -1: none */
	uint64_t cap_to;  /* the cap from now on: == cap unchanged, UINT64_MAX: lift it */
};
struct ta_press_config {
	uint64_t psi_us;   /* stall per round that counts as pressure */
	uint64_t refaults; /* refaulted pages per round that count as pressure */
	uint64_t step;	   /* bytes reclaimed at most per round and pressured group */
	unsigned hold;	   /* rounds a cgroup stays pressured after its last signal */
	/* Ahead of pressure: a cgroup that grew at least grow_min bytes this round, at a pace that
	 * fills its parent's room within `ahead` rounds, is pressured (0: off). */
	uint64_t grow_min;
	unsigned ahead;
	/* Caps: a cgroup reclaimed is held at memory.high = its usage less what it gives, so that
	 * it cannot fault back at once what it gave; the cap rises again as the parent has room
	 * beyond a step, once no higher priority of its group is pressured. */
	bool cap;
};
/* One round: which cgroups are pressured, and how much to reclaim of which lower-priority
 * siblings: within each group, for its highest-priority pressured cgroup, at most step bytes,
 * lowest priority first (then the one with the most above its floor), none below
 * max(low, min); with caps, what each cap becomes. Returns the number of cgroups to reclaim
 * from. */
unsigned ta_press_plan(struct ta_press_cg *cg, unsigned n, const struct ta_press_config *cfg);
/* The memory.high to write next on the way to cap, the value in force being held and the
 * cgroup's usage usage: cap itself once it is within TA_PRESS_CAP_DESCENT below the lesser of
 * the two (or above them), otherwise that lesser less TA_PRESS_CAP_DESCENT (pressure.c). */
uint64_t ta_press_cap_next(uint64_t held, uint64_t usage, uint64_t cap);

/* ---- reclaim.c: --reclaim-for-priority, the agent's side ---- */
struct ta_reclaim_config {
	uint64_t step;	   /* bytes reclaimed at most per round and pressured parent */
	uint64_t psi_us;   /* PSI "some" stall per round that counts as pressure */
	uint64_t refaults; /* refaulted pages per round that count as pressure */
	unsigned hold;	   /* rounds a cgroup stays pressured after its last signal */
	uint64_t grow_min; /* ahead of pressure (ta_press_config): 0 for off */
	unsigned ahead;
	uint64_t interval_ns; /* a round's length: a memory.high write is cut short after one */
	struct ta_agent_priorities priorities;
};
/* The policy's timing for rounds of interval_ms, the rest zero: pressure is a stall of 1% of the
 * interval or 1 MiB refaulted, and holds a second (two rounds at least) after the last; ahead of
 * it, growth of 1 MiB a round or more that would fill the parent within half a second (two rounds
 * at least). */
void ta_reclaim_tune(struct ta_reclaim_config *cfg, uint32_t interval_ms);
/* How long a cap outlives the agent's last round: eight intervals, 2 s at least. */
uint64_t ta_reclaim_expiry_ns(uint32_t interval_ms);
struct ta_lease;
struct ta_agent_policy;
struct ta_reclaim_options {
	struct ta_reclaim_config cfg; /* every round's */
	bool cap;		/* hold victims at memory.high (pressure.c), leased (lease.h) */
	uint64_t expiry_ns;	/* a cap not renewed for this long is restored by the keeper */
	struct ta_lease *lease; /* the agent's; NULL: no caps */
};
/* libcgroup started and the policy in *out (policy.h): 0, or -1 with a line in err. Caps need
 * cgroup v2 and the lease keeper; without them the policy goes on with memory.reclaim alone,
 * and says so. Its round samples, decides (ta_press_plan), writes memory.reclaim and the caps,
 * and says so; its status is a line per cgroup it knows (priority, why it is pressured now, the
 * counters, the seconds since it was last asked to give memory and the priority it gave for);
 * its stop lifts every cap. */
int ta_reclaim_start(const struct ta_reclaim_options *o, struct ta_agent_policy *out, char *err,
		     size_t errlen);

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

/* ---- damon.c: --access damon ---- */
#define TA_DAMON_MAX_PROCS 64
struct ta_damon;
struct ta_damon_stats {
	uint64_t files_written;
	unsigned regions; /* in the last file */
};
/* Takes DAMON's sysfs interface (admin: /sys/kernel/mm/damon/admin) and starts the thread that
 * keeps one kdamond per process and rewrites its access file in shm every aggregation (5 s; less
 * often when that would take more than 1% of a core). NULL with a line in err when the kernel has
 * none or another kdamond is on. */
struct ta_damon *ta_damon_start(const char *admin, const char *shm, bool verbose, char *err,
				size_t errlen);
/* The processes to monitor from now on. */
void ta_damon_set_procs(struct ta_damon *d, const struct ta_agent_proc *p, unsigned n);
void ta_damon_stats(struct ta_damon *d, struct ta_damon_stats *out);
/* Stops the kdamonds, removes the access files, ends the thread. */
void ta_damon_stop(struct ta_damon *d);
/* For the tests: a tried_regions directory's regions, sorted (max: out's room, max_accesses
 * caps their counts): their number, or -1 when they do not fit or overlap. */
struct ta_heatfile_region;
int ta_damon_regions(const char *dir, struct ta_heatfile_region *out, unsigned max,
		     uint32_t max_accesses);
/* How often each access file is rewritten, as the file says (stale after 3): the round's
 * period, or as many aggregations as there are processes, whichever is longer. */
uint64_t ta_damon_interval_ns(uint64_t period_ns, unsigned nrun, uint64_t aggr_us);
/* For the tests: write an access file for p into shm, whole (temporary name, rename). */
int ta_damon_write_file(const char *shm, const struct ta_agent_proc *p, const void *buf,
			size_t len);

/* ---- metrics.c ---- */
/* Writes the metrics' text to f: 0, or -1 when it could not (nothing is served then). */
typedef int ta_metrics_body(void *ctx, FILE *f);
struct pollfd;
struct ta_metrics_server;
/* Listen at "[ADDRESS:]PORT" (a numeric IPv4 address, or IPv6 in brackets; 127.0.0.1 when only a
 * port is given; port 0: any free one), a loopback address unless any. -1 with a line in err. */
int ta_metrics_listen(const char *spec, bool any, struct ta_metrics_server **out, char *err,
		      size_t errlen);
/* Whether ta_metrics_listen would take the address (it may still fail to bind): 0, or -1 with a
 * line in err. */
int ta_metrics_check(const char *spec, bool any, char *err, size_t errlen);
/* "ADDRESS:PORT" as bound. */
const char *ta_metrics_address(const struct ta_metrics_server *srv);
/* The descriptors to poll (the listening socket first, then the connections): at most max. */
unsigned ta_metrics_pollfds(struct ta_metrics_server *srv, struct pollfd *fds, unsigned max);
/* Milliseconds until a connection's deadline, -1 without connections. */
int ta_metrics_timeout_ms(const struct ta_metrics_server *srv, uint64_t now_ms);
/* Act on what poll() returned for the descriptors of the last ta_metrics_pollfds (n of them):
 * read, answer, accept, drop connections past their deadline. Never blocks. */
void ta_metrics_serve(struct ta_metrics_server *srv, const struct pollfd *fds, unsigned n,
		      uint64_t now_ms, ta_metrics_body *body, void *ctx);
void ta_metrics_free(struct ta_metrics_server *srv);
/* Write the text to PATH.tmp and rename it to PATH: readers see the old or the new file whole,
 * mode 0644 whatever the umask. 0, or -1 with errno. */
int ta_metrics_textfile(const char *path, ta_metrics_body *body, void *ctx);

#endif /* TA_AGENT_H */
