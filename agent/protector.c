/* SPDX-License-Identifier: MIT */
/*
 * Policy 2's runner (tierallocd --protect CGROUP, issue 17): a thread that samples each victim's
 * memory.current and writes the memory.low that protect.c decides, and a lease keeper process
 * that restores memory.low when the requests stop being renewed.
 *
 * - Hot path: the files are opened once and read and written with pread/pwrite. libcgroup's
 *   cgroup_set_value_* opens, writes and closes the file on every write (docs/DESIGN-NOTES.md).
 * - When: every interval (50 ms), and early when the parent's memory.events changes (the kernel
 *   notifies pollers of it, at most every 10 ms, each time the parent's limit is hit: reclaim is
 *   starting against its children), at most twice the timer's rate (run()).
 * - Cap: the parent's protection less the siblings' claims (protect.c), refreshed every second;
 *   a parent without protection files (the root cgroup) sets none.
 * - Lease: every sample renews the request. A keeper process forked at start (named
 *   tierallocd-lease) holds memory.low open; once a request has not been renewed for the expiry
 *   (the agent hung, stopped, or was killed, SIGKILL included), it writes the original value back
 *   (only if memory.low still holds what the agent wrote: a later administrator's write stands)
 *   and, once the agent is gone and all is restored, exits. The original is also kept in
 *   STATE_DIR/protect-INODE while raised, so that an agent started after both died takes it as
 *   the floor again instead of the raised value.
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
#include <stddef.h>
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
#include "prom.h"
#include "protector.h"

/* What the agent and the keeper share (MAP_SHARED, made before the fork). */
struct lease {
	_Atomic uint64_t renewed_ns; /* CLOCK_MONOTONIC of the last renewal */
	_Atomic uint64_t written;    /* what the agent last wrote to memory.low */
	_Atomic uint64_t original;   /* what to restore */
	_Atomic int raised;	     /* written != original and not restored */
};

struct victim {
	char path[PATH_MAX], parent[PATH_MAX], state[PATH_MAX];
	unsigned long long ino;
	int fd_current, fd_low, fd_events; /* fd_events: the parent's memory.events, or -1 */
	int fd_state;			   /* STATE_DIR/protect-INODE, or -1 */
	uint64_t cap, cap_ns;
	struct ta_protect_state st;
	uint64_t events, errors;
	uint64_t usage, last_write_ns; /* the last sample; the last write (0: none) */
	bool watched;		       /* the BPF source counts its pages */
	uint64_t stolen;	       /* pages the BPF source saw reclaimed from it */
	/* memory.stat's pgsteal when the BPF source began counting (UINT64_MAX: unread), so that
	 * the stop report gives the kernel's count over the same window as the BPF one. */
	uint64_t pgsteal0;
	/* pgsteal - pgsteal0 at the stop's final count (UINT64_MAX: none) */
	uint64_t pgsteal_final;
};

/* The victim's pgsteal (memory.stat, in pages), or UINT64_MAX. */
static uint64_t pgsteal_of(const struct victim *v)
{
	char path[PATH_MAX + 32], buf[8192];
	snprintf(path, sizeof(path), "%s/memory.stat", v->path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return UINT64_MAX;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	uint64_t value;
	if (n <= 0)
		return UINT64_MAX;
	buf[n] = '\0';
	return ta_cgstat_key(buf, "pgsteal", &value) == 0 ? value : UINT64_MAX;
}

/* What ta_protector_status() shows, copied from the thread's victims after each round. */
struct snapshot {
	uint64_t written, original, usage, cap, last_write_ns;
	uint64_t samples, events, falls, grows, decays, capped, errors;
	bool watched;
	uint64_t stolen, steals;
};

struct ta_protector {
	struct victim v[TA_PROTECT_MAX];
	unsigned n;
	struct ta_protect_cfg cfg;
	uint64_t interval_ns, expiry_ns;
	struct lease *lease; /* n of them */
	int stop_pipe[2];    /* the thread's wake-up to stop */
	int keeper_pipe;     /* write end: closed (or the agent dead) tells the keeper */
	pid_t keeper;
	pthread_t thread;
	bool started, print;
	struct ta_steals *steals; /* NULL: none */
	uint64_t steal_wakes;	  /* samples the BPF source's alerts brought forward */
	pthread_mutex_t snap_lock;
	struct snapshot snap[TA_PROTECT_MAX];
};

/* A cgroup file's value through an open descriptor: 0, or -1. */
static int pread_value(int fd, uint64_t *v)
{
	char buf[32];
	ssize_t r = pread(fd, buf, sizeof(buf) - 1, 0);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return ta_protect_parse(buf, v);
}

static int pwrite_value(int fd, uint64_t v)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", v);
	return pwrite(fd, buf, (size_t)len, 0) == len ? 0 : -1;
}

