/* SPDX-License-Identifier: MIT */
/*
 * tierallocd: the privileged agent (issue 6). It loads and attaches the BPF program of
 * bpf/migrations.bpf.c, which counts the kernel's page migrations per cgroup, reason and
 * destination node, reads the counts every interval and writes them, per destination tier, into the
 * shared segment of every cgroup that has tieralloc processes (segments.c, publish.c). When the
 * kernel promoted into a tier at its share, it raises the segment's alarm and wakes the processes'
 * workers, which then gate and demote at once.
 *
 *   tierallocd [--interval SECONDS] [--rescan SECONDS] [--print] [--once] [--stats]
 *              [--metrics [ADDRESS:]PORT [--metrics-any]] [--textfile PATH]
 *              [--access damon|none] [--lend [--lend-reserve SIZE]]
 *              [--reclaim-for-priority [--reclaim-step SIZE] [--reclaim-no-cap]]
 *              [--priority CGROUP=N]... [--priority-ceiling N]
 *              [--protect CGROUP [--protect-interval MS] [--protect-expiry SECONDS]]...
 *              [--status FILE] [--state-dir DIR]
 *              [--btf PATH] [-h|--help] [--version]
 *
 * With a policy (--reclaim-for-priority, --protect) it rewrites the policies' status file
 * (status.h; /run/tierallocd/policies, or --status FILE) every second, which tieralloc-stat
 * shows, and removes it when it stops.
 *
 * With --access damon it also monitors the accesses of the processes in the segments' slots
 * with DAMON and writes each an access file (damon.c), which TIERALLOC_ACCESS=agent reads.
 *
 * With --metrics it answers GET /metrics with the segments in Prometheus' text format (the same
 * as tieralloc-stat --prometheus, common/prom.c) from its own loop (metrics.c); with --textfile
 * it rewrites that text into PATH every second, for node-exporter's textfile collector.
 *
 * With --lend it lends idle fast-tier shares (issue 15): every interval, a cgroup's share below
 * its usage less the reserve goes to cgroups that want more than theirs, by priority
 * (agent/lend.c), with an expiry the next interval renews (lender.c).
 *
 * With --reclaim-for-priority, every interval, a cgroup under memory pressure (PSI, memory.events,
 * refaults, or growth about to fill its parent) has its lower-priority siblings capped and
 * reclaimed, never below their memory.low/min (agent/pressure.c decides, agent/reclaim.c acts);
 * one steered away from the fast tier has lower priorities yield it their fast-tier shares, which
 * their enforcement demotes (agent/lend.c, in the lending round). With --protect it keeps each
 * named cgroup's memory.low at its usage plus headroom while reclaim may steal from it (issue 17,
 * seed 004: agent/protect.c decides, agent/protector.c runs it in a thread and a lease keeper
 * process undoes requests that are no longer renewed).
 *
 * main() is ta_agent_options_parse (options.c), load_attach (which starts the policies, each a
 * struct ta_agent_policy of policy.h), run and cleanup, the one way out.
 *
 * Needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN) and a kernel with BTF; without either it
 * exits 1 with one line saying which. SIGTERM or SIGINT: detaches its programs and exits 0.
 * The allocator never depends on it.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "agent.h"
#include "base/base.h"
#include "cgctl.h"
#include "damon.h"
#include "lease.h"
#include "metrics.h"
#include "migcount.h"
#include "migrations.h" /* TA_BPF_MAX_KEYS */
#include "options.h"
#include "policy.h"
#include "protector.h"
#include "reclaim.h"
#include "status.h"
#include "steals.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_WARN && getenv("TIERALLOCD_DEBUG") != NULL)
		return vfprintf(stderr, fmt, args);
	if (level == LIBBPF_DEBUG || level == LIBBPF_INFO)
		return 0;
	return getenv("TIERALLOCD_DEBUG") != NULL ? vfprintf(stderr, fmt, args) : 0;
}

