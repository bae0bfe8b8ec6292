/* SPDX-License-Identifier: MIT */
/*
 * The kept segments read for the outside: the metrics exposition (formatted with common/prom.c)
 * and the agent's queries of live processes and cgroups, which the policies rank and act on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "cgpath.h"
#include "prom.h"
#include "quota/shm.h"
#include "segment.h"
#include "segset.h"

/* ---- metrics ---- */

/* Live processes in the segment's slots (pid, and start time when the slot has one, checked in
 * the /proc of its namespace), and slots of dead ones. Their heat records (the access block) are
 * summed for the live ones into p's tiers. */
static void count_slots(struct ta_agent_segments *set, struct segment *s,
			const struct ta_shm_access *acc, struct ta_prom_segment *p)
{
	size_t len = (size_t)s->max_slots * s->slot_size;
	char *slots = len <= SLOTS_READ_MAX ? malloc(len) : NULL;
	if (slots == NULL || !seg_read_at(set, s->fd, slots, len, s->slots_off)) {
		free(slots);
		return;
	}
	for (unsigned i = 0; i < s->max_slots; i++) {
		const struct ta_shm_slot *slot = (const void *)(slots + (size_t)i * s->slot_size);
		uint32_t pid = atomic_load(&((struct ta_shm_slot *)slot)->pid);
		uint64_t want = atomic_load(&((struct ta_shm_slot *)slot)->start_time), start;
		uid_t uid;
		if (pid == 0 || pid == UINT32_MAX)
			continue;
		if (pid > INT32_MAX || !seg_proc_stat(set, s->ns, pid, &start, &uid) ||
		    (want != 0 && start != want)) {
			p->dead_slots++;
			continue;
		}
		p->processes++;
		for (unsigned t = 0; acc != NULL && t < p->ntiers; t++) {
			p->tier[t].hot +=
			    atomic_load(&((struct ta_shm_access *)acc)->slot[i].hot[t]);
			p->tier[t].cold +=
			    atomic_load(&((struct ta_shm_access *)acc)->slot[i].cold[t]);
		}
	}
	free(slots);
}

/* One kept segment as the exposition shows it, read now: false when it could not be read. */
static bool snapshot(struct ta_agent_segments *set, struct segment *s, struct ta_prom_segment *p)
{
	struct ta_shm_header h;
	const char *why = NULL;
	char tiers[TA_SHM_MAX_TIERS * MAX_TIER_SIZE];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	/* The header again (its owner may have rewritten it), but the layout taken when it was
	 * kept: the offsets checked then are the ones used. */
	if (!seg_read_at(set, s->fd, &h, sizeof(h), 0) || ta_shm_validate(&h, s->size, &why) != 0 ||
	    !seg_read_at(set, s->fd, tiers, tiers_len, s->tiers_off))
		return false;
	memset(p, 0, sizeof(*p));
	const char *base = strrchr(s->path, '/');
	snprintf(p->segment, sizeof(p->segment), "%s", base != NULL ? base : s->path);
	size_t plen = strnlen(h.cgroup_path, sizeof(h.cgroup_path));
	memcpy(p->cgroup, h.cgroup_path, plen);
	p->cgroup[plen] = '\0';
	p->ntiers = s->ntiers;
	/* The record's size taken when the segment was kept, as the offsets are. */
	bool enforcement = ta_seg_has_enforcement(h.abi_minor, s->tier_size);
	for (unsigned t = 0; t < s->ntiers; t++) {
		struct ta_shm_tier *r = (void *)(tiers + (size_t)t * s->tier_size);
		struct ta_prom_tier *pt = &p->tier[t];
		ta_seg_prom_tier(r, enforcement, pt);
		pt->nodes = s->nodes[t]; /* as taken when the segment was kept */
		/* What a process of the cgroup last read of memory.numa_stat (the agent reads no
		 * cgroup file a segment names). */
		pt->have_observed = atomic_load(&r->observed_at_ns) != 0;
		pt->observed = atomic_load(&r->observed);
		/* The agent's own counts, as it last wrote them. */
		pt->have_agent = s->have_prev && s->cgroup_id != 0;
		pt->kernel_promoted = s->prev[t][TA_AGENT_PROMOTED];
		pt->kernel_demoted = s->prev[t][TA_AGENT_DEMOTED];
		pt->kernel_moved = s->prev[t][TA_AGENT_MOVED];
	}
	/* The access block (ABI minor 3), bounds-checked on this copy of the header. */
	struct ta_shm_access *acc = NULL;
	if (ta_shm_access_block(&h, s->size) != NULL) {
		acc = malloc(sizeof(*acc));
		if (acc != NULL && !seg_read_at(set, s->fd, acc, sizeof(*acc), h.access_off)) {
			free(acc);
			acc = NULL;
		}
	}
	for (unsigned t = 0; acc != NULL && t < s->ntiers; t++) {
		p->tier[t].have_access = true;
		ta_seg_prom_exchange(acc, t, &p->tier[t]);
	}
	/* The lending block (ABI minor 5), bounds-checked on this copy of the header. */
	struct ta_shm_lend lend;
	if (ta_shm_lend_block(&h, s->size) != NULL &&
	    seg_read_at(set, s->fd, &lend, sizeof(lend), h.lend_off))
		ta_seg_prom_lend(&lend, ta_seg_lend_live(&lend), s->ntiers, p);
	count_slots(set, s, acc, p);
	free(acc);
	return true;
}