/* A file's value by path (open, read, close): the slow path, for the cap. */
static int read_value(const char *dir, const char *name, uint64_t *v)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = pread_value(fd, v);
	close(fd);
	return rc;
}

/* The parent's budget less the siblings' claims (ta_protect_cap). */
static uint64_t parent_cap(const struct victim *v)
{
	uint64_t low, min;
	if (read_value(v->parent, "memory.low", &low) != 0)
		return UINT64_MAX; /* the root cgroup: no budget to keep within */
	if (read_value(v->parent, "memory.min", &min) == 0 && min > low)
		low = min;
	uint64_t claims[64];
	unsigned n = 0;
	DIR *d = opendir(v->parent);
	if (d == NULL)
		return low;
	for (struct dirent *e; (e = readdir(d)) != NULL && n < 64;) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char sib[PATH_MAX];
		if (snprintf(sib, sizeof(sib), "%s/%s", v->parent, e->d_name) >= (int)sizeof(sib) ||
		    strcmp(sib, v->path) == 0)
			continue;
		uint64_t sl, sc;
		if (read_value(sib, "memory.low", &sl) == 0 &&
		    read_value(sib, "memory.current", &sc) == 0)
			claims[n++] = sl < sc ? sl : sc;
	}
	closedir(d);
	return ta_protect_cap(low, claims, n);
}

/* The state file's one record, fixed width: one pwrite replaces it whole. */
static void state_write(const struct victim *v, uint64_t original, uint64_t written)
{
	char rec[64];
	int len = snprintf(rec, sizeof(rec), "original=%020" PRIu64 " written=%020" PRIu64 "\n",
			   original, written);
	if (v->fd_state >= 0 && pwrite(v->fd_state, rec, (size_t)len, 0) != len)
		return;
}

/* ---- the keeper (a child process: system calls and snprintf only, no allocation) ---- */

static void keeper_say(const char *path, uint64_t from, uint64_t to)
{
	char line[PATH_MAX + 128];
	int len = snprintf(line, sizeof(line),
			   "tierallocd-lease: %s: request expired, memory.low %" PRIu64
			   " -> %" PRIu64 " (the original)\n",
			   path, from, to);
	if (len > 0 && write(STDOUT_FILENO, line, (size_t)len) < 0)
		return;
}

static void keeper(struct ta_protector *p, int rd)
{
	signal(SIGINT, SIG_IGN); /* a terminal's ^C or a SIGTERM is the agent's to act on */
	signal(SIGTERM, SIG_IGN);
	prctl(PR_SET_NAME, "tierallocd-lease");
	/* Only what it needs: the agent's BPF links, segments and sockets must not outlive it. */
	long maxfd = sysconf(_SC_OPEN_MAX);
	for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 65536); fd++) {
		bool keep = fd == rd;
		for (unsigned i = 0; i < p->n; i++)
			keep |= fd == p->v[i].fd_low;
		if (!keep)
			close(fd);
	}
	bool agent_gone = false;
	int tick_ms = (int)(p->expiry_ns / 4000000u);
	for (;;) {
		struct pollfd pfd = { .fd = rd, .events = POLLIN };
		if (!agent_gone && poll(&pfd, 1, tick_ms < 10 ? 10 : tick_ms) > 0) {
			char c;
			if (read(rd, &c, 1) <= 0)
				agent_gone = true; /* closed: stopped, or killed */
		} else if (agent_gone) {
			poll(NULL, 0, tick_ms < 10 ? 10 : tick_ms);
		}
		uint64_t now = ta_monotonic_ns();
		unsigned raised = 0;
		for (unsigned i = 0; i < p->n; i++) {
			struct lease *l = &p->lease[i];
			if (!atomic_load(&l->raised))
				continue;
			if (now - atomic_load(&l->renewed_ns) < p->expiry_ns) {
				raised++;
				continue;
			}
			uint64_t cur, w = atomic_load(&l->written),
				      orig = atomic_load(&l->original);
			if (pread_value(p->v[i].fd_low, &cur) == 0 && cur == w &&
			    pwrite_value(p->v[i].fd_low, orig) == 0)
				keeper_say(p->v[i].path, w, orig);
			atomic_store(&l->raised, 0);
		}
		if (agent_gone && raised == 0) {
			for (unsigned i = 0; i < p->n; i++)
				unlink(p->v[i].state);
			_exit(0);
		}
	}
}

