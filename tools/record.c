/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat --record: see record.h. The file's format (tieralloc-stat(1), "RECORDING"):
 * - RFC 4180 CSV, the header line below first. One row per segment and tier at each sample; the
 *   rows of one sample share their time (seconds since the epoch, CLOCK_REALTIME, to the ms).
 * - Strings come from the segments, which any user writes: a control character, a byte beyond
 *   ASCII and a backslash are written as \xNN (\\ for the backslash), so that a row is one line
 *   of ASCII; so are '$' and '`', and a first character of "=+-@" (a spreadsheet's formula).
 *   A field with anything but letters, digits and "/._-:+=@%" is quoted, its quotes doubled
 *   (RFC 4180): a comma, a quote, and also ';' (the separator of spreadsheets in many locales),
 *   '#' (a comment to some readers) and spaces. A row is then one word to a shell, with nothing
 *   a shell would run: should a recording ever be run as a script, its lines are only commands
 *   that do not exist (issue 31).
 * - Byte counts are plain integers; a limit not set is "max" (as in the cgroup's own files); a
 *   value the segment does not have (observed without cgroup v2, demoted before ABI 1.1) is
 *   empty.
 * - The file is appended to: a recorder started again continues the same series. A file that
 *   is not empty must begin with this header (a recording of this format), or it is refused:
 *   rows are never mixed into another file. It is created, or appended to only when it is a
 *   regular file of the caller's with one link; a symbolic link is never followed (open_file).
 * - Each sample is formatted in memory and written with one write(2), flushed, so that a
 *   recorder killed at any moment leaves whole rows (a kill during the write itself aside).
 * The signals that stop it are blocked and waited for between samples (sigtimedwait): a sample
 * is always finished, and none arrives unseen between a check and a sleep.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "record.h"

static const char header[] =
    "time,segment,cgroup,processes,tier,tier_name,nodes,charged,observed,peak,min,low,high,max,"
    "demoted,reclaim_asked,steered_away,refused_max\n";

static int parse_seconds(const char *arg, const char *opt, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno != 0 || end == arg || *end != '\0' || !isfinite(v) || v < 0.01 || v > 86400) {
		fprintf(stderr, "tieralloc-stat: %s takes 0.01..86400 seconds, not \"%s\"\n", opt,
			arg);
		return -1;
	}
	*out = v;
	return 0;
}

int ta_record_option(struct ta_record *r, int code, const char *arg)
{
	switch (code) {
	case TA_OPT_RECORD:
		if (arg[0] == '\0') {
			fprintf(stderr, "tieralloc-stat: --record needs a file name (or -)\n");
			return -1;
		}
		r->path = arg;
		return 0;
	case TA_OPT_INTERVAL:
		r->options_seen = true;
		return parse_seconds(arg, "--interval", &r->interval);
	case TA_OPT_DURATION:
		r->options_seen = true;
		return parse_seconds(arg, "--duration", &r->duration);
	case TA_OPT_SAMPLES: {
		char *end;
		errno = 0;
		unsigned long v = strtoul(arg, &end, 10);
		r->options_seen = true;
		if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v == 0) {
			fprintf(stderr, "tieralloc-stat: --samples takes a count of 1 or more\n");
			return -1;
		}
		r->samples = v;
		return 0;
	}
	}
	return -1;
}

/* A byte a string field keeps as it is, unquoted: letters, digits and the punctuation of
 * cgroup paths, node lists and names. */
static bool plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("/._-:+=@%", c) != NULL;
}

