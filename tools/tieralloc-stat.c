/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat: the per-cgroup, per-tier quotas as every tieralloc process of a container
 * charges them. Lists the shared segments in /dev/shm and in the /dev/shm of every other mount
 * namespace it may read (stat_scan.c), recognised by their content (a valid header), whatever
 * their name; and, per tier: the limits (min, low, high, max), the charge, the kernel's usage on
 * the tier's nodes (memory.numa_stat, cgroup v2), the headroom and the event counts; and, when the
 * agent (tierallocd) writes them, the pages the kernel promoted, demoted and moved into each tier,
 * with their rates. A table that fits 100 columns (--wide: every column), JSON (--json),
 * Prometheus' text exposition (--prometheus, formatted by prom.c, which the agent shares), or a
 * table refreshed every N seconds (--watch N).
 *
 * This file is the program: its options, the listing in the format asked, --reap and --watch. A
 * segment is read by stat_seg.c and printed by stat_print.c; --record is written by record.c,
 * --policies by stat_policies.c.
 *
 * Read-only: it never writes or creates a segment. A segment whose every process died is shown
 * "gone", its charges as they will be once taken back (zero); --reap unlinks such segments (only
 * that: their content is not touched), after checking again, just before, that no process of
 * theirs lives and that no process maps the file.
 *
 * It is often run as root, and a segment is whatever its owner (any user) wrote: nothing read
 * from one is trusted (stat_seg.c says how it is read).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policies.h"
#include "prom.h"
#include "record.h"
#include "stat_policies.h"
#include "stat_print.h"
#include "stat_scan.h"
#include "stat_seg.h"
#include "stat_text.h"

static const char *shm_dir = "/dev/shm";

enum format { TABLE, JSON, PROMETHEUS, RECORD };

/* One listing: its options, and what it found. */
struct run {
	enum format format;
	bool wide, reap;
	const char *only;     /* --name, without its "/" */
	const char *policies; /* the agent's status file */
	bool policies_given;  /* --policies: its absence is an error */
	unsigned shown;	      /* segments printed (or kept for the exposition) */
	bool bad;	      /* a named segment could not be read, or a write failed */
};

/* The snapshots for --prometheus, written once all segments are read (a metric's samples must
 * come together). */
static struct ta_prom_segment *prom_segs;
static unsigned prom_n, prom_cap;

/* Say what --reap did (stdout with the table, stderr otherwise: the document stays one). */
static void say(const struct run *r, const struct ta_stat_seg *s, const char *what)
{
	char name[4 * sizeof(s->name) + 8];
	text_escape(s->name, name, sizeof(name));
	FILE *f = r->format == TABLE ? stdout : stderr;
	fprintf(f, "tieralloc-stat: %s%s: %s\n", name,
		s->place->via_pid != 0 ? " (in another mount namespace)" : "", what);
}

/* Unlink a gone segment, if it still is gone: read again just before (a process may have
 * attached meanwhile), no process may map it, and the name must still be that file. Its owner
 * or root may (/dev/shm is sticky); anyone else is told why not. */
