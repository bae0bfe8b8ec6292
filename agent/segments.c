/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of the shared segments: it finds every tieralloc segment on the machine and
 * keeps those it can trust; the other files of the segment set (segset.h) check their processes
 * and cgroup, publish the kernel's migrations into them, lend, and read them for the metrics.
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
 *
 * And any user can make files named tieralloc-*, as many as their tmpfs holds, so the work is
 * bounded (struct ta_agent_limits) and one user's files cannot crowd out another's:
 * - a directory entry costs one fstatat per rescan; only then is a file opened, and of a file only
 *   the header, tier records and agent block are read (its slots too when a limit is reached),
 *   never the whole file;
 * - files opened per rescan are counted per owner and per directory; root's are not (only root
 *   makes them), the rest wait for a later rescan;
 * - a file that was refused (invalid, or over a limit) is remembered by inode, size and times,
 *   and not opened again for a number of rescans unless it changes;
 * - segments kept are capped in all and per owner other than root (each holds a descriptor; the
 *   agent raises its descriptor limit to fit). At a cap, a better segment replaces a worse one:
 *   root's before others', one whose slots hold a live process of the file's owner (pid and start
 *   time checked in the /proc of the segment's namespace) before one without.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "base/base.h"
#include "quota/shm.h"
#include "segment.h"
#include "segset.h"
#include "walk.h"

_Static_assert(sizeof(struct ta_shm_header) + TA_SHM_MAX_TIERS * MAX_TIER_SIZE +
		       sizeof(struct ta_shm_agent) <=
		   4096,
	       "what is read of a file fits TA_AGENT_READ_MAX");

const struct ta_agent_limits ta_agent_default_limits = {
	.max_segments = 1024,
	.max_per_uid = 32,
	.opens_per_uid = 8,
	.opens_per_dir = 256,
	.retry_rescans = 30, /* a minute at the default 2 s */
	.max_refused = 65536,
};

static struct file_id file_id_of(const struct stat *st)
{
	return (struct file_id){ st->st_dev,  st->st_ino,  st->st_uid,
				 st->st_size, st->st_mtim, st->st_ctim };
}

static bool same_version(const struct file_id *a, const struct file_id *b)
{
	return a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec && a->owner == b->owner;
}

static unsigned bucket(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
	return (unsigned)(h >> 40) % BUCKETS;
}

static struct segment *find(struct ta_agent_segments *set, dev_t dev, ino_t ino)
{
	for (struct segment *s = set->list; s != NULL; s = s->next)
		if (s->id.dev == dev && s->id.ino == ino)
			return s;
	return NULL;
}

static struct owner *owner_of(struct ta_agent_segments *set, uid_t uid)
{
	struct owner **head = &set->owners[uid % BUCKETS];
	for (struct owner *o = *head; o != NULL; o = o->next)
		if (o->uid == uid)
			return o;
	struct owner *o = calloc(1, sizeof(*o));
	if (o != NULL) {
		o->uid = uid;
		o->next = *head;
		*head = o;
	}
	return o;
}

/* ---- refused files ---- */

static struct refused **refused_link(struct ta_agent_segments *set, const struct file_id *id)
{
	struct refused **p = &set->refused[bucket(id->dev, id->ino)];
	while (*p != NULL && ((*p)->id.dev != id->dev || (*p)->id.ino != id->ino))
		p = &(*p)->next;
	return p;
}

/* Whether the file is one refused lately, unchanged since (it counts as seen then). */
static bool refused_lately(struct ta_agent_segments *set, const struct file_id *id)
{
	struct refused **p = refused_link(set, id);
	struct refused *r = *p;
	if (r == NULL)
		return false;
	if (same_version(&r->id, id) && set->round < r->until) {
		r->seen = true;
		return true;
	}
	*p = r->next;
	free(r);
	set->nrefused--;
	return false;
}