/* A string field: see the top of the file. */
static void csv_string(FILE *f, const char *s)
{
	char buf[4 * TA_SHM_PATH_MAX + 8];
	size_t pos = 0;
	bool quote = false;
	for (const char *p = s; *p != '\0' && pos + 5 <= sizeof(buf); p++) {
		unsigned char c = (unsigned char)*p;
		/* A first character a spreadsheet takes for a formula's start. */
		bool formula = p == s && strchr("=+-@", c) != NULL;
		if (c == '\\') {
			buf[pos++] = '\\';
			buf[pos++] = '\\';
			quote = true;
		} else if (c < 0x20 || c >= 0x7f || c == '$' || c == '`' || formula) {
			pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "\\x%02x", c);
			quote = true;
		} else {
			quote |= !plain(c);
			buf[pos++] = (char)c;
		}
	}
	buf[pos] = '\0';
	if (!quote) {
		fputs(buf, f);
		return;
	}
	fputc('"', f);
	for (const char *p = buf; *p != '\0'; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
}

static void csv_bytes(FILE *f, bool have, uint64_t v, bool limit)
{
	if (!have)
		fputs(",", f);
	else if (limit && v == TA_SHM_UNLIMITED)
		fputs(",max", f);
	else
		fprintf(f, ",%llu", (unsigned long long)v);
}

static void write_rows(FILE *f, const struct timespec *now, const struct ta_prom_segment *segs,
		       unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const struct ta_prom_segment *s = &segs[i];
		unsigned nt = s->ntiers < TA_SHM_MAX_TIERS ? s->ntiers : TA_SHM_MAX_TIERS;
		for (unsigned t = 0; t < nt; t++) {
			const struct ta_prom_tier *r = &s->tier[t];
			char nodes[64];
			ta_nodelist_format(r->nodes, nodes, sizeof(nodes));
			fprintf(f, "%lld.%03ld,", (long long)now->tv_sec, now->tv_nsec / 1000000);
			csv_string(f, s->segment);
			fputc(',', f);
			csv_string(f, s->cgroup);
			fprintf(f, ",%u,%u,", s->processes, t);
			csv_string(f, r->name);
			fputc(',', f);
			csv_string(f, nodes);
			csv_bytes(f, true, r->charged, false);
			csv_bytes(f, r->have_observed, r->observed, false);
			csv_bytes(f, true, r->peak, false);
			for (unsigned k = 0; k < TA_NLIMITS; k++)
				csv_bytes(f, true, r->limit[k], true);
			csv_bytes(f, r->have_enforcement, r->demoted, false);
			csv_bytes(f, r->have_enforcement, r->reclaim_asked, false);
			fprintf(f, ",%llu,%llu\n", (unsigned long long)r->steered_away,
				(unsigned long long)r->refused_max);
		}
	}
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Say why the recording cannot go to path; -1. */
static int refuse(const char *path, const char *why)
{
	fprintf(stderr, "tieralloc-stat: --record %s: %s\n", path, why);
	return -1;
}

/* The file for appending: created when it is not there, and only then. --record is often run
 * as root in a directory others can write (/tmp), where a link planted at the path would make it
 * create or extend a file of the planter's choosing, and the rows carry strings any user wrote
 * (issue 31). So the last component is never followed (O_NOFOLLOW; O_EXCL when creating, which
 * fails on a link too), and a file that is already there is taken only if the descriptor shows
 * a regular file of the caller's with no other link (fstat: the file opened, not the one
 * looked at before). O_NONBLOCK: a FIFO planted there is refused, not waited on. */
static int open_file(const char *path, bool *created)
{
	for (int tries = 0; tries < 4; tries++) {
		int fd = open(
		    path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
		    0644);
		if (fd >= 0) {
			*created = true;
			return fd;
		}
		if (errno != EEXIST)
			break;
		fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0) {
			*created = false;
			return fd;
		}
		if (errno == ELOOP)
			return refuse(path,
				      "a symbolic link: not following it (name the file itself)");
		/* Removed between the two opens: create it again. */
		if (errno != ENOENT)
			break;
	}
	return refuse(path, strerror(errno));
}

/* Open (or create) the file for appending, and write the header when it is new. -1 after a
 * message when it cannot be opened, is not the caller's own regular file, or is not a recording
 * of this format. */
