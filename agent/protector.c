/* SPDX-License-Identifier: MIT */
/*
 * Policy 2's runner (tierallocd --protect CGROUP, issue 17): a thread that samples each victim's
 * memory.current and writes the memory.low that protect.c decides, under the agent's leases
 * (lease.h), which restore memory.low when the requests stop being renewed.
 *
 * - Hot path: the files are opened once and read and written with pread/pwrite. libcgroup's
 *   cgroup_set_value_* opens, writes and closes the file on every write (docs/DESIGN-NOTES.md).
 * - When: every interval (50 ms), and early when the parent's memory.events changes (the kernel
 *   notifies pollers of it, at most every 10 ms, each time the parent's limit is hit: reclaim is
 *   starting against its children), at most twice the timer's rate (run()).
 * - Cap: the parent's protection less the siblings' claims (protect.c), refreshed every second;
 *   a parent without protection files (the root cgroup) sets none.
 * - Lease: a raised memory.low is leased (lease.h) before it is written, and every round renews
 *   the leases. The agent's lease keeper writes the original back once they have not been
 *   renewed for the expiry (the agent hung, stopped, or was killed, SIGKILL included), only if
 *   memory.low still holds what the agent wrote (a later administrator's write stands); an agent
 *   started after both died restores it from the lease's state file before this runner starts,
 *   so that the original, not the raised value, is the floor again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "cgctl.h"
#include "lease.h"
#include "prom.h"
#include "protector.h"

struct victim {
	char path[PATH_MAX], parent[PATH_MAX];
	unsigned long long ino;
	int fd_current, fd_low, fd_events; /* fd_events: the parent's memory.events, or -1 */
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
	char buf[8192];
	uint64_t value;
	if (ta_cgfile_read(v->path, "memory.stat", buf, sizeof(buf)) <= 0)
		return UINT64_MAX;
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
	uint64_t interval_ns;
	struct ta_lease *lease;	   /* the agent's */
	struct ta_lease_kind kind; /* memory.low, the expiry */
	int stop_pipe[2];	   /* the thread's wake-up to stop */
	pthread_t thread;
	bool started, print;
	struct ta_steals *steals; /* NULL: none */
	uint64_t steal_wakes;	  /* samples the BPF source's alerts brought forward */
	pthread_mutex_t snap_lock;
	struct snapshot snap[TA_PROTECT_MAX];
};

/* The parent's budget less the siblings' claims (ta_protect_cap). */
static uint64_t parent_cap(const struct victim *v)
{
	uint64_t low, min;
	if (ta_cgfile_value(v->parent, "memory.low", &low) != 0)
		return UINT64_MAX; /* the root cgroup: no budget to keep within */
	if (ta_cgfile_value(v->parent, "memory.min", &min) == 0 && min > low)
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
		if (ta_cgfile_value(sib, "memory.low", &sl) == 0 &&
		    ta_cgfile_value(sib, "memory.current", &sc) == 0)
			claims[n++] = sl < sc ? sl : sc;
	}
	closedir(d);
	return ta_protect_cap(low, claims, n);
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
	uint64_t usage, value;
	if (now - v->cap_ns >= 1000000000u) {
		v->cap = parent_cap(v);
		v->cap_ns = now;
		/* Someone else wrote memory.low meanwhile: theirs is the new floor. */
		uint64_t low;
		if (ta_cgfile_get(v->fd_low, &low) == 0 && low != v->st.written) {
			printf("tierallocd: protect %s: memory.low set to %" PRIu64
			       " by someone else: the new floor\n",
			       v->path, low);
			v->st.original = v->st.written = low;
			ta_lease_drop(p->lease, &p->kind, v->path);
		}
	}
	if (ta_cgfile_get(v->fd_current, &usage) != 0) {
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
	if (why == TA_PROTECT_NONE)
		return;
	bool raise = value != v->st.original;
	/* The lease first: the keeper, or the next agent, must know what to restore before
	 * memory.low is raised. No lease, no raise. */
	if (raise && ta_lease_hold(p->lease, &p->kind, v->path, v->st.original, value) != 0) {
		v->errors++;
		v->st.written = before;
		return;
	}
	if (ta_cgfile_set(v->fd_low, value) != 0) {
		v->errors++;
		v->st.written = before;
		/* The file still holds before: the lease says so, or goes. */
		if (before == v->st.original)
			ta_lease_drop(p->lease, &p->kind, v->path);
		else if (raise)
			ta_lease_hold(p->lease, &p->kind, v->path, v->st.original, before);
		return;
	}
	if (!raise)
		ta_lease_drop(p->lease, &p->kind, v->path); /* back at the original */
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
		ta_lease_renew(p->lease, &p->kind);
		snapshot_take(p);
	}
}

