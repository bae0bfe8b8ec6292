// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The kernel's own page migrations, counted per cgroup, migration reason and destination node
 * (issue 6). CO-RE: built against a vmlinux.h generated from the build machine's BTF, loaded on
 * any kernel with BTF (the guest's 6.1 and newer).
 *
 * Two attach points:
 * - tracepoint migrate:mm_migrate_pages fires at the end of every migrate_pages() call with the
 *   pages that moved and the reason. It counts, always.
 * - a kprobe on migrate_pages() (optional: the agent loads the program without it when the
 *   kernel cannot attach there) tells the destination. A kprobe, not fentry: the guest's Debian
 *   6.1 refuses fentry there (-ENOTSUPP), and migrate_pages()'s first six arguments are in
 *   registers on x86-64. Where the caller passes it as
 *   migrate_pages()'s "private" argument, the node is exact: NUMA balancing (MR_NUMA_MISPLACED)
 *   passes the node, move_pages(2) (MR_SYSCALL) and demotion (MR_DEMOTION, since Linux 6.2)
 *   pass a struct migration_target_control whose nid is the target (a plain node before 6.2).
 *   mbind(2) (MR_MEMPOLICY_MBIND) passes an address: the destination is unknown (-1).
 * Without the kprobe, the destination is the node of the CPU running the migration: right for NUMA
 * balancing, which migrates on the faulting CPU's node, and recorded as such (flag in the key).
 *
 * Promotions also raise an alert (ring buffer, at most one per cgroup per TA_BPF_ALERT_NS), so that
 * the agent can tell the cgroup's workers within milliseconds instead of at its next interval.
 *
 * The cgroup: with the kprobe, the memory cgroup the pages are charged to (what memory.numa_stat
 * and the quotas count), so that a demotion by kswapd counts for the cgroup whose pages moved.
 * Without it, the current task's: the task whose pages NUMA balancing moves, the caller of mbind
 * or move_pages; kswapd's demotions then count under the root cgroup.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "migrations.h"

/* migrate_pages()'s sixth argument comes from a register (libbpf 1.1's BPF_KPROBE names five). */
#if defined(__TARGET_ARCH_x86)
#define SIXTH_ARG(ctx) ((ctx)->r9)
#else
#error "migrations.bpf.c: migrate_pages()'s sixth argument: register written for x86_64 only"
#endif

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TA_BPF_MAX_KEYS);
	__type(key, struct ta_bpf_key);
	__type(value, __u64);
} migrations SEC(".maps");

/* What the kprobe learnt of the migrate_pages() call a task is in, for the tracepoint. */
struct in_flight_call {
	__u64 cgroup_id; /* the pages' memory cgroup (v2 id), 0: unknown */
	__s32 node;	 /* destination, -1: unknown */
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct in_flight_call);
} in_flight SEC(".maps");

/* The cgroup v2 id of the memory cgroup the first page of the list is charged to, 0 if unknown.
 * One call migrates pages of one cgroup in the cases that matter: reclaim demotes from one
 * cgroup's LRU at a time, NUMA balancing moves one page, move_pages(2) one process's pages. */
static __always_inline __u64 pages_cgroup(struct list_head *from)
{
	if (!bpf_core_field_exists(struct page, memcg_data))
		return 0;
	struct list_head *first = BPF_CORE_READ(from, next);
	if (first == NULL || first == from)
		return 0;
	struct page *page = (void *)((char *)first - bpf_core_field_offset(struct page, lru));
	unsigned long memcg_data = BPF_CORE_READ(page, memcg_data);
	/* Low bits are flags; MEMCG_DATA_OBJCGS (1) marks slab pages, which hold no memcg. */
	if (memcg_data == 0 || (memcg_data & 1))
		return 0;
	struct mem_cgroup *memcg = (void *)(memcg_data & ~3ul);
	struct cgroup *cgrp = BPF_CORE_READ(memcg, css.cgroup);
	/* Only the v2 hierarchy (id 0) has the ids the segments carry. */
	if (cgrp == NULL || BPF_CORE_READ(cgrp, root, hierarchy_id) != 0)
		return 0;
	return BPF_CORE_READ(cgrp, kn, id);
}