/* Each segment kept holds a descriptor: raise the soft limit to fit the cap (and what libbpf
 * and the ring buffer need), or lower the cap to what the hard limit allows. */
static void fit_descriptors(struct ta_agent_limits *limits)
{
	enum { RESERVE = 128 };
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rlim_t want = (rlim_t)limits->max_segments + RESERVE;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return;
	}
	if (rl.rlim_cur >= want)
		return;
	unsigned fit = rl.rlim_cur > 2 * RESERVE ? (unsigned)(rl.rlim_cur - RESERVE) : RESERVE;
	if (fit < limits->max_segments) {
		fprintf(stderr,
			"tierallocd: %llu file descriptors (RLIMIT_NOFILE): at most %u segments "
			"instead of %u\n",
			(unsigned long long)rl.rlim_cur, fit, limits->max_segments);
		limits->max_segments = fit;
		if (limits->max_per_uid > fit)
			limits->max_per_uid = fit;
	}
}

static uint64_t monotonic_ms(void)
{
	return ta_monotonic_ns() / 1000000;
}

/* What runs while the agent is attached; cleanup() frees whatever part of it was made. */
struct agent {
	struct ta_migcount *migrations;
	int stats_fd;
	struct ta_agent_segments *segments;
	struct ta_agent_count *counts;
	struct ta_metrics_server *metrics;
	struct ta_damon *damon; /* --access damon, when DAMON could be taken */
	bool textfile_failed;	/* said once, until a write works again */
	bool status_failed;	/* the same, for the status file */
	bool status_written;	/* removed at the end */
	/* The policies, in the order their rounds run: lending, reclaim, protect (policy.h). */
	struct ta_agent_policy policy[3];
	unsigned npolicies;
	struct ta_steals *steals; /* --protect's view of reclaim, when it attached */
	struct ta_lease *lease;	  /* the leases of every policy that changes a cgroup file */
	int lock_fd;		  /* STATE_DIR/lock, held while the agent runs */
};

/* Whether a policy writes lines into the status file. */
static bool has_status(const struct agent *ag)
{
	for (unsigned i = 0; i < ag->npolicies; i++)
		if (ag->policy[i].status != NULL)
			return true;
	return false;
}

/* The metrics' text (ta_metrics_body): the segments as they are now. */
static int metrics_text(void *ctx, FILE *f)
{
	struct agent *ag = ctx;
	int n = ta_agent_segments_metrics(ag->segments, f);
	for (unsigned i = 0; n >= 0 && i < ag->npolicies; i++)
		if (ag->policy[i].metrics != NULL &&
		    ag->policy[i].metrics(ag->policy[i].self, f) != 0)
			return -1;
	return n;
}

static void write_textfile(const struct ta_agent_options *o, struct agent *ag)
{
	if (ta_metrics_textfile(o->textfile, metrics_text, ag) == 0) {
		ag->textfile_failed = false;
	} else if (!ag->textfile_failed) {
		fprintf(stderr, "tierallocd: cannot write --textfile %s (%s)\n", o->textfile,
			strerror(errno));
		ag->textfile_failed = true;
	}
}

/* The status file's text (ta_metrics_body): each policy's lines. */
static int status_text(void *ctx, FILE *f)
{
	struct agent *ag = ctx;
	if (fputs(TA_POLICIES_MAGIC "\n", f) < 0)
		return -1;
	for (unsigned i = 0; i < ag->npolicies; i++)
		if (ag->policy[i].status != NULL &&
		    ag->policy[i].status(ag->policy[i].self, f) != 0)
			return -1;
	return 0;
}

static void write_status(const struct ta_agent_options *o, struct agent *ag)
{
	if (ta_metrics_textfile(o->status, status_text, ag) == 0) {
		ag->status_failed = false;
		ag->status_written = true;
	} else if (!ag->status_failed) {
		fprintf(stderr, "tierallocd: cannot write the status file %s (%s)\n", o->status,
			strerror(errno));
		ag->status_failed = true;
	}
}

