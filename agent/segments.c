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
#include <linux/futex.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "base/base.h"
#include "cgpath.h"
#include "prom.h"
#include "quota/shm.h"
#include "segment.h"
#include "walk.h"

#define MAX_TIER_SIZE  512 /* larger tier records are refused (publish reads them on the stack) */
#define SLOTS_READ_MAX 65536
#define BUCKETS	       4096

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

/* What the kernel says of a segment's cgroup (verify()). */
enum cg_state {
	CG_UNKNOWN = 0, /* no live process of its owner maps it (yet): nothing to ask the kernel */
	CG_OK,		/* its header names the cgroup its processes are in */
	CG_FORGED,	/* its header names another cgroup: ignored by the policies */
	CG_NONE,	/* its header names none (cgroup v1), or the kernel shows no cgroup v2 */
};

/* The /proc of another mount namespace's processes, shared by the segments found there: walked
 * from its root without links, on procfs, and showing the pid namespace of the process it was
 * reached through. */
struct nsproc {
	struct nsproc *next;
	int via; /* the pid (ours) its root was reached through */
	int fd;
	unsigned refs;
};

/* A file's identity and version: a refused one is looked at again when any of it changes. */
struct file_id {
	dev_t dev;
	ino_t ino;
	uid_t owner;
	off_t size;
	struct timespec mtime, ctime;
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

struct segment {
	struct segment *next;
	int fd;
	struct file_id id;
	const char *map; /* PROT_READ: addresses for FUTEX_WAKE only, never dereferenced */
	size_t size;
	char path[200];
	struct nsproc *ns; /* the /proc of its processes' pid namespace; NULL: the agent's own */
	bool seen;
	unsigned live_round; /* the rescan whose liveness check live holds, 0: none */
	bool live;
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
	/* Lending (--lend): the block's offset (0: none), what this agent lent last, the
	 * steered_away counts it last saw, and when a take-back began for it as an owner. */
	uint32_t lend_off;
	bool lend_seen;
	bool yields; /* its processes honour a yield (ABI minor 6) */
	uint64_t loan[TA_SHM_MAX_TIERS], lent[TA_SHM_MAX_TIERS], yielded[TA_SHM_MAX_TIERS];
	uint64_t steered[TA_SHM_MAX_TIERS];
	uint64_t borrowed[TA_SHM_MAX_TIERS], taken_back[TA_SHM_MAX_TIERS];
	uint64_t take_backs[TA_SHM_MAX_TIERS], take_back_ns[TA_SHM_MAX_TIERS];
	uint64_t take_back_since[TA_SHM_MAX_TIERS];
	/* As an owner: its usage while it lent (the lowest since it began), and while it holds its
	 * share back, until when and the usage that last extended the hold. */
	uint64_t lend_base[TA_SHM_MAX_TIERS];
	uint64_t hold_until[TA_SHM_MAX_TIERS], hold_used[TA_SHM_MAX_TIERS];
	char cgroup_path[TA_SHM_PATH_MAX + 1]; /* from the header when it was kept */
	/* The cgroup its live, attached processes are in, as the kernel says (verify()): what the
	 * policies act on, rank and lend to. The header's cgroup is only checked against it. */
	enum cg_state cg_state;
	unsigned verified_round;
	char cg_path[TA_SHM_PATH_MAX + 1]; /* canonical, under the cgroup2 mount */
	uint64_t cg_id;			   /* its directory's inode */
	dev_t cg_dev;
	uint32_t cg_pid; /* the process that showed it, and its start time */
	uint64_t cg_start;
	char cg_said[TA_SHM_PATH_MAX + 64]; /* the last refusal said (one line per change) */
};

/* A file that was opened and not kept. */
struct refused {
	struct refused *next;
	struct file_id id;
	unsigned until; /* looked at again from this rescan on */
	bool seen;
};

/* Per owner: segments kept, files opened this rescan. */
struct owner {
	struct owner *next;
	uid_t uid;
	unsigned kept, opened;
};

struct ta_agent_segments {
	const char *const *dirs;
	bool scan_proc;
	struct segment *list;
	uint64_t started_ns;
	struct ta_agent_limits limits;
	unsigned round, nkept, nrefused;
	struct ta_agent_scan_stats cur, last;
	struct refused *refused[BUCKETS];
	struct owner *owners[BUCKETS];
	const char *node_dir; /* where the nodes' meminfo is: /sys/devices/system/node */
	struct ta_agent_lend_stats lend;
	/* The agent's own /proc (for the segments of its own namespace) and the cgroup2 mount
	 * ("": none), which the tests replace with fixtures. */
	char proc_dir[256];
	char cg_mount[256];
	struct nsproc *nsprocs;
	struct nsproc no_proc; /* another namespace's, when none could be trusted: fd -1 */
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* ---- liveness ---- */

/* A file of process pid in the /proc of ns (NULL: the agent's own): -1 if it cannot be opened.
 * Another namespace's files are opened beneath its /proc without a link or a mount crossing,
 * and only from procfs: its owner decides what else is mounted there. */
static int proc_file(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
		     const char *file)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "%u/%s", pid, file);
	if (ns == NULL) {
		char path[sizeof(set->proc_dir) + 64];
		snprintf(path, sizeof(path), "%s/%s", set->proc_dir, rel);
		return open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	}
	if (ns->fd < 0)
		return -1;
	int fd = ta_walk_file(ns->fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	struct statfs fs;
	if (fd >= 0 && (fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The start time (field 22) and owner of a process; false if there is no such process. */
static bool proc_stat(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
		      uint64_t *start, uid_t *uid)
{
	char text[1024];
	int fd = proc_file(set, ns, pid, "stat");
	if (fd < 0)
		return false;
	struct stat st;
	ssize_t n = fstat(fd, &st) == 0 ? read(fd, text, sizeof(text) - 1) : -1;
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	char state;
	if (!ta_proc_stat_parse(text, &state, start))
		return false;
	*uid = st.st_uid;
	return true;
}

/* Whether a slot of the file holds a live process of the file's owner: its pid, with the start
 * time the slot recorded, in the /proc of the segment's namespace. */
static bool slots_live(struct ta_agent_segments *set, int fd, const struct file_id *id,
		       const struct nsproc *ns, uint32_t slots_off, uint32_t slot_size,
		       uint32_t nslots)
{
	size_t len = (size_t)nslots * slot_size;
	if (len > SLOTS_READ_MAX)
		return false;
	char *slots = malloc(len);
	bool live = false;
	if (slots == NULL || pread(fd, slots, len, slots_off) != (ssize_t)len) {
		free(slots);
		return false;
	}
	set->cur.bytes_read += len;
	for (unsigned i = 0; i < nslots && !live; i++) {
		const struct ta_shm_slot *slot = (const void *)(slots + (size_t)i * slot_size);
		uint32_t pid = atomic_load(&((struct ta_shm_slot *)slot)->pid);
		uint64_t want = atomic_load(&((struct ta_shm_slot *)slot)->start_time), start;
		uid_t uid;
		if (pid == 0 || pid > INT32_MAX || want == 0)
			continue;
		live = proc_stat(set, ns, pid, &start, &uid) && start == want && uid == id->owner;
	}
	free(slots);
	return live;
}

static bool segment_live(struct ta_agent_segments *set, struct segment *s)
{
	if (s->live_round != set->round) {
		s->live =
		    slots_live(set, s->fd, &s->id, s->ns, s->slots_off, s->slot_size, s->max_slots);
		s->live_round = set->round;
	}
	return s->live;
}

/* ---- the cgroup, as the kernel says ---- */

/* The cgroup2 mount point from our mountinfo into out ("" without one). */
static void cg_mount_find(char *out, size_t len)
{
	out[0] = '\0';
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size_t cap = 1u << 20, used = 0;
	char *text = malloc(cap);
	ssize_t n = 0;
	while (text != NULL && used + 1 < cap && (n = read(fd, text + used, cap - 1 - used)) > 0)
		used += (size_t)n;
	close(fd);
	if (text == NULL)
		return;
	text[used] = '\0';
	if (ta_cgpath_mount_v2(text, out, len) != 0)
		out[0] = '\0';
	free(text);
}

/* Whether process pid maps the file (dev, ino): attached to the segment, not only named in it. */
static bool maps_file(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
		      dev_t dev, ino_t ino)
{
	int fd = proc_file(set, ns, pid, "maps");
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (f == NULL) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	char line[512];
	bool found = false, line_start = true;
	/* "start-end perms offset major:minor inode path"; the rest of a line too long for the
	 * buffer (a long path, which the process names) is not a line of its own. */
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned maj, min;
		unsigned long long inode;
		if (line_start && sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &inode) == 3)
			found = inode == (unsigned long long)ino && maj == major(dev) &&
				min == minor(dev);
		line_start = strchr(line, '\n') != NULL;
	}
	fclose(f);
	return found;
}

/* The cgroup v2 path of process pid (from the hierarchy's root) into out: 0, or -1. */
static int proc_cgroup(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
		       char *out, size_t len)
{
	char text[8192];
	int fd = proc_file(set, ns, pid, "cgroup");
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	return ta_cgpath_proc_v2(text, out, len);
}

/* in for a line of the agent's output: a byte that is not printable ASCII becomes '?' (the
 * owner wrote it). */
static void printable(const char *in, char *out, size_t len)
{
	size_t i = 0;
	for (; in[i] != '\0' && i + 1 < len; i++)
		out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
	out[i] = '\0';
}

/* Whether the header's path names the kernel's cgroup kpath (canonical): the same path once
 * canonical, or, from a container in a cgroup namespace of its own (which sees its cgroup at
 * its /sys/fs/cgroup), a path below /sys/fs/cgroup that ends the kernel's, component by
 * component. Any other spelling or directory is the owner's invention. */
static bool header_path_names(const char *header, const char *kpath, const char *mount)
{
	if (header[0] == '\0')
		return true; /* the id alone was declared */
	char canon[TA_SHM_PATH_MAX + 1];
	if (ta_cgpath_canon(header, canon, sizeof(canon)) != 0)
		return false;
	if (strcmp(canon, kpath) == 0)
		return true;
	static const char base[] = "/sys/fs/cgroup";
	size_t blen = sizeof(base) - 1, mlen = strlen(mount);
	if (strncmp(canon, base, blen) != 0 || (canon[blen] != '/' && canon[blen] != '\0') ||
	    strncmp(kpath, mount, mlen) != 0)
		return false;
	const char *tail = canon[blen] == '\0' ? "/" : canon + blen;
	const char *krel = kpath[mlen] == '\0' ? "/" : kpath + mlen;
	return ta_cgpath_ends_with(krel, tail);
}

/*
 * The cgroup the segment's processes are in, from the kernel: the first slot whose process is
 * live (pid and start time), of the file's owner and maps the file gives its /proc/PID/cgroup
 * ("0::/path"), resolved under the cgroup2 mount. The header's cgroup id must be that
 * directory's inode and its path must name it (header_path_names); otherwise the segment is
 * forged, and the policies ignore it (one line says so, once per change).
 *
 * Asked again every rescan: while the process that showed the cgroup lives and is still there,
 * its /proc/PID/cgroup alone is read. Only the first check, part of a file's opening, counts in
 * the rescan's bytes read (the budget of ta_agent_limits is per file opened).
 */
static void verify(struct ta_agent_segments *set, struct segment *s, bool opening)
{
	char rel[TA_SHM_PATH_MAX + 1], kpath[TA_SHM_PATH_MAX + 1];
	uint64_t start;
	uid_t uid;
	s->verified_round = set->round;
	if (s->cg_state == CG_OK && proc_stat(set, s->ns, s->cg_pid, &start, &uid) &&
	    start == s->cg_start && uid == s->id.owner &&
	    proc_cgroup(set, s->ns, s->cg_pid, rel, sizeof(rel)) == 0 &&
	    ta_cgpath_join(set->cg_mount, rel, kpath, sizeof(kpath)) == 0 &&
	    strcmp(kpath, s->cg_path) == 0)
		return;
	s->cg_state = CG_UNKNOWN;
	if (s->cgroup_id == 0) {
		s->cg_state = CG_NONE; /* cgroup v1, or no cgroup: nothing to act on */
		return;
	}
	size_t len = (size_t)s->max_slots * s->slot_size;
	char *slots = len <= SLOTS_READ_MAX ? malloc(len) : NULL;
	if (slots == NULL || pread(s->fd, slots, len, s->slots_off) != (ssize_t)len) {
		free(slots);
		return;
	}
	if (opening)
		set->cur.bytes_read += len;
	uint32_t pid = 0;
	for (unsigned i = 0; i < s->max_slots && pid == 0; i++) {
		struct ta_shm_slot *slot = (void *)(slots + (size_t)i * s->slot_size);
		uint32_t p = atomic_load(&slot->pid);
		uint64_t want = atomic_load(&slot->start_time);
		if (p == 0 || p > INT32_MAX || want == 0 ||
		    !proc_stat(set, s->ns, p, &start, &uid) || start != want ||
		    uid != s->id.owner || !maps_file(set, s->ns, p, s->id.dev, s->id.ino))
			continue;
		if (proc_cgroup(set, s->ns, p, rel, sizeof(rel)) != 0)
			rel[0] = '\0';
		pid = p;
		s->cg_start = start;
	}
	free(slots);
	if (pid == 0)
		return;
	char said[sizeof(s->cg_said)];
	struct stat st;
	if (rel[0] == '\0' || set->cg_mount[0] == '\0' ||
	    ta_cgpath_join(set->cg_mount, rel, kpath, sizeof(kpath)) != 0 ||
	    stat(kpath, &st) != 0 || !S_ISDIR(st.st_mode)) {
		s->cg_state = CG_FORGED;
		snprintf(said, sizeof(said), "its process %u is in no cgroup v2 the agent sees",
			 pid);
	} else if ((uint64_t)st.st_ino != s->cgroup_id ||
		   !header_path_names(s->cgroup_path, kpath, set->cg_mount)) {
		s->cg_state = CG_FORGED;
		snprintf(said, sizeof(said), "its process %u is in %s (id %llu)", pid, kpath,
			 (unsigned long long)st.st_ino);
	} else {
		s->cg_state = CG_OK;
		snprintf(s->cg_path, sizeof(s->cg_path), "%s", kpath);
		s->cg_id = (uint64_t)st.st_ino;
		s->cg_dev = st.st_dev;
		s->cg_pid = pid;
		s->cg_said[0] = '\0';
		return;
	}
	if (strcmp(said, s->cg_said) != 0) {
		memcpy(s->cg_said, said, sizeof(said));
		char name[sizeof(s->path)], named[sizeof(s->cgroup_path)];
		printable(s->path, name, sizeof(name));
		printable(s->cgroup_path[0] != '\0' ? s->cgroup_path : "-", named, sizeof(named));
		printf("tierallocd: segment %s names cgroup %s (id %llu), but %s: ignored by the "
		       "policies\n",
		       name, named, (unsigned long long)s->cgroup_id, said);
		fflush(stdout);
	}
}

/* Which segment to keep first: root's, then one with live processes. */
static unsigned rank(uid_t owner, bool live)
{
	return (owner == 0 ? 2u : 0u) + (live ? 1u : 0u);
}

/* ---- finding segments ---- */

/* Read len bytes at off into buf, counted. */
static bool read_at(struct ta_agent_segments *set, int fd, void *buf, size_t len, uint64_t off)
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
	if (!read_at(set, s->fd, &h, sizeof(h), 0) || ta_seg_header_ok(&h, s->size, &why) != 0 ||
	    ta_shm_agent_block(&h, s->size) == NULL || h.tier_size > MAX_TIER_SIZE)
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
	if (!read_at(set, s->fd, &agent, sizeof(agent), s->agent_off))
		return false;
	s->seq = atomic_load(&agent.seq);
	s->alarm = atomic_load(&agent.alarm);
	char tiers[TA_SHM_MAX_TIERS * MAX_TIER_SIZE];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	if (!read_at(set, s->fd, tiers, tiers_len, s->tiers_off))
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
		if (rank(s->id.owner, segment_live(set, s)) < r)
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
		s->live = segment_live(set, s);
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
	verify(set, s, true);
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
	if (ns->fd < 0 || inner == 0 || !proc_stat(set, NULL, (uint32_t)via, &ours, &uid) ||
	    !proc_stat(set, ns, (uint32_t)inner, &theirs, &uid) || ours != theirs) {
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
	set->started_ns = realtime_ns();
	set->limits = ta_agent_default_limits;
	set->node_dir = "/sys/devices/system/node";
	set->no_proc.fd = -1;
	snprintf(set->proc_dir, sizeof(set->proc_dir), "/proc");
	cg_mount_find(set->cg_mount, sizeof(set->cg_mount));
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
			verify(set, s, false);
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

/* ---- lending (--lend) ---- */

/* MemFree of the nodes in mask, from their meminfo. */
static uint64_t nodes_free(const struct ta_agent_segments *set, uint64_t mask)
{
	uint64_t sum = 0;
	for (unsigned n = 0; n < 64; n++) {
		if (!(mask & (1ull << n)))
			continue;
		char path[256], line[256];
		snprintf(path, sizeof(path), "%s/node%u/meminfo", set->node_dir, n);
		FILE *f = fopen(path, "re");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			unsigned node;
			unsigned long long kb;
			if (sscanf(line, "Node %u MemFree: %llu kB", &node, &kb) == 2) {
				sum += kb * 1024;
				break;
			}
		}
		fclose(f);
	}
	return sum;
}

/* One segment's figures for a round. */
struct lend_view {
	struct segment *s;
	bool ok, live;
	struct ta_shm_lend block;
	uint64_t share[TA_SHM_MAX_TIERS], used[TA_SHM_MAX_TIERS], charged[TA_SHM_MAX_TIERS];
	uint64_t steered[TA_SHM_MAX_TIERS], capacity[TA_SHM_MAX_TIERS];
	uint64_t floor[TA_SHM_MAX_TIERS]; /* the tier's low or min share, the larger */
	uint64_t loan[TA_SHM_MAX_TIERS], lent[TA_SHM_MAX_TIERS], yielded[TA_SHM_MAX_TIERS];
};

static bool lend_read(struct ta_agent_segments *set, struct lend_view *v)
{
	struct segment *s = v->s;
	char tiers[TA_SHM_MAX_TIERS * MAX_TIER_SIZE];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	if (!read_at(set, s->fd, tiers, tiers_len, s->tiers_off) ||
	    !read_at(set, s->fd, &v->block, sizeof(v->block), s->lend_off))
		return false;
	for (unsigned t = 0; t < s->ntiers; t++) {
		struct ta_shm_tier *r = (void *)(tiers + (size_t)t * s->tier_size);
		v->share[t] = atomic_load(&r->limit[TA_LIMIT_HIGH]);
		uint64_t low = atomic_load(&r->limit[TA_LIMIT_LOW]);
		uint64_t min = atomic_load(&r->limit[TA_LIMIT_MIN]);
		v->floor[t] = low > min ? low : min;
		v->charged[t] = atomic_load(&r->charged);
		uint64_t observed = atomic_load(&r->observed);
		v->used[t] = observed > v->charged[t] ? observed : v->charged[t];
		v->steered[t] = atomic_load(&r->steered_away);
		v->capacity[t] = atomic_load(&r->capacity);
	}
	v->live = slots_live(set, s->fd, &s->id, s->ns, s->slots_off, s->slot_size, s->max_slots);
	/* An agent started while an earlier one's loans are live goes on from them; the file is
	 * its user's, so a loan larger than the tier is not believed. */
	if (!s->lend_seen) {
		uint64_t expires = atomic_load(&v->block.expires_ns);
		for (unsigned t = 0; t < s->ntiers; t++) {
			uint64_t loan = atomic_load(&v->block.tier[t].loan);
			s->loan[t] =
			    ta_monotonic_ns() < expires && loan <= v->capacity[t] ? loan : 0;
			uint64_t yielded = atomic_load(&v->block.tier[t].yielded);
			s->yielded[t] =
			    s->yields && ta_monotonic_ns() < expires && yielded <= v->capacity[t]
				? yielded
				: 0;
			s->steered[t] = v->steered[t];
		}
	}
	return true;
}

/* Write a round's loans into a segment: the agent's fields only, around the processes'
 * priority and flags. */
static bool lend_write(struct segment *s, const struct lend_view *v, uint64_t expires)
{
	struct ta_shm_lend b = v->block;
	atomic_store(&b.expires_ns, expires);
	atomic_store(&b.seq, atomic_load(&b.seq) + 1);
	atomic_store(&b.agent_pid, (uint32_t)getpid());
	for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++) {
		bool mine = t < s->ntiers;
		atomic_store(&b.tier[t].loan, mine ? v->loan[t] : 0);
		atomic_store(&b.tier[t].lent, mine ? v->lent[t] : 0);
		if (s->yields)
			atomic_store(&b.tier[t].yielded, mine ? v->yielded[t] : 0);
		atomic_store(&b.tier[t].borrowed, mine ? s->borrowed[t] : 0);
		atomic_store(&b.tier[t].taken_back, mine ? s->taken_back[t] : 0);
		atomic_store(&b.tier[t].take_backs, mine ? s->take_backs[t] : 0);
		atomic_store(&b.tier[t].take_back_ns, mine ? s->take_back_ns[t] : 0);
	}
	size_t head = offsetof(struct ta_shm_lend, priority);
	size_t tail = offsetof(struct ta_shm_lend, agent_pid);
	/* The loans first, then the expiry that makes them count. */
	return pwrite(s->fd, (char *)&b + tail, sizeof(b) - tail, s->lend_off + tail) ==
		   (ssize_t)(sizeof(b) - tail) &&
	       pwrite(s->fd, &b, head, s->lend_off) == (ssize_t)head;
}

/* Raise the segment's alarm and wake its workers: a loan was cut, its excess is to go now. */
static void lend_alarm(struct segment *s)
{
	s->alarm++;
	uint64_t alarm = s->alarm;
	if (pwrite(s->fd, &alarm, sizeof(alarm),
		   s->agent_off + offsetof(struct ta_shm_agent, alarm)) == (ssize_t)sizeof(alarm))
		wake_workers(s);
}

/* Whether an owner holds its share of tier t this round: it asks for it back when its usage
 * grows past what it held while lending by more than a step (an eighth of the reserve, 4 MiB at
 * least: above the noise of charges and readings), and holds it until its usage has not grown by a
 * step for cfg->hold_ns. Taking the whole share back at once, rather than loan by loan as the
 * owner's allocations land, makes the take-back as fast as the borrowers' demotion, not as slow
 * as the owner's page faults. The ask starts the take-back's clock. */
static bool lend_holds(struct segment *s, unsigned t, uint64_t used,
		       const struct ta_agent_lend_config *cfg, uint64_t now, bool verbose)
{
	uint64_t step = cfg->reserve / 8 > (4ull << 20) ? cfg->reserve / 8 : (4ull << 20);
	if (s->hold_until[t] != 0) {
		if (used > s->hold_used[t] + step) {
			s->hold_used[t] = used;
			s->hold_until[t] = now + cfg->hold_ns;
		}
		if (now < s->hold_until[t])
			return true;
		s->hold_until[t] = 0;
	}
	if (s->lent[t] == 0 || used <= s->lend_base[t] + step)
		return false;
	s->hold_used[t] = used;
	s->hold_until[t] = now + cfg->hold_ns;
	if (s->take_back_since[t] == 0)
		s->take_back_since[t] = now;
	if (verbose)
		printf("tierallocd: lend tier %u: cgroup %llu asks for its share back (used %lluM, "
		       "%lluM when lending, lent %lluM) at %.3f s\n",
		       t, (unsigned long long)s->cgroup_id, (unsigned long long)(used >> 20),
		       (unsigned long long)(s->lend_base[t] >> 20),
		       (unsigned long long)(s->lent[t] >> 20), (double)now / 1e9);
	return true;
}

/* The plans of tier t, one per set of nodes the segments give the tier. */
static void lend_tier(struct ta_agent_segments *set, struct lend_view *v, unsigned n, unsigned t,
		      bool *done, const struct ta_agent_lend_config *cfg, uint64_t now,
		      bool verbose)
{
	static struct ta_lend_cg cg[TA_LEND_MAX];
	static unsigned idx[TA_LEND_MAX];
	for (unsigned i = 0; i < n; i++) {
		if (done[i] || !v[i].ok || t + 1 >= v[i].s->ntiers)
			continue;
		uint64_t nodes = v[i].s->nodes[t];
		unsigned m = 0;
		for (unsigned j = i; j < n && m < TA_LEND_MAX; j++) {
			if (done[j] || !v[j].ok || t + 1 >= v[j].s->ntiers ||
			    v[j].s->nodes[t] != nodes)
				continue;
			done[j] = true;
			struct segment *s = v[j].s;
			uint64_t below = 0;
			for (unsigned u = t + 1; u < s->ntiers; u++)
				below += v[j].charged[u];
			/* The operator's word only for the cgroup the kernel puts the segment's
			 * processes in; the segment's own word within the operator's ceiling. */
			int q =
			    s->cg_state == CG_OK
				? ta_agent_priority_find(cfg->priorities, cfg->npriorities,
							 s->cg_path, s->cg_id, (uint64_t)s->cg_dev)
				: -1;
			uint32_t prio = ta_agent_priority_of(
			    q >= 0, q >= 0 ? cfg->priorities[q].priority : 0,
			    atomic_load(&v[j].block.priority), cfg->priority_ceiling);
			cg[m] = (struct ta_lend_cg){
				.share = v[j].share[t],
				.used = v[j].used[t],
				.below = below,
				.loan_before = s->loan[t],
				.priority = prio,
				.wants = s->lend_seen && v[j].steered[t] != s->steered[t],
				.live = v[j].live,
				.holds = lend_holds(s, t, v[j].used[t], cfg, now, verbose),
				.can_yield = s->yields,
				.floor = v[j].floor[t],
			};
			idx[m++] = j;
		}
		ta_lend_plan(cg, m, nodes_free(set, nodes), cfg->reserve, cfg->flags);
		/* Loans cut this round, and what borrowers hold over their share and loan. */
		bool cut = false;
		uint64_t over = 0;
		for (unsigned k = 0; k < m; k++) {
			struct segment *s = v[idx[k]].s;
			if (cg[k].loan < s->loan[t])
				cut = true;
			uint64_t limit = cg[k].share + cg[k].loan;
			uint64_t tol = ta_shm_gate_margin(cg[k].share) / 2;
			if (cg[k].live && cg[k].used > limit + tol)
				over += cg[k].used - limit;
		}
		for (unsigned k = 0; k < m; k++) {
			struct lend_view *w = &v[idx[k]];
			struct segment *s = w->s;
			w->loan[t] = cg[k].loan;
			w->lent[t] = cg[k].lent;
			w->yielded[t] = cg[k].yielded;
			if (cg[k].yielded > s->yielded[t])
				set->lend.yields += cg[k].yielded - s->yielded[t];
			set->lend.yielded_now += cg[k].yielded;
			if (cg[k].lent > 0 && (s->lent[t] == 0 || cg[k].used < s->lend_base[t]))
				s->lend_base[t] = cg[k].used;
			if (cg[k].loan > s->loan[t]) {
				s->borrowed[t] += cg[k].loan - s->loan[t];
				set->lend.granted += cg[k].loan - s->loan[t];
			} else if (cg[k].loan < s->loan[t]) {
				s->taken_back[t] += s->loan[t] - cg[k].loan;
				set->lend.taken_back += s->loan[t] - cg[k].loan;
			}
			/* A take-back begins for an owner that grew into what it had lent (not
			 * for one whose borrower wants less). */
			if (cut && cg[k].lent < s->lent[t] && s->take_back_since[t] == 0 &&
			    cg[k].used + cfg->reserve > cg[k].share - s->lent[t])
				s->take_back_since[t] = now;
			set->lend.lent_now += cg[k].lent;
			if (verbose && (cg[k].loan != s->loan[t] || cg[k].lent != s->lent[t] ||
					cg[k].yielded != s->yielded[t]))
				printf(
				    "tierallocd: lend tier %u: cgroup %llu priority %u share %lluM "
				    "used %lluM loan %lluM lent %lluM yielded %lluM\n",
				    t, (unsigned long long)s->cgroup_id, cg[k].priority,
				    (unsigned long long)(cg[k].share >> 20),
				    (unsigned long long)(cg[k].used >> 20),
				    (unsigned long long)(cg[k].loan >> 20),
				    (unsigned long long)(cg[k].lent >> 20),
				    (unsigned long long)(cg[k].yielded >> 20));
		}
		/* A take-back ends when the owners stopped growing into what they lent (no cut
		 * this round) and no borrower holds more than its share and loan: one episode
		 * however many rounds the owner's growth takes. */
		for (unsigned k = 0; k < m && over == 0 && !cut; k++) {
			struct segment *s = v[idx[k]].s;
			if (s->take_back_since[t] == 0)
				continue;
			uint64_t took = now - s->take_back_since[t];
			s->take_back_since[t] = 0;
			s->take_backs[t]++;
			s->take_back_ns[t] = took;
			set->lend.take_backs++;
			set->lend.take_back_ns_sum += took;
			set->lend.take_back_ns_last = took;
			if (took > set->lend.take_back_ns_max)
				set->lend.take_back_ns_max = took;
			if (verbose)
				printf("tierallocd: take-back on tier %u for cgroup %llu took %.3f "
				       "s\n",
				       t, (unsigned long long)s->cgroup_id, (double)took / 1e9);
		}
	}
}

/* Whether a segment takes part in the lending rounds: only as the cgroup its live, attached
 * processes are in (the operator's --priority for that cgroup applies), or, on a machine without
 * cgroup v2, one that names none. A segment that names a cgroup its processes are not in, names
 * none on a cgroup v2 machine, or has no live attached process, neither lends nor borrows (its
 * loans lapse): none of these could take a priority the operator did not give its cgroup. */
static bool lends(const struct ta_agent_segments *set, const struct segment *s)
{
	return s->cg_state == CG_OK || (s->cg_state == CG_NONE && set->cg_mount[0] == '\0');
}

void ta_agent_segments_lend(struct ta_agent_segments *set, const struct ta_agent_lend_config *cfg,
			    bool verbose)
{
	unsigned n = 0;
	for (struct segment *s = set->list; s != NULL; s = s->next)
		if (s->lend_off != 0 && lends(set, s))
			n++;
	if (n == 0)
		return;
	struct lend_view *v = calloc(n, sizeof(*v));
	bool *done = calloc(n, sizeof(*done));
	if (v == NULL || done == NULL) {
		free(v);
		free(done);
		return;
	}
	unsigned i = 0;
	for (struct segment *s = set->list; s != NULL && i < n; s = s->next) {
		if (s->lend_off == 0 || !lends(set, s))
			continue;
		v[i].s = s;
		v[i].ok = lend_read(set, &v[i]);
		i++;
	}
	uint64_t now = ta_monotonic_ns();
	set->lend.lent_now = 0;
	set->lend.yielded_now = 0;
	for (unsigned t = 0; t + 1 < TA_SHM_MAX_TIERS; t++) {
		memset(done, 0, n * sizeof(*done));
		lend_tier(set, v, n, t, done, cfg, now, verbose);
	}
	for (i = 0; i < n; i++) {
		struct segment *s = v[i].s;
		if (!v[i].ok)
			continue;
		/* A loan cut or a yield raised: the excess is to go now. */
		bool cut = false;
		for (unsigned t = 0; t < s->ntiers; t++)
			cut |= v[i].loan[t] < s->loan[t] || v[i].yielded[t] > s->yielded[t];
		if (lend_write(s, &v[i], now + cfg->expiry_ns)) {
			memcpy(s->loan, v[i].loan, sizeof(s->loan));
			memcpy(s->lent, v[i].lent, sizeof(s->lent));
			memcpy(s->yielded, v[i].yielded, sizeof(s->yielded));
			if (cut)
				lend_alarm(s);
		}
		memcpy(s->steered, v[i].steered, sizeof(s->steered));
		s->lend_seen = true;
	}
	free(v);
	free(done);
}

void ta_agent_segments_lend_stats(const struct ta_agent_segments *set,
				  struct ta_agent_lend_stats *out)
{
	*out = set->lend;
}

/* ---- metrics ---- */

/* Live processes in the segment's slots (pid, and start time when the slot has one, checked in
 * the /proc of its namespace), and slots of dead ones. Their heat records (the access block) are
 * summed for the live ones into p's tiers. */
static void count_slots(struct ta_agent_segments *set, struct segment *s,
			const struct ta_shm_access *acc, struct ta_prom_segment *p)
{
	size_t len = (size_t)s->max_slots * s->slot_size;
	char *slots = len <= SLOTS_READ_MAX ? malloc(len) : NULL;
	if (slots == NULL || !read_at(set, s->fd, slots, len, s->slots_off)) {
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
		if (pid > INT32_MAX || !proc_stat(set, s->ns, pid, &start, &uid) ||
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
	if (!read_at(set, s->fd, &h, sizeof(h), 0) || ta_shm_validate(&h, s->size, &why) != 0 ||
	    !read_at(set, s->fd, tiers, tiers_len, s->tiers_off))
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
		if (acc != NULL && !read_at(set, s->fd, acc, sizeof(*acc), h.access_off)) {
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
	    read_at(set, s->fd, &lend, sizeof(lend), h.lend_off))
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
			    !proc_stat(set, NULL, pid, &start, &uid) || start != want ||
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
		if (!read_at(set, s->fd, tier, s->tier_size, s->tiers_off))
			continue;
		c->steered = atomic_load(&((struct ta_shm_tier *)(void *)tier)->steered_away);
		struct ta_shm_lend lend;
		if (s->lend_off != 0 && read_at(set, s->fd, &lend, sizeof(lend), s->lend_off)) {
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
