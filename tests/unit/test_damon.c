/* SPDX-License-Identifier: MIT */
/*
 * tierallocd --access damon's host side (agent/damon.c), on a directory tree standing in for
 * DAMON's sysfs interface (the guest test tests/guest/access_agent.sh runs the real one):
 * - a tried_regions listing comes back sorted by start (sysfs lists 10 before 2), counts capped
 *   at the scale, and a listing with overlapping or unreadable regions is refused;
 * - the access file is written whole under its name, and what was at the temporary name (a
 *   symbolic link another user left there) is removed, not followed;
 * - the interval a file says covers a whole round, one aggregation per process (else files
 *   go stale between rewrites with three processes or more);
 * - DAMON is not taken when a kdamond is on (someone else's monitoring), nor where there is
 *   no interface, each with a line saying which;
 * - a file's counts began no earlier than it says (window_ns), so that what the process made
 *   since reads unknown rather than accessed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "damon.h"
#include "enforce/heatfile.h"
#include "test.h"

static char root[64];

static void put(const char *rel, const char *value)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		test_fail(__FILE__, __LINE__, "cannot write %s", path);
	fputs(value, f);
	fclose(f);
}

static void dir(const char *rel)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		test_fail(__FILE__, __LINE__, "cannot make %s", path);
}

static void region(unsigned i, const char *start, const char *end, const char *acc)
{
	char rel[100];
	snprintf(rel, sizeof(rel), "tried/%u", i);
	dir(rel);
	snprintf(rel, sizeof(rel), "tried/%u/start", i);
	put(rel, start);
	snprintf(rel, sizeof(rel), "tried/%u/end", i);
	put(rel, end);
	snprintf(rel, sizeof(rel), "tried/%u/nr_accesses", i);
	put(rel, acc);
}

static void test_regions(void)
{
	test_context("tried regions");
	char path[300];
	snprintf(path, sizeof(path), "%s/tried", root);
	struct ta_heatfile_region r[16];
	dir("tried");
	put("tried/total_bytes", "123\n");
	expect_eq(ta_damon_regions(path, r, 16, 10), 0); /* none listed */
	/* Numbered 0..11, listed by sysfs as strings; starts out of order on purpose. */
	for (unsigned i = 0; i < 12; i++) {
		char s[32], e[32];
		unsigned slot = (i * 5) % 12; /* a permutation of 0..11 */
		snprintf(s, sizeof(s), "%u\n", (slot + 1) * 4096);
		snprintf(e, sizeof(e), "%u\n", (slot + 2) * 4096);
		region(i, s, e, i == 3 ? "99\n" : "4\n");
	}
	int n = ta_damon_regions(path, r, 16, 10);
	expect_eq(n, 12);
	for (int i = 0; i < n; i++) {
		expect_eq(r[i].start, (uint64_t)(i + 1) * 4096);
		expect_le(r[i].nr_accesses, 10); /* 99 capped at the scale */
	}
	expect_eq(ta_damon_regions(path, r, 11, 10), -1); /* no room */
	region(12, "8192\n", "20480\n", "1\n");		  /* overlaps */
	expect_eq(ta_damon_regions(path, r, 16, 10), -1);
	region(12, "100000\n", "200000\n", "x\n"); /* unreadable */
	expect_eq(ta_damon_regions(path, r, 16, 10), -1);
	test_context("%s", "");
}

static void test_write(void)
{
	test_context("access file");
	struct ta_agent_proc p = { .pid = 4242, .uid = (uint32_t)getuid(), .start_time = 9 };
	char tmp[300], path[300], other[300];
	snprintf(tmp, sizeof(tmp), "%s/.%s4242.tmp", root, TA_HEATFILE_PREFIX);
	snprintf(path, sizeof(path), "%s/%s4242", root, TA_HEATFILE_PREFIX);
	snprintf(other, sizeof(other), "%s/victim", root);
	put("victim", "untouched");
	expect_eq(symlink(other, tmp), 0);
	expect_eq(ta_damon_write_file(root, &p, "0123456789", 10), 0);
	struct stat st;
	expect_eq(stat(path, &st), 0);
	expect_eq(st.st_size, 10);
	expect_eq(st.st_mode & 0777, 0400);
	expect_eq(st.st_uid, getuid());
	expect_ne(lstat(tmp, &st), 0); /* renamed away */
	expect_eq(stat(other, &st), 0);
	expect_eq(st.st_size, 9);			       /* the link was not followed */
	expect_eq(ta_damon_write_file(root, &p, "abc", 3), 0); /* replaces it whole */
	expect_eq(stat(path, &st), 0);
	expect_eq(st.st_size, 3);
	test_context("%s", "");
}