/* One agent at a time per state directory. Two would share STATE_DIR/lease-INODE-FILE: each would
 * take the other's cap for the cgroup's own memory.high, and one's lifting would delete the other's
 * state, leaving the cgroup capped after both stopped. flock(2): the kernel drops the lock with
 * the last descriptor of its holder (the keepers close theirs), so a dead agent's lock file never
 * blocks a new one. 0, or 1 with a line saying why. */
static int take_lock(const struct ta_agent_options *o, struct agent *ag)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/lock", o->state_dir);
	if (mkdir(o->state_dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "tierallocd: cannot make the state directory %s (%s)\n",
			o->state_dir, strerror(errno));
		return 1;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd < 0) {
		fprintf(stderr, "tierallocd: cannot open its lock %s (%s)\n", path,
			strerror(errno));
		return 1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int err = errno;
		char pid[16] = "", who[32] = "";
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strspn(pid, "0123456789")] = '\0';
		if (pid[0] != '\0')
			snprintf(who, sizeof(who), " (pid %s)", pid);
		close(fd);
		if (err == EWOULDBLOCK)
			fprintf(stderr,
				"tierallocd: another tierallocd%s is running (%s is locked): two "
				"agents would take each other's caps for the cgroups' own values; "
				"stop it first, or give this one another --state-dir\n",
				who, path);
		else
			fprintf(stderr, "tierallocd: cannot lock %s (%s)\n", path, strerror(err));
		return 1;
	}
	char text[24];
	int len = snprintf(text, sizeof(text), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len)
		fprintf(stderr, "tierallocd: cannot write its pid into %s (%s)\n", path,
			strerror(errno));
	ag->lock_fd = fd;
	return 0;
}

/* The policies the options ask for, into ag->policy in the order of their rounds: lending
 * (with --lend, and with --reclaim-for-priority for its yields), reclaim, protect. 0, or 1 when
 * one that cannot do without what failed (--protect) could not start. */
static int start_policies(const struct ta_agent_options *o, struct agent *ag)
{
	uint32_t interval_ms = (uint32_t)(o->interval * 1000 + 0.5);
	struct ta_agent_priorities priorities = { .list = o->priorities,
						  .n = o->npriorities,
						  .ceiling = o->priority_ceiling };
	if (o->lend || o->reclaim) {
		struct ta_agent_lend_config lend;
		ta_agent_lend_tune(&lend, interval_ms);
		lend.reserve = o->lend_reserve;
		lend.priorities = priorities;
		lend.flags = (o->lend ? TA_LEND_IDLE : 0u) | (o->reclaim ? TA_LEND_YIELD : 0u);
		if (ta_lender_start(&lend, o->print, &ag->policy[ag->npolicies]) != 0) {
			fprintf(stderr, "tierallocd: lending: out of memory\n");
			return 1;
		}
		ag->npolicies++;
		if (o->lend)
			printf("tierallocd: lending idle shares (reserve %llu bytes)\n",
			       (unsigned long long)o->lend_reserve);
	}
	if (o->reclaim) {
		/* Not fatal: the rest of the agent works without it. */
		char err[300];
		struct ta_reclaim_options ro = { .cap = !o->reclaim_no_cap,
						 .expiry_ns = ta_reclaim_expiry_ns(
						     (uint32_t)(o->interval * 1000.0)),
						 .lease = ag->lease };
		ta_reclaim_tune(&ro.cfg, interval_ms);
		ro.cfg.step = o->reclaim_step;
		ro.cfg.priorities = priorities;
		if (ta_reclaim_start(&ro, &ag->policy[ag->npolicies], err, sizeof(err)) == 0)
			ag->npolicies++;
		else
			fprintf(stderr, "tierallocd: --reclaim-for-priority: %s; no reclaim\n",
				err);
	}
	if (o->nprotect > 0) {
		char err[PATH_MAX + 200];
		/* Not fatal: the policy sees stealing from memory.current's fall without it. */
		ag->steals = ta_steals_open(o->btf, err, sizeof(err));
		if (ag->steals == NULL)
			printf("tierallocd: protect: no BPF view of reclaim (%s): stealing is seen "
			       "from the victims' usage alone\n",
			       err);
		struct ta_protector_opts po = { .interval_ms = o->protect_interval_ms,
						.expiry_ms =
						    (uint64_t)(o->protect_expiry * 1000 + 0.5),
						.lease = ag->lease,
						.print = o->print,
						.steals = ag->steals };
		if (ta_protector_start(o->protect, o->nprotect, &po, &ag->policy[ag->npolicies],
				       err, sizeof(err)) != 0) {
			fprintf(stderr, "tierallocd: %s\n", err);
			return 1;
		}
		ag->npolicies++;
	}
	return 0;
}

