/* SPDX-License-Identifier: MIT */
/*
 * The migrations program's loader (migcount.h): tierallocd publishes what it reads here into the
 * segments (publish.c) and wakes at once for the cgroups its alerts name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "migcount.h"
#include "migrations.h"
#include "migrations.skel.h"

#define ALERTS_MAX 64

struct ta_migcount {
	struct migrations_bpf *skel;
	bool exact;
	struct ring_buffer *alerts;
	/* Filled by the ring buffer's callback during one ta_migcount_alerts(). */
	uint64_t ids[ALERTS_MAX];
	size_t nids;
};

static const char *const reason_names[TA_BPF_NREASONS] = { "promote", "demote", "mbind",
							   "move_pages", "other" };

/* Load with the kprobe that gives exact destinations; without it if this kernel cannot attach
 * there. */
static struct migrations_bpf *load(bool *exact, const char *btf)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct bpf_object_open_opts opts = { .sz = sizeof(opts), .btf_custom_path = btf };
		struct migrations_bpf *skel = migrations_bpf__open_opts(&opts);
		if (skel == NULL)
			return NULL;
		if (attempt == 1)
			bpf_program__set_autoload(skel->progs.migrate_enter, false);
		if (migrations_bpf__load(skel) == 0 && migrations_bpf__attach(skel) == 0) {
			*exact = attempt == 0;
			return skel;
		}
		int err = errno;
		migrations_bpf__destroy(skel);
		errno = err;
	}
	return NULL;
}

static int on_alert(void *ctx, void *data, size_t size)
{
	struct ta_migcount *m = ctx;
	uint64_t id;
	if (size < sizeof(id))
		return 0;
	memcpy(&id, data, sizeof(id));
	for (size_t i = 0; i < m->nids; i++)
		if (m->ids[i] == id)
			return 0;
	if (m->nids < ALERTS_MAX)
		m->ids[m->nids++] = id;
	return 0;
}

struct ta_migcount *ta_migcount_open(const char *btf, char *warn, size_t warnlen)
{
	warn[0] = '\0';
	struct ta_migcount *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->skel = load(&m->exact, btf);
	if (m->skel == NULL) {
		int err = errno;
		free(m);
		errno = err;
		return NULL;
	}
	m->alerts = ring_buffer__new(bpf_map__fd(m->skel->maps.alerts), on_alert, m, NULL);
	if (m->alerts == NULL)
		snprintf(warn, warnlen,
			 "no promotion alerts (%s): the workers learn of promotions at each "
			 "interval only",
			 strerror(errno));
	return m;
}

bool ta_migcount_exact(const struct ta_migcount *m)
{
	return m->exact;
}

size_t ta_migcount_read(struct ta_migcount *m, struct ta_agent_count *counts)
{
	int fd = bpf_map__fd(m->skel->maps.migrations);
	struct ta_bpf_key key, next;
	bool first = true;
	size_t n = 0;
	while (n < TA_BPF_MAX_KEYS && bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		first = false;
		key = next;
		__u64 pages;
		if (bpf_map_lookup_elem(fd, &key, &pages) != 0)
			continue;
		counts[n++] = (struct ta_agent_count){ .cgroup_id = key.cgroup_id,
						       .node = key.node,
						       .reason = key.reason,
						       .flags = key.flags,
						       .pages = pages };
	}
	return n;
}

int ta_migcount_alerts_fd(const struct ta_migcount *m)
{
	return m->alerts != NULL ? ring_buffer__epoll_fd(m->alerts) : -1;
}

size_t ta_migcount_alerts(struct ta_migcount *m, uint64_t *ids, size_t max)
{
	if (m->alerts == NULL)
		return 0;
	m->nids = 0;
	ring_buffer__consume(m->alerts);
	size_t n = m->nids < max ? m->nids : max;
	memcpy(ids, m->ids, n * sizeof(*ids));
	return n;
}

void ta_migcount_print(const struct ta_agent_count *counts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ta_agent_count *c = &counts[i];
		printf("cgroup=%llu reason=%s node=%d node_from=%s pages=%llu\n",
		       (unsigned long long)c->cgroup_id,
		       c->reason < TA_BPF_NREASONS ? reason_names[c->reason] : "?", c->node,
		       c->flags == TA_BPF_NODE_EXACT ? "arguments" : "cpu",
		       (unsigned long long)c->pages);
	}
	printf("counts %zu\n", n);
}

void ta_migcount_print_stats(struct ta_migcount *m)
{
	struct bpf_program *progs[] = { m->skel->progs.on_migrate_pages,
					m->skel->progs.migrate_enter };
	for (unsigned i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		int fd = bpf_program__fd(progs[i]);
		if (fd < 0)
			continue;
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
			continue;
		printf("prog=%s runs=%llu run_time_ns=%llu ns_per_run=%llu\n",
		       bpf_program__name(progs[i]), (unsigned long long)info.run_cnt,
		       (unsigned long long)info.run_time_ns,
		       (unsigned long long)(info.run_cnt ? info.run_time_ns / info.run_cnt : 0));
	}
}

void ta_migcount_close(struct ta_migcount *m)
{
	if (m == NULL)
		return;
	ring_buffer__free(m->alerts);
	migrations_bpf__destroy(m->skel);
	free(m);
}
