/* SPDX-License-Identifier: MIT */
/*
 * tierallocd --reclaim-for-priority (issue 17 policy 1, seed 001): each round, the cgroups with
 * a priority (the operator's --priority paths, and the segments' cgroups with their
 * TIERALLOC_PRIORITY) are sampled through libcgroup (cgctl.c), ta_press_plan (pressure.c)
 * decides, and the lower-priority siblings of a pressured cgroup give what the parent lacks of
 * the room it wants, by memory.high caps (or memory.reclaim writes, --reclaim-no-cap). Every
 * decision is a line on stdout and a counter in the metrics.
 *
 * The writes run on a thread of their own (the seed's bpf_wq plays that part): a memory.reclaim
 * write returns only once the kernel reclaimed it all or gave up, which took 2 to 20 s in the
 * guest for 32 MiB of a cgroup that kept refaulting them, and the loop must go on meanwhile. A
 * victim has one request at a time, written in chunks of CHUNK bytes: Linux 6.1 reclaims a whole
 * write before it looks for a signal, so chunks are what keeps a request stoppable. A request is
 * dropped between chunks when a round no longer asks for it (the pressure went away) or the
 * agent stops.
 *
 * Caps (pressure.c says why): with them, a victim's request is a memory.high write instead. The
 * kernel sets the value at once, then reclaims down to it before the write returns, in a loop
 * that ends only below the value, after reclaim finds nothing, or on a signal: a victim that
 * faults its pages back as fast as they go keeps it looping (the agent hung in it, at its
 * stop, with seed 001's file workload). The cap works without the loop (the victim's own faults
 * reclaim it past the value), so a write that lasted a round is cut short: the round sends the
 * worker SIGUSR2 (a handler that does nothing, SA_RESTART), and so does the stop. Every cap is
 * leased (lease.c): a keeper process restores the victim's own memory.high when the agent stops
 * renewing, killed or hung, and the agent restores them all when it stops. A victim whose
 * memory.high is no longer the cap (the keeper restored it, or an operator wrote it) is uncapped,
 * and that value is its own again.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent.h"
#include "base/base.h"
#include "cgctl.h"
#include "lease.h"
#include "policy.h"
#include "prom.h"
#include "reclaim.h"
#include "status.h"

#define MiB (1024.0 * 1024.0)

struct entry {
	char path[TA_SHM_PATH_MAX + 1];
	uint32_t priority;
	bool have_prev, seen;
	struct ta_press_sample prev;
	unsigned calm; /* rounds since it was last pressured */
	/* Counters, since the agent started. */
	uint64_t pressured_rounds; /* rounds it was pressured */
	uint64_t requests;	   /* memory.reclaim writes to it */
	uint64_t requested;	   /* bytes they asked for */
	uint64_t short_writes;	   /* writes the kernel could not fill (EAGAIN) */
	uint64_t reclaimed;	   /* its memory.current's drop across the writes */
	uint64_t dropped;	   /* requests dropped before their end (pressure gone) */
	uint64_t caps;		   /* memory.high writes that lowered its cap */
	uint64_t lifts;		   /* its cap lifted (its own memory.high back) */
	bool queued;		   /* a request to it is queued or under way */
	bool wanted;		   /* the last round asked to reclaim it */
	uint64_t cap;		   /* the memory.high it is held at (UINT64_MAX: not capped) */
	uint64_t high_orig;	   /* its own memory.high, while capped */
	/* The last decision, for the status file: why it is pressured now (0: it is not); when
	 * it was last asked to give memory, and for whom. */
	unsigned why_now;
	uint64_t last_request_ns;
	uint32_t last_for_priority;
	char last_for[TA_SHM_PATH_MAX + 1];
};

/* A write to one victim, for the worker: bytes to reclaim, or with cap a memory.high to hold it
 * at (UINT64_MAX: its own, high_orig). */
struct job {
	char path[TA_SHM_PATH_MAX + 1];
	uint64_t bytes, before;
	bool cap;
	uint64_t cap_to, from, high_orig;
};

#define CHUNK (2ull << 20)