/* Check the privileges and the kernel, load and attach the programs, and make what run() needs:
 * 0, or the exit status (1) with a line saying why. */
static int load_attach(const struct ta_agent_options *o, struct agent *ag)
{
	if (geteuid() != 0) {
		fprintf(stderr, "tierallocd: needs root (CAP_BPF and CAP_PERFMON) to load its BPF "
				"programs; tieralloc's allocator works without it\n");
		return 1;
	}
	if (access(o->btf, R_OK) != 0) {
		fprintf(stderr,
			"tierallocd: no kernel BTF at %s (%s): its CO-RE programs need a "
			"kernel built with CONFIG_DEBUG_INFO_BTF\n",
			o->btf, strerror(errno));
		return 1;
	}
	if (take_lock(o, ag) != 0)
		return 1;
	/* libbpf finds tracepoints in tracefs, which a minimal system may not have mounted. */
	struct stat st;
	if (stat("/sys/kernel/tracing/events", &st) != 0 &&
	    stat("/sys/kernel/debug/tracing/events", &st) != 0 &&
	    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0)
		fprintf(stderr, "tierallocd: tracefs is not mounted and mounting it failed (%s)\n",
			strerror(errno));
	libbpf_set_print(quiet_libbpf);
	char warn[300];
	ag->migrations = ta_migcount_open(o->btf, warn, sizeof(warn));
	if (ag->migrations == NULL) {
		fprintf(stderr,
			"tierallocd: cannot load or attach the BPF programs (%s); "
			"TIERALLOCD_DEBUG=1 shows libbpf's messages\n",
			strerror(errno));
		return 1;
	}
	/* Kept open while the agent runs: the kernel times the programs meanwhile. */
	ag->stats_fd = o->stats ? bpf_enable_stats(BPF_STATS_RUN_TIME) : -1;
	if (o->stats && ag->stats_fd < 0)
		fprintf(stderr, "tierallocd: cannot enable BPF run-time statistics (%s)\n",
			strerror(errno));
	static const char *const shm_dirs[] = { SHM_DIR, NULL };
	ag->segments = ta_agent_segments_new(shm_dirs, true);
	ag->counts = calloc(TA_BPF_MAX_KEYS, sizeof(*ag->counts));
	if (ag->segments == NULL || ag->counts == NULL) {
		fprintf(stderr, "tierallocd: out of memory\n");
		return 1;
	}
	struct ta_agent_limits limits = ta_agent_default_limits;
	fit_descriptors(&limits);
	ta_agent_segments_set_limits(ag->segments, &limits);
	if (warn[0] != '\0')
		fprintf(stderr, "tierallocd: %s\n", warn);
	if (o->metrics != NULL) {
		char err[300];
		if (ta_metrics_listen(o->metrics, o->metrics_any, &ag->metrics, err, sizeof(err)) !=
		    0) {
			fprintf(stderr, "tierallocd: %s\n", err);
			return 1;
		}
	}
	printf("tierallocd: attached (destination nodes from %s)\n",
	       ta_migcount_exact(ag->migrations) ? "migrate_pages() arguments"
						 : "the migrating CPU's node");
	if (o->damon) {
		/* Not fatal: the processes fall back to soft-dirty and say so. */
		char err[300];
		ag->damon = ta_damon_start(DAMON_ADMIN, SHM_DIR, o->print, err, sizeof(err));
		if (ag->damon == NULL)
			fprintf(stderr, "tierallocd: --access damon: %s; no access files\n", err);
		else
			printf("tierallocd: access: damon (one kdamond per process, 500 ms "
			       "samples, 5 s aggregation)\n");
	}
	/* One keeper for every policy that changes a cgroup file, forked before their threads. */
	if (o->nprotect > 0 || (o->reclaim && !o->reclaim_no_cap)) {
		char err[200];
		ag->lease = ta_lease_start(o->state_dir, err, sizeof(err));
		if (ag->lease == NULL)
			fprintf(stderr, "tierallocd: no lease keeper: %s\n", err);
		else
			printf("tierallocd: lease keeper pid %d (state in %s)\n",
			       (int)ta_lease_keeper(ag->lease), o->state_dir);
		if (ag->lease == NULL && o->nprotect > 0)
			return 1;
	}
	if (start_policies(o, ag) != 0)
		return 1;
	/* The default status file's directory (the leases' state files share it). */
	if (has_status(ag) && strcmp(o->status, TA_POLICIES_DEFAULT) == 0)
		mkdir(TA_AGENT_RUN_DIR, 0755);
	if (ag->metrics != NULL)
		printf("tierallocd: metrics at http://%s/metrics\n",
		       ta_metrics_address(ag->metrics));
	fflush(stdout);
	return 0;
}

