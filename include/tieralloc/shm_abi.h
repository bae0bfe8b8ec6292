/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory segment of one cgroup: every tieralloc process of the cgroup charges its
 * per-tier usage here, the CLI reads it, and the agent (tierallocd, root) writes the kernel's
 * migrations of the cgroup into it. This header is the single source of truth for the layout;
 * tests pin the sizes and offsets below.
 *
 * Rules:
 * - Only fixed-width integers and lock-free atomics; no pointers, bool, enum or implicit padding.
 *   No process-shared lock: a process killed while holding it would wedge the whole container.
 * - Name: "/tieralloc-v<MAJOR>-<key>-t<tiers>" in /dev/shm, key "cg<inode>" for a cgroup v2
 *   directory (the id BPF reports), "v1-<hash of the memory cgroup path>" on cgroup v1, "machine"
 *   without cgroups; <tiers> a hash of the tiers' node sets, so that processes that disagree on
 *   the tiers do not share quotas. TIERALLOC_SHM_NAME overrides it (shared by whoever names it).
 * - Mode 0600, owned by the creating user: a segment owned by anyone else is refused, and the
 *   process uses "<name>-u<euid>" instead (docs/security.md).
 * - The creator holds flock(LOCK_EX) on the file from its O_EXCL creation until it has filled the
 *   header and release-stored state = TA_SHM_READY; an attacher acquire-waits for it a bounded
 *   time. An unfinished file (empty, or INIT with no magic or this one) whose lock is free lost
 *   its creator: whoever takes the lock makes it. (The kernel drops the lock of a dead process.)
 *   Bad magic, major version, sizes or owner: local-only accounting and one warning.
 * - A minor version only appends fields (growing header_size or slot_size, or a block after the
 *   slots found through a header offset); readers use the smaller of their size and the
 *   segment's, and check a block's offset and size before using it. The library refuses a
 *   tier_size other than 192 (it indexes the records as an array): the tier record does not grow
 *   within major 1. A major version changes the name, so two layouts can live side by side.
 * - Readers copy the header once and use the copy: any process of the user may rewrite it.
 * - Every index read from the segment is bounds-checked against the reader's own maxima.
 */
#ifndef TIERALLOC_SHM_ABI_H
#define TIERALLOC_SHM_ABI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TA_SHM_MAGIC	 0x31306d6873726574ull /* "tershm01" little-endian */
#define TA_SHM_ABI_MAJOR 1
#define TA_SHM_ABI_MINOR 6
#define TA_SHM_MAX_TIERS 3
#define TA_SHM_MAX_SLOTS 256 /* processes of one cgroup attached at once */
#define TA_SHM_PATH_MAX	 256

enum { TA_SHM_INIT = 0, TA_SHM_READY = 1 };
#define TA_SHM_NOTICE_NO_RECLAIM 1ull /* memory.reclaim is not there (cgroup v1, old kernel) */

/* Limit kinds, in the order of the tier record's limit[] array. */
enum { TA_LIMIT_MIN = 0, TA_LIMIT_LOW = 1, TA_LIMIT_HIGH = 2, TA_LIMIT_MAX = 3, TA_NLIMITS = 4 };
#define TA_SHM_UNLIMITED UINT64_MAX

/* One per tier: the cgroup's limits split by the tier's share, and what was charged. */
struct ta_shm_tier {
	_Atomic uint64_t limit[TA_NLIMITS]; /* bytes; TA_SHM_UNLIMITED when none */
	_Atomic uint64_t charged;	    /* sum of the live slots' charges */
	_Atomic uint64_t peak;		    /* highest charge seen */
	_Atomic uint64_t observed;	    /* kernel's usage on the tier's nodes (numa_stat) */
	_Atomic uint64_t observed_at_ns;    /* CLOCK_REALTIME of that reading, 0: never */
	_Atomic uint64_t steered_away;	    /* a thread found the tier at high/max and moved on */
	_Atomic uint64_t overflowed;	    /* placed here although every tier was at max */
	_Atomic uint64_t exhausted;	    /* charges refused at max */
	_Atomic uint64_t reclaimed;	    /* charges taken back from dead processes */
	_Atomic uint64_t capacity;	    /* bytes: the tier's nodes' MemTotal */
	_Atomic uint64_t nodes;		    /* NUMA node mask of the tier */
	_Atomic uint32_t share_ppm;	    /* capacity / total capacity (or TIERALLOC_SPLIT) */
	uint32_t reserved0;
	char name[32];
	/* Minor 1: enforcement (src/enforce/enforce.c). */
	_Atomic uint64_t untracked;	/* observed - charged at the last reading, 0 if below */
	_Atomic uint64_t demoted;	/* bytes moved by mbind from this tier to a lower one */
	_Atomic uint64_t reclaim_asked; /* bytes written to memory.reclaim for this tier's excess */
	_Atomic uint64_t reclaims;	/* writes to memory.reclaim for this tier's excess */
	_Atomic uint64_t gated;		/* 1 while promotions into this tier are gated */
};

