/* SPDX-License-Identifier: MIT */
/*
 * The agent's leases on cgroup files (agent/lease.c: the caps of --reclaim-for-priority on
 * memory.high, --protect's memory.low), on stand-in cgroup directories (a temporary directory
 * holding regular memory.high and memory.low files: the host needs no cgroup v2 and no root).
 * Each case forks an "agent" that takes leases and then ends as the real one would:
 * - stops: every lease restored at once, and its state files removed;
 * - dies without a word (_exit, as a SIGKILL leaves it): the keeper restores each file once the
 *   expiry passed, but not one an operator wrote meanwhile, nor a directory made again under
 *   the same path, and then exits;
 * - dies with its keeper (both SIGKILLed): the state files stay, and the next agent restores
 *   from them at its start.
 * One keeper serves every policy: a policy's round renews its own leases, so that a policy that
 * hangs has its files restored while the other's stand, and a policy that stops restores only
 * its own. The directory's path holds a space, as a cgroup's may (the state file keeps it whole).
 * Outcomes are waited for with a deadline far above the expiry (a loaded host); no time is
 * judged.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgctl.h"
#include "lease.h"
#include "test.h"

#define EXPIRY_NS 300000000ull /* 0.3 s */
/* Where the test must act before the keeper does: wide enough for a loaded host. */
#define SLOW_EXPIRY_NS 3000000000ull

static char root[256], state[300], cg[3][300];
static const struct ta_lease_kind cap = { .file = "memory.high", .expiry_ns = EXPIRY_NS },
				  slow_cap = { .file = "memory.high", .expiry_ns = SLOW_EXPIRY_NS },
				  low = { .file = "memory.low", .expiry_ns = SLOW_EXPIRY_NS };

static void put_file(const char *dir, const char *file, const char *text)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		test_skip("cannot write %s", p);
}

static void put(const char *dir, const char *text)
{
	put_file(dir, "memory.high", text);
}

