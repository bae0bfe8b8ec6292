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
 * main() is parse (getopt_long), load_attach, run and cleanup, the one way out.
 *
 * Needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN) and a kernel with BTF; without either it
 * exits 1 with one line saying which. SIGTERM or SIGINT: detaches its programs and exits 0.
 * The allocator never depends on it.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
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
#include "cgpath.h"
#include "lease.h"
#include "migcount.h"
#include "migrations.h" /* TA_BPF_MAX_KEYS */
#include "protector.h"
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

/* Where the agent writes files of its own, beside TA_AGENT_RUN_DIR (policies.h); and the kernel
 * files of options its systemd unit does not give. usage() lists them all, which
 * tests/tools/test_unit_security.sh checks the unit against. */
#define SHM_DIR	    "/dev/shm"
#define CGROUP_DIR  "/sys/fs/cgroup"
#define DAMON_ADMIN "/sys/kernel/mm/damon/admin"

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: tierallocd [--interval SECONDS] [--rescan SECONDS] [--print] [--once] "
	       "[--stats] [--metrics [ADDRESS:]PORT [--metrics-any]] [--textfile PATH] "
	       "[--access damon|none] [--lend [--lend-reserve SIZE]] "
	       "[--reclaim-for-priority [--reclaim-step SIZE] [--reclaim-no-cap]] "
	       "[--priority CGROUP=N]... [--priority-ceiling N] "
	       "[--protect CGROUP [--protect-interval MS] [--protect-expiry SECONDS]]... "
	       "[--status FILE] [--state-dir DIR] [--btf PATH] [-h|--help] [--version]\n"
	       "  --interval S  read and publish the counts every S seconds (default 0.25,\n"
	       "                at least 0.05)\n"
	       "  --rescan S    look for new segments every S seconds (default 2), and at\n"
	       "                once when an unknown cgroup's pages are promoted\n"
	       "  --print       print them each time, and the segments found and alarms raised\n"
	       "  --stats       print the programs' run count and time too (BPF stats)\n"
	       "  --once        attach, wait one interval, print, detach and exit\n"
	       "  --metrics [ADDRESS:]PORT\n"
	       "                serve the segments' metrics (Prometheus' text format) at\n"
	       "                http://ADDRESS:PORT/metrics (ADDRESS 127.0.0.1 if left out)\n"
	       "  --metrics-any allow a --metrics ADDRESS that is not a loopback one\n"
	       "  --textfile PATH  write the same text into PATH every second (atomically)\n"
	       "  --access damon  monitor the accesses of tieralloc processes with DAMON\n"
	       "                (Linux >= 6.2 with DAMON's sysfs interface) and write each one\n"
	       "                /dev/shm/tieralloc_access.PID for TIERALLOC_ACCESS=agent;\n"
	       "                none (default): no access monitoring\n"
	       "  --lend        lend idle fast-tier shares to containers that want more,\n"
	       "                by TIERALLOC_PRIORITY; loans lapse 4 intervals (at least 2 s)\n"
	       "                after the agent stops renewing them\n"
	       "  --lend-reserve SIZE  bytes of an idle share its owner keeps for its own\n"
	       "                growth (default 64M; K, M, G suffixes)\n"
	       "  --reclaim-for-priority  when a cgroup shows memory pressure (PSI,\n"
	       "                memory.events high/max, refaults) or grows\n"
	       "                into its parent's limit, reclaim its\n"
	       "                lower-priority siblings (memory.reclaim), never below their\n"
	       "                memory.low/min, and hold them there (memory.high) until their\n"
	       "                parent has room again (cgroup v2); a cap lapses 8 intervals\n"
	       "                (at least 2 s) after the agent stops renewing it; one\n"
	       "                steered from the fast tier: lower priorities yield it their\n"
	       "                fast-tier shares (their coldest memory is demoted)\n"
	       "  --reclaim-step SIZE  the room a pressured cgroup wants free in its\n"
	       "                parent; at most 4 steps taken per interval (default 32M)\n"
	       "  --reclaim-no-cap  reclaim only: never lower a memory.high\n"
	       "  --priority CGROUP=N  the priority (0-1000) of the cgroup at this path\n"
	       "                (/sys/fs/cgroup/...); overrides its TIERALLOC_PRIORITY\n"
	       "                (repeatable; with --lend or --reclaim-for-priority)\n"
	       "  --priority-ceiling N  the highest priority a container may declare for\n"
	       "                itself (TIERALLOC_PRIORITY, 0-1000); a higher one counts as N\n"
	       "                (default 0: only --priority ranks a cgroup above another)\n"
	       "  --protect CGROUP  keep the cgroup's memory.low (cgroup v2) at its usage\n"
	       "                plus headroom, within its parent's protection, so that reclaim\n"
	       "                does not steal its working set (repeatable, at most 8)\n"
	       "  --protect-interval MS  sample its memory.current every MS milliseconds\n"
	       "                (1 to 1000, default 50), and early when its parent's limit is hit\n"
	       "  --protect-expiry S  a request not renewed for S seconds (default 2) is undone:\n"
	       "                memory.low goes back to what it was, also after a SIGKILL\n"
	       "  --status FILE  where the policies' decisions are written every second for\n"
	       "                tieralloc-stat (default " TA_POLICIES_DEFAULT ")\n"
	       "  --state-dir DIR  its lock and the state files of the caps and protections\n"
	       "                (default " TA_AGENT_RUN_DIR "): one agent at a time per\n"
	       "                directory\n"
	       "  --btf PATH    the kernel's BTF (default /sys/kernel/btf/vmlinux)\n"
	       "  --version     print \"tierallocd VERSION\" and exit\n"
	       "Where it writes (its systemd unit must leave these writable):\n"
	       "  " SHM_DIR "          the segments (and other mount namespaces' through\n"
	       "                    /proc/PID/root); with --access damon, the access files\n"
	       "  " TA_AGENT_RUN_DIR "   with --reclaim-for-priority or --protect: the state\n"
	       "                    files that restore the cgroups' files after the agent\n"
	       "                    died, and the status file\n"
	       "  and the paths of --textfile and --status\n"
	       "Kernel files it writes with options its systemd unit does not give (a drop-in\n"
	       "must make them writable; the unit says how):\n"
	       "  " CGROUP_DIR "    with --reclaim-for-priority or --protect: the cgroups'\n"
	       "                    memory.reclaim, memory.high and memory.low\n"
	       "  " DAMON_ADMIN "  with --access damon\n");
}