/* One per attached process. pid 0 = free, 0xffffffff = being taken back (a dead process's). */
struct ta_shm_slot {
	_Atomic uint32_t pid;
	uint32_t reserved0;
	_Atomic uint64_t start_time; /* /proc/<pid>/stat field 22: tells a reused pid apart */
	_Atomic uint64_t charged[TA_SHM_MAX_TIERS];
	/* Minor 2: the process's enforcement worker sleeps on this word (a shared futex), so that
	 * the agent can wake it; bumped before every wake. */
	_Atomic uint32_t wake;
	uint32_t reserved0b;
	uint64_t reserved[2];
};

/* Minor 2: what the agent (tierallocd, root) saw the kernel migrate for this cgroup, per
 * destination tier, as pages since the agent started counting (started_ns). */
struct ta_shm_agent_tier {
	_Atomic uint64_t promoted;	/* by NUMA balancing (MR_NUMA_MISPLACED) */
	_Atomic uint64_t demoted;	/* by reclaim (MR_DEMOTION) */
	_Atomic uint64_t moved;		/* by mbind(2) or move_pages(2) */
	_Atomic uint64_t promoted_rate; /* pages per second over the agent's last interval */
	_Atomic uint64_t demoted_rate;
	_Atomic uint64_t moved_rate;
	uint64_t reserved[2];
};

#define TA_SHM_AGENT_EXACT_NODES  1u /* destinations from migrate_pages()'s arguments */
#define TA_SHM_AGENT_NO_CGROUP_ID 2u /* no cgroup v2 id in the segment: nothing attributable */

struct ta_shm_agent {
	_Atomic uint64_t written_ns; /* CLOCK_REALTIME of the agent's last write; 0: never */
	_Atomic uint64_t started_ns; /* CLOCK_REALTIME the counts start from (a restart resets) */
	_Atomic uint64_t seq;	     /* bumped after each write */
	/* Bumped by the agent when pages were promoted into a tier at its share (gate shut, or
	 * within half a gate margin of its high share): the cgroup's workers wake, one of them
	 * reads the cgroup's usage at once (moving alarm_taken to alarm), and all act on it. */
	_Atomic uint64_t alarm;
	_Atomic uint64_t alarm_taken;
	_Atomic uint32_t pid;	      /* the agent's */
	_Atomic uint32_t flags;	      /* TA_SHM_AGENT_* */
	_Atomic uint32_t interval_ms; /* how often it writes */
	uint32_t reserved0;
	uint64_t reserved;
	struct ta_shm_agent_tier tier[TA_SHM_MAX_TIERS];
};

/* Minor 3: access-aware tiering (src/enforce/access.c, exchange.c), after the agent block. Per
 * slot, its process's bytes in each tier by heat at its last access sample (zeroed with the
 * slot); per tier, the cgroup's bytes the exchange moved up into it and down out of it. */
struct ta_shm_access_slot {
	_Atomic uint64_t hot[TA_SHM_MAX_TIERS];
	_Atomic uint64_t cold[TA_SHM_MAX_TIERS];
};

struct ta_shm_access {
	_Atomic uint64_t promoted[TA_SHM_MAX_TIERS];
	_Atomic uint64_t exchanged_down[TA_SHM_MAX_TIERS];
	uint64_t reserved[2];
	struct ta_shm_access_slot slot[TA_SHM_MAX_SLOTS];
};