/* Promotions' alerts to the agent: the cgroup id. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16384);
} alerts SEC(".maps");

/* When each cgroup's last alert went out (bpf_ktime_get_ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} alerted SEC(".maps");

/* NUMA balancing migrates one page or folio per fault: one alert per event would wake the
 * agent thousands of times a second. */
static __always_inline void alert(__u64 cgroup_id)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&alerted, &cgroup_id);
	if (last != NULL && now - *last < TA_BPF_ALERT_NS)
		return;
	bpf_map_update_elem(&alerted, &cgroup_id, &now, BPF_ANY);
	bpf_ringbuf_output(&alerts, &cgroup_id, sizeof(cgroup_id), 0);
}

/* The migrate_reason values differ between kernels: resolved at load time. */
static __always_inline __u32 reason_code(int reason)
{
	if (bpf_core_enum_value_exists(enum migrate_reason, MR_NUMA_MISPLACED) &&
	    reason == bpf_core_enum_value(enum migrate_reason, MR_NUMA_MISPLACED))
		return TA_BPF_PROMOTE;
	if (bpf_core_enum_value_exists(enum migrate_reason, MR_DEMOTION) &&
	    reason == bpf_core_enum_value(enum migrate_reason, MR_DEMOTION))
		return TA_BPF_DEMOTE;
	if (bpf_core_enum_value_exists(enum migrate_reason, MR_MEMPOLICY_MBIND) &&
	    reason == bpf_core_enum_value(enum migrate_reason, MR_MEMPOLICY_MBIND))
		return TA_BPF_MBIND;
	if (bpf_core_enum_value_exists(enum migrate_reason, MR_SYSCALL) &&
	    reason == bpf_core_enum_value(enum migrate_reason, MR_SYSCALL))
		return TA_BPF_MOVE_PAGES;
	return TA_BPF_OTHER;
}

SEC("kprobe/migrate_pages")
int BPF_KPROBE(migrate_enter, struct list_head *from, void *get_new, void *put_new,
	       unsigned long private)
{
	int reason = (int)SIXTH_ARG(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	struct in_flight_call call = { .cgroup_id = pages_cgroup(from), .node = -1 };
	__u32 code = reason_code(reason);
	if (code == TA_BPF_PROMOTE) {
		call.node = (__s32) private;
	} else if (code == TA_BPF_MOVE_PAGES || code == TA_BPF_DEMOTE) {
		/* A node number before Linux 6.2's demotion change, a pointer after. */
		if (private < TA_BPF_MAX_NODES) {
			call.node = (__s32) private;
		} else {
			struct migration_target_control *mtc = (void *)private;
			call.node = BPF_CORE_READ(mtc, nid);
		}
	}
	bpf_map_update_elem(&in_flight, &id, &call, BPF_ANY);
	return 0;
}

SEC("tracepoint/migrate/mm_migrate_pages")
int on_migrate_pages(struct trace_event_raw_mm_migrate_pages *ctx)
{
	__u64 pages = BPF_CORE_READ(ctx, succeeded);
	if (pages == 0)
		return 0;
	struct ta_bpf_key key = {};
	key.cgroup_id = bpf_get_current_cgroup_id();
	key.reason = (__u16)reason_code(BPF_CORE_READ(ctx, reason));
	__u64 id = bpf_get_current_pid_tgid();
	struct in_flight_call *call = bpf_map_lookup_elem(&in_flight, &id);
	if (call != NULL) {
		key.node = call->node;
		key.flags = TA_BPF_NODE_EXACT;
		if (call->cgroup_id != 0)
			key.cgroup_id = call->cgroup_id;
		/* The tracepoint ends the call: the next one of this task stores its own. */
		bpf_map_delete_elem(&in_flight, &id);
	} else {
		key.node = (__s32)bpf_get_numa_node_id();
		key.flags = TA_BPF_NODE_OF_CPU;
	}
	__u64 *count = bpf_map_lookup_elem(&migrations, &key);
	if (count != NULL) {
		__sync_fetch_and_add(count, pages);
	} else if (bpf_map_update_elem(&migrations, &key, &pages, BPF_NOEXIST) != 0) {
		/* Another CPU created it meanwhile (or the map is full): add to theirs. */
		count = bpf_map_lookup_elem(&migrations, &key);
		if (count != NULL)
			__sync_fetch_and_add(count, pages);
	}
	if (key.reason == TA_BPF_PROMOTE)
		alert(key.cgroup_id);
	return 0;
}