struct options {
	double interval, rescan; /* seconds */
	bool print, once, stats, metrics_any, damon, lend, reclaim;
	uint64_t lend_reserve; /* bytes */
	uint64_t reclaim_step; /* bytes */
	bool reclaim_no_cap;
	struct ta_agent_priority priorities[TA_AGENT_MAX_PRIORITIES];
	char priority_paths[TA_AGENT_MAX_PRIORITIES][TA_SHM_PATH_MAX + 1]; /* canonical */
	unsigned npriorities;
	uint32_t priority_ceiling; /* TIERALLOC_PRIORITY counts up to this */
	const char *state_dir;	   /* the lock and the caps' and protections' state files */
	const char *btf, *metrics, *textfile, *status;
	const char *protect[TA_PROTECT_MAX];
	unsigned nprotect;
	unsigned protect_interval_ms;
	double protect_expiry; /* seconds */
};

/* A positive number of seconds in [0.05, 3600], or a negative one. */
static double seconds(const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	return *end == '\0' && end != arg && v >= 0.05 && v <= 3600 ? v : -1;
}

/* The command line into o: 0 to go on, else the exit status (0 after --help, 2 on a usage error,
 * with a line saying which). */
static int parse(int argc, char **argv, struct options *o)
{
	/* Long-only options have values above any character, so that getopt's optopt tells a
	 * long option missing its value (optopt is its value) from an unknown short one (optopt is
	 * the character) and from an unknown long one (optopt is 0). */
	enum {
		OPT_INTERVAL = 256,
		OPT_RESCAN,
		OPT_PRINT,
		OPT_STATS,
		OPT_ONCE,
		OPT_BTF,
		OPT_VERSION,
		OPT_METRICS,
		OPT_METRICS_ANY,
		OPT_TEXTFILE,
		OPT_ACCESS,
		OPT_LEND,
		OPT_LEND_RESERVE,
		OPT_PRIORITY,
		OPT_RECLAIM,
		OPT_RECLAIM_STEP,
		OPT_RECLAIM_NO_CAP,
		OPT_PROTECT,
		OPT_PROTECT_INTERVAL,
		OPT_PROTECT_EXPIRY,
		OPT_STATUS,
		OPT_PRIORITY_CEILING,
		OPT_STATE_DIR
	};
	static const struct option longopts[] = {
		{ "interval", required_argument, NULL, OPT_INTERVAL },
		{ "rescan", required_argument, NULL, OPT_RESCAN },
		{ "print", no_argument, NULL, OPT_PRINT },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "btf", required_argument, NULL, OPT_BTF },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "metrics-any", no_argument, NULL, OPT_METRICS_ANY },
		{ "textfile", required_argument, NULL, OPT_TEXTFILE },
		{ "access", required_argument, NULL, OPT_ACCESS },
		{ "lend", no_argument, NULL, OPT_LEND },
		{ "lend-reserve", required_argument, NULL, OPT_LEND_RESERVE },
		{ "priority", required_argument, NULL, OPT_PRIORITY },
		{ "reclaim-for-priority", no_argument, NULL, OPT_RECLAIM },
		{ "reclaim-step", required_argument, NULL, OPT_RECLAIM_STEP },
		{ "reclaim-no-cap", no_argument, NULL, OPT_RECLAIM_NO_CAP },
		{ "protect", required_argument, NULL, OPT_PROTECT },
		{ "protect-interval", required_argument, NULL, OPT_PROTECT_INTERVAL },
		{ "protect-expiry", required_argument, NULL, OPT_PROTECT_EXPIRY },
		{ "status", required_argument, NULL, OPT_STATUS },
		{ "priority-ceiling", required_argument, NULL, OPT_PRIORITY_CEILING },
		{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct options){ .interval = 0.25,
			       .rescan = 2,
			       .lend_reserve = 64ull << 20,
			       .reclaim_step = 32ull << 20,
			       .protect_interval_ms = 50,
			       .protect_expiry = 2,
			       .btf = "/sys/kernel/btf/vmlinux",
			       .status = TA_POLICIES_DEFAULT,
			       .priority_ceiling = TA_AGENT_PRIORITY_CEILING_DEFAULT,
			       .state_dir = TA_AGENT_RUN_DIR };
	bool reserve_given = false, step_given = false, protect_tuned = false;
	bool ceiling_given = false;
	bool status_given = false;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
		switch (c) {
		case OPT_INTERVAL:
		case OPT_RESCAN: {
			double v = seconds(optarg);
			if (v < 0) {
				fprintf(stderr,
					"tierallocd: bad --%s \"%s\" (seconds, 0.05 to 3600)\n",
					c == OPT_INTERVAL ? "interval" : "rescan", optarg);
				return 2;
			}
			*(c == OPT_INTERVAL ? &o->interval : &o->rescan) = v;
			break;
		}
		case OPT_PRINT:
			o->print = true;
			break;
		case OPT_STATS:
			o->stats = true;
			break;
		case OPT_ONCE:
			o->once = o->print = true;
			break;
		case OPT_BTF:
			o->btf = optarg;
			break;
		case OPT_METRICS:
			o->metrics = optarg;
			break;
		case OPT_METRICS_ANY:
			o->metrics_any = true;
			break;
		case OPT_TEXTFILE:
			if (optarg[0] == '\0') {
				fprintf(stderr, "tierallocd: --textfile needs a path\n");
				return 2;
			}
			o->textfile = optarg;
			break;
		case OPT_STATUS:
			if (optarg[0] == '\0') {
				fprintf(stderr, "tierallocd: --status needs a path\n");
				return 2;
			}
			o->status = optarg;
			status_given = true;
			break;
		case OPT_ACCESS:
			if (strcmp(optarg, "damon") != 0 && strcmp(optarg, "none") != 0) {
				fprintf(stderr, "tierallocd: bad --access \"%s\" (damon or none)\n",
					optarg);
				return 2;
			}
			o->damon = strcmp(optarg, "damon") == 0;
			break;
		case OPT_LEND:
			o->lend = true;
			break;
		case OPT_LEND_RESERVE:
			if (ta_parse_size(optarg, &o->lend_reserve) != 0) {
				fprintf(stderr,
					"tierallocd: bad --lend-reserve \"%s\" (a size: 64M, 512K, "
					"1G)\n",
					optarg);
				return 2;
			}
			reserve_given = true;
			break;
		case OPT_PRIORITY: {
			/* CGROUP=N: the last '=' splits, so that a path may hold one. */
			char *eq = strrchr(optarg, '=');
			char *end = NULL;
			unsigned long p = eq != NULL ? strtoul(eq + 1, &end, 10) : 0;
			if (eq == NULL || eq == optarg || end == eq + 1 || *end != '\0' ||
			    eq[1] == '-' || p > TA_SHM_LEND_PRIORITY_MAX ||
			    o->npriorities == TA_AGENT_MAX_PRIORITIES) {
				fprintf(stderr,
					"tierallocd: bad --priority \"%s\" (CGROUP=N, N from 0 to "
					"1000, at most %u of them)\n",
					optarg, TA_AGENT_MAX_PRIORITIES);
				return 2;
			}
			*eq = '\0';
			/* Compared with the kernel's paths in canonical form: "/a//b/" is "/a/b".
			 */
			char *canon = o->priority_paths[o->npriorities];
			if (ta_cgpath_canon(optarg, canon, TA_SHM_PATH_MAX + 1) != 0) {
				fprintf(
				    stderr,
				    "tierallocd: bad --priority cgroup \"%s\" (an absolute path "
				    "without \"..\", /sys/fs/cgroup/...)\n",
				    optarg);
				return 2;
			}
			for (unsigned q = 0; q < o->npriorities; q++)
				if (strcmp(o->priorities[q].cgroup, canon) == 0) {
					fprintf(stderr, "tierallocd: --priority %s given twice\n",
						canon);
					return 2;
				}
			o->priorities[o->npriorities++] =
			    (struct ta_agent_priority){ canon, (uint32_t)p };
			break;
		}
		case OPT_PRIORITY_CEILING: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (end == optarg || *end != '\0' || optarg[0] == '-' ||
			    v > TA_SHM_LEND_PRIORITY_MAX) {
				fprintf(stderr,
					"tierallocd: bad --priority-ceiling \"%s\" (0 to 1000)\n",
					optarg);
				return 2;
			}
			o->priority_ceiling = (uint32_t)v;
			ceiling_given = true;
			break;
		}
		case OPT_STATE_DIR:
			if (optarg[0] != '/') {
				fprintf(stderr, "tierallocd: --state-dir needs an absolute path\n");
				return 2;
			}
			o->state_dir = optarg;
			break;
		case OPT_RECLAIM:
			o->reclaim = true;
			break;
		case OPT_RECLAIM_STEP:
			if (ta_parse_size(optarg, &o->reclaim_step) != 0 ||
			    o->reclaim_step < 4096) {
				fprintf(stderr,
					"tierallocd: bad --reclaim-step \"%s\" (a size of 4K or "
					"more: 32M, 512K)\n",
					optarg);
				return 2;
			}
			step_given = true;
			break;
		case OPT_RECLAIM_NO_CAP:
			o->reclaim_no_cap = true;
			break;
		case OPT_PROTECT:
			if (optarg[0] == '\0' || o->nprotect == TA_PROTECT_MAX) {
				fprintf(stderr,
					"tierallocd: bad --protect \"%s\" (a cgroup, at most %d of "
					"them)\n",
					optarg, TA_PROTECT_MAX);
				return 2;
			}
			o->protect[o->nprotect++] = optarg;
			break;
		case OPT_PROTECT_INTERVAL: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (end == optarg || *end != '\0' || optarg[0] == '-' || v < 1 ||
			    v > 1000) {
				fprintf(
				    stderr,
				    "tierallocd: bad --protect-interval \"%s\" (milliseconds, 1 "
				    "to 1000)\n",
				    optarg);
				return 2;
			}
			o->protect_interval_ms = (unsigned)v;
			protect_tuned = true;
			break;
		}
		case OPT_PROTECT_EXPIRY:
			o->protect_expiry = seconds(optarg);
			if (o->protect_expiry < 0) {
				fprintf(stderr,
					"tierallocd: bad --protect-expiry \"%s\" (seconds, 0.05 to "
					"3600)\n",
					optarg);
				return 2;
			}
			protect_tuned = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			/* PACKAGE_VERSION is configure's, from the VERSION file. */
			printf("tierallocd %s\n", PACKAGE_VERSION);
			return 0;
		default: {
			const struct option *named = NULL;
			for (const struct option *l = longopts; l->name != NULL; l++)
				if (optopt > UCHAR_MAX && l->val == optopt)
					named = l;
			if (named != NULL && named->has_arg)
				fprintf(stderr, "tierallocd: --%s needs a value\n", named->name);
			else if (named != NULL) /* --print=x */
				fprintf(stderr, "tierallocd: --%s takes no value\n", named->name);
			else if (optopt != 0 && optopt <= UCHAR_MAX)
				fprintf(stderr, "tierallocd: unknown option -%c\n", optopt);
			else
				fprintf(stderr, "tierallocd: unknown option %s\n",
					argv[optind - 1]);
			usage(stderr);
			return 2;
		}
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tierallocd: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (reserve_given && !o->lend) {
		fprintf(stderr, "tierallocd: --lend-reserve without --lend\n");
		usage(stderr);
		return 2;
	}
	if ((step_given || o->reclaim_no_cap) && !o->reclaim) {
		fprintf(stderr, "tierallocd: --%s without --reclaim-for-priority\n",
			step_given ? "reclaim-step" : "reclaim-no-cap");
		usage(stderr);
		return 2;
	}
	if ((o->npriorities > 0 || ceiling_given) && !o->lend && !o->reclaim) {
		fprintf(stderr, "tierallocd: --%s without --lend or --reclaim-for-priority\n",
			o->npriorities > 0 ? "priority" : "priority-ceiling");
		usage(stderr);
		return 2;
	}
	if (o->protect_expiry * 1000 < 4.0 * o->protect_interval_ms) {
		fprintf(
		    stderr,
		    "tierallocd: --protect-expiry %g s is shorter than 4 --protect-interval (%u "
		    "ms): requests would lapse between samples\n",
		    o->protect_expiry, o->protect_interval_ms);
		usage(stderr);
		return 2;
	}
	if (status_given && o->nprotect == 0 && !o->reclaim) {
		fprintf(stderr,
			"tierallocd: --status without --reclaim-for-priority or --protect\n");
		usage(stderr);
		return 2;
	}
	if (protect_tuned && o->nprotect == 0) {
		fprintf(stderr, "tierallocd: --protect-interval or --protect-expiry without "
				"--protect\n");
		usage(stderr);
		return 2;
	}
	if (o->metrics_any && o->metrics == NULL) {
		fprintf(stderr, "tierallocd: --metrics-any without --metrics\n");
		usage(stderr);
		return 2;
	}
	char err[300];
	if (o->metrics != NULL && ta_metrics_check(o->metrics, o->metrics_any, err, sizeof(err))) {
		fprintf(stderr, "tierallocd: %s\n", err);
		usage(stderr);
		return 2;
	}
	return -1;
}