struct ta_reclaim {
	unsigned n;
	bool can_write; /* cgroup v2: memory.reclaim */
	bool said_no_reclaim;
	struct ta_lease *lease;	   /* the agent's, for the caps (NULL: no caps) */
	struct ta_lease_kind kind; /* memory.high, the expiry */
	struct ta_reclaim_config cfg;
	struct entry e[TA_PRESS_MAX];
	struct ta_press_cg cg[TA_PRESS_MAX];
	struct ta_agent_cgroup segs[TA_PRESS_MAX];
	uint64_t rounds, decisions;
	/* The worker: jobs[head..head+njobs) in a ring; everything above is under lock, but for
	 * the writes themselves. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t worker;
	bool have_worker, stopping;
	uint64_t high_write_ns; /* when the worker's memory.high write under way began; 0: none */
	unsigned head, njobs;
	struct job jobs[TA_PRESS_MAX];
};

static struct entry *find(struct ta_reclaim *r, const char *path)
{
	for (unsigned i = 0; i < r->n; i++)
		if (strcmp(r->e[i].path, path) == 0)
			return &r->e[i];
	return NULL;
}

/* A request's memory.reclaim writes, a chunk at a time (r->lock held, dropped around each). */
static int reclaim_chunks(struct ta_reclaim *r, const struct job *j, uint64_t *done, int *err,
			  bool *dropped)
{
	int rc = 0;
	while (*done < j->bytes && rc == 0) {
		struct entry *e = find(r, j->path);
		if (r->stopping || e == NULL || !e->wanted) {
			*dropped = true;
			break;
		}
		uint64_t chunk = j->bytes - *done < CHUNK ? j->bytes - *done : CHUNK;
		pthread_mutex_unlock(&r->lock);
		rc = ta_cgctl_reclaim(j->path, chunk);
		*err = errno;
		pthread_mutex_lock(&r->lock);
		*done += chunk;
	}
	return rc;
}

static int write_high(const char *path, uint64_t v)
{
	char value[32];
	if (v == UINT64_MAX)
		snprintf(value, sizeof(value), "max");
	else
		snprintf(value, sizeof(value), "%llu", (unsigned long long)v);
	return ta_cgctl_write(path, "memory.high", value);
}

/* A cap's memory.high writes (r->lock held, dropped around each), each leased before it is
 * written: down to the cap TA_PRESS_CAP_DESCENT at a time below the usage (pressure.c says
 * why), in one write when it rises or is lifted. A descent stops between writes when the agent
 * stops or a round no longer asks for it; *reached is the value last written (j->from: none). */
static int cap_write(struct ta_reclaim *r, const struct job *j, uint64_t *reached, unsigned *writes,
		     int *err, bool *dropped)
{
	uint64_t cap = j->cap_to == UINT64_MAX ? j->high_orig : j->cap_to;
	bool lift = j->cap_to == UINT64_MAX;
	int rc = 0;
	*reached = j->from;
	*writes = 0;
	while (rc == 0 && (*writes == 0 || *reached != cap)) {
		struct entry *e = find(r, j->path);
		if (r->stopping || e == NULL || (*writes > 0 && !e->wanted)) {
			*dropped = true;
			break;
		}
		r->high_write_ns = ta_monotonic_ns();
		pthread_mutex_unlock(&r->lock);
		char buf[32];
		uint64_t usage = *reached;
		if (ta_cgctl_read(j->path, "memory.current", buf, sizeof(buf)) <= 0 ||
		    ta_cgstat_value(buf, &usage) != 0)
			usage = *reached;
		uint64_t v = lift ? cap : ta_press_cap_next(*reached, usage, cap);
		if (!lift && ta_lease_hold(r->lease, &r->kind, j->path, j->high_orig, v) != 0) {
			rc = -1;
			*err = ENOSPC; /* every lease held */
		} else {
			rc = write_high(j->path, v);
			*err = errno;
		}
		pthread_mutex_lock(&r->lock);
		r->high_write_ns = 0;
		e = find(r, j->path);
		if (rc != 0) {
			/* Not written: a lease taken for it would restore a value never there. */
			if (!lift && (e == NULL || e->cap == UINT64_MAX))
				ta_lease_drop(r->lease, &r->kind, j->path);
			break;
		}
		*reached = v;
		(*writes)++;
		if (lift)
			ta_lease_drop(r->lease, &r->kind, j->path);
		if (e != NULL) {
			if (e->cap == UINT64_MAX && !lift)
				e->high_orig = j->high_orig;
			e->cap = lift ? UINT64_MAX : v;
		}
	}
	struct entry *e = find(r, j->path);
	if (e != NULL && *writes > 0) {
		e->caps += *reached < j->from && !lift;
		e->lifts += lift;
	}
	return rc;
}