/* Minor 5: lending of idle fast-tier shares (issue 15), a block of its own after the access
 * block. The agent (tierallocd --lend) writes the loans, lent and expires_ns; the cgroup's
 * processes write priority. A loan raises the tier's high and max for the cgroup's steering and
 * enforcement while CLOCK_MONOTONIC is before expires_ns; the agent renews it every interval, so
 * that loans lapse by themselves when the agent is gone. */
struct ta_shm_lend_tier {
	_Atomic uint64_t loan;	     /* bytes borrowed from other cgroups' idle shares */
	_Atomic uint64_t lent;	     /* bytes of this cgroup's share lent to others (shown only) */
	_Atomic uint64_t borrowed;   /* bytes ever granted (loan increases), for the counters */
	_Atomic uint64_t taken_back; /* bytes ever revoked (loan decreases) */
	/* Take-backs of this cgroup's lent share completed, and how long the last one took: from
	 * the agent's first cut until it stopped growing into what it lent and no borrower held
	 * more than its share and loan. */
	_Atomic uint64_t take_backs;
	_Atomic uint64_t take_back_ns;
	/* Minor 6: bytes of this cgroup's share yielded to a higher priority (tierallocd
	 * --reclaim-for-priority): high and max lowered by that much while the loans count, never
	 * below the tier's low and min, so that its enforcement demotes its coldest memory there.
	 */
	_Atomic uint64_t yielded;
	uint64_t reserved;
};

#define TA_SHM_LEND_PRIORITY_SET 1u /* a process declared TIERALLOC_PRIORITY */
#define TA_SHM_LEND_PRIORITY_MAX 1000u

struct ta_shm_lend {
	_Atomic uint64_t expires_ns; /* CLOCK_MONOTONIC; the loans count before it, 0: no loans */
	_Atomic uint64_t seq;	     /* bumped by the agent after each write */
	_Atomic uint32_t priority;   /* TIERALLOC_PRIORITY, 0..TA_SHM_LEND_PRIORITY_MAX */
	_Atomic uint32_t flags;	     /* TA_SHM_LEND_* */
	_Atomic uint32_t agent_pid;  /* the agent that wrote the loans */
	uint32_t reserved0;
	uint64_t reserved[4];
	struct ta_shm_lend_tier tier[TA_SHM_MAX_TIERS];
};

struct ta_shm_header {
	uint64_t magic;
	uint16_t abi_major;
	uint16_t abi_minor;
	uint32_t header_size;
	uint64_t seg_size;
	uint32_t max_slots;
	uint32_t max_tiers;
	uint32_t slot_size;
	uint32_t slots_off;
	uint32_t tier_size;
	uint32_t tiers_off;
	_Atomic uint32_t state;
	uint32_t creator_pid;
	uint64_t cgroup_id;		 /* v2: the directory's inode; 0 otherwise */
	_Atomic uint64_t generation;	 /* bumped whenever limits change */
	_Atomic uint64_t limits_read_ns; /* CLOCK_MONOTONIC of the last read of the cgroup files */
	_Atomic uint32_t ntiers;
	uint32_t cgroup_version;	   /* 2, 1, or 0 for none */
	char cgroup_path[TA_SHM_PATH_MAX]; /* "/sys/fs/cgroup/..." or "" */
	/* Minor 1: one process per period reads memory.numa_stat into the tiers' observed. */
	_Atomic uint64_t observe_claim_ns; /* CLOCK_MONOTONIC of the last claim to read it */
	_Atomic uint64_t observe_gen;	   /* bumped after each reading */
	_Atomic uint64_t notices; /* TA_SHM_NOTICE_* said once per cgroup, not per process */
	/* Minor 2: the agent block (struct ta_shm_agent), after the slots; 0: none. */
	uint32_t agent_off;
	uint32_t agent_size;
	/* Minor 3: the access block (struct ta_shm_access), after the agent block; 0: none. */
	uint32_t access_off;
	uint32_t access_size;
	/* Minor 4: configuration lines lately said by a process of the cgroup, each its hash's
	 * upper 32 bits over the CLOCK_MONOTONIC second it was said (TA_SHM_SAID_*). */
	_Atomic uint64_t said[2];
	/* Minor 5: the lending block (struct ta_shm_lend), after the access block; 0: none. */
	uint32_t lend_off;
	uint32_t lend_size;
};
/* A line said within the window is not said again by the cgroup's other processes. */
#define TA_SHM_SAID_WINDOW_S   60u
#define TA_SHM_SAID(hash, sec) (((uint64_t)(hash)&0xffffffff00000000ull) | ((sec)&0xffffffffu))