/* What runs while the agent is attached; cleanup() frees whatever part of it was made. */
struct agent {
	struct ta_migcount *migrations;
	int stats_fd;
	struct ta_agent_segments *segments;
	struct ta_agent_count *counts;
	struct ta_metrics_server *metrics;
	struct ta_damon *damon;		/* --access damon, when DAMON could be taken */
	struct ta_reclaim *reclaim;	/* --reclaim-for-priority, when libcgroup started */
	bool textfile_failed;		/* said once, until a write works again */
	bool status_failed;		/* the same, for the status file */
	bool status_written;		/* removed at the end */
	struct ta_protector *protector; /* --protect */
	struct ta_steals *steals;	/* --protect's view of reclaim, when it attached */
	struct ta_lease *lease;		/* the leases of every policy that changes a cgroup file */
	int lock_fd;			/* STATE_DIR/lock, held while the agent runs */
};

/* The metrics' text (ta_metrics_body): the segments as they are now. */
static int metrics_text(void *ctx, FILE *f)
{
	struct agent *ag = ctx;
	int n = ta_agent_segments_metrics(ag->segments, f);
	if (n >= 0 && ag->reclaim != NULL && ta_reclaim_metrics(ag->reclaim, f) != 0)
		return -1;
	if (n >= 0 && ag->protector != NULL && ta_protector_metrics(ag->protector, f) != 0)
		return -1;
	return n;
}

