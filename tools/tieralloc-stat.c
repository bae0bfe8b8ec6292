/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat: the per-cgroup, per-tier quotas as every tieralloc process of a container
 * charges them. Lists the shared segments in /dev/shm and in the /dev/shm of every other mount
 * namespace it may read (stat_scan.c), recognised by their content (a valid header), whatever
 * their name; and, per tier: the limits (min, low, high, max), the charge, the kernel's usage on
 * the tier's nodes (memory.numa_stat, cgroup v2), the headroom and the event counts; and, when the
 * agent (tierallocd) writes them, the pages the kernel promoted, demoted and moved into each tier,
 * with their rates. A table that fits 100 columns (--wide: every column), JSON (--json),
 * Prometheus' text exposition (--prometheus, formatted by prom.c, which the agent shares), or a
 * table refreshed every N seconds (--watch N). The counters are named as tieralloc-run's summary
 * names them, and bytes printed as it prints them (units.c).
 *
 * Read-only: it never writes or creates a segment. A segment whose every process died is shown
 * "gone", its charges as they will be once taken back (zero); --reap unlinks such segments (only
 * that: their content is not touched), after checking again, just before, that no process of
 * theirs lives and that no process maps the file.
 *
 * It is often run as root, and a segment is whatever its owner (any user) wrote: nothing read
 * from one is trusted.
 * - A file is opened without following a link and without blocking (a FIFO named like a segment
 *   would otherwise hang the tool), taken only if it is a regular file of at most 1 MiB, and read
 *   once into private memory (pread, never a mapping: its owner may truncate it at any moment);
 *   the header is validated on that copy, which cannot change afterwards, and only the parts
 *   used are read (a sparse file of 1 MiB costs a few KiB).
 * - Strings (the cgroup path, tier names, the file's name) are bounded by their fields and
 *   printed escaped: no control character reaches the terminal, and JSON stays valid.
 * - The cgroup's files are read only from a cgroup2 file system under /sys/fs/cgroup: the path
 *   must be plain (no "." or ".." part), the file is opened without blocking or following a
 *   final link, and must be a regular file on cgroup2 (fstatfs).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "policies.h"
#include "prom.h"
#include "record.h"
#include "segment.h"
#include "stat_policies.h"
#include "stat_scan.h"
#include "stat_text.h"
#include "units.h"
#include "quota/cgroup.h"
#include "quota/shm.h"

#define CGROUP_MOUNT  "/sys/fs/cgroup"
#define TIER_NAME_MAX sizeof(((struct ta_shm_tier *)0)->name)

struct seg {
	char name[300];	    /* "/" and the file's name, as read: printed escaped */
	unsigned char *buf; /* the parts of the file used, at their offsets; the rest zero */
	const struct ta_shm_header *hdr; /* = buf once it validated */
	size_t size;
	uid_t owner;
	dev_t dev;
	ino_t ino;
	const char *error;	      /* why it could not be read, or NULL */
	const struct ta_place *place; /* where it was found: its namespace's /proc */
	/* Its slots' processes, counted once when read: alive, dead (or left marked by a
	 * reclaimer); gone when none lives and some did. */
	unsigned alive, dead;
	bool gone;
	/* The strings, bounded by their fields and terminated. */
	char cgroup_path[TA_SHM_PATH_MAX + 1];
	char tier_name[TA_SHM_MAX_TIERS][TIER_NAME_MAX + 1];
};

static const char *shm_dir = "/dev/shm";

/* ---- printing what a segment says ---- */

/* Read len bytes at off of the file into the copy (within its size: checked by the caller). */
static bool read_part(int fd, struct seg *s, uint64_t off, uint64_t len)
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

static void count_processes(struct seg *s);

/* Read the segment named file in the place's directory into s: 0, or -1 with s->error. */
static int open_seg(const struct ta_place *place, const char *file, struct seg *s)
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

static const struct ta_shm_tier *tier_rec(const struct seg *s, unsigned t)
{
	return (const struct ta_shm_tier *)((const char *)s->hdr + s->hdr->tiers_off +
					    (size_t)t * s->hdr->tier_size);
}

static const struct ta_shm_slot *slot_rec(const struct seg *s, unsigned i)
{
	return (const struct ta_shm_slot *)((const char *)s->hdr + s->hdr->slots_off +
					    (size_t)i * s->hdr->slot_size);
}

static unsigned ntiers(const struct seg *s)
{
	unsigned n = atomic_load(&((struct ta_shm_header *)s->hdr)->ntiers);
	return n < TA_SHM_MAX_TIERS ? n : TA_SHM_MAX_TIERS;
}

/* Tier t's name, bounded by its field. */
static const char *tier_name(struct seg *s, unsigned t)
{
	take_string(s->tier_name[t], tier_rec(s, t)->name, TIER_NAME_MAX);
	return s->tier_name[t];
}

/* The slot's process lives, by pid and start time in the /proc of the segment's namespace. */
static bool slot_live(const struct seg *s, unsigned i)
{
	struct ta_shm_slot *slot = (struct ta_shm_slot *)slot_rec(s, i);
	uint32_t pid = atomic_load(&slot->pid);
	return pid != UINT32_MAX &&
	       ta_slot_alive(s->place->proc, pid, atomic_load(&slot->start_time));
}

/* Processes attached and alive, and slots of dead ones not yet taken back. A slot held by a
 * reclaimer's marker is not a process, but the reclaimer holds a slot of its own: when no slot
 * lives, the marker is left by a dead one and counts as dead. */
static void count_processes(struct seg *s)
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

/* The kernel's usage of the cgroup on each tier's nodes: a node in several tiers counts in each. */
static bool observed(const struct seg *s, uint64_t out[TA_SHM_MAX_TIERS])
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
	for (unsigned t = 0; t < ntiers(s); t++) {
		uint64_t nodes = atomic_load(&((struct ta_shm_tier *)tier_rec(s, t))->nodes);
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

/* What the tier is charged; zero in a gone segment, as it will be once its slots are taken back
 * (every slot's charge is part of the tier's: their dead processes hold nothing). */
static uint64_t charged_of(const struct seg *s, const struct ta_shm_tier *r)
{
	return s->gone ? 0 : ld(&r->charged);
}

/* Tier t's bytes by heat at each live process's last access sample (ABI minor 3): false when
 * the segment has no access block. Dead processes' records are not counted. */
static bool access_sums(const struct seg *s, unsigned t, uint64_t *hot, uint64_t *cold)
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

/* Segments of ABI minor 0 end their tier record before the enforcement counters. */
static bool has_enforcement(const struct seg *s)
{
	return ta_seg_has_enforcement(s->hdr->abi_minor, s->hdr->tier_size);
}

/* Whether the cgroup has memory.reclaim: cgroup v2 only (Linux >= 5.19), so never on v1 or
 * without a cgroup; not once a process of the cgroup found it missing (ABI minor 1); and only
 * when the file is there (looked at the way numa_stat is read, without opening it for I/O). */
static bool reclaim_available(const struct seg *s)
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

/* The agent's block, when an agent wrote it recently and could attribute migrations to the
 * segment's cgroup; otherwise NULL and why. */
static const struct ta_shm_agent *agent_counts(const struct seg *s, const char **why,
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

static void print_migrations(const struct seg *s)
{
	const char *why;
	uint64_t age_ms;
	const struct ta_shm_agent *a = agent_counts(s, &why, &age_ms);
	if (a == NULL) {
		printf("kernel migrations: n/a (%s)\n", why);
		return;
	}
	printf("kernel migrations into each tier, in pages (tierallocd, %llu ms ago):\n",
	       (unsigned long long)age_ms);
	printf("  destinations %s; %llu alarms\n",
	       atomic_load(&((struct ta_shm_agent *)a)->flags) & TA_SHM_AGENT_EXACT_NODES
		   ? "exact"
		   : "of promotions only",
	       (unsigned long long)ld(&a->alarm));
	printf("%-4s %12s %10s %12s %10s %12s %10s\n", "tier", "promoted", "/s", "demoted", "/s",
	       "moved", "/s");
	for (unsigned t = 0; t < ntiers(s); t++) {
		const struct ta_shm_agent_tier *m = &a->tier[t];
		char v[6][24];
		count(ld(&m->promoted), 12, v[0], sizeof(v[0]));
		count(ld(&m->promoted_rate), 10, v[1], sizeof(v[1]));
		count(ld(&m->demoted), 12, v[2], sizeof(v[2]));
		count(ld(&m->demoted_rate), 10, v[3], sizeof(v[3]));
		count(ld(&m->moved), 12, v[4], sizeof(v[4]));
		count(ld(&m->moved_rate), 10, v[5], sizeof(v[5]));
		printf("%-4u %12s %10s %12s %10s %12s %10s\n", t, v[0], v[1], v[2], v[3], v[4],
		       v[5]);
	}
}

static void print_access(const struct seg *s)
{
	const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
	if (acc == NULL) {
		printf("hot and cold: n/a (segment made before the access block, tieralloc < ABI "
		       "1.3)\n");
		return;
	}
	printf("hot and cold by writes lately (soft-dirty; each process's last sample), and the "
	       "exchange:\n");
	printf("%-4s %10s %10s %10s %10s\n", "tier", "hot", "cold", "promoted", "moved-down");
	for (unsigned t = 0; t < ntiers(s); t++) {
		uint64_t hot, cold;
		char v[4][16];
		access_sums(s, t, &hot, &cold);
		human(hot, v[0], sizeof(v[0]));
		human(cold, v[1], sizeof(v[1]));
		human(ld(&acc->promoted[t]), v[2], sizeof(v[2]));
		human(ld(&acc->exchanged_down[t]), v[3], sizeof(v[3]));
		printf("%-4u %10s %10s %10s %10s\n", t, v[0], v[1], v[2], v[3]);
	}
}

/* The lending block (ABI minor 5) and whether its loans count now (CLOCK_MONOTONIC before the
 * agent's expiry): a lapsed loan is shown as none. */
static const struct ta_shm_lend *lending(const struct seg *s, bool *live)
{
	const struct ta_shm_lend *l = ta_shm_lend_block(s->hdr, s->size);
	*live = l != NULL && ta_seg_lend_live(l);
	return l;
}

/* One line per segment in the default table (within TA_STAT_COLUMNS for two tiers); a table with
 * --wide. */
static void print_lending(const struct seg *s, bool wide)
{
	bool live;
	const struct ta_shm_lend *l = lending(s, &live);
	if (l == NULL) {
		printf(
		    "lending: n/a (segment made before the lending block, tieralloc < ABI 1.5)\n");
		return;
	}
	if (wide) {
		printf("lending: priority %u, loans %s\n", ta_seg_priority(l),
		       live ? "live (the agent renews them)" : "none or lapsed");
		printf("%-4s %10s %10s %10s %10s %10s %10s %12s\n", "tier", "share", "loan", "lent",
		       "yielded", "borrowed", "taken_back", "take_back_s");
		for (unsigned t = 0; t < ntiers(s); t++) {
			const struct ta_shm_lend_tier *lt = &l->tier[t];
			char v[6][16];
			human(ld(&tier_rec(s, t)->limit[TA_LIMIT_HIGH]), v[0], sizeof(v[0]));
			human(live ? ld(&lt->loan) : 0, v[1], sizeof(v[1]));
			human(live ? ld(&lt->lent) : 0, v[2], sizeof(v[2]));
			human(live ? ld(&lt->yielded) : 0, v[5], sizeof(v[5]));
			human(ld(&lt->borrowed), v[3], sizeof(v[3]));
			human(ld(&lt->taken_back), v[4], sizeof(v[4]));
			printf("%-4u %10s %10s %10s %10s %10s %10s %12.3f\n", t, v[0], v[1], v[2],
			       v[5], v[3], v[4], (double)ld(&lt->take_back_ns) / 1e9);
		}
		return;
	}
	printf("lending: priority %u\n", ta_seg_priority(l));
	for (unsigned t = 0; t < ntiers(s); t++) {
		char share[16], loan[16], lent[16], yielded[16];
		const struct ta_shm_lend_tier *lt = &l->tier[t];
		human(ld(&tier_rec(s, t)->limit[TA_LIMIT_HIGH]), share, sizeof(share));
		human(live ? ld(&lt->loan) : 0, loan, sizeof(loan));
		human(live ? ld(&lt->lent) : 0, lent, sizeof(lent));
		human(live ? ld(&lt->yielded) : 0, yielded, sizeof(yielded));
		printf("  tier %u: share %s, loan %s, lent %s, yielded %s\n", t, share, loan, lent,
		       yielded);
	}
}

/* The segment's heading: its name, where it was seen, its processes and its cgroup. One line
 * with --wide; in the default table two, each at most TA_STAT_COLUMNS wide (the name and the path
 * elided in their middle). */
static void print_heading(const struct seg *s, bool wide)
{
	char name[4 * sizeof(s->name) + 8], path[4 * TA_SHM_PATH_MAX + 8], where[48] = "";
	char procs[128], version[64], id[32] = "";
	text_escape(s->name, name, sizeof(name));
	text_escape(s->cgroup_path[0] ? s->cgroup_path : "(none)", path, sizeof(path));
	if (s->place->via_pid != 0)
		snprintf(where, sizeof(where), " (mount ns of pid %d)", s->place->via_pid);
	if (s->hdr->cgroup_version == 2)
		snprintf(id, sizeof(id), ", id %llu", (unsigned long long)s->hdr->cgroup_id);
	snprintf(version, sizeof(version), " (v%u%s)", s->hdr->cgroup_version, id);
	int len = snprintf(procs, sizeof(procs), "  %u process(es)", s->alive);
	if (s->dead != 0)
		len += snprintf(procs + len, sizeof(procs) - (size_t)len, ", %u dead slot(s)",
				s->dead);
	if (s->gone)
		snprintf(procs + len, sizeof(procs) - (size_t)len, ": gone");
	if (wide) {
		printf("%s%s  cgroup %s%s%s\n", name, where, path, version, procs);
	} else {
		char fit[sizeof(path)];
		elide(name, TA_STAT_COLUMNS - strlen(where) - strlen(procs), fit, sizeof(fit));
		printf("%s%s%s\n", fit, where, procs);
		elide(path, TA_STAT_COLUMNS - strlen("cgroup ") - strlen(version), fit,
		      sizeof(fit));
		printf("cgroup %s%s\n", fit, version);
	}
	if (s->gone)
		printf("gone: its processes died; charges shown as they are once taken back (0); "
		       "--reap removes it\n");
}

static void print_table(struct seg *s, bool wide)
{
	if (s->error != NULL) {
		text_print(s->name);
		printf(": unreadable: %s\n\n", s->error);
		return;
	}
	print_heading(s, wide);
	if (!reclaim_available(s))
		printf("memory.reclaim: not available (cgroup v1, no cgroup, or Linux < 5.19): an "
		       "excess stays\n");
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = observed(s, obs);
	if (wide)
		printf("%-4s %-8s %-6s %6s %10s %10s %10s %10s %10s %10s %10s %10s %12s %10s %11s "
		       "%10s %10s %13s %5s\n",
		       "tier", "name", "nodes", "share", "min", "low", "high", "max", "charged",
		       "peak", "observed", "headroom", "steered_away", "overflowed", "refused_max",
		       "reclaimed", "demoted", "reclaim_asked", "gated");
	else
		printf("%-4s %-8s %10s %10s %10s %10s %10s %12s %10s %5s\n", "tier", "name", "high",
		       "max", "charged", "observed", "headroom", "steered_away", "overflowed",
		       "gated");
	for (unsigned t = 0; t < ntiers(s); t++) {
		const struct ta_shm_tier *r = tier_rec(s, t);
		char nodes[64], v[12][24], name[4 * TIER_NAME_MAX + 1];
		text_escape(tier_name(s, t), name, sizeof(name));
		ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			human(ld(&r->limit[k]), v[k], sizeof(v[k]));
		uint64_t charged = charged_of(s, r), high = ld(&r->limit[TA_LIMIT_HIGH]);
		human(charged, v[4], sizeof(v[4]));
		if (have_obs)
			human(obs[t], v[5], sizeof(v[5]));
		else
			snprintf(v[5], sizeof(v[5]), "n/a");
		human(high > charged ? high - charged : 0, v[6], sizeof(v[6]));
		const char *gated = "n/a";
		if (has_enforcement(s)) {
			human(ld(&r->demoted), v[7], sizeof(v[7]));
			human(ld(&r->reclaim_asked), v[8], sizeof(v[8]));
			gated = ld(&r->gated) ? "yes" : "no";
		} else {
			snprintf(v[7], sizeof(v[7]), "n/a");
			snprintf(v[8], sizeof(v[8]), "n/a");
		}
		human(ld(&r->peak), v[9], sizeof(v[9]));
		human(ld(&r->reclaimed), v[10], sizeof(v[10]));
		char steered[24], overflowed[24], refused[24];
		count(ld(&r->steered_away), 12, steered, sizeof(steered));
		count(ld(&r->overflowed), 10, overflowed, sizeof(overflowed));
		count(ld(&r->exhausted), 11, refused, sizeof(refused));
		if (wide)
			printf(
			    "%-4u %-8.8s %-6s %5.1f%% %10s %10s %10s %10s %10s %10s %10s %10s %12s "
			    "%10s %11s %10s %10s %13s %5s\n",
			    t, name, nodes,
			    atomic_load(&((struct ta_shm_tier *)r)->share_ppm) / 10000.0, v[0],
			    v[1], v[2], v[3], v[4], v[9], v[5], v[6], steered, overflowed, refused,
			    v[10], v[7], v[8], gated);
		else
			printf("%-4u %-8.8s %10s %10s %10s %10s %10s %12s %10s %5s\n", t, name,
			       v[TA_LIMIT_HIGH], v[TA_LIMIT_MAX], v[4], v[5], v[6], steered,
			       overflowed, gated);
	}
	print_migrations(s);
	print_access(s);
	print_lending(s, wide);
	printf("\n");
}

static void print_json(struct seg *s, bool first)
{
	static const char *const limit_names[TA_NLIMITS] = { "min", "low", "high", "max" };
	printf("%s{\"name\":", first ? "" : ",");
	json_string(s->name);
	if (s->error != NULL) {
		printf(",\"error\":");
		json_string(s->error);
		printf("}");
		return;
	}
	if (s->place->via_pid != 0)
		printf(",\"namespace_pid\":%d", s->place->via_pid);
	else
		printf(",\"namespace_pid\":null");
	printf(",\"cgroup\":{\"path\":");
	json_string(s->cgroup_path);
	printf(",\"id\":%llu,\"version\":%u},\"processes\":%u,\"dead_slots\":%u,\"gone\":%s,"
	       "\"generation\":%llu,\"reclaim_available\":%s,\"tiers\":[",
	       (unsigned long long)s->hdr->cgroup_id, s->hdr->cgroup_version, s->alive, s->dead,
	       s->gone ? "true" : "false",
	       (unsigned long long)ld(&((struct ta_shm_header *)s->hdr)->generation),
	       reclaim_available(s) ? "true" : "false");
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = observed(s, obs);
	const char *agent_why;
	uint64_t agent_age;
	const struct ta_shm_agent *agent = agent_counts(s, &agent_why, &agent_age);
	for (unsigned t = 0; t < ntiers(s); t++) {
		const struct ta_shm_tier *r = tier_rec(s, t);
		char nodes[64];
		ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
		printf("%s{\"tier\":%u,\"name\":", t ? "," : "", t);
		json_string(tier_name(s, t));
		printf(",\"nodes\":");
		json_string(nodes);
		printf(",\"capacity\":%llu,\"share_ppm\":%u", (unsigned long long)ld(&r->capacity),
		       atomic_load(&((struct ta_shm_tier *)r)->share_ppm));
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			printf(",\"%s\":%llu", limit_names[k],
			       (unsigned long long)ld(&r->limit[k]));
		uint64_t charged = charged_of(s, r), high = ld(&r->limit[TA_LIMIT_HIGH]);
		printf(",\"charged\":%llu,\"peak\":%llu,\"observed\":", (unsigned long long)charged,
		       (unsigned long long)ld(&r->peak));
		if (have_obs)
			printf("%llu", (unsigned long long)obs[t]);
		else
			printf("null");
		printf(",\"headroom\":%llu,\"steered_away\":%llu,\"overflowed\":%llu,"
		       "\"refused_max\":%llu,\"reclaimed\":%llu",
		       (unsigned long long)(high > charged ? high - charged : 0),
		       (unsigned long long)ld(&r->steered_away),
		       (unsigned long long)ld(&r->overflowed),
		       (unsigned long long)ld(&r->exhausted),
		       (unsigned long long)ld(&r->reclaimed));
		/* Enforcement (ABI minor 1); null from an older segment. */
		if (has_enforcement(s))
			printf(",\"untracked\":%llu,\"demoted\":%llu,\"reclaim_asked\":%llu,"
			       "\"reclaims\":%llu,\"gated\":%s",
			       (unsigned long long)ld(&r->untracked),
			       (unsigned long long)ld(&r->demoted),
			       (unsigned long long)ld(&r->reclaim_asked),
			       (unsigned long long)ld(&r->reclaims),
			       ld(&r->gated) ? "true" : "false");
		else
			printf(",\"untracked\":null,\"demoted\":null,\"reclaim_asked\":null,"
			       "\"reclaims\":null,\"gated\":null");
		/* Hot and cold bytes, what the exchange moved (ABI minor 3); null before. */
		uint64_t hot, cold;
		const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
		if (access_sums(s, t, &hot, &cold))
			printf(",\"access\":{\"hot\":%llu,\"cold\":%llu,\"promoted\":%llu,"
			       "\"exchanged_down\":%llu}",
			       (unsigned long long)hot, (unsigned long long)cold,
			       (unsigned long long)ld(&acc->promoted[t]),
			       (unsigned long long)ld(&acc->exchanged_down[t]));
		else
			printf(",\"access\":null");
		/* Loans (ABI minor 5); null before. */
		bool lend_live;
		const struct ta_shm_lend *lend = lending(s, &lend_live);
		if (lend != NULL)
			printf(",\"lend\":{\"loan\":%llu,\"lent\":%llu,\"yielded\":%llu,"
			       "\"borrowed\":%llu,\"taken_back\":%llu,\"take_backs\":%llu,"
			       "\"take_back_ns\":%llu}",
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].loan) : 0),
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].lent) : 0),
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].yielded) : 0),
			       (unsigned long long)ld(&lend->tier[t].borrowed),
			       (unsigned long long)ld(&lend->tier[t].taken_back),
			       (unsigned long long)ld(&lend->tier[t].take_backs),
			       (unsigned long long)ld(&lend->tier[t].take_back_ns));
		else
			printf(",\"lend\":null");
		/* The agent's counts (ABI minor 2), in pages; null without an agent. */
		if (agent != NULL) {
			const struct ta_shm_agent_tier *m = &agent->tier[t];
			printf(",\"migrations\":{\"promoted\":%llu,\"promoted_rate\":%llu,"
			       "\"demoted\":%llu,\"demoted_rate\":%llu,\"moved\":%llu,"
			       "\"moved_rate\":%llu}}",
			       (unsigned long long)ld(&m->promoted),
			       (unsigned long long)ld(&m->promoted_rate),
			       (unsigned long long)ld(&m->demoted),
			       (unsigned long long)ld(&m->demoted_rate),
			       (unsigned long long)ld(&m->moved),
			       (unsigned long long)ld(&m->moved_rate));
		} else {
			printf(",\"migrations\":null}");
		}
	}
	bool lend_live;
	const struct ta_shm_lend *lend = lending(s, &lend_live);
	if (lend != NULL)
		printf("],\"priority\":%u,\"loans_live\":%s", ta_seg_priority(lend),
		       lend_live ? "true" : "false");
	else
		printf("],\"priority\":null,\"loans_live\":null");
	printf(",\"agent\":{\"available\":%s,\"why_not\":", agent ? "true" : "false");
	if (agent != NULL)
		printf("null,\"age_ms\":%llu,\"exact_nodes\":%s,\"alarms\":%llu}",
		       (unsigned long long)agent_age,
		       atomic_load(&((struct ta_shm_agent *)agent)->flags) &
			       TA_SHM_AGENT_EXACT_NODES
			   ? "true"
			   : "false",
		       (unsigned long long)ld(&agent->alarm));
	else {
		json_string(agent_why);
		printf(",\"age_ms\":null,\"exact_nodes\":null,\"alarms\":null}");
	}
	printf("}");
}