/* ---- start and stop ---- */

static int open_victim(struct victim *v, const char *arg, char *err, size_t errlen)
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
	v->pgsteal0 = v->pgsteal_final = UINT64_MAX;
	v->fd_current = ta_cgfile_open(v->path, "memory.current", O_RDONLY);
	v->fd_low = ta_cgfile_open(v->path, "memory.low", O_RDWR);
	if (v->fd_current < 0 || v->fd_low < 0) {
		snprintf(err, errlen,
			 "--protect %s: cannot open its memory.current and memory.low (%s): "
			 "policy 2 needs cgroup v2's memory controller",
			 arg, strerror(errno));
		return -1;
	}
	v->fd_events = ta_cgfile_open(v->parent, "memory.events", O_RDONLY);
	return 0;
}

static void protector_stop(void *self);
static int protector_status(void *self, FILE *f);
static int protector_metrics(void *self, FILE *f);

int ta_protector_start(const char *const *cgroups, unsigned n, const struct ta_protector_opts *o,
		       struct ta_agent_policy *out, char *err, size_t errlen)
{
	if (n == 0 || n > TA_PROTECT_MAX) {
		snprintf(err, errlen, "--protect: 1 to %d cgroups", TA_PROTECT_MAX);
		return -1;
	}
	if (o->lease == NULL) {
		snprintf(err, errlen,
			 "--protect: no lease keeper: memory.low is not raised unleased");
		return -1;
	}
	struct ta_protector *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p->cfg = ta_protect_default_cfg;
	p->interval_ns = o->interval_ms * 1000000u;
	p->lease = o->lease;
	p->kind =
	    (struct ta_lease_kind){ .file = "memory.low", .expiry_ns = o->expiry_ms * 1000000u };
	p->print = o->print;
	p->steals = o->steals;
	p->stop_pipe[0] = p->stop_pipe[1] = -1;
	pthread_mutex_init(&p->snap_lock, NULL);
	for (unsigned i = 0; i < TA_PROTECT_MAX; i++)
		p->v[i].fd_current = p->v[i].fd_low = p->v[i].fd_events = -1;
	for (unsigned i = 0; i < n; i++, p->n++)
		if (open_victim(&p->v[i], cgroups[i], err, errlen) != 0)
			goto fail;
	uint64_t now = ta_monotonic_ns();
	for (unsigned i = 0; i < n; i++) {
		struct victim *v = &p->v[i];
		/* An earlier agent's raise, if it left one, was restored when the lease started. */
		uint64_t orig = 0;
		ta_cgfile_get(v->fd_low, &orig);
		ta_protect_init(&v->st, orig);
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
	if (pipe2(p->stop_pipe, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "--protect: pipe: %s", strerror(errno));
		goto fail;
	}
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
		       o->interval_ms, o->expiry_ms, (int)ta_lease_keeper(p->lease));
	fflush(stdout);
	*out = (struct ta_agent_policy){ .name = "protect",
					 .self = p,
					 .status = protector_status,
					 .metrics = protector_metrics,
					 .stop = protector_stop };
	return 0;
fail:
	protector_stop(p);
	return -1;
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

/* The counters, a line per victim. */
static void report(const struct ta_protector *p, FILE *f)
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

static int protector_status(void *self, FILE *f)
{
	struct ta_protector *p = self;
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

static int protector_metrics(void *self, FILE *f)
{
	struct ta_protector *p = self;
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

static void protector_stop(void *self)
{
	struct ta_protector *p = self;
	if (p == NULL)
		return;
	if (p->started) {
		if (write(p->stop_pipe[1], "x", 1) < 0)
			perror("tierallocd: protect");
		pthread_join(p->thread, NULL);
		for (unsigned i = 0; i < p->n; i++)
			final_count(p, &p->v[i], &p->v[i].pgsteal_final);
		report(p, stdout);
	}
	/* What was raised goes back to the original (when memory.low still holds the raise). */
	ta_lease_release(p->lease, &p->kind);
	for (unsigned i = 0; i < p->n; i++) {
		if (p->v[i].fd_current >= 0)
			close(p->v[i].fd_current);
		if (p->v[i].fd_low >= 0)
			close(p->v[i].fd_low);
		if (p->v[i].fd_events >= 0)
			close(p->v[i].fd_events);
	}
	if (p->stop_pipe[0] >= 0) {
		close(p->stop_pipe[0]);
		close(p->stop_pipe[1]);
	}
	pthread_mutex_destroy(&p->snap_lock);
	free(p);
	fflush(stdout);
}
