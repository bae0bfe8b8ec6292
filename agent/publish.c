/* SPDX-License-Identifier: MIT */
/*
 * Publishing (tierallocd's main duty): the kernel's migrations of each kept segment's cgroup,
 * counted by the BPF program, are written into the segment's agent block with their rates, and
 * the processes' workers are woken when the alarm rises. Only the agent's own fields are written,
 * with pwrite (segments.c says why never through a mapping).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "agent.h"
#include "quota/shm.h"
#include "segset.h"

/* Bump each live process's wake word and wake its worker. */
void seg_wake_workers(struct segment *s)
{
	size_t len = (size_t)s->max_slots * s->slot_size;
	char *slots = malloc(len);
	if (slots == NULL || pread(s->fd, slots, len, s->slots_off) != (ssize_t)len) {
		free(slots);
		return;
	}
	for (unsigned i = 0; i < s->max_slots; i++) {
		struct ta_shm_slot *slot = (void *)(slots + (size_t)i * s->slot_size);
		uint32_t pid = atomic_load(&slot->pid);
		if (pid == 0 || pid == UINT32_MAX)
			continue;
		off_t off = (off_t)s->slots_off + (off_t)i * s->slot_size +
			    (off_t)offsetof(struct ta_shm_slot, wake);
		uint32_t wake = atomic_load(&slot->wake) + 1;
		if (pwrite(s->fd, &wake, sizeof(wake), off) != (ssize_t)sizeof(wake))
			break;
		/* The kernel resolves the address; a truncated file gives EFAULT, not SIGBUS. */
		syscall(SYS_futex, s->map + off, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	free(slots);
}

static bool publish(struct ta_agent_segments *set, struct segment *s,
		    const struct ta_agent_count *counts, size_t n, uint32_t flags,
		    uint32_t interval_ms, bool periodic)
{
	uint64_t now[TA_SHM_MAX_TIERS][TA_AGENT_NKINDS] = { { 0 } };
	if (s->cgroup_id != 0)
		ta_agent_tally(counts, n, s->cgroup_id, s->nodes, s->ntiers, now);
	else
		flags |= TA_SHM_AGENT_NO_CGROUP_ID;
	char tiers[TA_SHM_MAX_TIERS * 512];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	if (tiers_len > sizeof(tiers) ||
	    pread(s->fd, tiers, tiers_len, s->tiers_off) != (ssize_t)tiers_len)
		return false;
	uint64_t now_ns = seg_realtime_ns();
	double dt = s->have_prev ? (double)(now_ns - s->rate_base_ns) / 1e9 : 0;
	struct ta_shm_agent block;
	memset(&block, 0, sizeof(block));
	bool alarm = false;
	long page = sysconf(_SC_PAGESIZE);
	for (unsigned t = 0; t < s->ntiers; t++) {
		uint64_t promoted = 0;
		if (s->have_prev && now[t][TA_AGENT_PROMOTED] > s->prev[t][TA_AGENT_PROMOTED])
			promoted = now[t][TA_AGENT_PROMOTED] - s->prev[t][TA_AGENT_PROMOTED];
		for (unsigned k = 0; k < TA_AGENT_NKINDS && periodic; k++) {
			uint64_t d = s->have_prev && now[t][k] >= s->rate_base[t][k]
					 ? now[t][k] - s->rate_base[t][k]
					 : 0;
			s->rate[t][k] = dt > 0 ? (uint64_t)((double)d / dt + 0.5) : 0;
		}
		struct ta_shm_tier *r = (void *)(tiers + (size_t)t * s->tier_size);
		if (ta_agent_alarm(promoted * (uint64_t)page, atomic_load(&r->observed),
				   atomic_load(&r->limit[TA_LIMIT_HIGH]),
				   atomic_load(&r->gated) != 0))
			alarm = true;
		atomic_store(&block.tier[t].promoted, now[t][TA_AGENT_PROMOTED]);
		atomic_store(&block.tier[t].demoted, now[t][TA_AGENT_DEMOTED]);
		atomic_store(&block.tier[t].moved, now[t][TA_AGENT_MOVED]);
		atomic_store(&block.tier[t].promoted_rate, s->rate[t][TA_AGENT_PROMOTED]);
		atomic_store(&block.tier[t].demoted_rate, s->rate[t][TA_AGENT_DEMOTED]);
		atomic_store(&block.tier[t].moved_rate, s->rate[t][TA_AGENT_MOVED]);
	}
	s->seq++;
	if (alarm)
		s->alarm++;
	atomic_store(&block.written_ns, now_ns);
	atomic_store(&block.started_ns, set->started_ns);
	atomic_store(&block.seq, s->seq);
	atomic_store(&block.alarm, s->alarm);
	atomic_store(&block.pid, (uint32_t)getpid());
	atomic_store(&block.flags, flags);
	atomic_store(&block.interval_ms, interval_ms);
	/* Two writes around alarm_taken, which belongs to the processes. */
	size_t tail = offsetof(struct ta_shm_agent, pid);
	size_t head = offsetof(struct ta_shm_agent, alarm_taken);
	if (pwrite(s->fd, (char *)&block + tail, sizeof(block) - tail, s->agent_off + tail) !=
		(ssize_t)(sizeof(block) - tail) ||
	    pwrite(s->fd, &block, head, s->agent_off) != (ssize_t)head)
		return false;
	memcpy(s->prev, now, sizeof(now));
	if (periodic || !s->have_prev) {
		memcpy(s->rate_base, now, sizeof(now));
		s->rate_base_ns = now_ns;
	}
	s->have_prev = true;
	if (alarm)
		seg_wake_workers(s);
	return true;
}

static bool wanted(uint64_t cgroup_id, const uint64_t *only, size_t nonly)
{
	if (only == NULL)
		return true;
	for (size_t i = 0; i < nonly; i++)
		if (only[i] == cgroup_id)
			return true;
	return false;
}

unsigned ta_agent_segments_publish(struct ta_agent_segments *set,
				   const struct ta_agent_count *counts, size_t n,
				   const uint64_t *only, size_t nonly, uint32_t flags,
				   uint32_t interval_ms, bool verbose)
{
	unsigned written = 0;
	for (struct segment *s = set->list; s != NULL; s = s->next) {
		uint64_t alarms = s->alarm;
		if (!wanted(s->cgroup_id, only, nonly) ||
		    !publish(set, s, counts, n, flags, interval_ms, only == NULL))
			continue;
		written++;
		if (verbose && s->alarm != alarms)
			printf("tierallocd: alarm %llu for cgroup %llu%s\n",
			       (unsigned long long)s->alarm, (unsigned long long)s->cgroup_id,
			       only != NULL ? " (alert)" : "");
	}
	return written;
}