/* What the exposition shows of a segment that validated: what --json shows, as numbers. */
static void snapshot(struct seg *s, struct ta_prom_segment *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->segment, sizeof(p->segment), "%s", s->name);
	snprintf(p->cgroup, sizeof(p->cgroup), "%s", s->cgroup_path);
	p->processes = s->alive;
	p->dead_slots = s->dead;
	p->ntiers = ntiers(s);
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = observed(s, obs);
	const char *why;
	uint64_t age_ms;
	const struct ta_shm_agent *agent = agent_counts(s, &why, &age_ms);
	const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
	for (unsigned t = 0; t < p->ntiers; t++) {
		const struct ta_shm_tier *r = tier_rec(s, t);
		struct ta_prom_tier *pt = &p->tier[t];
		ta_seg_prom_tier(r, has_enforcement(s), pt);
		pt->charged = charged_of(s, r);
		pt->have_observed = have_obs;
		pt->observed = have_obs ? obs[t] : 0;
		pt->have_access = access_sums(s, t, &pt->hot, &pt->cold);
		if (pt->have_access)
			ta_seg_prom_exchange(acc, t, pt);
		pt->have_agent = agent != NULL;
		if (agent != NULL) {
			pt->kernel_promoted = ld(&agent->tier[t].promoted);
			pt->kernel_demoted = ld(&agent->tier[t].demoted);
			pt->kernel_moved = ld(&agent->tier[t].moved);
		}
	}
	bool lend_live;
	const struct ta_shm_lend *lend = lending(s, &lend_live);
	if (lend != NULL)
		ta_seg_prom_lend(lend, lend_live, p->ntiers, p);
}