/* Remember a file opened and not kept, so that it is not opened again for a while. */
static void remember(struct ta_agent_segments *set, const struct file_id *id)
{
	struct refused **p = refused_link(set, id);
	if (*p == NULL) {
		if (set->nrefused >= set->limits.max_refused)
			return; /* not remembered: opened again, within the budgets */
		*p = calloc(1, sizeof(**p));
		if (*p == NULL)
			return;
		set->nrefused++;
	}
	(*p)->id = *id;
	(*p)->until = set->round + set->limits.retry_rescans;
	(*p)->seen = true;
}

static void refuse(struct ta_agent_segments *set, const struct file_id *id)
{
	set->cur.refused++;
	remember(set, id);
}

/* Which segment to keep first: root's, then one with live processes. */
static unsigned rank(uid_t owner, bool live)
{
	return (owner == 0 ? 2u : 0u) + (live ? 1u : 0u);
}

/* ---- finding segments ---- */

/* Read len bytes at off into buf, counted. */
bool seg_read_at(struct ta_agent_segments *set, int fd, void *buf, size_t len, uint64_t off)
{
	if (pread(fd, buf, len, (off_t)off) != (ssize_t)len)
		return false;
	set->cur.bytes_read += len;
	return true;
}

/* Read and check the header, the tiers' node masks and the agent block; fill the snapshot. */
static bool take_header(struct ta_agent_segments *set, struct segment *s)
{
	struct ta_shm_header h;
	const char *why = NULL;
	if (!seg_read_at(set, s->fd, &h, sizeof(h), 0) ||
	    ta_seg_header_ok(&h, s->size, &why) != 0 || ta_shm_agent_block(&h, s->size) == NULL ||
	    h.tier_size > MAX_TIER_SIZE)
		return false;
	s->cgroup_id = h.cgroup_id;
	s->ntiers = atomic_load(&h.ntiers);
	if (s->ntiers > TA_SHM_MAX_TIERS)
		s->ntiers = TA_SHM_MAX_TIERS;
	s->tiers_off = h.tiers_off;
	s->tier_size = h.tier_size;
	s->slots_off = h.slots_off;
	s->slot_size = h.slot_size;
	s->max_slots = h.max_slots < TA_SHM_MAX_SLOTS ? h.max_slots : TA_SHM_MAX_SLOTS;
	s->agent_off = h.agent_off;
	s->lend_off = ta_shm_lend_block(&h, s->size) != NULL ? h.lend_off : 0;
	s->yields = s->lend_off != 0 && h.abi_minor >= 6;
	size_t plen = strnlen(h.cgroup_path, sizeof(h.cgroup_path));
	memcpy(s->cgroup_path, h.cgroup_path, plen);
	s->cgroup_path[plen] = '\0';
	/* Go on from what an earlier agent wrote: the processes compare the alarm with the last
	 * one they took, so it must not repeat a value. */
	struct ta_shm_agent agent;
	if (!seg_read_at(set, s->fd, &agent, sizeof(agent), s->agent_off))
		return false;
	s->seq = atomic_load(&agent.seq);
	s->alarm = atomic_load(&agent.alarm);
	char tiers[TA_SHM_MAX_TIERS * MAX_TIER_SIZE];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	if (!seg_read_at(set, s->fd, tiers, tiers_len, s->tiers_off))
		return false;
	for (unsigned t = 0; t < s->ntiers; t++) {
		struct ta_shm_tier *r = (void *)(tiers + (size_t)t * s->tier_size);
		s->nodes[t] = atomic_load(&r->nodes);
	}
	return true;
}

static void nsproc_put(struct ta_agent_segments *set, struct nsproc *ns)
{
	if (ns == NULL || ns == &set->no_proc || --ns->refs > 0)
		return;
	for (struct nsproc **p = &set->nsprocs; *p != NULL; p = &(*p)->next)
		if (*p == ns) {
			*p = ns->next;
			break;
		}
	close(ns->fd);
	free(ns);
}

static void segment_free(struct ta_agent_segments *set, struct segment *s)
{
	if (s->map != NULL)
		munmap((void *)s->map, s->size);
	close(s->fd);
	nsproc_put(set, s->ns);
	free(s);
}

