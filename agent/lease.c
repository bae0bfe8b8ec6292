/* SPDX-License-Identifier: MIT */
/*
 * Leases on cgroup control files (lease.h). The table is shared with the keeper (MAP_SHARED,
 * made before the fork); a lease is found by its cgroup's path and its file, and is restored
 * only while the directory is still the one leased (its inode) and the file still holds what
 * the agent wrote: a cgroup made again under the same path, or an operator's later write,
 * stands.
 *
 * The keeper is a child process that uses system calls and snprintf only (the agent has
 * threads when it forks). It polls the pipe whose write end only the agent holds: end of file
 * means the agent stopped or died; it then restores what is still leased once expired, and
 * exits when nothing is.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "cgctl.h"
#include "lease.h"

#define FILE_MAX     32
#define STATE_PREFIX "lease-"

struct entry {
	_Atomic int used;
	char path[PATH_MAX];
	char file[FILE_MAX];
	uint64_t ino, expiry_ns;
	_Atomic uint64_t original, written, renewed_ns;
	/* What the file held when the last hold was taken: the agent holds a value before it
	 * writes it, so one that died between the two left this in the file. */
	_Atomic uint64_t before;
};

struct ta_lease {
	struct entry *e; /* TA_LEASE_MAX of them, shared with the keeper */
	char state_dir[PATH_MAX];
	pthread_mutex_t lock; /* the agent's threads */
	int pipe_wr;
	pid_t keeper;
};

static void value_text(uint64_t v, char *buf, size_t len)
{
	if (v == UINT64_MAX)
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%" PRIu64, v);
}

static void state_path(const char *state_dir, uint64_t ino, const char *file, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" STATE_PREFIX "%" PRIu64 "-%s", state_dir, ino, file);
}

/* A control file the keeper may write: "memory." and a name, no path. */
static bool file_ok(const char *file)
{
	size_t len = strlen(file);
	return strncmp(file, "memory.", 7) == 0 && len > 7 && len < FILE_MAX &&
	       strchr(file, '/') == NULL;
}

/* Writes original back to dir/file if dir is still inode ino and the file holds written (or
 * before, the value the agent held written over and may have died before replacing).
 * 1 when written back, 0 when left as it is, -1 on an error. */
static int restore(const char *dir, const char *file, uint64_t ino, uint64_t original,
		   uint64_t written, uint64_t before)
{
	struct stat st;
	if (stat(dir, &st) != 0 || (uint64_t)st.st_ino != ino)
		return 0;
	int fd = ta_cgfile_open(dir, file, O_RDWR);
	if (fd < 0)
		return -1;
	uint64_t cur;
	int rc = 0;
	if (ta_cgfile_get(fd, &cur) != 0)
		rc = -1;
	else if (cur == written || cur == before)
		rc = ta_cgfile_set(fd, original) == 0 ? 1 : -1;
	close(fd);
	return rc;
}

static void say(const char *who, const char *dir, const char *file, uint64_t written,
		uint64_t original)
{
	char line[PATH_MAX + 200], w[24], o[24];
	value_text(written, w, sizeof(w));
	value_text(original, o, sizeof(o));
	int len = snprintf(line, sizeof(line), "%s: %s: %s %s -> %s (the original)\n", who, dir,
			   file, w, o);
	if (len > 0 && write(STDOUT_FILENO, line, (size_t)len) < 0)
		return;
}

/* Earlier agents' state files: "original written path", one line. */
static void restore_states(const struct ta_lease *l)
{
	DIR *d = opendir(l->state_dir);
	if (d == NULL)
		return;
	size_t plen = strlen(STATE_PREFIX);
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		char *end;
		if (strncmp(de->d_name, STATE_PREFIX, plen) != 0)
			continue;
		errno = 0;
		unsigned long long ino = strtoull(de->d_name + plen, &end, 10);
		if (errno != 0 || end == de->d_name + plen || *end != '-' || !file_ok(end + 1))
			continue;
		const char *file = end + 1;
		char sp[2 * PATH_MAX], rec[PATH_MAX + 64], dir[PATH_MAX];
		snprintf(sp, sizeof(sp), "%s/%s", l->state_dir, de->d_name);
		int fd = open(sp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = fd >= 0 ? read(fd, rec, sizeof(rec) - 1) : -1;
		if (fd >= 0)
			close(fd);
		unsigned long long orig, written;
		if (n > 0) {
			rec[n] = '\0';
			/* Only root writes the state directory, and restore() checks the
			 * directory's inode. The path comes last: it may hold spaces. */
			if (sscanf(rec, "%llu %llu %4095[^\n]", &orig, &written, dir) == 3 &&
			    restore(dir, file, ino, orig, written, written) == 1)
				say("tierallocd: an earlier agent's lease", dir, file, written,
				    orig);
		}
		unlink(sp);
	}
	closedir(d);
}

