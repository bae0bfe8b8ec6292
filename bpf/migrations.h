/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the BPF program (migrations.bpf.c) and the agent (agent/tierallocd.c) share: the key of the
 * migration counts. Fixed-width types only; the BPF side gets them from vmlinux.h, the agent
 * from <linux/types.h>.
 */
#ifndef TA_MIGRATIONS_H
#define TA_MIGRATIONS_H

#define TA_BPF_MAX_KEYS	 16384
#define TA_BPF_MAX_NODES 1024
#define TA_BPF_ALERT_NS	 10000000ull /* at most one promotion alert per cgroup per 10 ms */

/* Why pages moved (the kernel's enum migrate_reason, reduced to what tieralloc tells apart). */
enum ta_bpf_reason {
	TA_BPF_PROMOTE = 0,    /* NUMA balancing: MR_NUMA_MISPLACED */
	TA_BPF_DEMOTE = 1,     /* reclaim: MR_DEMOTION */
	TA_BPF_MBIND = 2,      /* mbind(2) with MPOL_MF_MOVE: MR_MEMPOLICY_MBIND */
	TA_BPF_MOVE_PAGES = 3, /* move_pages(2): MR_SYSCALL */
	TA_BPF_OTHER = 4,      /* compaction, hot-unplug, ... */
	TA_BPF_NREASONS = 5,
};

/* How the destination node was found. */
enum ta_bpf_node_flags {
	TA_BPF_NODE_EXACT = 1,	/* from migrate_pages()'s arguments (kprobe); -1: not given */
	TA_BPF_NODE_OF_CPU = 2, /* the node of the CPU that ran the migration (no fentry) */
};

struct ta_bpf_key {
	/* A cgroup v2 directory's inode: the pages' memory cgroup where the kprobe could read it,
	 * else bpf_get_current_cgroup_id(). */
	__u64 cgroup_id;
	__s32 node;   /* destination NUMA node, -1 unknown */
	__u16 reason; /* enum ta_bpf_reason */
	__u16 flags;  /* enum ta_bpf_node_flags */
};

#endif /* TA_MIGRATIONS_H */
