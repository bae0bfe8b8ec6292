/* SPDX-License-Identifier: MIT */
/*
 * Reading a segment for tieralloc-stat, and what its copy says: see stat_seg.h.
 *
 * tieralloc-stat is often run as root, and a segment is whatever its owner (any user) wrote:
 * nothing read from one is trusted.
 * - A file is opened without following a link and without blocking (a FIFO named like a segment
 *   would otherwise hang the tool), taken only if it is a regular file of at most 1 MiB, and read
 *   once into private memory (pread, never a mapping: its owner may truncate it at any moment);
 *   the header is validated on that copy, which cannot change afterwards, and only the parts
 *   used are read (a sparse file of 1 MiB costs a few KiB).
 * - Strings (the cgroup path, tier names, the file's name) are bounded by their fields; they are
 *   printed escaped (stat_text.c).
 * - The cgroup's files are read only from a cgroup2 file system under /sys/fs/cgroup: the path
 *   must be plain (no "." or ".." part), the file is opened without blocking or following a
 *   final link, and must be a regular file on cgroup2 (fstatfs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"
#include "stat_scan.h"
#include "stat_seg.h"
#include "quota/cgroup.h"
#include "quota/shm.h"

#define CGROUP_MOUNT "/sys/fs/cgroup"

/* Read len bytes at off of the file into the copy (within its size: checked by the caller). */
static bool read_part(int fd, struct ta_stat_seg *s, uint64_t off, uint64_t len)
{
	if (off > s->size || len > s->size - off)
		return false;
	return pread(fd, s->buf + off, (size_t)len, (off_t)off) == (ssize_t)len;
}

/* Copy a string field of n bytes, which need not hold a NUL. */
static void take_string(char *dst, const char *field, size_t n)
{
	size_t len = strnlen(field, n);
	memcpy(dst, field, len);
	dst[len] = '\0';
}

static void count_processes(struct ta_stat_seg *s);