/* SIGUSR2's handler: the signal's only work is to be pending (see the header). */
static void on_kick(int sig)
{
	(void)sig;
}

/* Cuts the worker's memory.high write short if it began at least min_ns ago (r->lock held). */
static void kick(struct ta_reclaim *r, uint64_t min_ns)
{
	if (r->have_worker && r->high_write_ns != 0 &&
	    ta_monotonic_ns() - r->high_write_ns >= min_ns)
		pthread_kill(r->worker, SIGUSR2);
}

static void *work(void *arg)
{
	struct ta_reclaim *r = arg;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (r->njobs == 0 && !r->stopping)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->stopping)
			break;
		struct job j = r->jobs[r->head];
		r->head = (r->head + 1) % TA_PRESS_MAX;
		r->njobs--;
		uint64_t t0 = ta_monotonic_ns(), done = 0, reached = 0;
		unsigned writes = 0;
		int err = 0;
		bool dropped = false;
		int rc = j.cap ? cap_write(r, &j, &reached, &writes, &err, &dropped)
			       : reclaim_chunks(r, &j, &done, &err, &dropped);
		pthread_mutex_unlock(&r->lock);
		uint64_t took = ta_monotonic_ns() - t0;
		struct ta_press_sample after;
		uint64_t got = 0;
		if (ta_cgctl_sample(j.path, &after) != 0 && after.current < j.before)
			got = j.before - after.current;
		char what[96], from[24] = "max";
		if (j.from != UINT64_MAX)
			snprintf(from, sizeof(from), "%.1f", j.from / MiB);
		if (!j.cap)
			snprintf(what, sizeof(what), "%.1f of %.1f MiB written", done / MiB,
				 j.bytes / MiB);
		else if (j.cap_to == UINT64_MAX)
			snprintf(what, sizeof(what), "cap lifted");
		else if (writes == 0)
			snprintf(what, sizeof(what), "memory.high %s kept", from);
		else
			snprintf(what, sizeof(what), "memory.high %s -> %.1f MiB (%u write%s)",
				 from, reached / MiB, writes, writes == 1 ? "" : "s");
		printf("tierallocd: reclaim: %s: %s, %.1f MiB freed in %llu ms%s%s\n", j.path, what,
		       got / MiB, (unsigned long long)(took / 1000000), rc != 0 ? ", " : "",
		       rc != 0	 ? strerror(err)
		       : dropped ? ", dropped: no longer asked"
				 : "");
		fflush(stdout);
		pthread_mutex_lock(&r->lock);
		struct entry *e = find(r, j.path);
		if (e != NULL) {
			e->queued = false;
			e->reclaimed += got;
			e->short_writes += rc != 0;
			e->dropped += dropped;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void reclaim_round(void *self, struct ta_agent_segments *set);
static int reclaim_status(void *self, FILE *f);
static int reclaim_metrics(void *self, FILE *f);
static void reclaim_stop(void *self);

int ta_reclaim_start(const struct ta_reclaim_options *o, struct ta_agent_policy *out, char *err,
		     size_t errlen)
{
	if (ta_cgctl_init(err, errlen) != 0)
		return -1;
	struct ta_reclaim *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->cfg = o->cfg;
	r->can_write = ta_cgctl_version() == 2;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	r->kind = (struct ta_lease_kind){ .file = "memory.high", .expiry_ns = o->expiry_ns };
	if (r->can_write && o->cap) {
		struct sigaction sa = { .sa_handler = on_kick, .sa_flags = SA_RESTART };
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR2, &sa, NULL);
		r->lease = o->lease;
		if (r->lease == NULL)
			printf("tierallocd: reclaim: no caps: no lease keeper\n");
	}
	if (r->can_write && pthread_create(&r->worker, NULL, work, r) != 0) {
		snprintf(err, errlen, "cannot start its thread (%s)", strerror(errno));
		free(r);
		return -1;
	}
	r->have_worker = r->can_write;
	printf("tierallocd: reclaim for priority (cgroup v%d at %s, steps of %llu bytes, %s)\n",
	       ta_cgctl_version(), ta_cgctl_mount(), (unsigned long long)r->cfg.step,
	       r->lease != NULL ? "capped at memory.high until room" : "no caps");
	*out = (struct ta_agent_policy){ .name = "reclaim-for-priority",
					 .self = r,
					 .round = reclaim_round,
					 .status = reclaim_status,
					 .metrics = reclaim_metrics,
					 .stop = reclaim_stop };
	return 0;
}