int ta_agent_segments_metrics(struct ta_agent_segments *set, FILE *f)
{
	unsigned n = 0, cap = set->nkept;
	struct ta_prom_segment *segs = calloc(cap > 0 ? cap : 1, sizeof(*segs));
	if (segs == NULL)
		return -1;
	for (struct segment *s = set->list; s != NULL && n < cap; s = s->next)
		if (snapshot(set, s, &segs[n]))
			n++;
	int rc = ta_prom_write(f, segs, n);
	free(segs);
	fprintf(f,
		"# HELP tieralloc_agent_segments Segments tierallocd keeps and writes to.\n"
		"# TYPE tieralloc_agent_segments gauge\n"
		"tieralloc_agent_segments %u\n",
		set->nkept);
	const struct ta_agent_lend_stats *l = &set->lend;
	fprintf(f,
		"# HELP tieralloc_agent_lent_bytes Bytes of idle shares lent out now (--lend).\n"
		"# TYPE tieralloc_agent_lent_bytes gauge\n"
		"tieralloc_agent_lent_bytes %llu\n"
		"# HELP tieralloc_agent_lend_granted_bytes_total Bytes of loans granted.\n"
		"# TYPE tieralloc_agent_lend_granted_bytes_total counter\n"
		"tieralloc_agent_lend_granted_bytes_total %llu\n"
		"# HELP tieralloc_agent_lend_taken_back_bytes_total Bytes of loans revoked.\n"
		"# TYPE tieralloc_agent_lend_taken_back_bytes_total counter\n"
		"tieralloc_agent_lend_taken_back_bytes_total %llu\n"
		"# HELP tieralloc_agent_take_back_seconds From the first loan cut for a growing "
		"owner until it stopped and no borrower held more than its share and loan.\n"
		"# TYPE tieralloc_agent_take_back_seconds summary\n"
		"tieralloc_agent_take_back_seconds_sum %.3f\n"
		"tieralloc_agent_take_back_seconds_count %llu\n"
		"# HELP tieralloc_agent_take_back_seconds_max The longest take-back.\n"
		"# TYPE tieralloc_agent_take_back_seconds_max gauge\n"
		"tieralloc_agent_take_back_seconds_max %.3f\n",
		(unsigned long long)l->lent_now, (unsigned long long)l->granted,
		(unsigned long long)l->taken_back, (double)l->take_back_ns_sum / 1e9,
		(unsigned long long)l->take_backs, (double)l->take_back_ns_max / 1e9);
	fprintf(f,
		"# HELP tieralloc_agent_yielded_bytes Bytes of shares yielded to higher priorities "
		"now (--reclaim-for-priority).\n"
		"# TYPE tieralloc_agent_yielded_bytes gauge\n"
		"tieralloc_agent_yielded_bytes %llu\n"
		"# HELP tieralloc_agent_yields_bytes_total Bytes of yield increases.\n"
		"# TYPE tieralloc_agent_yields_bytes_total counter\n"
		"tieralloc_agent_yields_bytes_total %llu\n",
		(unsigned long long)l->yielded_now, (unsigned long long)l->yields);
	return rc != 0 || ferror(f) ? -1 : 0;
}