/* ---- the thread ---- */

static void say_write(const struct victim *v, uint64_t from, uint64_t to, enum ta_protect_why why,
		      uint64_t usage)
{
	static const char *const words[TA_PROTECT_NWHY] = { "none", "grow", "decay" };
	char cap[32] = "none";
	if (v->cap != UINT64_MAX)
		snprintf(cap, sizeof(cap), "%" PRIu64, v->cap);
	printf("tierallocd: protect %s: memory.low %" PRIu64 " -> %" PRIu64 " (%s; usage %" PRIu64
	       ", cap %s)\n",
	       v->path, from, to, words[why], usage, cap);
	fflush(stdout);
}

static void sample(struct ta_protector *p, unsigned i, uint64_t now)
{
	struct victim *v = &p->v[i];
	struct lease *l = &p->lease[i];
	uint64_t usage, value;
	if (now - v->cap_ns >= 1000000000u) {
		v->cap = parent_cap(v);
		v->cap_ns = now;
		/* Someone else wrote memory.low meanwhile: theirs is the new floor. */
		uint64_t low;
		if (pread_value(v->fd_low, &low) == 0 && low != v->st.written) {
			printf("tierallocd: protect %s: memory.low set to %" PRIu64
			       " by someone else: the new floor\n",
			       v->path, low);
			v->st.original = v->st.written = low;
			atomic_store(&l->original, low);
			atomic_store(&l->written, low);
			atomic_store(&l->raised, 0);
			state_write(v, low, low);
		}
	}
	if (pread_value(v->fd_current, &usage) != 0) {
		v->errors++;
		return;
	}
	/* Reclaim took its pages since the last sample, as the kernel counted them. */
	if (v->watched) {
		uint64_t stolen = ta_steals_pages(p->steals, v->ino);
		if (stolen > v->stolen) {
			v->stolen = stolen;
			ta_protect_stolen(&p->cfg, &v->st, now);
		}
	}
	v->usage = usage;
	uint64_t before = v->st.written;
	enum ta_protect_why why = ta_protect_sample(&p->cfg, &v->st, usage, v->cap, now, &value);
	atomic_store(&l->renewed_ns, now);
	if (why == TA_PROTECT_NONE)
		return;
	bool raise = value != v->st.original;
	/* The lease first: the keeper, or the next agent, must know what to restore before
	 * memory.low is raised. */
	state_write(v, v->st.original, value);
	atomic_store(&l->written, value);
	atomic_store(&l->raised, raise ? 1 : 0);
	if (pwrite_value(v->fd_low, value) != 0) {
		v->errors++;
		v->st.written = before;
		atomic_store(&l->written, before);
		atomic_store(&l->raised, before != v->st.original);
		state_write(v, v->st.original, before);
		return;
	}
	v->last_write_ns = now;
	say_write(v, before, value, why, usage);
}

static void snapshot_take(struct ta_protector *p)
{
	pthread_mutex_lock(&p->snap_lock);
	for (unsigned i = 0; i < p->n; i++) {
		const struct victim *v = &p->v[i];
		p->snap[i] = (struct snapshot){ .written = v->st.written,
						.original = v->st.original,
						.usage = v->usage,
						.cap = v->cap,
						.last_write_ns = v->last_write_ns,
						.samples = v->st.samples,
						.events = v->events,
						.falls = v->st.falls,
						.grows = v->st.writes[TA_PROTECT_GROW],
						.decays = v->st.writes[TA_PROTECT_DECAY],
						.capped = v->st.capped,
						.errors = v->errors,
						.watched = v->watched,
						.stolen = v->stolen,
						.steals = v->st.steals };
	}
	pthread_mutex_unlock(&p->snap_lock);
}

/* Sample every interval, and early when the parent's memory.events changes (its limit was hit,
 * reclaim is starting) or the BPF source tells of reclaim taking a victim's pages. The kernel
 * notifies at most every 10 ms, and the BPF source every millisecond, which under steady
 * pressure would be a sample per notification; both are watched only from half an interval
 * after the last sample, so that the samples stay at most twice the timer's rate. */