static void reclaim_stop(void *self)
{
	struct ta_reclaim *r = self;
	if (r->have_worker) {
		pthread_mutex_lock(&r->lock);
		r->stopping = true;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->lock);
		/* A memory.high write under way is cut short, however long it has run. */
		for (;;) {
			struct timespec by;
			clock_gettime(CLOCK_REALTIME, &by);
			by.tv_nsec += 50000000;
			if (by.tv_nsec >= 1000000000) {
				by.tv_sec++;
				by.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(r->worker, NULL, &by) == 0)
				break;
			pthread_mutex_lock(&r->lock);
			kick(r, 0);
			pthread_mutex_unlock(&r->lock);
		}
	}
	fflush(stdout);
	if (r->lease != NULL)
		ta_lease_release(r->lease, &r->kind); /* every cap back to its own memory.high */
	free(r);
}

static struct entry *entry_of(struct ta_reclaim *r, const char *path)
{
	struct entry *known = find(r, path);
	if (known != NULL)
		return known;
	if (r->n == TA_PRESS_MAX)
		return NULL;
	struct entry *e = &r->e[r->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->calm = UINT32_MAX;
	e->cap = e->high_orig = UINT64_MAX;
	return e;
}

/* A segment's cgroup as the kernel gave it (trust.c checks the header against it): still that
 * directory (a v2 cgroup's id is its directory's inode), under the cgroup file system. */
static bool path_is(const char *path, uint64_t cgroup_id)
{
	struct stat st;
	return strncmp(path, "/sys/fs/cgroup/", 15) == 0 && stat(path, &st) == 0 &&
	       S_ISDIR(st.st_mode) && (uint64_t)st.st_ino == cgroup_id;
}

static void why_text(unsigned why, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s%s", why & TA_PRESS_PSI ? " psi" : "",
		 why & TA_PRESS_EVENTS ? " events" : "", why & TA_PRESS_REFAULT ? " refaults" : "",
		 why & TA_PRESS_STEERED ? " steered" : "", why & TA_PRESS_GROWING ? " growing" : "",
		 why & TA_PRESS_LINGER ? " lately" : "");
}

/* The room under the limit of the directory holding path (cgroup v2): the lesser of its
 * memory.max and memory.high, less its memory.current; UINT64_MAX without a limit (the root
 * has no such files) or on v1. */
static uint64_t parent_room(const char *path)
{
	const char *slash = strrchr(path, '/');
	char parent[TA_SHM_PATH_MAX + 1];
	if (ta_cgctl_version() != 2 || slash == NULL || slash == path ||
	    (size_t)(slash - path) >= sizeof(parent))
		return UINT64_MAX;
	memcpy(parent, path, (size_t)(slash - path));
	parent[slash - path] = '\0';
	if (strcmp(parent, ta_cgctl_mount()) == 0)
		return UINT64_MAX; /* the root cgroup: no limit files */
	char buf[64];
	uint64_t max = UINT64_MAX, high = UINT64_MAX, current;
	if (ta_cgctl_read(parent, "memory.max", buf, sizeof(buf)) <= 0 ||
	    ta_cgstat_value(buf, &max) != 0)
		return UINT64_MAX;
	if (ta_cgctl_read(parent, "memory.high", buf, sizeof(buf)) > 0)
		(void)ta_cgstat_value(buf, &high);
	uint64_t limit = high < max ? high : max;
	if (limit == UINT64_MAX || ta_cgctl_read(parent, "memory.current", buf, sizeof(buf)) <= 0 ||
	    ta_cgstat_value(buf, &current) != 0)
		return UINT64_MAX;
	return limit > current ? limit - current : 0;
}