/* Stop keeping s (it was replaced by a better one): remembered as refused. */
static void evict(struct ta_agent_segments *set, struct segment *s, bool verbose)
{
	for (struct segment **p = &set->list; *p != NULL; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	struct owner *o = owner_of(set, s->id.owner);
	if (o != NULL && o->kept > 0)
		o->kept--;
	set->nkept--;
	set->cur.evicted++;
	if (verbose)
		printf("tierallocd: segment %s: dropped for a segment with live processes\n",
		       s->path);
	/* As it is now: the agent's own writes changed its times since it was opened. */
	struct stat st;
	if (fstat(s->fd, &st) == 0 && st.st_ino == s->id.ino && st.st_dev == s->id.dev)
		s->id = file_id_of(&st);
	remember(set, &s->id);
	segment_free(set, s);
}

/* A kept segment to give up for one of rank r: one ranked below r, of that owner only when
 * owner_only; NULL if none. Liveness is checked (once per rescan) only where it decides. */
static struct segment *victim(struct ta_agent_segments *set, unsigned r, bool owner_only,
			      uid_t owner)
{
	for (struct segment *s = set->list; s != NULL; s = s->next) {
		if ((owner_only && s->id.owner != owner) || rank(s->id.owner, false) >= r)
			continue;
		if (rank(s->id.owner, seg_live(set, s)) < r)
			return s;
	}
	return NULL;
}

/* Whether a segment of this owner, if valid and live, could be kept. */
static bool could_keep(struct ta_agent_segments *set, struct owner *o, uid_t uid)
{
	if (uid != 0 && o->kept >= set->limits.max_per_uid &&
	    victim(set, rank(uid, true), true, uid) == NULL)
		return false;
	return set->nkept < set->limits.max_segments ||
	       victim(set, rank(uid, true), false, uid) != NULL;
}

static void consider(struct ta_agent_segments *set, int dirfd, const char *dir, struct nsproc *ns,
		     const char *name, unsigned *dir_opened, bool verbose)
{
	/* First what costs no open: type, links, size, owner, and whether it is known. */
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || !ta_seg_size_ok(st.st_size))
		return;
	struct segment *known = find(set, st.st_dev, st.st_ino);
	if (known != NULL) {
		known->seen = true;
		return;
	}
	struct file_id id = file_id_of(&st);
	if (refused_lately(set, &id))
		return;
	struct owner *o = owner_of(set, st.st_uid);
	if (o == NULL)
		return;
	if (!could_keep(set, o, st.st_uid)) {
		refuse(set, &id); /* a limit is reached with nothing it could replace */
		return;
	}
	if (st.st_uid != 0) {
		if (o->opened >= set->limits.opens_per_uid ||
		    *dir_opened >= set->limits.opens_per_dir) {
			set->cur.deferred++;
			return;
		}
		o->opened++;
		(*dir_opened)++;
	}
	/* Look before opening for I/O: opening a device node or FIFO a user put there could block
	 * or have side effects. The O_PATH descriptor pins the inode; reopening it through /proc
	 * opens that same inode, whatever the name points to by then. */
	int path_fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (path_fd < 0)
		return;
	struct statfs fs;
	if (fstat(path_fd, &st) != 0 || st.st_dev != id.dev || st.st_ino != id.ino ||
	    !S_ISREG(st.st_mode) || st.st_nlink != 1 || fstatfs(path_fd, &fs) != 0 ||
	    fs.f_type != TMPFS_MAGIC || !ta_seg_size_ok(st.st_size)) {
		if (fstat(path_fd, &st) == 0 && st.st_dev == id.dev && st.st_ino == id.ino)
			refuse(set, &id); /* not on tmpfs: not opened again for a while */
		close(path_fd);
		return;
	}
	char reopen[64];
	snprintf(reopen, sizeof(reopen), "/proc/self/fd/%d", path_fd);
	int fd = open(reopen, O_RDWR | O_CLOEXEC);
	close(path_fd);
	if (fd < 0)
		return;
	set->cur.opened++;
	struct segment *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		close(fd);
		return;
	}
	s->fd = fd;
	s->id = id;
	s->size = (size_t)st.st_size;
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, name);
	s->ns = ns;
	if (ns != NULL && ns != &set->no_proc)
		ns->refs++;
	if (!take_header(set, s)) {
		refuse(set, &id);
		segment_free(set, s);
		return;
	}
	/* At a limit: kept only in place of a worse segment. */
	bool owner_full = st.st_uid != 0 && o->kept >= set->limits.max_per_uid;
	if (owner_full || set->nkept >= set->limits.max_segments) {
		s->live = seg_live(set, s);
		struct segment *v = victim(set, rank(st.st_uid, s->live), owner_full, st.st_uid);
		if (v == NULL) {
			refuse(set, &id);
			segment_free(set, s);
			return;
		}
		evict(set, v, verbose);
	}
	void *map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		segment_free(set, s);
		return;
	}
	s->map = map;
	s->seen = true;
	s->next = set->list;
	set->list = s;
	o->kept++;
	set->nkept++;
	if (verbose)
		printf("tierallocd: segment %s: cgroup %llu, %u tiers\n", s->path,
		       (unsigned long long)s->cgroup_id, s->ntiers);
	seg_verify(set, s, true);
}