int ta_stat_open_seg(const struct ta_place *place, const char *file, struct ta_stat_seg *s)
{
	memset(s, 0, sizeof(*s));
	s->place = place;
	snprintf(s->name, sizeof(s->name), "/%s", file);
	if (strchr(file, '/') != NULL || strcmp(file, "..") == 0 || strcmp(file, ".") == 0) {
		s->error = "not a name in /dev/shm";
		return -1;
	}
	/* Non-blocking: opening a FIFO for reading waits for a writer. */
	int fd =
	    openat(place->dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		s->error = strerror(errno);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	s->owner = st.st_uid;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	if (!S_ISREG(st.st_mode)) {
		s->error = "not a regular file";
		close(fd);
		return -1;
	}
	if (!ta_seg_size_ok(st.st_size)) {
		s->error = "not a segment (size)";
		close(fd);
		return -1;
	}
	s->size = (size_t)st.st_size;
	s->buf = calloc(1, s->size);
	if (s->buf == NULL) {
		s->error = "out of memory";
		close(fd);
		return -1;
	}
	const struct ta_shm_header *h = (const void *)s->buf;
	if (!read_part(fd, s, 0, sizeof(*h)))
		s->error = "truncated while read";
	else
		ta_seg_header_ok(h, s->size, &s->error);
	if (s->error != NULL) {
		close(fd);
		return -1;
	}
	/* What is used: the tiers, each slot's pid, the agent, access and lending blocks. */
	unsigned nslots = h->max_slots < TA_SHM_MAX_SLOTS ? h->max_slots : TA_SHM_MAX_SLOTS;
	bool ok = read_part(fd, s, h->tiers_off, (uint64_t)h->tier_size * h->max_tiers);
	for (unsigned i = 0; i < nslots && ok; i++)
		ok = read_part(fd, s, h->slots_off + (uint64_t)i * h->slot_size,
			       sizeof(struct ta_shm_slot));
	const struct ta_shm_agent *a = ta_shm_agent_block(h, s->size);
	if (ok && a != NULL)
		ok = read_part(fd, s, h->agent_off, sizeof(*a));
	const struct ta_shm_access *acc = ta_shm_access_block(h, s->size);
	if (ok && acc != NULL)
		ok = read_part(fd, s, h->access_off, sizeof(*acc));
	const struct ta_shm_lend *lend = ta_shm_lend_block(h, s->size);
	if (ok && lend != NULL)
		ok = read_part(fd, s, h->lend_off, sizeof(*lend));
	close(fd);
	if (!ok) {
		s->error = "truncated while read";
		return -1;
	}
	s->hdr = h;
	take_string(s->cgroup_path, h->cgroup_path, sizeof(h->cgroup_path));
	count_processes(s);
	return 0;
}

const struct ta_shm_tier *ta_stat_tier_rec(const struct ta_stat_seg *s, unsigned t)
{
	return (const struct ta_shm_tier *)((const char *)s->hdr + s->hdr->tiers_off +
					    (size_t)t * s->hdr->tier_size);
}

static const struct ta_shm_slot *slot_rec(const struct ta_stat_seg *s, unsigned i)
{
	return (const struct ta_shm_slot *)((const char *)s->hdr + s->hdr->slots_off +
					    (size_t)i * s->hdr->slot_size);
}

unsigned ta_stat_ntiers(const struct ta_stat_seg *s)
{
	unsigned n = atomic_load(&((struct ta_shm_header *)s->hdr)->ntiers);
	return n < TA_SHM_MAX_TIERS ? n : TA_SHM_MAX_TIERS;
}

const char *ta_stat_tier_name(struct ta_stat_seg *s, unsigned t)
{
	take_string(s->tier_name[t], ta_stat_tier_rec(s, t)->name, TA_STAT_TIER_NAME_MAX);
	return s->tier_name[t];
}

/* The slot's process lives, by pid and start time in the /proc of the segment's namespace. */
static bool slot_live(const struct ta_stat_seg *s, unsigned i)
{
	struct ta_shm_slot *slot = (struct ta_shm_slot *)slot_rec(s, i);
	uint32_t pid = atomic_load(&slot->pid);
	return pid != UINT32_MAX &&
	       ta_slot_alive(s->place->proc, pid, atomic_load(&slot->start_time));
}

/* Processes attached and alive, and slots of dead ones not yet taken back. A slot held by a
 * reclaimer's marker is not a process, but the reclaimer holds a slot of its own: when no slot
 * lives, the marker is left by a dead one and counts as dead. */
static void count_processes(struct ta_stat_seg *s)
{
	unsigned n = s->hdr->max_slots < TA_SHM_MAX_SLOTS ? s->hdr->max_slots : TA_SHM_MAX_SLOTS;
	unsigned marked = 0;
	for (unsigned i = 0; i < n; i++) {
		uint32_t pid = atomic_load(&((struct ta_shm_slot *)slot_rec(s, i))->pid);
		if (pid == 0)
			continue;
		if (pid == UINT32_MAX)
			marked++;
		else if (slot_live(s, i))
			s->alive++;
		else
			s->dead++;
	}
	/* No slot in use at all: a segment just made, whose creator is about to take its slot. */
	s->gone = s->alive == 0 && s->dead + marked > 0;
}

/*
 * Open a file of the segment's cgroup for reading, or -1. The path comes from the segment, so it
 * must name a directory under the cgroup mount without "." or ".." parts, and the file must be a
 * regular file of a cgroup2 file system: never a FIFO (which would block), a device, a link, or a
 * file elsewhere that the segment's owner chose. mode: O_RDONLY, or O_PATH to look only.
 */
static int open_cgroup_file(const char *dir, const char *file, int mode)
{
	static const char mount[] = CGROUP_MOUNT;
	size_t mlen = sizeof(mount) - 1;
	if (strncmp(dir, mount, mlen) != 0 || (dir[mlen] != '/' && dir[mlen] != '\0'))
		return -1;
	for (const char *p = dir + mlen; *p != '\0';) {
		const char *part = p + 1, *end = strchr(part, '/');
		size_t len = end != NULL ? (size_t)(end - part) : strlen(part);
		if (len == 0 || (len == 1 && part[0] == '.') ||
		    (len == 2 && part[0] == '.' && part[1] == '.'))
			return -1;
		p = part + len;
	}
	char path[TA_SHM_PATH_MAX + 64];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -1;
	int fd = open(path, mode | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	struct stat st;
	struct statfs fs;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fstatfs(fd, &fs) != 0 ||
	    fs.f_type != CGROUP2_SUPER_MAGIC) {
		close(fd);
		return -1;
	}
	return fd;
}

bool ta_stat_observed(const struct ta_stat_seg *s, uint64_t out[TA_SHM_MAX_TIERS])
{
	if (s->hdr->cgroup_version != 2)
		return false;
	int fd = open_cgroup_file(s->cgroup_path, "memory.numa_stat", O_RDONLY);
	if (fd < 0)
		return false;
	uint64_t per_node[TA_CGROUP_NODES];
	int rc = ta_cgroup_numa_stat_fd(fd, per_node);
	close(fd);
	if (rc != 0)
		return false;
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		uint64_t nodes =
		    atomic_load(&((struct ta_shm_tier *)ta_stat_tier_rec(s, t))->nodes);
		out[t] = 0;
		for (unsigned n = 0; n < TA_CGROUP_NODES; n++)
			if (nodes & (1ull << n))
				out[t] += per_node[n];
	}
	return true;
}