static void write_textfile(const struct options *o, struct agent *ag)
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
	if (ag->reclaim != NULL && ta_reclaim_status(ag->reclaim, f) != 0)
		return -1;
	if (ag->protector != NULL && ta_protector_status(ag->protector, f) != 0)
		return -1;
	return 0;
}

static void write_status(const struct options *o, struct agent *ag)
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
static int take_lock(const struct options *o, struct agent *ag)
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

/* Check the privileges and the kernel, load and attach the programs, and make what run() needs:
 * 0, or the exit status (1) with a line saying why. */
static int load_attach(const struct options *o, struct agent *ag)
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
		ag->protector = ta_protector_start(o->protect, o->nprotect, &po, err, sizeof(err));
		if (ag->protector == NULL) {
			fprintf(stderr, "tierallocd: %s\n", err);
			return 1;
		}
	}
	if (o->lend)
		printf("tierallocd: lending idle shares (reserve %llu bytes)\n",
		       (unsigned long long)o->lend_reserve);
	if (o->reclaim) {
		/* Not fatal: the rest of the agent works without it. */
		char err[300];
		struct ta_reclaim_options ro = { .cap = !o->reclaim_no_cap,
						 .expiry_ns = ta_reclaim_expiry_ns(
						     (uint32_t)(o->interval * 1000.0)),
						 .lease = ag->lease };
		ag->reclaim = ta_reclaim_new(&ro, err, sizeof(err));
		if (ag->reclaim == NULL)
			fprintf(stderr, "tierallocd: --reclaim-for-priority: %s; no reclaim\n",
				err);
		else
			printf("tierallocd: reclaim for priority (cgroup v%d at %s, steps of %llu "
			       "bytes, %s)\n",
			       ta_cgctl_version(), ta_cgctl_mount(),
			       (unsigned long long)o->reclaim_step,
			       ta_reclaim_caps(ag->reclaim) ? "capped at memory.high until room"
							    : "no caps");
	}
	/* The default status file's directory (--protect's state files share it). */
	if ((ag->reclaim != NULL || ag->protector != NULL) &&
	    strcmp(o->status, TA_POLICIES_DEFAULT) == 0)
		mkdir(TA_AGENT_RUN_DIR, 0755);
	if (ag->metrics != NULL)
		printf("tierallocd: metrics at http://%s/metrics\n",
		       ta_metrics_address(ag->metrics));
	fflush(stdout);
	return 0;
}

