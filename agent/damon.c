/* SPDX-License-Identifier: MIT */
/*
 * tierallocd --access damon (issue 14): which ranges of each tieralloc process were accessed
 * lately, reads included, from DAMON's virtual-address monitoring, written into one access file
 * per process (src/enforce/heatfile.h) that the process's worker folds into its heat.
 *
 * DAMON's sysfs interface (Linux >= 5.18; the vaddr operations and schemes' tried regions, >=
 * 6.2): one kdamond per process, since a context's tried regions do not say which target they
 * belong to and a kdamond has one context. Each monitors its process's address space, samples
 * every 500 ms and aggregates over 5 s (so nr_accesses is 0..10), with 64 to 128 regions; a
 * "stat" scheme that matches every region lists them under tried_regions when asked
 * (update_schemes_tried_regions, which waits for the next aggregation: hence a thread of its
 * own, away from the agent's 0.25 s loop).
 *
 * The processes: the live pids in the slots of the segments the agent keeps, in its own pid
 * namespace only (DAMON takes pids of the writer's namespace; a container's own pid namespace is
 * left out), of the segment's owner (or any, for root's segments), at most TA_DAMON_MAX_PROCS.
 * DAMON is taken only when no kdamond is on: an operator's own monitoring is left alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "base/base.h"
#include "damon.h"
#include "enforce/heatfile.h"

/* What it costs (bench/run-access-agent.sh, 1 GiB, TCG guest, docs/DESIGN-NOTES.md): the
 * kdamond's share of a core goes with the sampling rate, the agent thread's with the regions it
 * reads (three sysfs files each) per round. 500 ms samples and at most 128 regions, and a round
 * no more often than keeps the thread within CPU_BUDGET_PCT of a core.
 * DAMON merges regions up to a size of the monitored span over MIN_REGIONS. A tieralloc process
 * spans gigabytes of address space (its tiers' reserved regions): with 10, regions of 150-300
 * MiB each held hot and cold blocks alike, and a read working set of 200 MiB ranked hot in part
 * and by chance; 64 keeps them under 50 MiB for 3 GiB. */
#define SAMPLE_US      500000u
#define AGGR_US	       5000000u
#define MIN_REGIONS    64u
#define MAX_REGIONS    128u
#define CPU_BUDGET_PCT 1u

struct monitored {
	struct ta_agent_proc proc;
	bool wrote;	   /* its access file exists */
	bool dead;	   /* its kdamond stopped (the process exited) */
	uint64_t since_ns; /* at or before the start of the aggregation the next update lists */
};

struct ta_damon {
	char admin[200], shm[200];
	bool verbose;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;				       /* under lock */
	struct ta_agent_proc want[TA_DAMON_MAX_PROCS]; /* under lock */
	unsigned nwant;				       /* under lock */
	struct monitored run[TA_DAMON_MAX_PROCS];      /* the thread's */
	unsigned nrun;
	struct ta_heatfile_region regions[MAX_REGIONS * 2];
	uint64_t file[TA_HEATFILE_MAX_BYTES / sizeof(uint64_t) + 1];
	struct ta_damon_stats stats; /* under lock */
	uint64_t period_ns;	     /* between rounds: the aggregation, or longer (budget) */
};

/* Write a value into a sysfs file under the admin directory: 0, or -1 with errno. */
static int put(const struct ta_damon *d, const char *rel, const char *value)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", d->admin, rel);
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	int err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)len ? 0 : -1;
}