static uint64_t ld(const _Atomic uint64_t *p)
{
	return atomic_load((_Atomic uint64_t *)p);
}

uint64_t ta_stat_charged_of(const struct ta_stat_seg *s, const struct ta_shm_tier *r)
{
	return s->gone ? 0 : ld(&r->charged);
}

bool ta_stat_access_sums(const struct ta_stat_seg *s, unsigned t, uint64_t *hot, uint64_t *cold)
{
	const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
	*hot = *cold = 0;
	if (acc == NULL || t >= TA_SHM_MAX_TIERS)
		return false;
	unsigned n = s->hdr->max_slots < TA_SHM_MAX_SLOTS ? s->hdr->max_slots : TA_SHM_MAX_SLOTS;
	for (unsigned i = 0; i < n; i++) {
		if (!slot_live(s, i))
			continue;
		*hot += ld(&acc->slot[i].hot[t]);
		*cold += ld(&acc->slot[i].cold[t]);
	}
	return true;
}

bool ta_stat_has_enforcement(const struct ta_stat_seg *s)
{
	return ta_seg_has_enforcement(s->hdr->abi_minor, s->hdr->tier_size);
}

bool ta_stat_reclaim_available(const struct ta_stat_seg *s)
{
	if (s->hdr->cgroup_version != 2)
		return false;
	if (s->hdr->abi_minor >= 1 && s->hdr->header_size >= sizeof(struct ta_shm_header) &&
	    (ld(&((struct ta_shm_header *)s->hdr)->notices) & TA_SHM_NOTICE_NO_RECLAIM))
		return false;
	int fd = open_cgroup_file(s->cgroup_path, "memory.reclaim", O_PATH);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

const struct ta_shm_agent *ta_stat_agent_counts(const struct ta_stat_seg *s, const char **why,
						uint64_t *age_ms)
{
	const struct ta_shm_agent *a = ta_shm_agent_block(s->hdr, s->size);
	*age_ms = 0;
	if (a == NULL) {
		*why = "segment made before the agent's block (tieralloc < ABI 1.2)";
		return NULL;
	}
	uint64_t written = ld(&a->written_ns);
	if (written == 0) {
		*why = "no agent: tierallocd has not written here";
		return NULL;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	*age_ms = now > written ? (now - written) / 1000000 : 0;
	/* Stale after three of its intervals, and never before 2 s. */
	uint64_t interval = atomic_load(&((struct ta_shm_agent *)a)->interval_ms);
	uint64_t stale_ms = interval * 3 > 2000 ? interval * 3 : 2000;
	if (*age_ms > stale_ms) {
		*why = "no agent: tierallocd stopped writing here";
		return NULL;
	}
	if (atomic_load(&((struct ta_shm_agent *)a)->flags) & TA_SHM_AGENT_NO_CGROUP_ID) {
		*why = "the agent runs, but cannot tell this cgroup's migrations (no cgroup v2 id)";
		return NULL;
	}
	*why = NULL;
	return a;
}

const struct ta_shm_lend *ta_stat_lending(const struct ta_stat_seg *s, bool *live)
{
	const struct ta_shm_lend *l = ta_shm_lend_block(s->hdr, s->size);
	*live = l != NULL && ta_seg_lend_live(l);
	return l;
}
