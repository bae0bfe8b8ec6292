/* SPDX-License-Identifier: MIT */
/*
 * The leases on the caps of --reclaim-for-priority (agent/lease.c), on stand-in cgroup
 * directories (a temporary directory holding a regular memory.high file: the host needs no
 * cgroup v2 and no root). Each case forks an "agent" that takes leases and then ends as the
 * real one would:
 * - stops: every lease restored at once, and its state files removed;
 * - dies without a word (_exit, as a SIGKILL leaves it): the keeper restores each file once the
 *   expiry passed, but not one an operator wrote meanwhile, nor a directory made again under
 *   the same path, and then exits;
 * - dies with its keeper (both SIGKILLed): the state files stay, and the next agent restores
 *   from them at its start.
 * The directory's path holds a space, as a cgroup's may (the state file keeps it whole).
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

#include "lease.h"
#include "test.h"

#define EXPIRY_NS 300000000ull /* 0.3 s */
/* Where the test must act before the keeper does: wide enough for a loaded host. */
#define SLOW_EXPIRY_NS 3000000000ull

static char root[256], state[300], cg[3][300];

static void put(const char *dir, const char *text)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/memory.high", dir);
	FILE *f = fopen(p, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		test_skip("cannot write %s", p);
}

static void get(const char *dir, char *buf, size_t len)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/memory.high", dir);
	buf[0] = '\0';
	FILE *f = fopen(p, "r");
	if (f != NULL) {
		if (fgets(buf, (int)len, f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* Until dir's memory.high reads want, or 30 s: whether it did. */
static bool wait_for(const char *dir, const char *want)
{
	char buf[64];
	for (int i = 0; i < 3000; i++) {
		get(dir, buf, sizeof(buf));
		if (strcmp(buf, want) == 0)
			return true;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	return false;
}

static unsigned state_files(void)
{
	unsigned n = 0;
	DIR *d = opendir(state);
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
		n += strncmp(e->d_name, "cap-", 4) == 0;
	if (d != NULL)
		closedir(d);
	return n;
}

static struct ta_lease *start(uint64_t expiry_ns)
{
	char err[200];
	struct ta_lease *l =
	    ta_lease_start("memory.high", state, "cap", expiry_ns, err, sizeof(err));
	if (l == NULL)
		test_skip("ta_lease_start: %s", err);
	return l;
}

/* The agent's part in a child: leases on cg[0..2] (max -> 100, 200000 -> 300, max -> 500),
 * files written, then it stops or dies. Returns once it ended and said it held them. */
static void agent(bool stops, uint64_t expiry_ns)
{
	int p[2];
	if (pipe(p) != 0)
		test_skip("pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		struct ta_lease *l = start(expiry_ns);
		static const char *const orig_text[3] = { "max", "200000", "max" };
		static const unsigned long long orig[3] = { UINT64_MAX, 200000, UINT64_MAX };
		static const unsigned long long written[3] = { 100, 300, 500 };
		for (int i = 0; i < 3; i++) {
			put(cg[i], orig_text[i]);
			char v[32];
			snprintf(v, sizeof(v), "%llu\n", written[i]);
			if (ta_lease_hold(l, cg[i], orig[i], written[i]) != 0)
				_exit(3);
			put(cg[i], v);
		}
		/* Dying, the agent takes a lower cap's lease on cg[0] and dies before writing it
		 * (a descent of memory.high: guest pressure.cap_lease): the file holds the cap
		 * before, which the keeper restores too. */
		if (!stops && ta_lease_hold(l, cg[0], orig[0], 50) != 0)
			_exit(6);
		ta_lease_renew(l);
		if (!ta_lease_held(l, cg[1]))
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

	test_context("the agent stops: each restored at once, no state file left");
	agent(true, EXPIRY_NS);
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	get(cg[1], buf, sizeof(buf));
	expect_str_eq(buf, "200000");
	get(cg[2], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	expect_eq(state_files(), 0);

	test_context("the agent dies: the keeper restores after the expiry, but not an operator's "
		     "later write nor a directory made again");
	agent(false, SLOW_EXPIRY_NS);
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
		struct ta_lease *l = start(EXPIRY_NS);
		put(cg[0], "max\n");
		if (ta_lease_hold(l, cg[0], UINT64_MAX, 100) != 0)
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
	struct ta_lease *next = start(EXPIRY_NS);
	get(cg[0], buf, sizeof(buf));
	expect_str_eq(buf, "max");
	expect_eq(state_files(), 0);
	ta_lease_stop(next);

	test_context("a lease on a directory that is gone: refused");
	next = start(EXPIRY_NS);
	char gone[400];
	snprintf(gone, sizeof(gone), "%s/no-such", root);
	expect_eq(ta_lease_hold(next, gone, UINT64_MAX, 1), -1);
	expect_true(!ta_lease_held(next, gone));
	ta_lease_stop(next);

	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", root);
	test_context("%s", "");
	return test_done();
}