unsigned ta_agent_segments_procs(struct ta_agent_segments *set, struct ta_agent_proc *out,
				 unsigned max)
{
	unsigned n = 0;
	for (struct segment *s = set->list; s != NULL && n < max; s = s->next) {
		if (s->ns != NULL || strcmp(set->proc_dir, "/proc") != 0)
			continue;
		size_t len = (size_t)s->max_slots * s->slot_size;
		char *slots = len <= SLOTS_READ_MAX ? malloc(len) : NULL;
		if (slots == NULL || pread(s->fd, slots, len, s->slots_off) != (ssize_t)len) {
			free(slots);
			continue;
		}
		for (unsigned i = 0; i < s->max_slots && n < max; i++) {
			struct ta_shm_slot *slot = (void *)(slots + (size_t)i * s->slot_size);
			uint32_t pid = atomic_load(&slot->pid);
			uint64_t want = atomic_load(&slot->start_time), start;
			uid_t uid;
			if (pid == 0 || pid > INT32_MAX || want == 0 ||
			    !seg_proc_stat(set, NULL, pid, &start, &uid) || start != want ||
			    (s->id.owner != 0 && uid != s->id.owner))
				continue;
			bool dup = false;
			for (unsigned j = 0; j < n && !dup; j++)
				dup = out[j].pid == pid;
			if (!dup)
				out[n++] = (struct ta_agent_proc){ pid, uid, start };
		}
		free(slots);
	}
	return n;
}

unsigned ta_agent_segments_cgroups(struct ta_agent_segments *set, struct ta_agent_cgroup *out,
				   unsigned max)
{
	unsigned n = 0;
	for (struct segment *s = set->list; s != NULL && n < max; s = s->next) {
		if (s->cg_state != CG_OK || s->ntiers < 2)
			continue;
		struct ta_agent_cgroup *c = &out[n];
		memset(c, 0, sizeof(*c));
		/* The fast tier's steering: its first record. */
		char tier[MAX_TIER_SIZE];
		if (!seg_read_at(set, s->fd, tier, s->tier_size, s->tiers_off))
			continue;
		c->steered = atomic_load(&((struct ta_shm_tier *)(void *)tier)->steered_away);
		struct ta_shm_lend lend;
		if (s->lend_off != 0 && seg_read_at(set, s->fd, &lend, sizeof(lend), s->lend_off)) {
			uint32_t prio = atomic_load(&lend.priority);
			c->have_priority = true;
			c->priority = prio <= TA_SHM_LEND_PRIORITY_MAX ? prio : 0;
		}
		snprintf(c->path, sizeof(c->path), "%s", s->cg_path);
		c->cgroup_id = s->cg_id;
		c->dev = (uint64_t)s->cg_dev;
		n++;
	}
	return n;
}

int ta_agent_priority_find(const struct ta_agent_priority *p, unsigned n, const char *path,
			   uint64_t id, uint64_t dev)
{
	for (unsigned q = 0; q < n; q++) {
		struct stat st;
		if (ta_cgpath_same(p[q].cgroup, path) ||
		    (stat(p[q].cgroup, &st) == 0 && S_ISDIR(st.st_mode) &&
		     (uint64_t)st.st_ino == id && (uint64_t)st.st_dev == dev))
			return (int)q;
	}
	return -1;
}

bool ta_agent_segments_has(const struct ta_agent_segments *set, uint64_t cgroup_id)
{
	for (const struct segment *s = set->list; s != NULL; s = s->next)
		if (s->cgroup_id == cgroup_id && cgroup_id != 0)
			return true;
	return false;
}