/* A job for the worker: bytes to reclaim, or the cap the plan gave (r->lock held). */
static void queue(struct ta_reclaim *r, struct entry *e, const struct ta_press_cg *c,
		  uint64_t bytes)
{
	struct job *job = &r->jobs[(r->head + r->njobs++) % TA_PRESS_MAX];
	size_t plen = strlen(e->path);
	memcpy(job->path, e->path, plen + 1);
	job->bytes = bytes;
	job->before = c->now.current;
	job->cap = c->cap_to != c->cap;
	job->cap_to = c->cap_to;
	job->from = c->cap != UINT64_MAX ? c->cap : c->high_orig;
	job->high_orig = c->high_orig;
	e->queued = true;
	pthread_cond_signal(&r->wake);
}

/* The cgroups with a priority this round, marked seen: the operator's paths first (their
 * priority is the one kept), then the segments' cgroups, whose steered counts go to steered[]
 * by entry. */
static void name_priorities(struct ta_reclaim *r, struct ta_agent_segments *set,
			    const struct ta_reclaim_config *cfg, uint64_t steered[])
{
	for (unsigned i = 0; i < r->n; i++)
		r->e[i].seen = false;
	const struct ta_agent_priorities *pr = &cfg->priorities;
	for (unsigned q = 0; q < pr->n; q++) {
		struct entry *e = entry_of(r, pr->list[q].cgroup);
		if (e != NULL && !e->seen) {
			e->seen = true;
			e->priority = pr->list[q].priority;
		}
	}
	unsigned nseg = set != NULL && ta_cgctl_version() == 2
			    ? ta_agent_segments_cgroups(set, r->segs, TA_PRESS_MAX)
			    : 0;
	for (unsigned s = 0; s < nseg; s++) {
		/* The kernel's path and id of the cgroup the segment's processes are in
		 * (trust.c); the operator's entry for that directory, under any spelling, is
		 * the one it joins, and the operator's priority stands. */
		const struct ta_agent_cgroup *c = &r->segs[s];
		if (!path_is(c->path, c->cgroup_id))
			continue;
		int q = ta_agent_priority_find(pr->list, pr->n, c->path, c->cgroup_id, c->dev);
		struct entry *e = entry_of(r, q >= 0 ? pr->list[q].cgroup : c->path);
		if (e == NULL)
			continue;
		steered[e - r->e] = c->steered;
		if (!e->seen) {
			e->seen = true;
			e->priority = ta_agent_priority_of(
			    false, 0, c->have_priority ? c->priority : 0, pr->ceiling);
		}
	}
}

/* Those no longer named are forgotten (but while a write to them is queued, or they are
 * capped: their cap is lifted first, they have no priority to be held for). steered[] follows
 * the entries as they close up. */
static void forget_unnamed(struct ta_reclaim *r, uint64_t steered[])
{
	unsigned kept = 0;
	for (unsigned i = 0; i < r->n; i++) {
		struct entry *e = &r->e[i];
		if (!e->seen && !e->queued && e->cap != UINT64_MAX && r->njobs < TA_PRESS_MAX) {
			struct ta_press_cg lift = { .cap = e->cap,
						    .cap_to = UINT64_MAX,
						    .high_orig = e->high_orig };
			printf("tierallocd: reclaim: %s: no longer has a priority: cap lifted\n",
			       e->path);
			queue(r, e, &lift, 0);
		}
		if (e->seen || e->queued || e->cap != UINT64_MAX) {
			steered[kept] = steered[i];
			r->e[kept++] = *e;
		}
	}
	r->n = kept;
}

/* c, the sample of e, joins the siblings sampled before it (the same parent directory,
 * numbered by its first child, whose room is read once a round), or starts a group. */
