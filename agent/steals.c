/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of bpf/steals.bpf.c: load and attach it, watch cgroups, read their counts and
 * take its alerts (a ring buffer, whose epoll descriptor the protector polls with the rest).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "steals.h"
#include "steals.skel.h"

#include "steals_map.h"

struct ta_steals {
	struct steals_bpf *skel;
	struct ring_buffer *alerts;
	unsigned taken; /* alerts seen by the callback during one drain */
};

static int on_alert(void *ctx, void *data, size_t size)
{
	(void)data;
	(void)size;
	((struct ta_steals *)ctx)->taken++;
	return 0;
}

struct ta_steals *ta_steals_open(const char *btf, char *err, size_t errlen)
{
	struct ta_steals *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	struct bpf_object_open_opts opts = { .sz = sizeof(opts), .btf_custom_path = btf };
	s->skel = steals_bpf__open_opts(&opts);
	if (s->skel == NULL) {
		snprintf(err, errlen, "cannot open its BPF object (%s)", strerror(errno));
		goto fail;
	}
	if (steals_bpf__load(s->skel) != 0) {
		snprintf(err, errlen, "cannot load its BPF program (%s)", strerror(errno));
		goto fail;
	}
	if (steals_bpf__attach(s->skel) != 0) {
		snprintf(err, errlen, "cannot attach a kprobe to shrink_lruvec() (%s)",
			 strerror(errno));
		goto fail;
	}
	s->alerts = ring_buffer__new(bpf_map__fd(s->skel->maps.steal_alerts), on_alert, s, NULL);
	if (s->alerts == NULL) {
		snprintf(err, errlen, "cannot read its alerts (%s)", strerror(errno));
		goto fail;
	}
	return s;
fail:
	ta_steals_close(s);
	return NULL;
}

int ta_steals_watch(struct ta_steals *s, uint64_t cgroup_id)
{
	__u64 key = cgroup_id;
	struct ta_steals_count zero = { 0 };
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.watched), &key, &zero, BPF_NOEXIST) != 0)
		return errno == EEXIST ? 0 : -errno;
	return 0;
}

uint64_t ta_steals_pages(struct ta_steals *s, uint64_t cgroup_id)
{
	__u64 key = cgroup_id;
	struct ta_steals_count count;
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.watched), &key, &count) != 0)
		return 0;
	return count.pages;
}

int ta_steals_fd(const struct ta_steals *s)
{
	return ring_buffer__epoll_fd(s->alerts);
}

unsigned ta_steals_drain(struct ta_steals *s)
{
	s->taken = 0;
	ring_buffer__consume(s->alerts);
	return s->taken;
}

void ta_steals_close(struct ta_steals *s)
{
	if (s == NULL)
		return;
	ring_buffer__free(s->alerts);
	steals_bpf__destroy(s->skel);
	free(s);
}