/* Until SIGTERM or SIGINT (or one interval with --once): publish the counts every interval, and
 * at once for the cgroups whose promotions alert. */
static void run(const struct ta_agent_options *o, struct agent *ag)
{
	/* New segments are looked for every --rescan seconds (a scan walks /proc), rounded to
	 * intervals. */
	unsigned rescan_every =
	    o->interval >= o->rescan ? 1 : (unsigned)(o->rescan / o->interval + 0.5);
	uint32_t flags = ta_migcount_exact(ag->migrations) ? TA_SHM_AGENT_EXACT_NODES : 0;
	uint32_t interval_ms = (uint32_t)(o->interval * 1000 + 0.5);
	uint64_t last_rescan_ms = 0, last_textfile_ms = 0, last_status_ms = 0;
	bool status = has_status(ag);
	uint64_t alerted[64];
	int ring_fd = ta_migcount_alerts_fd(ag->migrations);
	for (unsigned round = 0; !stop; round++) {
		if (round % rescan_every == 0) {
			ta_agent_segments_rescan(ag->segments, o->print);
			last_rescan_ms = monotonic_ms();
			if (ag->damon != NULL) {
				struct ta_agent_proc procs[TA_DAMON_MAX_PROCS];
				unsigned n = ta_agent_segments_procs(ag->segments, procs,
								     TA_DAMON_MAX_PROCS);
				ta_damon_set_procs(ag->damon, procs, n);
			}
		}
		/* Wait for the interval, serving promotion alerts and metrics requests meanwhile:
		 * the cgroups the alerts name get their counts, and perhaps an alarm, at once. */
		uint64_t deadline = monotonic_ms() + interval_ms;
		for (uint64_t now = monotonic_ms(); !stop && now < deadline; now = monotonic_ms()) {
			struct pollfd fds[1 + 1 + 16];
			unsigned nfds = 0, first_metrics;
			if (ring_fd >= 0)
				fds[nfds++] = (struct pollfd){ .fd = ring_fd, .events = POLLIN };
			first_metrics = nfds;
			int timeout = (int)(deadline - now);
			if (ag->metrics != NULL) {
				nfds += ta_metrics_pollfds(
				    ag->metrics, fds + nfds,
				    (unsigned)(sizeof(fds) / sizeof(fds[0])) - nfds);
				int t = ta_metrics_timeout_ms(ag->metrics, now);
				if (t >= 0 && t < timeout)
					timeout = t;
			}
			int ready = poll(fds, nfds, timeout);
			if (ag->metrics != NULL)
				ta_metrics_serve(ag->metrics, fds + first_metrics,
						 ready > 0 ? nfds - first_metrics : 0,
						 monotonic_ms(), metrics_text, ag);
			if (ring_fd < 0 || ready <= 0 || fds[0].revents == 0)
				continue;
			size_t nalerted = ta_migcount_alerts(ag->migrations, alerted,
							     sizeof(alerted) / sizeof(alerted[0]));
			bool unknown = false;
			for (size_t i = 0; i < nalerted; i++)
				unknown |= !ta_agent_segments_has(ag->segments, alerted[i]);
			/* Promotions in a cgroup without a known segment: a container may just
			 * have started one. Look again, at most twice a second (the cgroups
			 * without tieralloc alert too). */
			if (unknown && monotonic_ms() - last_rescan_ms >= 500) {
				ta_agent_segments_rescan(ag->segments, o->print);
				last_rescan_ms = monotonic_ms();
			}
			size_t mine = 0;
			for (size_t i = 0; i < nalerted; i++)
				if (ta_agent_segments_has(ag->segments, alerted[i]))
					alerted[mine++] = alerted[i];
			if (mine == 0)
				continue;
			size_t n = ta_migcount_read(ag->migrations, ag->counts);
			ta_agent_segments_publish(ag->segments, ag->counts, n, alerted, mine, flags,
						  interval_ms, o->print);
		}
		if (stop)
			break;
		size_t n = ta_migcount_read(ag->migrations, ag->counts);
		ta_agent_segments_publish(ag->segments, ag->counts, n, NULL, 0, flags, interval_ms,
					  o->print);
		for (unsigned i = 0; i < ag->npolicies; i++)
			if (ag->policy[i].round != NULL)
				ag->policy[i].round(ag->policy[i].self, ag->segments);
		if (o->print)
			ta_migcount_print(ag->counts, n);
		if (o->stats)
			ta_migcount_print_stats(ag->migrations);
		if (o->textfile != NULL && monotonic_ms() - last_textfile_ms >= 1000) {
			write_textfile(o, ag);
			last_textfile_ms = monotonic_ms();
		}
		if (status && (last_status_ms == 0 || monotonic_ms() - last_status_ms >= 1000)) {
			write_status(o, ag);
			last_status_ms = monotonic_ms();
		}
		fflush(stdout);
		if (o->once)
			break;
	}
}

