/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of the shared segments: it finds every tieralloc segment on the machine and
 * writes the kernel's migrations of the segment's cgroup into its agent block (ABI minor 2).
 *
 * Where: /dev/shm, and the /dev/shm of every other mount namespace, through /proc/<pid>/root
 * (a container's /dev/shm is its own tmpfs, out of sight of the host's).
 *
 * The segments belong to their containers' users, and the agent is root, so it trusts nothing in
 * them:
 * - a file is looked at without following links (O_PATH), opened only if it is a regular, singly
 *   linked file on tmpfs, and taken only if its header validates; offsets and sizes are taken
 *   once, then bounds-checked;
 * - it is read and written with pread/pwrite, never through a mapping: its owner may truncate
 *   it at any time, and a mapped access past the end would kill the agent with SIGBUS. The one
 *   mapping (read-only) only gives the futex words an address, which the kernel resolves;
 * - the agent writes only its own fields (never alarm_taken, which the processes swap).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "shm.h"

#define MAX_SEGMENT_BYTES (1u << 20)

struct segment {
	struct segment *next;
	int fd;
	dev_t dev;
	ino_t ino;
	const char *map; /* PROT_READ: addresses for FUTEX_WAKE only, never dereferenced */
	size_t size;
	char path[200];
	bool seen;
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
};

struct ta_agent_segments {
	const char *const *dirs;
	bool scan_proc;
	struct segment *list;
	uint64_t started_ns;
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct segment *find(struct ta_agent_segments *set, dev_t dev, ino_t ino)
{
	for (struct segment *s = set->list; s != NULL; s = s->next)
		if (s->dev == dev && s->ino == ino)
			return s;
	return NULL;
}

/* Read and check the header and tiers; fill the snapshot. */
static bool take_header(struct segment *s, const char *buf)
{
	const struct ta_shm_header *h = (const void *)buf;
	const char *why = NULL;
	if (atomic_load(&((struct ta_shm_header *)h)->state) != TA_SHM_READY ||
	    ta_shm_validate(buf, s->size, &why) != 0 || ta_shm_agent_block(h, s->size) == NULL)
		return false;
	s->cgroup_id = h->cgroup_id;
	s->ntiers = atomic_load(&((struct ta_shm_header *)h)->ntiers);
	if (s->ntiers > TA_SHM_MAX_TIERS)
		s->ntiers = TA_SHM_MAX_TIERS;
	s->tiers_off = h->tiers_off;
	s->tier_size = h->tier_size;
	s->slots_off = h->slots_off;
	s->slot_size = h->slot_size;
	s->max_slots = h->max_slots < TA_SHM_MAX_SLOTS ? h->max_slots : TA_SHM_MAX_SLOTS;
	s->agent_off = h->agent_off;
	/* Go on from what an earlier agent wrote: the processes compare the alarm with the last
	 * one they took, so it must not repeat a value. */
	const struct ta_shm_agent *agent = (const void *)(buf + s->agent_off);
	s->seq = atomic_load(&((struct ta_shm_agent *)agent)->seq);
	s->alarm = atomic_load(&((struct ta_shm_agent *)agent)->alarm);
	for (unsigned t = 0; t < s->ntiers; t++) {
		const struct ta_shm_tier *r =
		    (const void *)(buf + s->tiers_off + (size_t)t * s->tier_size);
		s->nodes[t] = atomic_load(&((struct ta_shm_tier *)r)->nodes);
	}
	return true;
}

static void consider(struct ta_agent_segments *set, int dirfd, const char *dir, const char *name,
		     bool verbose)
{
	/* Look before opening for I/O: opening a device node or FIFO a user put there could block
	 * or have side effects. The O_PATH descriptor pins the inode; reopening it through /proc
	 * opens that same inode, whatever the name points to by then. */
	int path_fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (path_fd < 0)
		return;
	struct stat st;
	struct statfs fs;
	if (fstat(path_fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    fstatfs(path_fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC ||
	    st.st_size < (off_t)sizeof(struct ta_shm_header) || st.st_size > MAX_SEGMENT_BYTES) {
		close(path_fd);
		return;
	}
	struct segment *known = find(set, st.st_dev, st.st_ino);
	if (known != NULL) {
		known->seen = true;
		close(path_fd);
		return;
	}
	char reopen[64];
	snprintf(reopen, sizeof(reopen), "/proc/self/fd/%d", path_fd);
	int fd = open(reopen, O_RDWR | O_CLOEXEC);
	close(path_fd);
	if (fd < 0)
		return;
	struct segment *s = calloc(1, sizeof(*s));
	char *buf = malloc((size_t)st.st_size);
	if (s == NULL || buf == NULL)
		goto drop;
	s->fd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (size_t)st.st_size;
	if (pread(fd, buf, s->size, 0) != (ssize_t)s->size || !take_header(s, buf))
		goto drop;
	void *map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto drop;
	s->map = map;
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, name);
	s->seen = true;
	s->next = set->list;
	set->list = s;
	free(buf);
	if (verbose)
		printf("tierallocd: segment %s: cgroup %llu, %u tiers\n", s->path,
		       (unsigned long long)s->cgroup_id, s->ntiers);
	return;
drop:
	free(buf);
	free(s);
	close(fd);
}

static void scan_dir(struct ta_agent_segments *set, const char *dir, bool verbose)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return;
	DIR *d = fdopendir(dirfd);
	if (d == NULL) {
		close(dirfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "tieralloc-", 10) == 0)
			consider(set, dirfd, dir, e->d_name, verbose);
	closedir(d);
}

/* One /proc/<pid>/root/dev/shm per mount namespace other than ours. */
static void scan_namespaces(struct ta_agent_segments *set, bool verbose)
{
	struct stat own;
	if (stat("/proc/self/ns/mnt", &own) != 0)
		return;
	enum { MAX_NS = 4096 };
	static ino_t seen[MAX_NS];
	unsigned nseen = 0;
	DIR *proc = opendir("/proc");
	if (proc == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(proc)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300];
		struct stat ns;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", e->d_name);
		if (stat(path, &ns) != 0 || ns.st_ino == own.st_ino)
			continue;
		bool dup = false;
		for (unsigned i = 0; i < nseen && !dup; i++)
			dup = seen[i] == ns.st_ino;
		if (dup || nseen == MAX_NS)
			continue;
		seen[nseen++] = ns.st_ino;
		snprintf(path, sizeof(path), "/proc/%s/root/dev/shm", e->d_name);
		scan_dir(set, path, verbose);
	}
	closedir(proc);
}