/* The promotion gate's margin below a tier's high share: an eighth of it, at least 8 MiB. The
 * gate shuts within half a margin of the share and opens below the whole margin; the agent raises
 * its alarm by the same rule, so it is part of the ABI. */
static inline uint64_t ta_shm_gate_margin(uint64_t high)
{
	uint64_t m = high / 8 > (8ull << 20) ? high / 8 : (8ull << 20);
	return m < high ? m : high;
}

#define TA_SHM_TIERS_OFF  512
#define TA_SHM_SLOTS_OFF  (TA_SHM_TIERS_OFF + TA_SHM_MAX_TIERS * 192)
#define TA_SHM_AGENT_OFF  (TA_SHM_SLOTS_OFF + TA_SHM_MAX_SLOTS * 64)
#define TA_SHM_ACCESS_OFF (TA_SHM_AGENT_OFF + 256)
#define TA_SHM_LEND_OFF	  (TA_SHM_ACCESS_OFF + sizeof(struct ta_shm_access))
#define TA_SHM_SEG_SIZE	  (TA_SHM_LEND_OFF + sizeof(struct ta_shm_lend))

_Static_assert(sizeof(struct ta_shm_tier) == 192, "tier record size is ABI");
_Static_assert(sizeof(struct ta_shm_slot) == 64, "slot size is ABI");
_Static_assert(sizeof(struct ta_shm_header) == 408, "header size is ABI");
_Static_assert(sizeof(struct ta_shm_header) <= TA_SHM_TIERS_OFF, "header fits before the tiers");
_Static_assert(offsetof(struct ta_shm_header, state) == 48, "state offset is ABI");
_Static_assert(offsetof(struct ta_shm_header, cgroup_path) == 88, "path offset is ABI");
_Static_assert(offsetof(struct ta_shm_tier, charged) == 32, "charged offset is ABI");
_Static_assert(offsetof(struct ta_shm_slot, charged) == 16, "slot charges offset is ABI");
_Static_assert(TA_SHM_SLOTS_OFF % 64 == 0, "slots are cache-line aligned");
_Static_assert(sizeof(struct ta_shm_agent) == 256, "agent block size is ABI");
_Static_assert(sizeof(struct ta_shm_agent_tier) == 64, "agent tier size is ABI");
_Static_assert(offsetof(struct ta_shm_agent, tier) == 64, "agent tiers offset is ABI");
_Static_assert(sizeof(struct ta_shm_access_slot) == 48, "access slot size is ABI");
_Static_assert(offsetof(struct ta_shm_access, slot) == 64, "access slots offset is ABI");
_Static_assert(TA_SHM_ACCESS_OFF % 64 == 0, "the access block is cache-line aligned");
_Static_assert(offsetof(struct ta_shm_header, agent_off) == 368, "agent offset is ABI");
_Static_assert(offsetof(struct ta_shm_slot, wake) == 40, "wake word offset is ABI");
_Static_assert(TA_SHM_AGENT_OFF % 64 == 0, "agent block is cache-line aligned");
_Static_assert(sizeof(struct ta_shm_lend) == 256, "lending block size is ABI");
_Static_assert(sizeof(struct ta_shm_lend_tier) == 64, "lending tier size is ABI");
_Static_assert(offsetof(struct ta_shm_lend, tier) == 64, "lending tiers offset is ABI");
_Static_assert(offsetof(struct ta_shm_header, lend_off) == 400, "lending offset is ABI");
_Static_assert(TA_SHM_LEND_OFF % 64 == 0, "the lending block is cache-line aligned");

#endif /* TIERALLOC_SHM_ABI_H */