static int open_output(const char *path)
{
	if (strcmp(path, "-") == 0)
		return write_all(STDOUT_FILENO, header, sizeof(header) - 1) == 0 ? STDOUT_FILENO
										 : -1;
	bool created;
	int fd = open_file(path, &created);
	if (fd < 0)
		return -1;
	struct stat st;
	char why[128];
	const char *bad = NULL;
	if (fstat(fd, &st) != 0) {
		bad = strerror(errno);
	} else if (!created && !S_ISREG(st.st_mode)) {
		bad = "not a regular file: not appending to it";
	} else if (!created && st.st_uid != geteuid()) {
		snprintf(why, sizeof(why),
			 "owned by uid %u, not by the caller (uid %u): not appending to it",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		bad = why;
	} else if (!created && st.st_nlink != 1) {
		snprintf(why, sizeof(why), "has %ju links to it: not appending to it",
			 (uintmax_t)st.st_nlink);
		bad = why;
	}
	if (bad != NULL) {
		close(fd);
		return refuse(path, bad);
	}
	if (st.st_size == 0) {
		/* New (or left empty): the header first. */
		if (write_all(fd, header, sizeof(header) - 1) != 0) {
			refuse(path, strerror(errno));
			close(fd);
			return -1;
		}
		return fd;
	}
	char first[sizeof(header)];
	ssize_t got = pread(fd, first, sizeof(first) - 1, 0);
	if (got != (ssize_t)sizeof(first) - 1 || memcmp(first, header, sizeof(first) - 1) != 0) {
		refuse(path, "the file holds something else than a recording of this format: not "
			     "appending to it");
		close(fd);
		return -1;
	}
	/* A recorder killed in the middle of a write left half a row: end it, so that the next
	 * row starts on a line of its own (readers skip the broken one). */
	char last;
	if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
	    write_all(fd, "\n", 1) != 0) {
		refuse(path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static double elapsed(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (now.tv_nsec - start->tv_nsec) / 1e9;
}

int ta_record_run(const struct ta_record *r, ta_record_collect *collect, void *arg)
{
	double interval = r->interval > 0 ? r->interval : 1.0;
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	/* Blocked before the file is opened: a signal from now on ends the recording cleanly. */
	sigprocmask(SIG_BLOCK, &stop, NULL);
	int fd = open_output(r->path);
	if (fd < 0)
		return 2;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	unsigned long taken = 0;
	int status = 0;
	for (;;) {
		const struct ta_prom_segment *segs;
		unsigned n = collect(arg, &segs);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		char *buf = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&buf, &len);
		if (mem == NULL) {
			fprintf(stderr, "tieralloc-stat: --record: out of memory\n");
			status = 1;
			break;
		}
		write_rows(mem, &now, segs, n);
		bool ok = fclose(mem) == 0 && write_all(fd, buf, len) == 0;
		free(buf);
		if (!ok) {
			fprintf(stderr, "tieralloc-stat: --record %s: %s\n", r->path,
				strerror(errno));
			status = 1;
			break;
		}
		if (r->samples != 0 && ++taken >= r->samples)
			break;
		/* The next slot of the schedule after now: late samples are skipped, not bunched.
		 */
		double t = elapsed(&start);
		double next = (floor(t / interval) + 1) * interval;
		if (r->duration > 0 && next > r->duration + 1e-9)
			break;
		int sig = 0;
		while (sig <= 0 && (t = elapsed(&start)) < next) {
			double wait = next - t;
			struct timespec ts = { (time_t)wait, (long)((wait - floor(wait)) * 1e9) };
			sig = sigtimedwait(&stop, NULL, &ts);
			if (sig < 0 && errno != EAGAIN && errno != EINTR)
				break;
		}
		if (sig > 0)
			break;
		/* A signal that came while the wait had already ended. */
		struct timespec zero = { 0, 0 };
		if (sigtimedwait(&stop, NULL, &zero) > 0)
			break;
	}
	if (fd != STDOUT_FILENO && close(fd) != 0 && status == 0) {
		fprintf(stderr, "tieralloc-stat: --record %s: %s\n", r->path, strerror(errno));
		status = 1;
	}
	return status;
}