static void *run(void *arg)
{
	struct ta_protector *p = arg;
	struct pollfd fds[2 + TA_PROTECT_MAX];
	unsigned owner[2 + TA_PROTECT_MAX];
	uint64_t last = 0, half = p->interval_ns / 2;
	for (;;) {
		uint64_t since = ta_monotonic_ns() - last;
		bool watch = since >= half;
		uint64_t wait_ns = since >= p->interval_ns ? 0
				   : watch		   ? p->interval_ns - since
							   : half - since;
		nfds_t nfds = 0;
		fds[nfds++] = (struct pollfd){ .fd = p->stop_pipe[0], .events = POLLIN };
		for (unsigned i = 0; watch && i < p->n; i++)
			if (p->v[i].fd_events >= 0) {
				owner[nfds] = i;
				fds[nfds++] =
				    (struct pollfd){ .fd = p->v[i].fd_events, .events = POLLPRI };
			}
		nfds_t steals_at = nfds;
		if (watch && p->steals != NULL)
			fds[nfds++] =
			    (struct pollfd){ .fd = ta_steals_fd(p->steals), .events = POLLIN };
		int ready = poll(fds, nfds, (int)((wait_ns + 999999) / 1000000));
		if (ready > 0 && fds[0].revents != 0)
			return NULL;
		bool event = false;
		if (ready > 0 && steals_at < nfds && (fds[steals_at].revents & POLLIN)) {
			/* The alert names the cgroup; the counts, read at the sample, say which
			 * victims lost pages. */
			if (ta_steals_drain(p->steals) > 0) {
				event = true;
				p->steal_wakes++;
			}
		}
		for (nfds_t k = 1; ready > 0 && k < steals_at; k++)
			if (fds[k].revents & (POLLPRI | POLLERR)) {
				char buf[512];
				/* Read to re-arm the notification. */
				if (pread(fds[k].fd, buf, sizeof(buf), 0) < 0)
					p->v[owner[k]].errors++;
				p->v[owner[k]].events++;
				event = true;
			}
		uint64_t now = ta_monotonic_ns();
		if (!event && now - last < p->interval_ns)
			continue;
		last = now;
		for (unsigned i = 0; i < p->n; i++)
			sample(p, i, now);
		snapshot_take(p);
	}
}

/* ---- start and stop ---- */