/* dirfd: the directory, open for reading and checked (on tmpfs); it is closed. */
static void scan_dir(struct ta_agent_segments *set, int dirfd, const char *dir, struct nsproc *ns,
		     bool verbose)
{
	DIR *d = fdopendir(dirfd);
	if (d == NULL) {
		close(dirfd);
		return;
	}
	unsigned opened = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "tieralloc-", 10) == 0) {
			set->cur.entries++;
			consider(set, dirfd, dir, ns, e->d_name, &opened, verbose);
		}
	closedir(d);
}

/* Process via's innermost pid (the last of NSpid in our /proc), 0 when it cannot be told. */
static unsigned long inner_pid(int via)
{
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", via);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	const char *line = strstr(text, "\nNSpid:");
	unsigned long inner = 0;
	for (const char *p = line != NULL ? line + 7 : ""; *p != '\0' && *p != '\n';) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			break;
		char *end;
		inner = strtoul(p, &end, 10);
		p = end;
	}
	return inner <= INT32_MAX ? inner : 0;
}

/* The /proc of the mount namespace reached through process via, shared: walked from its root
 * without links (ta_walk_root), on procfs, and trusted only if it shows via itself (its
 * innermost pid there, with the start time our /proc gives): then the pids in the slots of that
 * namespace's segments are looked up in the pid namespace their processes wrote them from;
 * &set->no_proc when it is not so (their processes count as not live). */
static struct nsproc *nsproc_get(struct ta_agent_segments *set, int via)
{
	for (struct nsproc *ns = set->nsprocs; ns != NULL; ns = ns->next)
		if (ns->via == via) {
			ns->refs++;
			return ns;
		}
	struct nsproc *ns = calloc(1, sizeof(*ns));
	if (ns == NULL)
		return &set->no_proc;
	ns->via = via;
	ns->fd = ta_walk_root(via, "proc", PROC_SUPER_MAGIC);
	uint64_t ours, theirs;
	uid_t uid;
	unsigned long inner = inner_pid(via);
	if (ns->fd < 0 || inner == 0 || !seg_proc_stat(set, NULL, (uint32_t)via, &ours, &uid) ||
	    !seg_proc_stat(set, ns, (uint32_t)inner, &theirs, &uid) || ours != theirs) {
		if (ns->fd >= 0)
			close(ns->fd);
		free(ns);
		return &set->no_proc;
	}
	ns->refs = 1;
	ns->next = set->nsprocs;
	set->nsprocs = ns;
	return ns;
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
		struct stat mnt;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", e->d_name);
		if (stat(path, &mnt) != 0 || mnt.st_ino == own.st_ino)
			continue;
		bool dup = false;
		for (unsigned i = 0; i < nseen && !dup; i++)
			dup = seen[i] == mnt.st_ino;
		if (dup || nseen == MAX_NS)
			continue;
		seen[nseen++] = mnt.st_ino;
		snprintf(path, sizeof(path), "/proc/%s/root/dev/shm", e->d_name);
		/* Without following a link (theirs would resolve in our root) and never into a
		 * file system that is not a tmpfs: a FUSE server could hold the agent forever. */
		int via = atoi(e->d_name);
		int dirfd = ta_walk_root(via, "dev/shm", TMPFS_MAGIC);
		if (dirfd < 0)
			continue;
		struct nsproc *ns = nsproc_get(set, via);
		scan_dir(set, dirfd, path, ns, verbose);
		nsproc_put(set, ns);
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
	set->started_ns = seg_realtime_ns();
	set->limits = ta_agent_default_limits;
	set->node_dir = "/sys/devices/system/node";
	set->no_proc.fd = -1;
	snprintf(set->proc_dir, sizeof(set->proc_dir), "/proc");
	seg_cg_mount_find(set->cg_mount, sizeof(set->cg_mount));
	return set;
}