/* Until SIGTERM or SIGINT (or one interval with --once): publish the counts every interval, and
 * at once for the cgroups whose promotions alert. */
static void run(const struct options *o, struct agent *ag)
{
	/* New segments are looked for every --rescan seconds (a scan walks /proc), rounded to
	 * intervals. */
	unsigned rescan_every =
	    o->interval >= o->rescan ? 1 : (unsigned)(o->rescan / o->interval + 0.5);
	uint32_t flags = ta_migcount_exact(ag->migrations) ? TA_SHM_AGENT_EXACT_NODES : 0;
	uint32_t interval_ms = (uint32_t)(o->interval * 1000 + 0.5);
	uint64_t last_rescan_ms = 0, last_textfile_ms = 0, last_status_ms = 0;
	bool policies = ag->reclaim != NULL || ag->protector != NULL;
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
		if (o->lend || o->reclaim) {
			struct ta_agent_lend_config lend;
			ta_agent_lend_tune(&lend, interval_ms);
			lend.reserve = o->lend_reserve;
			lend.priorities = o->priorities;
			lend.npriorities = o->npriorities;
			lend.priority_ceiling = o->priority_ceiling;
			lend.flags =
			    (o->lend ? TA_LEND_IDLE : 0u) | (o->reclaim ? TA_LEND_YIELD : 0u);
			ta_agent_segments_lend(ag->segments, &lend, o->print);
		}
		if (ag->reclaim != NULL) {
			struct ta_reclaim_config rc;
			ta_reclaim_tune(&rc, interval_ms);
			rc.step = o->reclaim_step;
			rc.priorities = o->priorities;
			rc.npriorities = o->npriorities;
			rc.priority_ceiling = o->priority_ceiling;
			ta_reclaim_round(ag->reclaim, ag->segments, &rc);
		}
		if (o->print)
			ta_migcount_print(ag->counts, n);
		if (o->stats)
			ta_migcount_print_stats(ag->migrations);
		if (o->textfile != NULL && monotonic_ms() - last_textfile_ms >= 1000) {
			write_textfile(o, ag);
			last_textfile_ms = monotonic_ms();
		}
		if (policies && (last_status_ms == 0 || monotonic_ms() - last_status_ms >= 1000)) {
			write_status(o, ag);
			last_status_ms = monotonic_ms();
		}
		fflush(stdout);
		if (o->once)
			break;
	}
}

/* The one way out: whatever load_attach() made, detached and freed. */
static void cleanup(const struct options *o, struct agent *ag)
{
	/* A status file left behind would show decisions nobody makes any more. */
	if (ag->status_written)
		unlink(o->status);
	ta_protector_stop(ag->protector);
	ta_steals_close(ag->steals);
	ta_damon_stop(ag->damon);
	ta_reclaim_free(ag->reclaim);
	ta_lease_stop(ag->lease); /* after every policy that held leases */
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
	struct options o;
	int rc = parse(argc, argv, &o);
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
