/* SPDX-License-Identifier: MIT */
/*
 * Whether a segment's processes live, and which cgroup they are in as the kernel says (issue 31):
 * a segment counts for the cgroup of a live process of the file's owner that maps the file, read
 * from that process's /proc (in its own namespace, walked without links); the header's cgroup is
 * only checked against it (segments.c's comment says what the agent trusts and why).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <linux/magic.h>

#include "agent.h"
#include "base/base.h"
#include "cgpath.h"
#include "quota/shm.h"
#include "segset.h"
#include "walk.h"

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
bool seg_proc_stat(const struct ta_agent_segments *set, const struct nsproc *ns, uint32_t pid,
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
bool seg_slots_live(struct ta_agent_segments *set, int fd, const struct file_id *id,
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
		live =
		    seg_proc_stat(set, ns, pid, &start, &uid) && start == want && uid == id->owner;
	}
	free(slots);
	return live;
}

bool seg_live(struct ta_agent_segments *set, struct segment *s)
{
	if (s->live_round != set->round) {
		s->live = seg_slots_live(set, s->fd, &s->id, s->ns, s->slots_off, s->slot_size,
					 s->max_slots);
		s->live_round = set->round;
	}
	return s->live;
}

/* ---- the cgroup, as the kernel says ---- */

/* The cgroup2 mount point from our mountinfo into out ("" without one). */
void seg_cg_mount_find(char *out, size_t len)
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
void seg_verify(struct ta_agent_segments *set, struct segment *s, bool opening)
{
	char rel[TA_SHM_PATH_MAX + 1], kpath[TA_SHM_PATH_MAX + 1];
	uint64_t start;
	uid_t uid;
	s->verified_round = set->round;
	if (s->cg_state == CG_OK && seg_proc_stat(set, s->ns, s->cg_pid, &start, &uid) &&
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
		    !seg_proc_stat(set, s->ns, p, &start, &uid) || start != want ||
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