static void join_siblings(struct ta_reclaim *r, const struct entry *e, struct ta_press_cg *c,
			  unsigned n, const int idx[], bool ahead)
{
	const char *slash = strrchr(e->path, '/');
	size_t plen = slash != NULL ? (size_t)(slash - e->path) : 0;
	c->group = (uint32_t)n;
	c->room = UINT64_MAX;
	for (unsigned j = 0; j < n; j++) {
		const char *p = r->e[idx[j]].path;
		const char *ps = strrchr(p, '/');
		if (ps != NULL && (size_t)(ps - p) == plen && strncmp(p, e->path, plen) == 0) {
			c->group = r->cg[j].group;
			c->room = r->cg[j].room;
			return;
		}
	}
	if (ahead)
		c->room = parent_room(e->path);
}

/* Each named cgroup's control files into r->cg, for ta_press_plan: how many were read; idx[j]
 * is the entry r->cg[j] belongs to. A cgroup that is gone loses its cap's lease. */
static unsigned sample(struct ta_reclaim *r, const struct ta_reclaim_config *cfg,
		       const uint64_t steered[], int idx[])
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->n; i++) {
		struct entry *e = &r->e[i];
		struct ta_press_cg *c = &r->cg[n];
		memset(c, 0, sizeof(*c));
		if (ta_cgctl_sample(e->path, &c->now) == 0) {
			e->have_prev = false; /* gone, or not a memory cgroup (yet) */
			if (e->cap != UINT64_MAX && !e->queued) {
				ta_lease_drop(r->lease, &r->kind,
					      e->path); /* nothing left to restore */
				e->cap = UINT64_MAX;
			}
			continue;
		}
		if (!e->seen)
			continue; /* its cap is being lifted */
		c->now.steered = steered[i];
		/* A cap no longer in force (the keeper restored the cgroup's own value after an
		 * expiry, or an operator wrote one): that value is its own now. A cap being
		 * written is in flux: left for the worker. */
		if (e->cap != UINT64_MAX && !e->queued &&
		    (c->now.high != e->cap || !ta_lease_held(r->lease, &r->kind, e->path))) {
			printf("tierallocd: reclaim: %s: memory.high is no longer the cap: "
			       "uncapped\n",
			       e->path);
			ta_lease_drop(r->lease, &r->kind, e->path);
			e->cap = UINT64_MAX;
		}
		c->cap = e->cap;
		c->high_orig = e->cap != UINT64_MAX ? e->high_orig : c->now.high;
		c->priority = e->priority;
		c->have_prev = e->have_prev;
		c->prev = e->prev;
		c->calm = e->calm;
		join_siblings(r, e, c, n, idx, cfg->ahead > 0);
		idx[n++] = (int)i;
	}
	return n;
}

/* What the plan says of r->cg[j]: remember its sample, and queue the cap's change or the
 * reclaim it asks, with a line that says why. */