enum format { TABLE, JSON, PROMETHEUS, RECORD };

/* One listing: its options, and what it found. */
struct run {
	enum format format;
	bool wide, reap;
	const char *only;     /* --name, without its "/" */
	const char *policies; /* the agent's status file */
	bool policies_given;  /* --policies: its absence is an error */
	unsigned shown;	      /* segments printed (or kept for the exposition) */
	bool bad;	      /* a named segment could not be read, or a write failed */
};

/* The snapshots for --prometheus, written once all segments are read (a metric's samples must
 * come together). */
static struct ta_prom_segment *prom_segs;
static unsigned prom_n, prom_cap;

/* Say what --reap did (stdout with the table, stderr otherwise: the document stays one). */
static void say(const struct run *r, const struct seg *s, const char *what)
{
	char name[4 * sizeof(s->name) + 8];
	text_escape(s->name, name, sizeof(name));
	FILE *f = r->format == TABLE ? stdout : stderr;
	fprintf(f, "tieralloc-stat: %s%s: %s\n", name,
		s->place->via_pid != 0 ? " (in another mount namespace)" : "", what);
}

/* Unlink a gone segment, if it still is gone: read again just before (a process may have
 * attached meanwhile), no process may map it, and the name must still be that file. Its owner
 * or root may (/dev/shm is sticky); anyone else is told why not. */