void ta_agent_segments_set_node_dir(struct ta_agent_segments *set, const char *dir)
{
	set->node_dir = dir;
}

void ta_agent_segments_set_proc(struct ta_agent_segments *set, const char *proc_dir,
				const char *cg_mount)
{
	snprintf(set->proc_dir, sizeof(set->proc_dir), "%s", proc_dir);
	snprintf(set->cg_mount, sizeof(set->cg_mount), "%s", cg_mount);
}

void ta_agent_segments_set_limits(struct ta_agent_segments *set, const struct ta_agent_limits *l)
{
	set->limits = *l;
}

void ta_agent_segments_stats(const struct ta_agent_segments *set, struct ta_agent_scan_stats *out)
{
	*out = set->last;
}

void ta_agent_segments_rescan(struct ta_agent_segments *set, bool verbose)
{
	set->round++;
	memset(&set->cur, 0, sizeof(set->cur));
	for (struct segment *s = set->list; s != NULL; s = s->next)
		s->seen = false;
	for (unsigned b = 0; b < BUCKETS; b++) {
		for (struct refused *r = set->refused[b]; r != NULL; r = r->next)
			r->seen = false;
		for (struct owner *o = set->owners[b]; o != NULL; o = o->next)
			o->opened = 0;
	}
	for (const char *const *dir = set->dirs; *dir != NULL; dir++) {
		int dirfd = ta_walk_own(*dir, TMPFS_MAGIC);
		if (dirfd >= 0)
			scan_dir(set, dirfd, *dir, NULL, verbose);
	}
	if (set->scan_proc)
		scan_namespaces(set, verbose);
	/* Its processes may have come, gone or moved: asked again every rescan. */
	for (struct segment *s = set->list; s != NULL; s = s->next)
		if (s->seen && s->verified_round != set->round)
			seg_verify(set, s, false);
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
		struct owner *o = owner_of(set, s->id.owner);
		if (o != NULL && o->kept > 0)
			o->kept--;
		set->nkept--;
		segment_free(set, s);
	}
	/* Forget what is gone, and owners with nothing kept. */
	for (unsigned b = 0; b < BUCKETS; b++) {
		for (struct refused **p = &set->refused[b]; *p != NULL;) {
			struct refused *r = *p;
			if (r->seen) {
				p = &r->next;
				continue;
			}
			*p = r->next;
			free(r);
			set->nrefused--;
		}
		for (struct owner **p = &set->owners[b]; *p != NULL;) {
			struct owner *o = *p;
			if (o->kept > 0) {
				p = &o->next;
				continue;
			}
			*p = o->next;
			free(o);
		}
	}
	set->cur.kept = set->nkept;
	set->last = set->cur;
}

void ta_agent_segments_free(struct ta_agent_segments *set)
{
	if (set == NULL)
		return;
	while (set->list != NULL) {
		struct segment *s = set->list;
		set->list = s->next;
		segment_free(set, s);
	}
	for (unsigned b = 0; b < BUCKETS; b++) {
		while (set->refused[b] != NULL) {
			struct refused *r = set->refused[b];
			set->refused[b] = r->next;
			free(r);
		}
		while (set->owners[b] != NULL) {
			struct owner *o = set->owners[b];
			set->owners[b] = o->next;
			free(o);
		}
	}
	free(set);
}