static void act(struct ta_reclaim *r, const struct ta_press_config *pc, unsigned j, const int idx[])
{
	struct entry *e = &r->e[idx[j]];
	struct ta_press_cg *c = &r->cg[j];
	e->prev = c->now;
	e->have_prev = true;
	e->calm = c->calm;
	if (c->why != 0)
		e->pressured_rounds++;
	e->why_now = c->why;
	e->wanted = c->reclaim > 0;
	if (c->cap_to != c->cap && c->reclaim == 0 && !e->queued && r->njobs < TA_PRESS_MAX) {
		/* A cap rises or is lifted: the room is back in its parent. */
		queue(r, e, c, 0);
		char room[32] = "no limit";
		if (c->room != UINT64_MAX)
			snprintf(room, sizeof(room), "%.1f MiB", c->room / MiB);
		printf("tierallocd: reclaim: %s: room in its parent (%s), no higher "
		       "priority pressured: cap %s\n",
		       e->path, room, c->cap_to == UINT64_MAX ? "lifted" : "raised");
	}
	if (c->reclaim == 0)
		return;
	const struct entry *hi = &r->e[idx[c->for_whom]];
	char why[64];
	why_text(r->cg[c->for_whom].why, why, sizeof(why));
	r->decisions++;
	if (!r->can_write) {
		if (!r->said_no_reclaim)
			printf("tierallocd: reclaim: %s is pressured, but cgroup v1 has no "
			       "memory.reclaim: nothing is reclaimed\n",
			       hi->path);
		r->said_no_reclaim = true;
		return;
	}
	/* Capped at or below what the plan wants already: the kernel holds it there on its own
	 * faults. memory.reclaim on top would not heed its memory.low (the cgroup is that
	 * reclaim's root) and, with the cap's reclaim, can take it under its floor (guest
	 * pressure.floor on 6.12: 49M under a memory.low of 64M). */
	if (pc->cap && c->cap != UINT64_MAX && c->cap_to == c->cap)
		return;
	uint64_t floor = c->now.low > c->now.min ? c->now.low : c->now.min;
	/* One write at a time per victim: the next round asks again if it must. */
	if (e->queued || r->njobs == TA_PRESS_MAX)
		return;
	char cap[48] = "";
	if (c->cap_to != c->cap)
		snprintf(cap, sizeof(cap), ", capped at %.1f MiB", c->cap_to / MiB);
	printf("tierallocd: reclaim: %s (priority %u) pressured (%s) -> %s (priority %u, "
	       "%.1f MiB, floor %.1f MiB): asking %.1f MiB%s\n",
	       hi->path, hi->priority, why + 1, e->path, e->priority, c->now.current / MiB,
	       floor / MiB, c->reclaim / MiB, cap);
	queue(r, e, c, c->reclaim);
	e->last_request_ns = ta_monotonic_ns();
	e->last_for_priority = hi->priority;
	if (hi != e) /* never the same, but the compiler cannot tell */
		memcpy(e->last_for, hi->path, sizeof(e->last_for));
	e->requests++;
	e->requested += c->reclaim;
}

void ta_reclaim_tune(struct ta_reclaim_config *cfg, uint32_t interval_ms)
{
	if (interval_ms == 0)
		interval_ms = 1;
	memset(cfg, 0, sizeof(*cfg));
	cfg->psi_us = interval_ms * 10ull;
	cfg->refaults = 256;
	cfg->hold = interval_ms >= 500 ? 2 : 1000 / interval_ms;
	cfg->grow_min = 1ull << 20;
	cfg->ahead = interval_ms >= 250 ? 2 : 500 / interval_ms;
	cfg->interval_ns = interval_ms * 1000000ull;
}

uint64_t ta_reclaim_expiry_ns(uint32_t interval_ms)
{
	uint64_t ms = 8ull * interval_ms > 2000 ? 8ull * interval_ms : 2000;
	return ms * 1000000ull;
}

static void reclaim_round(void *self, struct ta_agent_segments *set)
{
	struct ta_reclaim *r = self;
	const struct ta_reclaim_config *cfg = &r->cfg;
	pthread_mutex_lock(&r->lock);
	r->rounds++;
	if (r->lease != NULL)
		ta_lease_renew(r->lease, &r->kind);
	kick(r, cfg->interval_ns);
	uint64_t steered[TA_PRESS_MAX] = { 0 };
	name_priorities(r, set, cfg, steered);
	forget_unnamed(r, steered);
	int idx[TA_PRESS_MAX];
	unsigned n = sample(r, cfg, steered, idx);
	struct ta_press_config pc = { .psi_us = cfg->psi_us,
				      .refaults = cfg->refaults,
				      .step = cfg->step,
				      .hold = cfg->hold,
				      .grow_min = cfg->grow_min,
				      .ahead = cfg->ahead,
				      .cap = r->lease != NULL };
	ta_press_plan(r->cg, n, &pc);
	for (unsigned j = 0; j < n; j++)
		act(r, &pc, j, idx);
	fflush(stdout);
	pthread_mutex_unlock(&r->lock);
}