/* The record is rewritten in place and cut to its length: a crash between the two leaves
 * only bytes after its newline, which restore_states() does not read. */
static void state_write(const struct ta_lease *l, const struct entry *e)
{
	char sp[PATH_MAX + 64], rec[PATH_MAX + 64];
	state_path(l->state_dir, e->ino, e->file, sp, sizeof(sp));
	int len = snprintf(rec, sizeof(rec), "%020" PRIu64 " %020" PRIu64 " %s\n",
			   atomic_load(&e->original), atomic_load(&e->written), e->path);
	int fd = open(sp, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return;
	if (pwrite(fd, rec, (size_t)len, 0) != len || ftruncate(fd, len) != 0)
		unlink(sp);
	close(fd);
}

static void forget(const struct ta_lease *l, struct entry *e)
{
	char sp[PATH_MAX + 64];
	state_path(l->state_dir, e->ino, e->file, sp, sizeof(sp));
	unlink(sp);
	atomic_store(&e->used, 0);
}

/* Restored (if the file still holds what the agent wrote) and forgotten. */
static void give_back(const struct ta_lease *l, struct entry *e, const char *who)
{
	uint64_t w = atomic_load(&e->written), o = atomic_load(&e->original);
	if (restore(e->path, e->file, e->ino, o, w, atomic_load(&e->before)) == 1)
		say(who, e->path, e->file, w, o);
	forget(l, e);
}

bool ta_lease_expired(uint64_t now_ns, uint64_t renewed_ns, uint64_t expiry_ns)
{
	/* now_ns - renewed_ns would wrap to a huge age for a renewal after the clock was read. */
	return renewed_ns <= now_ns && now_ns - renewed_ns >= expiry_ns;
}

static void keeper(struct ta_lease *l, int rd)
{
	signal(SIGINT, SIG_IGN); /* a terminal's ^C or a SIGTERM is the agent's to act on */
	signal(SIGTERM, SIG_IGN);
	prctl(PR_SET_NAME, "tierallocd-lease");
	/* Only what it needs: the agent's BPF links, segments and sockets must not outlive it. */
	long maxfd = sysconf(_SC_OPEN_MAX);
	for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 65536); fd++)
		if (fd != rd)
			close(fd);
	bool agent_gone = false;
	int tick_ms = 250;
	for (;;) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		if (!agent_gone && poll(&pfd, 1, tick_ms) > 0) {
			char c;
			if (read(rd, &c, 1) <= 0)
				agent_gone = true;
		} else if (agent_gone) {
			poll(NULL, 0, tick_ms);
		}
		uint64_t now = ta_monotonic_ns(), shortest = UINT64_MAX;
		unsigned held = 0;
		for (unsigned i = 0; i < TA_LEASE_MAX; i++) {
			struct entry *e = &l->e[i];
			if (!atomic_load(&e->used))
				continue;
			if (!ta_lease_expired(now, atomic_load(&e->renewed_ns), e->expiry_ns)) {
				held++;
				if (e->expiry_ns < shortest)
					shortest = e->expiry_ns;
				continue;
			}
			give_back(l, e, "tierallocd-lease: lease expired");
		}
		/* A quarter of the shortest expiry held: restored within 1.25 expiries. */
		tick_ms = shortest == UINT64_MAX ? 250 : (int)(shortest / 4000000u);
		if (tick_ms < 10)
			tick_ms = 10;
		if (tick_ms > 250)
			tick_ms = 250;
		if (agent_gone && held == 0)
			_exit(0);
	}
}