static void test_interval(void)
{
	test_context("interval in the file");
	/* One process: the period (the aggregation, or longer for the CPU budget). */
	expect_eq(ta_damon_interval_ns(5000000000ull, 1, 5000000), 5000000000ull);
	expect_eq(ta_damon_interval_ns(9000000000ull, 1, 5000000), 9000000000ull);
	/* Ten processes: a round can wait ten aggregations, one per kdamond; saying 5 s would make
	 * every file stale 15 s after it was written, before its next rewrite. */
	expect_eq(ta_damon_interval_ns(5000000000ull, 10, 5000000), 50000000000ull);
	expect_eq(ta_damon_interval_ns(5000000000ull, 0, 5000000), 5000000000ull);
	test_context("%s", "");
}

static void test_start(void)
{
	test_context("taking DAMON");
	char err[300] = "", admin[128];
	snprintf(admin, sizeof(admin), "%s/none", root);
	expect_true(ta_damon_start(admin, root, false, err, sizeof(err)) == NULL);
	expect_true(strstr(err, "no DAMON sysfs interface") != NULL);
	snprintf(admin, sizeof(admin), "%s/admin", root);
	dir("admin");
	dir("admin/kdamonds");
	dir("admin/kdamonds/0");
	put("admin/kdamonds/nr_kdamonds", "1\n");
	put("admin/kdamonds/0/state", "on\n");
	expect_true(ta_damon_start(admin, root, false, err, sizeof(err)) == NULL);
	expect_true(strstr(err, "kdamond 0 is on") != NULL);
	/* Off: taken, and given back (nr_kdamonds 0) when stopped. */
	put("admin/kdamonds/0/state", "off\n");
	struct ta_damon *d = ta_damon_start(admin, root, false, err, sizeof(err));
	expect_true(d != NULL);
	ta_damon_stop(d);
	char path[300], buf[16] = "";
	snprintf(path, sizeof(path), "%s/admin/kdamonds/nr_kdamonds", root);
	FILE *f = fopen(path, "r");
	expect_true(f != NULL && fgets(buf, sizeof(buf), f) != NULL);
	if (f != NULL)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	expect_str_eq(buf, "0");
	test_context("%s", "");
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The access file the thread wrote for pid into root, parsed: its header copied to *out, false
 * while there is none (or not a whole one). */
static bool read_file(uint32_t pid, uint64_t start_time, struct ta_heatfile_header *out)
{
	static uint64_t buf[TA_HEATFILE_MAX_BYTES / sizeof(uint64_t) + 1];
	char path[300];
	snprintf(path, sizeof(path), "%s/" TA_HEATFILE_PREFIX "%u", root, pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t got = read(fd, buf, sizeof(buf));
	close(fd);
	const struct ta_heatfile_header *h;
	const struct ta_heatfile_region *r;
	const char *why = NULL;
	if (got <= 0 ||
	    ta_heatfile_parse(buf, (size_t)got, pid, start_time, now_ns(), &h, &r, &why) != 0)
		return false;
	*out = *h;
	return true;
}

/* The counts a file gives began no earlier than its window says: the first file's when the
 * kdamond was set up, each later one's when the update before it was asked for. Were it
 * later, the worker would take what the process made in the window (filling a heap reads all
 * of it accessed) for its use. */
static void test_window(void)
{
	static const char *const dirs[] = {
		"win",
		"win/kdamonds",
		"win/kdamonds/0",
		"win/kdamonds/0/contexts",
		"win/kdamonds/0/contexts/0",
		"win/kdamonds/0/contexts/0/monitoring_attrs",
		"win/kdamonds/0/contexts/0/monitoring_attrs/intervals",
		"win/kdamonds/0/contexts/0/monitoring_attrs/nr_regions",
		"win/kdamonds/0/contexts/0/targets",
		"win/kdamonds/0/contexts/0/targets/0",
		"win/kdamonds/0/contexts/0/schemes",
		"win/kdamonds/0/contexts/0/schemes/0",
		"win/kdamonds/0/contexts/0/schemes/0/access_pattern",
		"win/kdamonds/0/contexts/0/schemes/0/access_pattern/sz",
		"win/kdamonds/0/contexts/0/schemes/0/access_pattern/nr_accesses",
		"win/kdamonds/0/contexts/0/schemes/0/access_pattern/age",
		"win/kdamonds/0/contexts/0/schemes/0/tried_regions",
		"win/kdamonds/0/contexts/0/schemes/0/tried_regions/0",
	};
	static const char *const files[] = {
		"kdamonds/nr_kdamonds",
		"kdamonds/0/state",
		"kdamonds/0/contexts/nr_contexts",
		"kdamonds/0/contexts/0/operations",
		"kdamonds/0/contexts/0/monitoring_attrs/intervals/sample_us",
		"kdamonds/0/contexts/0/monitoring_attrs/intervals/aggr_us",
		"kdamonds/0/contexts/0/monitoring_attrs/intervals/update_us",
		"kdamonds/0/contexts/0/monitoring_attrs/nr_regions/min",
		"kdamonds/0/contexts/0/monitoring_attrs/nr_regions/max",
		"kdamonds/0/contexts/0/targets/nr_targets",
		"kdamonds/0/contexts/0/targets/0/pid_target",
		"kdamonds/0/contexts/0/schemes/nr_schemes",
		"kdamonds/0/contexts/0/schemes/0/action",
		"kdamonds/0/contexts/0/schemes/0/access_pattern/sz/max",
		"kdamonds/0/contexts/0/schemes/0/access_pattern/nr_accesses/max",
		"kdamonds/0/contexts/0/schemes/0/access_pattern/age/max",
	};
	test_context("the window of an access file's counts");
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		dir(dirs[i]);
	char rel[200];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(rel, sizeof(rel), "win/%s", files[i]);
		put(rel, i == 1 ? "off\n" : "0\n");
	}
	const char *tried = "win/kdamonds/0/contexts/0/schemes/0/tried_regions/0";
	snprintf(rel, sizeof(rel), "%s/start", tried);
	put(rel, "4194304\n");
	snprintf(rel, sizeof(rel), "%s/end", tried);
	put(rel, "8388608\n");
	snprintf(rel, sizeof(rel), "%s/nr_accesses", tried);
	put(rel, "7\n");
	char err[300] = "", admin[128];
	snprintf(admin, sizeof(admin), "%s/win", root);
	struct ta_damon *d = ta_damon_start(admin, root, false, err, sizeof(err));
	if (d == NULL)
		test_fail(__FILE__, __LINE__, "the stand-in was not taken: %s", err);
	struct ta_agent_proc me = { .pid = (uint32_t)getpid(),
				    .uid = (uint32_t)getuid(),
				    .start_time = 12345 }; /* copied, not checked */
	uint64_t before = now_ns();
	ta_damon_set_procs(d, &me, 1);
	struct ta_heatfile_header first = { 0 }, second = { 0 };
	/* Rewritten once an aggregation (5 s): 30 s is a guard, not a deadline. */
	for (int i = 0; i < 300 && !read_file(me.pid, me.start_time, &first); i++)
		usleep(100 * 1000);
	expect_ne(first.written_ns, 0);
	expect_true(first.window_ns >= before);
	expect_true(first.window_ns <= first.written_ns);
	for (int i = 0; i < 300; i++) {
		if (read_file(me.pid, me.start_time, &second) &&
		    second.written_ns != first.written_ns)
			break;
		usleep(100 * 1000);
	}
	expect_true(second.written_ns > first.written_ns);
	/* The update for the first was asked for after its kdamond was set up and before the
	 * first file was written. */
	expect_true(second.window_ns > first.window_ns);
	expect_true(second.window_ns < first.written_ns);
	ta_damon_stop(d);
	test_context("%s", "");
}

int main(void)
{
	snprintf(root, sizeof(root), "/tmp/test_damon.XXXXXX");
	if (mkdtemp(root) == NULL)
		test_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
	test_regions();
	test_write();
	test_interval();
	test_start();
	test_window();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		test_fail(__FILE__, __LINE__, "cannot remove %s", root);
	return test_done();
}
