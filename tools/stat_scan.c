/* SPDX-License-Identifier: MIT */
/*
 * Finding segments for tieralloc-stat, and telling whether their processes live: see
 * stat_scan.h.
 *
 * A container's /dev/shm is a tmpfs of its own mount namespace, out of the host's sight, but
 * reachable through /proc/<pid>/root of any of its processes (as the agent finds them,
 * agent/segments.c). The host's /dev/shm is seen again through every process that shares it, so
 * files are taken once by (st_dev, st_ino), our own directory first.
 *
 * The pids in a segment's slots are those of its processes' pid namespace: they are looked up in
 * the /proc mounted in the segment's mount namespace, and that /proc is trusted only if it shows
 * the process it was reached through (its pid there, from NSpid, with the same start time).
 * Otherwise (no /proc there, or another pid namespace's) liveness cannot be told, and every
 * process counts as alive.
 */
#include "stat_scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "quota/shm.h"
#include "segment.h"
#include "tieralloc/shm_abi.h"
#include "walk.h"

/* Read a small /proc file whole (at most n - 1 bytes), terminated; -1 if it cannot be read. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, n - 1);
	int err = errno;
	close(fd);
	if (len < 0) {
		errno = err;
		return -1;
	}
	buf[len] = '\0';
	return len;
}

/* <proc>/<pid>/stat: 1 and its state and start time (field 22), 0 if there is no such process,
 * -1 if it cannot be told. */
static int proc_stat(const char *proc, uint32_t pid, char *state, uint64_t *start)
{
	char path[128], text[1024];
	if ((size_t)snprintf(path, sizeof(path), "%s/%u/stat", proc, pid) >= sizeof(path))
		return -1;
	if (read_small(path, text, sizeof(text)) < 0)
		return errno == ENOENT || errno == ESRCH ? 0 : -1;
	return ta_proc_stat_parse(text, state, start) ? 1 : -1;
}

bool ta_slot_alive(const char *proc, uint32_t pid, uint64_t start_time)
{
	if (pid == 0 || pid > INT32_MAX) /* no process; nor a process group */
		return false;
	if (proc[0] == '\0')
		return true;
	char state;
	uint64_t now_start;
	int rc = proc_stat(proc, pid, &state, &now_start);
	if (rc < 0)
		return true;
	if (rc == 0 || state == 'Z' || state == 'X')
		return false;
	/* As the library decides (src/quota/shm.c): a slot without a start time is the pid's. */
	return start_time == 0 || now_start == start_time;
}

/* Whether <proc> shows the pid namespace of process via: its own entry there, by the pid NSpid
 * gives in its innermost namespace, has the start time the host's /proc gives. */
static bool proc_shows(const char *proc, int via)
{
	struct statfs fs;
	if (statfs(proc, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)
		return false;
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", via);
	if (read_small(path, text, sizeof(text)) < 0)
		return false;
	const char *line = strstr(text, "\nNSpid:");
	if (line == NULL)
		return false;
	line += 7;
	unsigned long inner = 0;
	for (const char *p = line; *p != '\0' && *p != '\n';) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			break;
		inner = strtoul(p, (char **)&p, 10);
	}
	char s1, s2;
	uint64_t t1, t2;
	return inner != 0 && inner <= INT32_MAX &&
	       proc_stat("/proc", (uint32_t)via, &s1, &t1) == 1 &&
	       proc_stat(proc, (uint32_t)inner, &s2, &t2) == 1 && t1 == t2;
}

struct seen {
	dev_t *dev;
	ino_t *ino;
	size_t n, cap;
};

/* Record (dev, ino): false if it was there already (or cannot be recorded). */
static bool first_time(struct seen *s, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->dev[i] == dev && s->ino[i] == ino)
			return false;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		dev_t *d = realloc(s->dev, cap * sizeof(*d));
		if (d != NULL)
			s->dev = d;
		ino_t *i = realloc(s->ino, cap * sizeof(*i));
		if (i != NULL)
			s->ino = i;
		if (d == NULL || i == NULL)
			return false;
		s->cap = cap;
	}
	s->dev[s->n] = dev;
	s->ino[s->n++] = ino;
	return true;
}

/* Another namespace's /dev/shm is walked from its root one component at a time without
 * following a link (the namespace's owner may make /dev/shm a link, which would resolve in our
 * root rather than theirs) and is read only if it is a tmpfs, looked at before anything in it is
 * (a FUSE file system there could hold the tool forever): common/walk.c, the agent's walk too. */
static void scan_dir(struct ta_place *p, struct seen *files, ta_scan_fn *fn, void *ctx)
{
	p->dirfd = p->via_pid != 0 ? ta_walk_root(p->via_pid, "dev/shm", TMPFS_MAGIC)
				   : ta_walk_own(p->dir, TMPFS_MAGIC);
	if (p->dirfd < 0)
		return;
	DIR *d = fdopendir(dup(p->dirfd));
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		struct stat st;
		if (fstatat(p->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || !ta_seg_size_ok(st.st_size) ||
		    !first_time(files, st.st_dev, st.st_ino))
			continue;
		fn(p, e->d_name, ctx);
	}
	if (d != NULL)
		closedir(d);
	close(p->dirfd);
	p->dirfd = -1;
}

void ta_scan(const char *own_dir, ta_scan_fn *fn, void *ctx)
{
	struct seen files = { 0 }, spaces = { 0 };
	struct ta_place p = { .dirfd = -1, .proc = "/proc" };
	snprintf(p.dir, sizeof(p.dir), "%s", own_dir);
	scan_dir(&p, &files, fn, ctx);
	struct stat own;
	DIR *proc = stat("/proc/self/ns/mnt", &own) == 0 ? opendir("/proc") : NULL;
	if (proc == NULL)
		goto out;
	first_time(&spaces, own.st_dev, own.st_ino);
	struct dirent *e;
	while ((e = readdir(proc)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid > INT32_MAX)
			continue;
		char path[64];
		struct stat ns;
		snprintf(path, sizeof(path), "/proc/%ld/ns/mnt", pid);
		if (stat(path, &ns) != 0 || !first_time(&spaces, ns.st_dev, ns.st_ino))
			continue;
		p.via_pid = (int)pid;
		snprintf(p.dir, sizeof(p.dir), "/proc/%ld/root/dev/shm", pid);
		snprintf(p.proc, sizeof(p.proc), "/proc/%ld/root/proc", pid);
		if (!proc_shows(p.proc, (int)pid))
			p.proc[0] = '\0';
		scan_dir(&p, &files, fn, ctx);
	}
	closedir(proc);
out:
	free(files.dev);
	free(files.ino);
	free(spaces.dev);
	free(spaces.ino);
}

bool ta_file_mapped(dev_t dev, ino_t ino)
{
	DIR *proc = opendir("/proc");
	if (proc == NULL)
		return false;
	bool found = false;
	struct dirent *e;
	char path[64], line[4096];
	while (!found && (e = readdir(proc)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/maps", e->d_name);
		FILE *f = fopen(path, "re");
		if (f == NULL)
			continue;
		while (!found && fgets(line, sizeof(line), f) != NULL) {
			unsigned maj, min;
			unsigned long long inode;
			/* "start-end perms offset major:minor inode path" */
			if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &inode) == 3)
				found = inode == (unsigned long long)ino && maj == major(dev) &&
					min == minor(dev);
		}
		fclose(f);
	}
	closedir(proc);
	return found;
}
