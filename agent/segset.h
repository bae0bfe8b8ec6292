/* SPDX-License-Identifier: MIT */
/*
 * The set of segments the agent keeps, as the files that work on it share it: segments.c finds
 * and keeps them, trust.c tells whether their processes live and which cgroup they are in,
 * publish.c writes the kernel's migrations into them, lender.c runs the lending rounds,
 * snapshot.c reads them for the metrics and the queries. Nothing outside those files sees these
 * structures: the rest of the agent uses agent.h.
 */
#ifndef TA_AGENT_SEGSET_H
#define TA_AGENT_SEGSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "agent.h"
#include "quota/shm.h"

#define MAX_TIER_SIZE  512 /* larger tier records are refused (publish reads them on the stack) */
#define SLOTS_READ_MAX 65536
#define BUCKETS	       4096

/* What the kernel says of a segment's cgroup (seg_verify()). */
enum cg_state {
	CG_UNKNOWN = 0, /* no live process of its owner maps it (yet): nothing to ask the kernel */
	CG_OK,		/* its header names the cgroup its processes are in */
	CG_FORGED,	/* its header names another cgroup: ignored by the policies */
	CG_NONE,	/* its header names none (cgroup v1), or the kernel shows no cgroup v2 */
};

/* The /proc of another mount namespace's processes, shared by the segments found there: walked
 * from its root without links, on procfs, and showing the pid namespace of the process it was
 * reached through. */
struct nsproc {
	struct nsproc *next;
	int via; /* the pid (ours) its root was reached through */
	int fd;
	unsigned refs;
};

/* A file's identity and version: a refused one is looked at again when any of it changes. */
struct file_id {
	dev_t dev;
	ino_t ino;
	uid_t owner;
	off_t size;
	struct timespec mtime, ctime;
};

struct segment {
	struct segment *next;
	int fd;
	struct file_id id;
	const char *map; /* PROT_READ: addresses for FUTEX_WAKE only, never dereferenced */
	size_t size;
	char path[200];
	struct nsproc *ns; /* the /proc of its processes' pid namespace; NULL: the agent's own */
	bool seen;
	unsigned live_round; /* the rescan whose liveness check live holds, 0: none */
	bool live;
	/* Taken from the header once, when it validated. */
	uint64_t cgroup_id;
	unsigned ntiers;
	uint64_t nodes[TA_SHM_MAX_TIERS];
	uint32_t tiers_off, tier_size, slots_off, slot_size, max_slots, agent_off;
	/* What the agent wrote last (any write: for the alarm), and at its last periodic write
	 * (for the rates, which an alert's write in between would make noisy). */
	bool have_prev;
	uint64_t prev[TA_SHM_MAX_TIERS][TA_AGENT_NKINDS];
	uint64_t rate_base[TA_SHM_MAX_TIERS][TA_AGENT_NKINDS];
	uint64_t rate_base_ns;
	uint64_t rate[TA_SHM_MAX_TIERS][TA_AGENT_NKINDS];
	uint64_t seq, alarm;
	/* Lending (--lend): the block's offset (0: none), what this agent lent last, the
	 * steered_away counts it last saw, and when a take-back began for it as an owner. */
	uint32_t lend_off;
	bool lend_seen;
	bool yields; /* its processes honour a yield (ABI minor 6) */
	uint64_t loan[TA_SHM_MAX_TIERS], lent[TA_SHM_MAX_TIERS], yielded[TA_SHM_MAX_TIERS];
	uint64_t steered[TA_SHM_MAX_TIERS];
	uint64_t borrowed[TA_SHM_MAX_TIERS], taken_back[TA_SHM_MAX_TIERS];
	uint64_t take_backs[TA_SHM_MAX_TIERS], take_back_ns[TA_SHM_MAX_TIERS];
	uint64_t take_back_since[TA_SHM_MAX_TIERS];
	/* As an owner: its usage while it lent (the lowest since it began), and while it holds its
	 * share back, until when and the usage that last extended the hold. */
	uint64_t lend_base[TA_SHM_MAX_TIERS];
	uint64_t hold_until[TA_SHM_MAX_TIERS], hold_used[TA_SHM_MAX_TIERS];
	char cgroup_path[TA_SHM_PATH_MAX + 1]; /* from the header when it was kept */
	/* The cgroup its live, attached processes are in, as the kernel says (seg_verify()): what
	 * the policies act on, rank and lend to. The header's cgroup is only checked against it. */
	enum cg_state cg_state;
	unsigned verified_round;
	char cg_path[TA_SHM_PATH_MAX + 1]; /* canonical, under the cgroup2 mount */
	uint64_t cg_id;			   /* its directory's inode */
	dev_t cg_dev;
	uint32_t cg_pid; /* the process that showed it, and its start time */
	uint64_t cg_start;
	char cg_said[TA_SHM_PATH_MAX + 64]; /* the last refusal said (one line per change) */
};

/* A file that was opened and not kept. */
struct refused {
	struct refused *next;
	struct file_id id;
	unsigned until; /* looked at again from this rescan on */
	bool seen;
};

/* Per owner: segments kept, files opened this rescan. */
struct owner {
	struct owner *next;
	uid_t uid;
	unsigned kept, opened;
};

struct ta_agent_segments {
	const char *const *dirs;
	bool scan_proc;
	struct segment *list;
	uint64_t started_ns;
	struct ta_agent_limits limits;
	unsigned round, nkept, nrefused;
	struct ta_agent_scan_stats cur, last;
	struct refused *refused[BUCKETS];
	struct owner *owners[BUCKETS];
	const char *node_dir; /* where the nodes' meminfo is: /sys/devices/system/node */
	struct ta_agent_lend_stats lend;
	/* The agent's own /proc (for the segments of its own namespace) and the cgroup2 mount
	 * ("": none), which the tests replace with fixtures. */
	char proc_dir[256];
	char cg_mount[256];
	struct nsproc *nsprocs;
	struct nsproc no_proc; /* another namespace's, when none could be trusted: fd -1 */
};

static inline uint64_t seg_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* segments.c: read len bytes at off into buf, counted. */
bool seg_read_at(struct ta_agent_segments *set, int fd, void *buf, size_t len, uint64_t off);

/* trust.c: liveness and the cgroup, as the kernel says. */
bool seg_proc_stat(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
		   uint64_t *start, uid_t *uid);
bool seg_slots_live(struct ta_agent_segments *set, int fd, const struct file_id *id,
		    const struct nsproc *ns, uint32_t slots_off, uint32_t slot_size,
		    uint32_t nslots);
bool seg_live(struct ta_agent_segments *set, struct segment *s);
void seg_cg_mount_find(char *out, size_t len);
void seg_verify(struct ta_agent_segments *set, struct segment *s, bool opening);

/* publish.c: bump each live process's wake word and wake its worker. */
void seg_wake_workers(struct segment *s);

#endif