static int open_victim(struct victim *v, const char *arg, const char *state_dir, char *err,
		       size_t errlen)
{
	if (arg[0] == '/')
		snprintf(v->path, sizeof(v->path), "%s", arg);
	else
		snprintf(v->path, sizeof(v->path), "/sys/fs/cgroup/%s", arg);
	size_t len = strlen(v->path);
	while (len > 1 && v->path[len - 1] == '/')
		v->path[--len] = '\0';
	struct stat st;
	if (stat(v->path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--protect %s: no such cgroup (%s)", arg, v->path);
		return -1;
	}
	v->ino = (unsigned long long)st.st_ino;
	snprintf(v->parent, sizeof(v->parent), "%s", v->path);
	char *slash = strrchr(v->parent, '/');
	if (slash != NULL && slash != v->parent)
		*slash = '\0';
	snprintf(v->state, sizeof(v->state), "%s/protect-%llu", state_dir, v->ino);
	v->pgsteal0 = v->pgsteal_final = UINT64_MAX;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/memory.current", v->path);
	v->fd_current = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/memory.low", v->path);
	v->fd_low = open(path, O_RDWR | O_CLOEXEC);
	if (v->fd_current < 0 || v->fd_low < 0) {
		snprintf(err, errlen,
			 "--protect %s: cannot open its memory.current and memory.low (%s): "
			 "policy 2 needs cgroup v2's memory controller",
			 arg, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/memory.events", v->parent);
	v->fd_events = open(path, O_RDONLY | O_CLOEXEC);
	return 0;
}

/* The floor: memory.low now, or the original an earlier agent recorded if memory.low still
 * holds what that agent wrote. */
static uint64_t find_original(const struct victim *v)
{
	uint64_t low = 0, orig, written;
	pread_value(v->fd_low, &low);
	FILE *f = fopen(v->state, "re");
	if (f == NULL)
		return low;
	int got = fscanf(f, "original=%" SCNu64 " written=%" SCNu64, &orig, &written);
	fclose(f);
	if (got == 2 && written == low) {
		printf("tierallocd: protect %s: memory.low %" PRIu64
		       " was raised by an earlier agent; its original %" PRIu64 " is the floor\n",
		       v->path, low, orig);
		return orig;
	}
	return low;
}

struct ta_protector *ta_protector_start(const char *const *cgroups, unsigned n,
					const struct ta_protector_opts *o, char *err, size_t errlen)
{
	if (n == 0 || n > TA_PROTECT_MAX) {
		snprintf(err, errlen, "--protect: 1 to %d cgroups", TA_PROTECT_MAX);
		return NULL;
	}
	struct ta_protector *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->cfg = ta_protect_default_cfg;
	p->interval_ns = o->interval_ms * 1000000u;
	p->expiry_ns = o->expiry_ms * 1000000u;
	p->print = o->print;
	p->steals = o->steals;
	p->stop_pipe[0] = p->stop_pipe[1] = p->keeper_pipe = -1;
	p->keeper = -1;
	pthread_mutex_init(&p->snap_lock, NULL);
	for (unsigned i = 0; i < TA_PROTECT_MAX; i++)
		p->v[i].fd_current = p->v[i].fd_low = p->v[i].fd_events = p->v[i].fd_state = -1;
	mkdir(o->state_dir, 0755);
	for (unsigned i = 0; i < n; i++, p->n++)
		if (open_victim(&p->v[i], cgroups[i], o->state_dir, err, errlen) != 0)
			goto fail;
	p->lease = mmap(NULL, sizeof(struct lease) * n, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p->lease == MAP_FAILED) {
		p->lease = NULL;
		snprintf(err, errlen, "--protect: mmap: %s", strerror(errno));
		goto fail;
	}
	uint64_t now = ta_monotonic_ns();
	for (unsigned i = 0; i < n; i++) {
		struct victim *v = &p->v[i];
		uint64_t orig = find_original(v);
		ta_protect_init(&v->st, orig);
		/* memory.low may still hold an earlier agent's raise: written is what it holds. */
		pread_value(v->fd_low, &v->st.written);
		atomic_store(&p->lease[i].original, orig);
		atomic_store(&p->lease[i].written, v->st.written);
		atomic_store(&p->lease[i].renewed_ns, now);
		atomic_store(&p->lease[i].raised, v->st.written != orig);
		v->fd_state = open(v->state, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (v->fd_state < 0)
			printf(
			    "tierallocd: protect %s: no state file %s (%s): a restart after the "
			    "lease keeper died too would take a raised memory.low as the floor\n",
			    v->path, v->state, strerror(errno));
		state_write(v, orig, v->st.written);
		v->cap = parent_cap(v);
		v->cap_ns = now;
		if (p->steals != NULL) {
			int rc = ta_steals_watch(p->steals, v->ino);
			v->watched = rc == 0;
			if (rc != 0)
				printf("tierallocd: protect %s: reclaim of its pages not watched "
				       "(%s): "
				       "stealing is seen from its usage's fall alone\n",
				       v->path, strerror(-rc));
			else {
				v->pgsteal0 = pgsteal_of(v);
				v->stolen = ta_steals_pages(p->steals, v->ino);
			}
		}
	}
	snapshot_take(p);
	int kp[2];
	if (pipe2(p->stop_pipe, O_CLOEXEC) != 0 || pipe2(kp, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "--protect: pipe: %s", strerror(errno));
		goto fail;
	}
	fflush(stdout);
	p->keeper = fork();
	if (p->keeper < 0) {
		snprintf(err, errlen, "--protect: fork: %s", strerror(errno));
		close(kp[0]);
		close(kp[1]);
		goto fail;
	}
	if (p->keeper == 0) {
		close(kp[1]);
		keeper(p, kp[0]);
	}
	close(kp[0]);
	p->keeper_pipe = kp[1];
	if (pthread_create(&p->thread, NULL, run, p) != 0) {
		snprintf(err, errlen, "--protect: cannot start its thread");
		goto fail;
	}
	p->started = true;
	for (unsigned i = 0; i < n; i++)
		printf("tierallocd: protecting %s (memory.low %" PRIu64 " now, the floor %" PRIu64
		       "; cap %s; woken by %s%s every %" PRIu64 " ms; lease %" PRIu64
		       " ms, keeper pid %d)\n",
		       p->v[i].path, p->v[i].st.written, p->v[i].st.original,
		       p->v[i].cap == UINT64_MAX ? "none (the parent is the root)" : "the parent's",
		       p->v[i].fd_events >= 0 ? "the parent's memory.events and " : "",
		       p->v[i].watched ? "reclaim of its pages (BPF) and a timer" : "a timer",
		       o->interval_ms, o->expiry_ms, (int)p->keeper);
	fflush(stdout);
	return p;
fail:
	ta_protector_stop(p);
	return NULL;
}

/* The last BPF count, and the kernel's pgsteal taken at once with it: the report compares the
 * two over one window, whatever the time between the last sample and the stop. */
static void final_count(struct ta_protector *p, struct victim *v, uint64_t *pgsteal)
{
	*pgsteal = UINT64_MAX;
	if (!v->watched)
		return;
	uint64_t stolen = ta_steals_pages(p->steals, v->ino);
	uint64_t now = pgsteal_of(v);
	if (stolen > v->stolen)
		v->stolen = stolen;
	if (now != UINT64_MAX && v->pgsteal0 != UINT64_MAX && now >= v->pgsteal0)
		*pgsteal = now - v->pgsteal0;
}

void ta_protector_report(const struct ta_protector *p, FILE *f)
{
	for (unsigned i = 0; p != NULL && i < p->n; i++) {
		const struct victim *v = &p->v[i];
		fprintf(f,
			"tierallocd: protect %s: samples=%" PRIu64 " events=%" PRIu64
			" falls=%" PRIu64 " grow=%" PRIu64 " decay=%" PRIu64 " capped=%" PRIu64
			" errors=%" PRIu64 " memory.low=%" PRIu64,
			v->path, v->st.samples, v->events, v->st.falls,
			v->st.writes[TA_PROTECT_GROW], v->st.writes[TA_PROTECT_DECAY], v->st.capped,
			v->errors, v->st.written);
		if (v->watched)
			fprintf(f,
				" stolen_pages=%" PRIu64 " steals=%" PRIu64 " bpf_wakes=%" PRIu64,
				v->stolen, v->st.steals, p->steal_wakes);
		if (v->watched && v->pgsteal_final != UINT64_MAX)
			fprintf(f, " pgsteal=%" PRIu64, v->pgsteal_final);
		fputc('\n', f);
	}
}

int ta_protector_status(struct ta_protector *p, FILE *f)
{
	uint64_t now = ta_monotonic_ns();
	int rc = 0;
	pthread_mutex_lock(&p->snap_lock);
	for (unsigned i = 0; i < p->n && rc == 0; i++) {
		const struct snapshot *s = &p->snap[i];
		char cap[24] = "max", ago[24] = "never";
		if (s->cap != UINT64_MAX)
			snprintf(cap, sizeof(cap), "%" PRIu64, s->cap);
		if (s->last_write_ns != 0)
			snprintf(ago, sizeof(ago), "%" PRIu64,
				 (now - s->last_write_ns) / 1000000000u);
		if (fprintf(f,
			    "protect low_bytes=%" PRIu64 " original_bytes=%" PRIu64
			    " usage_bytes=%" PRIu64 " cap_bytes=%s samples=%" PRIu64
			    " events=%" PRIu64 " falls=%" PRIu64 " raises=%" PRIu64
			    " decays=%" PRIu64 " capped=%" PRIu64 " errors=%" PRIu64
			    " last_write_s=%s",
			    s->written, s->original, s->usage, cap, s->samples, s->events, s->falls,
			    s->grows, s->decays, s->capped, s->errors, ago) < 0 ||
		    (s->watched && fprintf(f, " stolen_pages=%" PRIu64 " steals=%" PRIu64,
					   s->stolen, s->steals) < 0) ||
		    ta_status_path(f, "path", p->v[i].path) != 0 || fputc('\n', f) < 0)
			rc = -1;
	}
	pthread_mutex_unlock(&p->snap_lock);
	return rc;
}

int ta_protector_metrics(struct ta_protector *p, FILE *f)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
		{ "tieralloc_agent_protect_low_bytes", "gauge",
		  "memory.low tierallocd --protect keeps for the cgroup.",
		  offsetof(struct snapshot, written) },
		{ "tieralloc_agent_protect_original_bytes", "gauge",
		  "The cgroup's memory.low before the agent raised it: restored when it stops.",
		  offsetof(struct snapshot, original) },
		{ "tieralloc_agent_protect_samples_total", "counter",
		  "Samples of the cgroup's memory.current.", offsetof(struct snapshot, samples) },
		{ "tieralloc_agent_protect_falls_total", "counter",
		  "Falls of its usage fast enough to be stealing.",
		  offsetof(struct snapshot, falls) },
		{ "tieralloc_agent_protect_raises_total", "counter",
		  "Writes of memory.low that raised it.", offsetof(struct snapshot, grows) },
		{ "tieralloc_agent_protect_decays_total", "counter",
		  "Writes of memory.low that lowered it.", offsetof(struct snapshot, decays) },
		{ "tieralloc_agent_protect_capped_total", "counter",
		  "Requests cut to what the parent affords.", offsetof(struct snapshot, capped) },
		{ "tieralloc_agent_protect_errors_total", "counter",
		  "Reads or writes of its files that failed.", offsetof(struct snapshot, errors) },
		{ "tieralloc_agent_protect_stolen_pages_total", "counter",
		  "Pages reclaim took from the cgroup's own LRU lists, as the kernel counted them "
		  "(BPF on shrink_lruvec; 0 where it cannot attach).",
		  offsetof(struct snapshot, stolen) },
		{ "tieralloc_agent_protect_steals_total", "counter",
		  "Samples that found pages stolen since the last (BPF).",
		  offsetof(struct snapshot, steals) },
	};
	int rc = 0;
	pthread_mutex_lock(&p->snap_lock);
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]) && rc == 0; k++) {
		if (fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name,
			    m[k].type) < 0)
			rc = -1;
		for (unsigned i = 0; i < p->n && rc == 0; i++) {
			uint64_t v =
			    *(const uint64_t *)(const void *)((const char *)&p->snap[i] + m[k].off);
			if (fprintf(f, "%s{cgroup=\"", m[k].name) < 0)
				rc = -1;
			else
				ta_prom_label_value(f, p->v[i].path);
			if (rc == 0 && fprintf(f, "\"} %" PRIu64 "\n", v) < 0)
				rc = -1;
		}
	}
	pthread_mutex_unlock(&p->snap_lock);
	return rc;
}

