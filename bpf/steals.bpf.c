// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Reclaim taking pages from watched cgroups, as it happens (issue 17, policy 2: tierallocd
 * --protect). CO-RE, loaded on any kernel with BTF.
 *
 * shrink_lruvec(lruvec, sc) reclaims from one cgroup's LRU lists on one node, for whichever
 * reclaim is running (a parent's limit, kswapd, direct reclaim): the lruvec says whose pages, and
 * sc->nr_reclaimed grows by what it took. A kprobe at its entry notes the count for the calling
 * task when the lruvec's cgroup is watched; the kretprobe adds the difference to the cgroup's
 * count and, at most once a millisecond per cgroup, wakes the agent through a ring buffer.
 * Kprobes, not fentry: Debian's 6.1 refuses fentry where tierallocd tried it (migrations.bpf.c).
 *
 * Not seen: reclaim that does not go through shrink_lruvec(). Under MGLRU since Linux 6.3 a
 * global (root) reclaim walks the generations with lru_gen_shrink_node() instead; the limit
 * reclaim of a parent cgroup, seed 004's case, still calls shrink_lruvec().
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "steals_map.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The cgroups watched (the agent adds them) and their counts. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TA_STEALS_MAX_WATCHED);
	__type(key, __u64);
	__type(value, struct ta_steals_count);
} watched SEC(".maps");

/* A task inside shrink_lruvec() for a watched cgroup: which, and the count before. */
struct shrinking_call {
	__u64 cgroup_id;
	struct scan_control *sc;
	__u64 before;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct shrinking_call);
} shrinking SEC(".maps");

/* Alerts to the agent: the cgroup id. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} steal_alerts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TA_STEALS_MAX_WATCHED);
	__type(key, __u64);
	__type(value, __u64);
} alerted SEC(".maps");

/* The cgroup v2 id of the memory cgroup a lruvec belongs to, 0 if none (the node's own lruvec
 * when memory cgroups are off, or a v1 hierarchy). */
static __always_inline __u64 lruvec_cgroup(struct lruvec *lruvec)
{
	struct mem_cgroup_per_node *pn =
	    (void *)((char *)lruvec - bpf_core_field_offset(struct mem_cgroup_per_node, lruvec));
	struct mem_cgroup *memcg = BPF_CORE_READ(pn, memcg);
	if (memcg == NULL)
		return 0;
	struct cgroup *cgrp = BPF_CORE_READ(memcg, css.cgroup);
	if (cgrp == NULL || BPF_CORE_READ(cgrp, root, hierarchy_id) != 0)
		return 0;
	return BPF_CORE_READ(cgrp, kn, id);
}

SEC("kprobe/shrink_lruvec")
int BPF_KPROBE(shrink_enter, struct lruvec *lruvec, struct scan_control *sc)
{
	/* Nothing watched (no --protect): one map lookup and out. */
	__u64 cgroup_id = lruvec_cgroup(lruvec);
	if (cgroup_id == 0 || bpf_map_lookup_elem(&watched, &cgroup_id) == NULL)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct shrinking_call call = { .cgroup_id = cgroup_id,
				       .sc = sc,
				       .before = BPF_CORE_READ(sc, nr_reclaimed) };
	bpf_map_update_elem(&shrinking, &id, &call, BPF_ANY);
	return 0;
}

SEC("kretprobe/shrink_lruvec")
int BPF_KRETPROBE(shrink_exit)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct shrinking_call *call = bpf_map_lookup_elem(&shrinking, &id);
	if (call == NULL)
		return 0;
	__u64 cgroup_id = call->cgroup_id;
	/* Out of the map's value first: BPF_CORE_READ would relocate this program's own type. */
	struct scan_control *sc = call->sc;
	__u64 after = BPF_CORE_READ(sc, nr_reclaimed);
	__u64 before = call->before;
	bpf_map_delete_elem(&shrinking, &id);
	if (after <= before)
		return 0;
	struct ta_steals_count *count = bpf_map_lookup_elem(&watched, &cgroup_id);
	if (count == NULL)
		return 0;
	__sync_fetch_and_add(&count->pages, after - before);
	__sync_fetch_and_add(&count->passes, 1);
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&alerted, &cgroup_id);
	if (last != NULL && now - *last < TA_STEALS_ALERT_NS)
		return 0;
	bpf_map_update_elem(&alerted, &cgroup_id, &now, BPF_ANY);
	bpf_ringbuf_output(&steal_alerts, &cgroup_id, sizeof(cgroup_id), 0);
	return 0;
}