static void reap(struct run *r, const struct seg *s, const char *file)
{
	struct seg again;
	bool still = open_seg(s->place, file, &again) == 0 && again.gone && again.dev == s->dev &&
		     again.ino == s->ino;
	free(again.buf);
	if (!still) {
		say(r, s, "not removed: it changed while read (a process attached?)");
		return;
	}
	if (ta_file_mapped(s->dev, s->ino)) {
		say(r, s, "not removed: a process still maps it");
		return;
	}
	struct stat st;
	if (fstatat(s->place->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != s->dev ||
	    st.st_ino != s->ino) {
		say(r, s, "not removed: the name is another file now");
		return;
	}
	char what[160];
	if (unlinkat(s->place->dirfd, file, 0) == 0)
		snprintf(what, sizeof(what), "removed (gone: %u dead slot(s), owner uid %u)",
			 s->dead, (unsigned)s->owner);
	else if (errno == EPERM || errno == EACCES)
		snprintf(what, sizeof(what),
			 "not removed: owned by uid %u (its owner or root may remove it)",
			 (unsigned)s->owner);
	else
		snprintf(what, sizeof(what), "not removed: %s", strerror(errno));
	say(r, s, what);
}

/* One segment that opened (or was named): printed (or kept for the exposition), reaped if
 * asked, let go. A named segment that cannot be read is said on stderr for the exposition (it
 * has no values there). */
static void show(struct run *r, struct seg *s, const char *file, bool named)
{
	if (r->format == JSON) {
		print_json(s, r->shown == 0);
	} else if (r->format == TABLE) {
		print_table(s, r->wide);
	} else if (s->error == NULL) {
		if (prom_n == prom_cap) {
			unsigned cap = prom_cap ? 2 * prom_cap : 16;
			struct ta_prom_segment *p = realloc(prom_segs, cap * sizeof(*p));
			if (p == NULL) {
				r->bad = true;
				return;
			}
			prom_segs = p;
			prom_cap = cap;
		}
		snapshot(s, &prom_segs[prom_n++]);
	} else if (named) {
		char name[4 * sizeof(s->name) + 8];
		text_escape(s->name, name, sizeof(name));
		fprintf(stderr, "tieralloc-stat: %s: unreadable: %s\n", name, s->error);
	}
	r->shown++;
	if (r->reap && s->error == NULL && s->gone)
		reap(r, s, file);
}

/* A file found by the scan: shown if it is a segment (others are not tieralloc's business). */
static void visit(const struct ta_place *p, const char *file, void *ctx)
{
	struct run *r = ctx;
	/* With --name, our own directory's file was shown already, readable or not. */
	if (r->only != NULL && (p->via_pid == 0 || strcmp(file, r->only) != 0))
		return;
	struct seg s;
	if (open_seg(p, file, &s) == 0)
		show(r, &s, file, false);
	free(s.buf);
}

/* Every segment, or those named --name (ours, and any of other mount namespaces); false when a
 * named one could be read nowhere. */
static bool show_all(struct run *r)
{
	r->shown = 0;
	r->bad = false;
	if (r->format == JSON)
		printf("{\"version\":1,\"segments\":[");
	prom_n = 0;
	if (r->only != NULL) {
		struct ta_place own = { .proc = "/proc" };
		snprintf(own.dir, sizeof(own.dir), "%s", shm_dir);
		own.dirfd = open(shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct seg s;
		int rc = open_seg(&own, r->only, &s);
		/* Missing here: perhaps in another namespace; said below if nowhere. */
		struct stat st;
		bool missing = rc != 0 && own.dirfd >= 0 &&
			       fstatat(own.dirfd, r->only, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
			       errno == ENOENT;
		if (!missing) {
			show(r, &s, r->only, true);
			r->bad |= rc != 0;
		}
		free(s.buf);
		ta_scan(shm_dir, visit, r);
		if (r->shown == 0) {
			open_seg(&own, r->only, &s);
			show(r, &s, r->only, true);
			free(s.buf);
			r->bad = true;
		}
		if (own.dirfd >= 0)
			close(own.dirfd);
	} else {
		ta_scan(shm_dir, visit, r);
		if (r->shown == 0 && r->format == TABLE)
			printf(
			    "no tieralloc segments in %s or in other mount namespaces' /dev/shm\n",
			    shm_dir);
	}
	if (r->format == JSON)
		printf("]");
	if (r->format != PROMETHEUS && r->only == NULL &&
	    !ta_stat_show_policies(r->policies, r->policies_given, r->format == JSON))
		r->bad = true;
	if (r->format == JSON)
		printf("}\n");
	if (r->format == PROMETHEUS && ta_prom_write(stdout, prom_segs, prom_n) != 0)
		r->bad = true;
	return !r->bad;
}

/* --record's samples: the segments as --prometheus reads them (show keeps their snapshots). */
static unsigned record_collect(void *run, const struct ta_prom_segment **segs)
{
	show_all(run);
	*segs = prom_segs;
	return prom_n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tieralloc-stat [--json|--prometheus] [--wide] [--watch SECONDS] "
		   "[--name SEGMENT] [--reap]\n"
		   "  Shows the per-cgroup, per-tier quotas of tieralloc processes (segments in "
		   "/dev/shm,\n"
		   "  and in the /dev/shm of other mount namespaces, through /proc/PID/root).\n"
		   "  --json          one JSON document instead of the table\n"
		   "  --prometheus    Prometheus' text exposition format instead of the table\n"
		   "  --wide          every column (the default table fits 100 columns)\n"
		   "  --watch N       redraw the table every N seconds (Ctrl-C to stop)\n"
		   "  --name SEGMENT  only this segment (e.g. /tieralloc-v1-cg123-t1a2b3c4d)\n"
		   "  --reap          remove the segments shown gone (all their processes died)\n"
		   "  --policies FILE what tierallocd's policies decided, from FILE (default\n"
		   "                  " TA_POLICIES_DEFAULT ", shown when it exists)\n"
		   "  --version       print \"tieralloc-stat VERSION\" and exit\n");
	fputs(TA_RECORD_USAGE, f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "watch", required_argument, NULL, 'w' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "wide", no_argument, NULL, 'W' },
		{ "reap", no_argument, NULL, 'R' },
		{ "policies", required_argument, NULL, 'P' },
		{ "record", required_argument, NULL, TA_OPT_RECORD },
		{ "interval", required_argument, NULL, TA_OPT_INTERVAL },
		{ "samples", required_argument, NULL, TA_OPT_SAMPLES },
		{ "duration", required_argument, NULL, TA_OPT_DURATION },
		{ NULL, 0, NULL, 0 },
	};
	struct run r = { .format = TABLE, .policies = TA_POLICIES_DEFAULT };
	unsigned watch = 0;
	struct ta_record rec = { 0 };
	int c;
	while ((c = getopt_long(argc, argv, "jw:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
		case 'p':
			if (r.format != TABLE) {
				fprintf(
				    stderr,
				    "tieralloc-stat: --json and --prometheus exclude each other\n");
				return 2;
			}
			r.format = c == 'j' ? JSON : PROMETHEUS;
			break;
		case 'w': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v == 0 || v > 3600) {
				fprintf(stderr, "tieralloc-stat: --watch takes 1..3600 seconds\n");
				return 2;
			}
			watch = (unsigned)v;
			break;
		}
		case 'n':
			r.only = optarg[0] == '/' ? optarg + 1 : optarg;
			break;
		case 'W':
			r.wide = true;
			break;
		case 'R':
			r.reap = true;
			break;
		case 'P':
			r.policies = optarg;
			r.policies_given = true;
			break;
		case TA_OPT_RECORD:
		case TA_OPT_INTERVAL:
		case TA_OPT_SAMPLES:
		case TA_OPT_DURATION:
			if (ta_record_option(&rec, c, optarg) != 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V': /* long only: PACKAGE_VERSION is configure's, from the VERSION file */
			printf("tieralloc-stat %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (rec.path == NULL && rec.options_seen)) {
		usage(stderr);
		return 2;
	}
	/* A recording is its own format on its own schedule, and it only reads (no --reap). */
	if (rec.path != NULL && (r.format != TABLE || watch != 0 || r.reap)) {
		fprintf(
		    stderr,
		    "tieralloc-stat: --record excludes --json, --prometheus, --watch and --reap\n");
		return 2;
	}
	if (rec.path != NULL) {
		r.format = RECORD;
		return ta_record_run(&rec, record_collect, &r);
	}
	for (;;) {
		if (watch != 0 && r.format == TABLE)
			printf("\033[H\033[2J");
		bool ok = show_all(&r);
		fflush(stdout);
		if (watch == 0)
			return ok ? 0 : 1;
		sleep(watch);
	}
}