void ta_protector_stop(struct ta_protector *p)
{
	if (p == NULL)
		return;
	if (p->started) {
		if (write(p->stop_pipe[1], "x", 1) < 0)
			perror("tierallocd: protect");
		pthread_join(p->thread, NULL);
		for (unsigned i = 0; i < p->n; i++)
			final_count(p, &p->v[i], &p->v[i].pgsteal_final);
		ta_protector_report(p, stdout);
	}
	/* Restore what was raised, then let the keeper go with nothing left to do. */
	for (unsigned i = 0; i < p->n; i++) {
		struct victim *v = &p->v[i];
		if (p->lease == NULL || !atomic_load(&p->lease[i].raised))
			continue;
		uint64_t cur;
		if (pread_value(v->fd_low, &cur) == 0 && cur == v->st.written &&
		    pwrite_value(v->fd_low, v->st.original) == 0)
			printf("tierallocd: protect %s: stopped, memory.low %" PRIu64 " -> %" PRIu64
			       " (the original)\n",
			       v->path, cur, v->st.original);
		atomic_store(&p->lease[i].raised, 0);
	}
	for (unsigned i = 0; i < p->n; i++)
		if (p->v[i].fd_state >= 0)
			unlink(p->v[i].state);
	if (p->keeper_pipe >= 0)
		close(p->keeper_pipe);
	if (p->keeper > 0)
		waitpid(p->keeper, NULL, 0);
	for (unsigned i = 0; i < p->n; i++) {
		if (p->v[i].fd_current >= 0)
			close(p->v[i].fd_current);
		if (p->v[i].fd_low >= 0)
			close(p->v[i].fd_low);
		if (p->v[i].fd_events >= 0)
			close(p->v[i].fd_events);
		if (p->v[i].fd_state >= 0)
			close(p->v[i].fd_state);
	}
	if (p->stop_pipe[0] >= 0) {
		close(p->stop_pipe[0]);
		close(p->stop_pipe[1]);
	}
	if (p->lease != NULL)
		munmap(p->lease, sizeof(struct lease) * p->n);
	pthread_mutex_destroy(&p->snap_lock);
	free(p);
	fflush(stdout);
}
