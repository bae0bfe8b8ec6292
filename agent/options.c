/* SPDX-License-Identifier: MIT */
/*
 * tierallocd's command line: --help's text, the defaults, and every value checked (a usage error
 * is exit 2 with one line saying which), so that nothing after it needs to doubt an option.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cgpath.h"
#include "metrics.h"
#include "options.h"
#include "policies.h"

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

/* A positive number of seconds in [0.05, 3600], or a negative one. */
static double seconds(const char *arg)
{
	char *end;
	double v = strtod(arg, &end);
	return *end == '\0' && end != arg && v >= 0.05 && v <= 3600 ? v : -1;
}

int ta_agent_options_parse(int argc, char **argv, struct ta_agent_options *o)
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
	*o = (struct ta_agent_options){ .interval = 0.25,
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