struct ta_lease *ta_lease_start(const char *state_dir, char *err, size_t errlen)
{
	struct ta_lease *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(l->state_dir, sizeof(l->state_dir), "%s", state_dir);
	l->pipe_wr = -1;
	pthread_mutex_init(&l->lock, NULL);
	mkdir(state_dir, 0755);
	restore_states(l);
	l->e = mmap(NULL, sizeof(struct entry) * TA_LEASE_MAX, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int p[2];
	if (l->e == MAP_FAILED || pipe2(p, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "%s: %s", l->e == MAP_FAILED ? "mmap" : "pipe",
			 strerror(errno));
		if (l->e != MAP_FAILED)
			munmap(l->e, sizeof(struct entry) * TA_LEASE_MAX);
		free(l);
		return NULL;
	}
	fflush(stdout);
	l->keeper = fork();
	if (l->keeper < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		munmap(l->e, sizeof(struct entry) * TA_LEASE_MAX);
		free(l);
		return NULL;
	}
	if (l->keeper == 0) {
		close(p[1]);
		keeper(l, p[0]);
	}
	close(p[0]);
	l->pipe_wr = p[1];
	return l;
}

pid_t ta_lease_keeper(const struct ta_lease *l)
{
	return l->keeper;
}

static struct entry *find(struct ta_lease *l, const char *file, const char *cgroup)
{
	for (unsigned i = 0; i < TA_LEASE_MAX; i++)
		if (atomic_load(&l->e[i].used) && strcmp(l->e[i].path, cgroup) == 0 &&
		    strcmp(l->e[i].file, file) == 0)
			return &l->e[i];
	return NULL;
}

int ta_lease_hold(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup,
		  uint64_t original, uint64_t written)
{
	struct stat st;
	if (!file_ok(k->file) || strlen(cgroup) >= PATH_MAX || stat(cgroup, &st) != 0)
		return -1;
	pthread_mutex_lock(&l->lock);
	struct entry *e = find(l, k->file, cgroup);
	if (e != NULL && e->ino != (uint64_t)st.st_ino) {
		forget(l, e); /* the same path, another cgroup: its lease is over */
		e = NULL;
	}
	if (e == NULL) {
		for (unsigned i = 0; i < TA_LEASE_MAX && e == NULL; i++)
			if (!atomic_load(&l->e[i].used))
				e = &l->e[i];
		if (e == NULL) {
			pthread_mutex_unlock(&l->lock);
			return -1;
		}
		snprintf(e->path, sizeof(e->path), "%s", cgroup);
		snprintf(e->file, sizeof(e->file), "%s", k->file);
		e->ino = (uint64_t)st.st_ino;
		atomic_store(&e->original, original);
		atomic_store(&e->before, original);
	} else {
		atomic_store(&e->before, atomic_load(&e->written));
	}
	e->expiry_ns = k->expiry_ns;
	atomic_store(&e->written, written);
	atomic_store(&e->renewed_ns, ta_monotonic_ns());
	atomic_store(&e->used, 1);
	state_write(l, e);
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void ta_lease_renew(struct ta_lease *l, const struct ta_lease_kind *k)
{
	uint64_t now = ta_monotonic_ns();
	for (unsigned i = 0; i < TA_LEASE_MAX; i++)
		if (atomic_load(&l->e[i].used) && strcmp(l->e[i].file, k->file) == 0)
			atomic_store(&l->e[i].renewed_ns, now);
}

void ta_lease_drop(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup)
{
	pthread_mutex_lock(&l->lock);
	struct entry *e = find(l, k->file, cgroup);
	if (e != NULL)
		forget(l, e);
	pthread_mutex_unlock(&l->lock);
}

bool ta_lease_held(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup)
{
	pthread_mutex_lock(&l->lock);
	bool held = find(l, k->file, cgroup) != NULL;
	pthread_mutex_unlock(&l->lock);
	return held;
}

void ta_lease_release(struct ta_lease *l, const struct ta_lease_kind *k)
{
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < TA_LEASE_MAX; i++)
		if (atomic_load(&l->e[i].used) && strcmp(l->e[i].file, k->file) == 0)
			give_back(l, &l->e[i], "tierallocd: stopped");
	pthread_mutex_unlock(&l->lock);
	fflush(stdout);
}

void ta_lease_stop(struct ta_lease *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < TA_LEASE_MAX; i++)
		if (atomic_load(&l->e[i].used))
			give_back(l, &l->e[i], "tierallocd: stopped");
	pthread_mutex_unlock(&l->lock);
	close(l->pipe_wr);
	waitpid(l->keeper, NULL, 0);
	munmap(l->e, sizeof(struct entry) * TA_LEASE_MAX);
	pthread_mutex_destroy(&l->lock);
	free(l);
	fflush(stdout);
}