static void get_file(const char *dir, const char *file, char *buf, size_t len)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	buf[0] = '\0';
	FILE *f = fopen(p, "r");
	if (f != NULL) {
		if (fgets(buf, (int)len, f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static void get(const char *dir, char *buf, size_t len)
{
	get_file(dir, "memory.high", buf, len);
}

/* Until dir's file reads want, or 30 s: whether it did. */
static bool wait_for_file(const char *dir, const char *file, const char *want)
{
	char buf[64];
	for (int i = 0; i < 3000; i++) {
		get_file(dir, file, buf, sizeof(buf));
		if (strcmp(buf, want) == 0)
			return true;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	return false;
}

static bool wait_for(const char *dir, const char *want)
{
	return wait_for_file(dir, "memory.high", want);
}

static unsigned state_files(void)
{
	unsigned n = 0;
	DIR *d = opendir(state);
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
		n += strncmp(e->d_name, "lease-", 6) == 0;
	if (d != NULL)
		closedir(d);
	return n;
}

static struct ta_lease *start(void)
{
	char err[200];
	struct ta_lease *l = ta_lease_start(state, err, sizeof(err));
	if (l == NULL)
		test_skip("ta_lease_start: %s", err);
	return l;
}

/* The agent's part in a child: leases on cg[0..2] (max -> 100, 200000 -> 300, max -> 500),
 * files written, then it stops or dies. Returns once it ended and said it held them. */
static void agent(bool stops, const struct ta_lease_kind *k)
{
	int p[2];
	if (pipe(p) != 0)
		test_skip("pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		struct ta_lease *l = start();
		static const char *const orig_text[3] = { "max", "200000", "max" };
		static const unsigned long long orig[3] = { UINT64_MAX, 200000, UINT64_MAX };
		static const unsigned long long written[3] = { 100, 300, 500 };
		for (int i = 0; i < 3; i++) {
			put(cg[i], orig_text[i]);
			char v[32];
			snprintf(v, sizeof(v), "%llu\n", written[i]);
			if (ta_lease_hold(l, k, cg[i], orig[i], written[i]) != 0)
				_exit(3);
			put(cg[i], v);
		}
		/* Dying, the agent takes a lower cap's lease on cg[0] and dies before writing it
		 * (a descent of memory.high: guest pressure.cap_lease): the file holds the cap
		 * before, which the keeper restores too. */
		if (!stops && ta_lease_hold(l, k, cg[0], orig[0], 50) != 0)
			_exit(6);
		ta_lease_renew(l, k);
		if (!ta_lease_held(l, k, cg[1]) || ta_lease_held(l, &low, cg[1]))
			_exit(4);
		if (write(p[1], "h", 1) != 1)
			_exit(5);
		if (stops)
			ta_lease_stop(l);
		_exit(0); /* dying: nothing restored, the keeper left running */
	}
	close(p[1]);
	char c;
	expect_eq(read(p[0], &c, 1), 1);
	close(p[0]);
	int st;
	expect_eq(waitpid(pid, &st, 0), pid);
	expect_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Two policies on one keeper: the caps (memory.high, short expiry, never renewed once held)
 * and the protections (memory.low, long expiry, renewed). The caps expire and are restored while
 * the protections stand; a policy's release restores its own leases only. */
static void two_policies(void)
{
	test_context("two policies, one keeper: a hung policy's leases expire, the other's stand");
	char buf[64];
	struct ta_lease *l = start();
	for (int i = 0; i < 2; i++) {
		put(cg[i], "max\n");
		put_file(cg[i], "memory.low", "1000\n");
		expect_eq(ta_lease_hold(l, &cap, cg[i], UINT64_MAX, 100), 0);
		put(cg[i], "100\n");
		expect_eq(ta_lease_hold(l, &low, cg[i], 1000, 5000), 0);
		put_file(cg[i], "memory.low", "5000\n");
	}
	expect_eq(state_files(), 4);
	/* Only the protections are renewed, for long past the caps' expiry. */
	bool caps_back = false;
	for (int n = 0; n < 3000 && !caps_back; n++) {
		ta_lease_renew(l, &low);
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		char b0[64], b1[64];
		get(cg[0], b0, sizeof(b0));
		get(cg[1], b1, sizeof(b1));
		caps_back = strcmp(b0, "max") == 0 && strcmp(b1, "max") == 0;
	}
	ta_lease_renew(l, &low);
	expect_true(caps_back);
	expect_true(!ta_lease_held(l, &cap, cg[0]));
	expect_true(ta_lease_held(l, &low, cg[0]) && ta_lease_held(l, &low, cg[1]));
	for (int i = 0; i < 2; i++) {
		get_file(cg[i], "memory.low", buf, sizeof(buf));
		expect_str_eq(buf, "5000");
	}
	/* The caps again, held (renewed) this time; the protections' policy stops. */
	expect_eq(ta_lease_hold(l, &slow_cap, cg[0], UINT64_MAX, 200), 0);
	put(cg[0], "200\n");
	ta_lease_release(l, &low);
	for (int i = 0; i < 2; i++) {
		get_file(cg[i], "memory.low", buf, sizeof(buf));
		expect_str_eq(buf, "1000");
	}
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "200");
	expect_true(ta_lease_held(l, &slow_cap, cg[0]));
	expect_eq(state_files(), 1);
	ta_lease_stop(l);
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	expect_eq(state_files(), 0);
}

/* cgfile.c, which the keeper writes with: a value, "max", and what is neither. */
static void plain_files(void)
{
	test_context("cgfile: values by descriptor and by path");
	uint64_t v = 7;
	put_file(cg[0], "memory.low", "max\n");
	expect_eq(ta_cgfile_value(cg[0], "memory.low", &v), 0);
	expect_eq(v, UINT64_MAX);
	int fd = ta_cgfile_open(cg[0], "memory.low", O_RDWR);
	expect_true(fd >= 0);
	expect_eq(ta_cgfile_set(fd, 123456), 0);
	expect_eq(ta_cgfile_get(fd, &v), 0);
	expect_eq(v, 123456);
	close(fd);
	/* A cgroup file takes each write whole; a regular file keeps what lies past it. */
	put_file(cg[0], "memory.low", "0\n");
	fd = ta_cgfile_open(cg[0], "memory.low", O_RDWR);
	expect_eq(ta_cgfile_set(fd, UINT64_MAX), 0);
	char buf[64];
	expect_eq(ta_cgfile_read(cg[0], "memory.low", buf, sizeof(buf)), 4);
	expect_str_eq(buf, "max\n");
	close(fd);
	put_file(cg[0], "memory.low", "some text\n");
	expect_eq(ta_cgfile_value(cg[0], "memory.low", &v), -1);
	expect_eq(ta_cgfile_value(cg[0], "memory.none", &v), -1);
	expect_eq(ta_cgfile_open(cg[0], "memory.none", O_RDONLY), -1);
}

int main(void)
{
	snprintf(root, sizeof(root), "/tmp/tieralloc test-lease-%d", (int)getpid());
	snprintf(state, sizeof(state), "%s/state", root);
	if (mkdir(root, 0755) != 0)
		test_skip("mkdir %s: %s", root, strerror(errno));
	for (int i = 0; i < 3; i++) {
		snprintf(cg[i], sizeof(cg[i]), "%s/cg%d", root, i);
		mkdir(cg[i], 0755);
	}
	char buf[64];

	/* The keeper reads its clock, then each lease's renewal: a policy's thread can renew in
	 * between, and that lease is as fresh as can be (a wrapped age once restored it). */
	test_context("expiry: a renewal after the keeper's clock read is held");
	expect_true(!ta_lease_expired(1000, 1001, EXPIRY_NS));
	expect_true(!ta_lease_expired(1000, UINT64_MAX, EXPIRY_NS));
	expect_true(!ta_lease_expired(EXPIRY_NS, 1, EXPIRY_NS));
	expect_true(ta_lease_expired(EXPIRY_NS + 1, 1, EXPIRY_NS));
	expect_true(ta_lease_expired(UINT64_MAX, 0, EXPIRY_NS));

	test_context("the agent stops: each restored at once, no state file left");
	agent(true, &cap);
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	get(cg[1], buf, sizeof(buf));
	expect_str_eq(buf, "200000");
	get(cg[2], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	expect_eq(state_files(), 0);

	test_context("the agent dies: the keeper restores after the expiry, but not an operator's "
		     "later write nor a directory made again");
	agent(false, &slow_cap);
	put(cg[1], "777\n"); /* the operator's */
	/* Another directory under the same path: made while the old one still exists elsewhere,
	 * so that it cannot take its inode number (cgroup2's ids are never reused; tmpfs's are). */
	char moved[400];
	snprintf(moved, sizeof(moved), "%s/moved", root);
	expect_eq(rename(cg[2], moved), 0);
	mkdir(cg[2], 0755);
	put(cg[2], "500\n");
	expect_true(wait_for(cg[0], "max"));
	nanosleep(&(struct timespec){ 1, 0 }, NULL); /* the keeper's next tick */
	get(cg[1], buf, sizeof(buf));
	expect_str_eq(buf, "777");
	get(cg[2], buf, sizeof(buf));
	expect_str_eq(buf, "500");
	/* The keeper forgot all three: their state files go with them. */
	for (int i = 0; i < 3000 && state_files() != 0; i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	expect_eq(state_files(), 0);

	test_context("the agent and its keeper die: the next agent restores from the state files");
	put(cg[2], "max\n");
	int p[2];
	expect_eq(pipe(p), 0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		setpgid(0, 0);
		struct ta_lease *l = start();
		put(cg[0], "max\n");
		if (ta_lease_hold(l, &cap, cg[0], UINT64_MAX, 100) != 0)
			_exit(3);
		put(cg[0], "100\n");
		if (write(p[1], "h", 1) != 1)
			_exit(5);
		pause();
		_exit(0);
	}
	close(p[1]);
	char c;
	expect_eq(read(p[0], &c, 1), 1);
	close(p[0]);
	kill(-pid, SIGKILL); /* the agent and the keeper, its process group */
	waitpid(pid, NULL, 0);
	nanosleep(&(struct timespec){ 0, 4 * EXPIRY_NS }, NULL);
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "100"); /* nobody left to restore it */
	expect_eq(state_files(), 1);
	struct ta_lease *next = start();
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	expect_eq(state_files(), 0);
	ta_lease_stop(next);

	test_context("a lease on a directory that is gone: refused");
	next = start();
	char gone[400];
	snprintf(gone, sizeof(gone), "%s/no-such", root);
	expect_eq(ta_lease_hold(next, &cap, gone, UINT64_MAX, 1), -1);
	expect_true(!ta_lease_held(next, &cap, gone));
	test_context("a file that is no control file: refused");
	static const struct ta_lease_kind bad[] = { { "../memory.high", EXPIRY_NS },
						    { "cgroup.procs", EXPIRY_NS },
						    { "memory.", EXPIRY_NS } };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_eq(ta_lease_hold(next, &bad[i], cg[0], UINT64_MAX, 1), -1);
	ta_lease_stop(next);

	two_policies();
	plain_files();

	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	test_context("%s", "");
	return test_done();
}