struct ta_agent_segments *ta_agent_segments_new(const char *const *dirs, bool scan_proc)
{
	struct ta_agent_segments *set = calloc(1, sizeof(*set));
	if (set == NULL)
		return NULL;
	set->dirs = dirs;
	set->scan_proc = scan_proc;
	set->started_ns = realtime_ns();
	return set;
}

static void segment_free(struct segment *s)
{
	if (s->map != NULL)
		munmap((void *)s->map, s->size);
	close(s->fd);
	free(s);
}

void ta_agent_segments_rescan(struct ta_agent_segments *set, bool verbose)
{
	for (struct segment *s = set->list; s != NULL; s = s->next)
		s->seen = false;
	for (const char *const *dir = set->dirs; *dir != NULL; dir++)
		scan_dir(set, *dir, verbose);
	if (set->scan_proc)
		scan_namespaces(set, verbose);
	/* A segment no longer in any directory was removed (or its container is gone). */
	for (struct segment **p = &set->list; *p != NULL;) {
		struct segment *s = *p;
		if (s->seen) {
			p = &s->next;
			continue;
		}
		if (verbose)
			printf("tierallocd: segment %s: gone\n", s->path);
		*p = s->next;
		segment_free(s);
	}
}

/* Bump each live process's wake word and wake its worker. */
static void wake_workers(struct segment *s)
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
	uint64_t now_ns = realtime_ns();
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
		wake_workers(s);
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

bool ta_agent_segments_has(const struct ta_agent_segments *set, uint64_t cgroup_id)
{
	for (const struct segment *s = set->list; s != NULL; s = s->next)
		if (s->cgroup_id == cgroup_id && cgroup_id != 0)
			return true;
	return false;
}

void ta_agent_segments_free(struct ta_agent_segments *set)
{
	if (set == NULL)
		return;
	while (set->list != NULL) {
		struct segment *s = set->list;
		set->list = s->next;
		segment_free(s);
	}
	free(set);
}