static int putf(const struct ta_damon *d, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int putf(const struct ta_damon *d, const char *value, const char *fmt, ...)
{
	char rel[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	return put(d, rel, value);
}

/* A file's first line, trailing newline cut: 0, or -1. */
static int get(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int get_u64(const char *path, uint64_t *v)
{
	char buf[32], *end;
	if (get(path, buf, sizeof(buf)) != 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(buf, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*v = x;
	return 0;
}

int ta_damon_regions(const char *dir, struct ta_heatfile_region *out, unsigned max,
		     uint32_t max_accesses)
{
	unsigned n = 0;
	for (unsigned i = 0;; i++) {
		char path[600];
		uint64_t start, end, acc;
		snprintf(path, sizeof(path), "%s/%u/start", dir, i);
		if (get_u64(path, &start) != 0)
			break;
		snprintf(path, sizeof(path), "%s/%u/end", dir, i);
		if (get_u64(path, &end) != 0)
			return -1;
		snprintf(path, sizeof(path), "%s/%u/nr_accesses", dir, i);
		if (get_u64(path, &acc) != 0)
			return -1;
		/* Its age is not read: the worker does not use it, and each file read costs. */
		if (start >= end)
			continue;
		if (n == max)
			return -1;
		out[n++] = (struct ta_heatfile_region){
			.start = start,
			.end = end,
			.nr_accesses = acc > max_accesses ? max_accesses : (uint32_t)acc,
		};
	}
	/* Listed in no particular order (sysfs names sort as strings), and regions of one
	 * target never overlap: sorted by start, an overlap is a torn listing. */
	for (unsigned i = 1; i < n; i++) {
		struct ta_heatfile_region r = out[i];
		unsigned j = i;
		for (; j > 0 && out[j - 1].start > r.start; j--)
			out[j] = out[j - 1];
		out[j] = r;
	}
	for (unsigned i = 1; i < n; i++)
		if (out[i].start < out[i - 1].end)
			return -1;
	return (int)n;
}

/* ---- the access files ---- */

static void file_path(const struct ta_damon *d, uint32_t pid, bool tmp, char *out, size_t size)
{
	snprintf(out, size, "%s/%s" TA_HEATFILE_PREFIX "%u%s", d->shm, tmp ? "." : "", pid,
		 tmp ? ".tmp" : "");
}

/* Written whole under a temporary name and renamed over the old one, so that the process reads
 * the old file or the new one. The directory is world-writable: nothing there is followed, and
 * whatever holds the temporary name is removed first. */
int ta_damon_write_file(const char *shm, const struct ta_agent_proc *p, const void *buf, size_t len)
{
	struct ta_damon d = { 0 };
	snprintf(d.shm, sizeof(d.shm), "%s", shm);
	char tmp[300], path[300];
	file_path(&d, p->pid, true, tmp, sizeof(tmp));
	file_path(&d, p->pid, false, path, sizeof(path));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0)
		return -1;
	bool ok = write(fd, buf, len) == (ssize_t)len;
	/* The process's user owns it: its reader takes only root's files or its own. */
	if (ok && geteuid() == 0 && fchown(fd, p->uid, (gid_t)-1) != 0)
		ok = false;
	close(fd);
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* ---- the kdamonds ---- */

static bool same(const struct ta_agent_proc *a, const struct ta_agent_proc *b)
{
	return a->pid == b->pid && a->start_time == b->start_time;
}

/* Every kdamond off (one that already stopped, its process gone, refuses: fine). */
static void all_off(struct ta_damon *d)
{
	for (unsigned i = 0; i < d->nrun; i++)
		putf(d, "off", "kdamonds/%u/state", i);
}

static int setup_one(struct ta_damon *d, unsigned i, uint32_t pid)
{
	char v[32];
#define k "kdamonds/%u/contexts/0/%s"
	if (putf(d, "1", "kdamonds/%u/contexts/nr_contexts", i) != 0 ||
	    putf(d, "vaddr", k, i, "operations") != 0)
		return -1;
	snprintf(v, sizeof(v), "%u", SAMPLE_US);
	if (putf(d, v, k, i, "monitoring_attrs/intervals/sample_us") != 0)
		return -1;
	snprintf(v, sizeof(v), "%u", AGGR_US);
	if (putf(d, v, k, i, "monitoring_attrs/intervals/aggr_us") != 0 ||
	    putf(d, v, k, i, "monitoring_attrs/intervals/update_us") != 0)
		return -1;
	snprintf(v, sizeof(v), "%u", MAX_REGIONS);
	if (putf(d, v, k, i, "monitoring_attrs/nr_regions/max") != 0)
		return -1;
	snprintf(v, sizeof(v), "%u", MIN_REGIONS);
	if (putf(d, v, k, i, "monitoring_attrs/nr_regions/min") != 0)
		return -1;
	snprintf(v, sizeof(v), "%u", pid);
	if (putf(d, "1", k, i, "targets/nr_targets") != 0 ||
	    putf(d, v, k, i, "targets/0/pid_target") != 0)
		return -1;
	/* A scheme that does nothing but count, over every region, so that all are listed. */
	if (putf(d, "1", k, i, "schemes/nr_schemes") != 0 ||
	    putf(d, "stat", k, i, "schemes/0/action") != 0 ||
	    putf(d, "18446744073709551615", k, i, "schemes/0/access_pattern/sz/max") != 0 ||
	    putf(d, "4294967295", k, i, "schemes/0/access_pattern/nr_accesses/max") != 0 ||
	    putf(d, "4294967295", k, i, "schemes/0/access_pattern/age/max") != 0)
		return -1;
#undef k
	return putf(d, "on", "kdamonds/%u/state", i);
}

static void remove_file(struct ta_damon *d, struct monitored *m)
{
	if (!m->wrote)
		return;
	char path[300];
	file_path(d, m->proc.pid, false, path, sizeof(path));
	unlink(path);
	m->wrote = false;
}

/* The kdamonds for the processes wanted now: all stopped and set up again (nr_kdamonds cannot
 * change while one runs). */
static void reconfigure(struct ta_damon *d, const struct ta_agent_proc *want, unsigned n)
{
	all_off(d);
	for (unsigned i = 0; i < d->nrun; i++) {
		bool kept = false;
		for (unsigned j = 0; j < n && !kept; j++)
			kept = same(&d->run[i].proc, &want[j]);
		if (!kept)
			remove_file(d, &d->run[i]);
	}
	struct monitored next[TA_DAMON_MAX_PROCS];
	for (unsigned j = 0; j < n; j++) {
		next[j] = (struct monitored){ .proc = want[j] };
		for (unsigned i = 0; i < d->nrun; i++)
			if (same(&d->run[i].proc, &want[j]))
				next[j].wrote = d->run[i].wrote;
	}
	char v[16];
	snprintf(v, sizeof(v), "%u", n);
	if (put(d, "kdamonds/nr_kdamonds", v) != 0) {
		if (d->verbose)
			printf("tierallocd: damon: nr_kdamonds %u: %s\n", n, strerror(errno));
		n = 0;
	}
	for (unsigned j = 0; j < n; j++) {
		/* Its first aggregation begins once it is on. */
		next[j].since_ns = ta_monotonic_ns();
		if (setup_one(d, j, next[j].proc.pid) != 0) {
			next[j].dead = true;
			if (d->verbose)
				printf("tierallocd: damon: pid %u: %s\n", next[j].proc.pid,
				       strerror(errno));
		} else if (d->verbose) {
			printf("tierallocd: damon: monitoring pid %u\n", next[j].proc.pid);
		}
	}
	memcpy(d->run, next, sizeof(next[0]) * n);
	d->nrun = n;
	fflush(stdout);
}

/* One process's regions into its access file; the agent rewrites it every period_ns. */
static void publish_one(struct ta_damon *d, unsigned i, uint64_t period_ns)
{
	struct monitored *m = &d->run[i];
	if (m->dead)
		return;
	/* The update lists the first aggregation to end after it is asked for. That one began
	 * when the one before ended, which was after the last update was asked for (or the
	 * kdamond started): the counts began no earlier than since_ns, and the next ones no
	 * earlier than now. */
	uint64_t asked_ns = ta_monotonic_ns();
	if (putf(d, "update_schemes_tried_regions", "kdamonds/%u/state", i) != 0) {
		/* The kdamond stopped: its process exited. */
		m->dead = true;
		remove_file(d, m);
		return;
	}
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/kdamonds/%u/contexts/0/schemes/0/tried_regions", d->admin,
		 i);
	uint64_t window_ns = m->since_ns;
	m->since_ns = asked_ns;
	int n = ta_damon_regions(dir, d->regions, MAX_REGIONS * 2, AGGR_US / SAMPLE_US);
	if (n < 0 || (unsigned)n > TA_HEATFILE_MAX_REGIONS)
		return;
	struct ta_heatfile_header h = {
		.pid = m->proc.pid,
		.start_time = m->proc.start_time,
		.written_ns = ta_monotonic_ns(),
		.window_ns = window_ns,
		.interval_ns = period_ns,
		.max_accesses = AGGR_US / SAMPLE_US,
		.source = TA_HEATFILE_SOURCE_DAMON,
	};
	size_t len = ta_heatfile_encode(d->file, &h, d->regions, (uint32_t)n);
	if (len != 0 && ta_damon_write_file(d->shm, &m->proc, d->file, len) == 0) {
		m->wrote = true;
		pthread_mutex_lock(&d->lock);
		d->stats.files_written++;
		d->stats.regions = (unsigned)n;
		pthread_mutex_unlock(&d->lock);
	}
}

uint64_t ta_damon_interval_ns(uint64_t period_ns, unsigned nrun, uint64_t aggr_us)
{
	/* Each update_schemes_tried_regions waits for its kdamond's next aggregation, one after
	 * the other: with n processes a round can take n aggregations, and each file is
	 * rewritten once a round. */
	uint64_t round = (uint64_t)nrun * aggr_us * 1000ull;
	return round > period_ns ? round : period_ns;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *loop(void *arg)
{
	struct ta_damon *d = arg;
	struct ta_agent_proc want[TA_DAMON_MAX_PROCS];
	for (;;) {
		uint64_t t0 = ta_monotonic_ns(), c0 = thread_cpu_ns();
		pthread_mutex_lock(&d->lock);
		bool stop = d->stop;
		unsigned n = d->nwant;
		memcpy(want, d->want, sizeof(want[0]) * n);
		pthread_mutex_unlock(&d->lock);
		if (stop)
			break;
		bool changed = n != d->nrun;
		for (unsigned j = 0; j < n && !changed; j++)
			changed = !same(&d->run[j].proc, &want[j]);
		if (changed) {
			reconfigure(d, want, n);
			c0 = thread_cpu_ns(); /* once per change: not a round's cost */
		}
		for (unsigned i = 0; i < d->nrun; i++)
			publish_one(d, i, ta_damon_interval_ns(d->period_ns, d->nrun, AGGR_US));
		/* Once per aggregation (update_schemes_tried_regions waited for one), or less often
		 * when a round took more than the budget's share of that. The files just written
		 * say the last period; a process deems them stale after 3, so it at most doubles.
		 */
		uint64_t took = ta_monotonic_ns() - t0;
		uint64_t cpu = thread_cpu_ns() - c0;
		uint64_t period = AGGR_US * 1000ull;
		if (cpu * (100 / CPU_BUDGET_PCT) > period)
			period = cpu * (100 / CPU_BUDGET_PCT);
		if (period > 2 * d->period_ns)
			period = 2 * d->period_ns;
		d->period_ns = period;
		uint64_t wait_ns = took >= period ? 100000000ull : period - took;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)(wait_ns / 1000000000ull);
		until.tv_nsec += (long)(wait_ns % 1000000000ull);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&d->lock);
		if (!d->stop)
			pthread_cond_timedwait(&d->cond, &d->lock, &until);
		pthread_mutex_unlock(&d->lock);
	}
	all_off(d);
	for (unsigned i = 0; i < d->nrun; i++)
		remove_file(d, &d->run[i]);
	put(d, "kdamonds/nr_kdamonds", "0");
	return NULL;
}

struct ta_damon *ta_damon_start(const char *admin, const char *shm, bool verbose, char *err,
				size_t errlen)
{
	char path[300];
	uint64_t nk = 0;
	snprintf(path, sizeof(path), "%s/kdamonds/nr_kdamonds", admin);
	if (get_u64(path, &nk) != 0) {
		snprintf(err, errlen,
			 "this kernel has no DAMON sysfs interface (%s: %s): CONFIG_DAMON_SYSFS, "
			 "Linux >= 6.2",
			 path, strerror(errno));
		return NULL;
	}
	for (uint64_t i = 0; i < nk; i++) {
		char state[32];
		snprintf(path, sizeof(path), "%s/kdamonds/%llu/state", admin,
			 (unsigned long long)i);
		if (get(path, state, sizeof(state)) == 0 && strcmp(state, "on") == 0) {
			snprintf(err, errlen,
				 "DAMON is in use (kdamond %llu is on): not taking it over",
				 (unsigned long long)i);
			return NULL;
		}
	}
	struct ta_damon *d = calloc(1, sizeof(*d));
	if (d == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(d->admin, sizeof(d->admin), "%s", admin);
	snprintf(d->shm, sizeof(d->shm), "%s", shm);
	d->verbose = verbose;
	d->period_ns = AGGR_US * 1000ull;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (put(d, "kdamonds/nr_kdamonds", "0") != 0) {
		snprintf(err, errlen, "DAMON's sysfs interface refused a write: %s",
			 strerror(errno));
		free(d);
		return NULL;
	}
	if (pthread_create(&d->thread, NULL, loop, d) != 0) {
		snprintf(err, errlen, "no thread for DAMON");
		free(d);
		return NULL;
	}
	/* bench/run-access-agent.sh finds its CPU time by this name. */
	pthread_setname_np(d->thread, "ta-damon");
	return d;
}

void ta_damon_set_procs(struct ta_damon *d, const struct ta_agent_proc *p, unsigned n)
{
	if (n > TA_DAMON_MAX_PROCS)
		n = TA_DAMON_MAX_PROCS;
	pthread_mutex_lock(&d->lock);
	memcpy(d->want, p, sizeof(p[0]) * n);
	d->nwant = n;
	pthread_mutex_unlock(&d->lock);
}

void ta_damon_stats(struct ta_damon *d, struct ta_damon_stats *out)
{
	pthread_mutex_lock(&d->lock);
	*out = d->stats;
	pthread_mutex_unlock(&d->lock);
}

void ta_damon_stop(struct ta_damon *d)
{
	if (d == NULL)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
}