static int metrics(const struct ta_reclaim *r, FILE *f)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} m[] = {
		{ "tieralloc_agent_reclaim_pressured_rounds_total",
		  "Rounds of tierallocd --reclaim-for-priority in which the cgroup was pressured.",
		  offsetof(struct entry, pressured_rounds) },
		{ "tieralloc_agent_reclaim_requests_total",
		  "Reclaim requests tierallocd made of the cgroup for a higher priority.",
		  offsetof(struct entry, requests) },
		{ "tieralloc_agent_reclaim_requested_bytes_total",
		  "Bytes those requests asked for.", offsetof(struct entry, requested) },
		{ "tieralloc_agent_reclaim_short_total",
		  "Requests ended by a memory.reclaim write the kernel could not fill (EAGAIN).",
		  offsetof(struct entry, short_writes) },
		{ "tieralloc_agent_reclaim_dropped_total",
		  "Requests dropped before their end: a round no longer asked for them.",
		  offsetof(struct entry, dropped) },
		{ "tieralloc_agent_reclaim_freed_bytes_total",
		  "The drop of the cgroup's memory.current across those writes.",
		  offsetof(struct entry, reclaimed) },
		{ "tieralloc_agent_reclaim_caps_total",
		  "memory.high writes that lowered the cgroup's cap.",
		  offsetof(struct entry, caps) },
		{ "tieralloc_agent_reclaim_cap_lifts_total",
		  "Times the cgroup's cap was lifted: its own memory.high back.",
		  offsetof(struct entry, lifts) },
	};
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		if (fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", m[k].name, m[k].help,
			    m[k].name) < 0)
			return -1;
		for (unsigned i = 0; i < r->n; i++) {
			uint64_t v =
			    *(const uint64_t *)(const void *)((const char *)&r->e[i] + m[k].off);
			if (fprintf(f, "%s{cgroup=\"", m[k].name) < 0)
				return -1;
			ta_prom_label_value(f, r->e[i].path);
			if (fprintf(f, "\",priority=\"%u\"} %llu\n", r->e[i].priority,
				    (unsigned long long)v) < 0)
				return -1;
		}
	}
	return 0;
}

static int reclaim_status(void *self, FILE *f)
{
	struct ta_reclaim *r = self;
	pthread_mutex_lock(&r->lock);
	uint64_t now = ta_monotonic_ns();
	int rc = 0;
	for (unsigned i = 0; i < r->n && rc == 0; i++) {
		const struct entry *e = &r->e[i];
		char why[64] = " none", ago[24] = "never";
		if (e->why_now != 0)
			why_text(e->why_now, why, sizeof(why));
		/* why_text's words are separated by spaces: one value, joined by commas. */
		for (char *w = why + 1; *w != '\0'; w++)
			if (*w == ' ')
				*w = ',';
		if (e->last_request_ns != 0)
			snprintf(ago, sizeof(ago), "%llu",
				 (unsigned long long)((now - e->last_request_ns) / 1000000000u));
		if (fprintf(f,
			    "reclaim priority=%u pressured=%s pressured_rounds=%llu requests=%llu "
			    "asked_bytes=%llu freed_bytes=%llu short=%llu dropped=%llu "
			    "last_request_s=%s",
			    e->priority, why + 1, (unsigned long long)e->pressured_rounds,
			    (unsigned long long)e->requests, (unsigned long long)e->requested,
			    (unsigned long long)e->reclaimed, (unsigned long long)e->short_writes,
			    (unsigned long long)e->dropped, ago) < 0)
			rc = -1;
		else if (fprintf(f, " caps=%llu lifts=%llu", (unsigned long long)e->caps,
				 (unsigned long long)e->lifts) < 0 ||
			 (e->cap != UINT64_MAX &&
			  fprintf(f, " cap_bytes=%llu", (unsigned long long)e->cap) < 0))
			rc = -1;
		else if (e->last_request_ns != 0 &&
			 (fprintf(f, " for_priority=%u", e->last_for_priority) < 0 ||
			  ta_status_path(f, "for", e->last_for) != 0))
			rc = -1;
		else if (ta_status_path(f, "path", e->path) != 0 || fputc('\n', f) < 0)
			rc = -1;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static int reclaim_metrics(void *self, FILE *f)
{
	struct ta_reclaim *r = self;
	pthread_mutex_lock(&r->lock);
	int rc = metrics(r, f);
	pthread_mutex_unlock(&r->lock);
	return rc;
}