/* The one way out: whatever load_attach() made, detached and freed. */
static void cleanup(const struct ta_agent_options *o, struct agent *ag)
{
	/* A status file left behind would show decisions nobody makes any more. */
	if (ag->status_written)
		unlink(o->status);
	while (ag->npolicies > 0) {
		struct ta_agent_policy *p = &ag->policy[--ag->npolicies];
		p->stop(p->self);
	}
	ta_lease_stop(ag->lease); /* after every policy that held leases */
	ta_steals_close(ag->steals);
	ta_damon_stop(ag->damon);
	ta_metrics_free(ag->metrics);
	ta_migcount_close(ag->migrations);
	if (ag->segments != NULL)
		ta_agent_segments_free(ag->segments);
	free(ag->counts);
	if (ag->stats_fd >= 0)
		close(ag->stats_fd);
	if (ag->lock_fd >= 0)
		close(ag->lock_fd); /* last: the keepers have restored what they held */
}

int main(int argc, char **argv)
{
	struct ta_agent_options o;
	int rc = ta_agent_options_parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	struct agent ag = { .stats_fd = -1, .lock_fd = -1 };
	rc = load_attach(&o, &ag);
	if (rc == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		run(&o, &ag);
	}
	bool attached = ag.migrations != NULL;
	cleanup(&o, &ag);
	if (rc == 0 && attached)
		printf("tierallocd: detached, stopped\n");
	return rc;
}