static void reap(struct run *r, const struct ta_stat_seg *s, const char *file)
{
	struct ta_stat_seg again;
	bool still = ta_stat_open_seg(s->place, file, &again) == 0 && again.gone &&
		     again.dev == s->dev && again.ino == s->ino;
	free(again.buf);
	if (!still) {
		say(r, s, "not removed: it changed while read (a process attached?)");
		return;
	}
	if (ta_file_mapped(s->dev, s->ino)) {
		say(r, s, "not removed: a process still maps it");
		return;
	}
	struct stat st;
	if (fstatat(s->place->dirfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != s->dev ||
	    st.st_ino != s->ino) {
		say(r, s, "not removed: the name is another file now");
		return;
	}
	char what[160];
	if (unlinkat(s->place->dirfd, file, 0) == 0)
		snprintf(what, sizeof(what), "removed (gone: %u dead slot(s), owner uid %u)",
			 s->dead, (unsigned)s->owner);
	else if (errno == EPERM || errno == EACCES)
		snprintf(what, sizeof(what),
			 "not removed: owned by uid %u (its owner or root may remove it)",
			 (unsigned)s->owner);
	else
		snprintf(what, sizeof(what), "not removed: %s", strerror(errno));
	say(r, s, what);
}

/* One segment that opened (or was named): printed (or kept for the exposition), reaped if
 * asked, let go. A named segment that cannot be read is said on stderr for the exposition (it
 * has no values there). */
static void show(struct run *r, struct ta_stat_seg *s, const char *file, bool named)
{
	if (r->format == JSON) {
		ta_stat_print_json(s, r->shown == 0);
	} else if (r->format == TABLE) {
		ta_stat_print_table(s, r->wide);
	} else if (s->error == NULL) {
		if (prom_n == prom_cap) {
			unsigned cap = prom_cap ? 2 * prom_cap : 16;
			struct ta_prom_segment *p = realloc(prom_segs, cap * sizeof(*p));
			if (p == NULL) {
				r->bad = true;
				return;
			}
			prom_segs = p;
			prom_cap = cap;
		}
		ta_stat_snapshot(s, &prom_segs[prom_n++]);
	} else if (named) {
		char name[4 * sizeof(s->name) + 8];
		text_escape(s->name, name, sizeof(name));
		fprintf(stderr, "tieralloc-stat: %s: unreadable: %s\n", name, s->error);
	}
	r->shown++;
	if (r->reap && s->error == NULL && s->gone)
		reap(r, s, file);
}

/* A file found by the scan: shown if it is a segment (others are not tieralloc's business). */
static void visit(const struct ta_place *p, const char *file, void *ctx)
{
	struct run *r = ctx;
	/* With --name, our own directory's file was shown already, readable or not. */
	if (r->only != NULL && (p->via_pid == 0 || strcmp(file, r->only) != 0))
		return;
	struct ta_stat_seg s;
	if (ta_stat_open_seg(p, file, &s) == 0)
		show(r, &s, file, false);
	free(s.buf);
}

/* Every segment, or those named --name (ours, and any of other mount namespaces); false when a
 * named one could be read nowhere. */
static bool show_all(struct run *r)
{
	r->shown = 0;
	r->bad = false;
	if (r->format == JSON)
		printf("{\"version\":1,\"segments\":[");
	prom_n = 0;
	if (r->only != NULL) {
		struct ta_place own = { .proc = "/proc" };
		snprintf(own.dir, sizeof(own.dir), "%s", shm_dir);
		own.dirfd = open(shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct ta_stat_seg s;
		int rc = ta_stat_open_seg(&own, r->only, &s);
		/* Missing here: perhaps in another namespace; said below if nowhere. */
		struct stat st;
		bool missing = rc != 0 && own.dirfd >= 0 &&
			       fstatat(own.dirfd, r->only, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
			       errno == ENOENT;
		if (!missing) {
			show(r, &s, r->only, true);
			r->bad |= rc != 0;
		}
		free(s.buf);
		ta_scan(shm_dir, visit, r);
		if (r->shown == 0) {
			ta_stat_open_seg(&own, r->only, &s);
			show(r, &s, r->only, true);
			free(s.buf);
			r->bad = true;
		}
		if (own.dirfd >= 0)
			close(own.dirfd);
	} else {
		ta_scan(shm_dir, visit, r);
		if (r->shown == 0 && r->format == TABLE)
			printf(
			    "no tieralloc segments in %s or in other mount namespaces' /dev/shm\n",
			    shm_dir);
	}
	if (r->format == JSON)
		printf("]");
	if (r->format != PROMETHEUS && r->only == NULL &&
	    !ta_stat_show_policies(r->policies, r->policies_given, r->format == JSON))
		r->bad = true;
	if (r->format == JSON)
		printf("}\n");
	if (r->format == PROMETHEUS && ta_prom_write(stdout, prom_segs, prom_n) != 0)
		r->bad = true;
	return !r->bad;
}

/* --record's samples: the segments as --prometheus reads them (show keeps their snapshots). */
static unsigned record_collect(void *run, const struct ta_prom_segment **segs)
{
	show_all(run);
	*segs = prom_segs;
	return prom_n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tieralloc-stat [--json|--prometheus] [--wide] [--watch SECONDS] "
		   "[--name SEGMENT] [--reap]\n"
		   "  Shows the per-cgroup, per-tier quotas of tieralloc processes (segments in "
		   "/dev/shm,\n"
		   "  and in the /dev/shm of other mount namespaces, through /proc/PID/root).\n"
		   "  --json          one JSON document instead of the table\n"
		   "  --prometheus    Prometheus' text exposition format instead of the table\n"
		   "  --wide          every column (the default table fits 100 columns)\n"
		   "  --watch N       redraw the table every N seconds (Ctrl-C to stop)\n"
		   "  --name SEGMENT  only this segment (e.g. /tieralloc-v1-cg123-t1a2b3c4d)\n"
		   "  --reap          remove the segments shown gone (all their processes died)\n"
		   "  --policies FILE what tierallocd's policies decided, from FILE (default\n"
		   "                  " TA_POLICIES_DEFAULT ", shown when it exists)\n"
		   "  --version       print \"tieralloc-stat VERSION\" and exit\n");
	fputs(TA_RECORD_USAGE, f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "watch", required_argument, NULL, 'w' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "wide", no_argument, NULL, 'W' },
		{ "reap", no_argument, NULL, 'R' },
		{ "policies", required_argument, NULL, 'P' },
		{ "record", required_argument, NULL, TA_OPT_RECORD },
		{ "interval", required_argument, NULL, TA_OPT_INTERVAL },
		{ "samples", required_argument, NULL, TA_OPT_SAMPLES },
		{ "duration", required_argument, NULL, TA_OPT_DURATION },
		{ NULL, 0, NULL, 0 },
	};
	struct run r = { .format = TABLE, .policies = TA_POLICIES_DEFAULT };
	unsigned watch = 0;
	struct ta_record rec = { 0 };
	int c;
	while ((c = getopt_long(argc, argv, "jw:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
		case 'p':
			if (r.format != TABLE) {
				fprintf(
				    stderr,
				    "tieralloc-stat: --json and --prometheus exclude each other\n");
				return 2;
			}
			r.format = c == 'j' ? JSON : PROMETHEUS;
			break;
		case 'w': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v == 0 || v > 3600) {
				fprintf(stderr, "tieralloc-stat: --watch takes 1..3600 seconds\n");
				return 2;
			}
			watch = (unsigned)v;
			break;
		}
		case 'n':
			r.only = optarg[0] == '/' ? optarg + 1 : optarg;
			break;
		case 'W':
			r.wide = true;
			break;
		case 'R':
			r.reap = true;
			break;
		case 'P':
			r.policies = optarg;
			r.policies_given = true;
			break;
		case TA_OPT_RECORD:
		case TA_OPT_INTERVAL:
		case TA_OPT_SAMPLES:
		case TA_OPT_DURATION:
			if (ta_record_option(&rec, c, optarg) != 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V': /* long only: PACKAGE_VERSION is configure's, from the VERSION file */
			printf("tieralloc-stat %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (rec.path == NULL && rec.options_seen)) {
		usage(stderr);
		return 2;
	}
	/* A recording is its own format on its own schedule, and it only reads (no --reap). */
	if (rec.path != NULL && (r.format != TABLE || watch != 0 || r.reap)) {
		fprintf(
		    stderr,
		    "tieralloc-stat: --record excludes --json, --prometheus, --watch and --reap\n");
		return 2;
	}
	if (rec.path != NULL) {
		r.format = RECORD;
		return ta_record_run(&rec, record_collect, &r);
	}
	for (;;) {
		if (watch != 0 && r.format == TABLE)
			printf("\033[H\033[2J");
		bool ok = show_all(&r);
		fflush(stdout);
		if (watch == 0)
			return ok ? 0 : 1;
		sleep(watch);
	}
}
