/* SPDX-License-Identifier: MIT */
/*
 * Who re-reads the cgroup's limits (issue 13, item 4): start-up, then the worker, never the
 * program's thread inside malloc (the refresh reads cgroup files and, for the dead-slot check,
 * /proc of every peer). A malloc that finds the limits stale uses the last values and leaves a
 * note; the worker, started or woken by it, re-reads them. ENFORCE=off and PROMOTION=never, so
 * that nothing but stale limits starts the worker. A process joining the segment reads them only
 * when no process of the cgroup did within the period, or when its own options change them.
 */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "quota/shm.h"
#include "test.h"

#define MiB (1024 * 1024)

static char shm_name_var[64];

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_stale_rule(void)
{
	test_context("stale after two periods unread");
	uint64_t now = mono_ns();
	atomic_store(&ta_shm.hdr->limits_read_ns, now - 500000000ull);
	expect_true(!ta_shm_limits_stale());
	atomic_store(&ta_shm.hdr->limits_read_ns, now - 2500000000ull);
	expect_true(ta_shm_limits_stale());
	atomic_store(&ta_shm.hdr->limits_read_ns, now);
	test_context("%s", "");
}

static void test_not_in_malloc(void)
{
	test_context("stale limits: malloc leaves them to the worker");
	unsigned before = ta_shm_limit_reads_here();
	uint64_t gen = ta_quota_observe_gen();
	atomic_store(&ta_shm.hdr->limits_read_ns, 0);
	enum { N = 2048 };
	static void *small[N];
	void *large[8];
	for (unsigned i = 0; i < N; i++)
		small[i] = tieralloc_malloc(4096);
	for (unsigned i = 0; i < 8; i++)
		large[i] = tieralloc_malloc(1 * MiB);
	expect_eq(ta_shm_limit_reads_here(), before);
	/* The worker re-reads them: wait for it (a guard, not a deadline). */
	uint64_t t0 = mono_ns(), waited = 0;
	while (atomic_load(&ta_shm.hdr->limits_read_ns) == 0 && waited < 120000000000ull) {
		usleep(10000);
		waited = mono_ns() - t0;
	}
	printf("limits re-read by the worker %llu ms after the last malloc\n",
	       (unsigned long long)(waited / 1000000));
	expect_ne(atomic_load(&ta_shm.hdr->limits_read_ns), 0);
	expect_eq(ta_shm_limit_reads_here(), before);
	/* Started for the limits alone (enforcement and the gate are off here), the worker ran no
	 * pass: it read no usage and would take no alarm of the agent's. */
	usleep(500000);
	expect_eq(ta_quota_observe_gen(), gen);
	for (unsigned i = 0; i < N; i++)
		tieralloc_free(small[i]);
	for (unsigned i = 0; i < 8; i++)
		tieralloc_free(large[i]);
	test_context("%s", "");
}

static void test_observe_reads_limits(void)
{
	test_context("the process whose turn it is to read the usage re-reads the limits with it");
	/* Fresh limits, which the limits' own period would leave alone for a second. */
	atomic_store(&ta_shm.hdr->limits_read_ns, mono_ns());
	atomic_store(&ta_shm.hdr->observe_claim_ns, 0);
	unsigned before = ta_shm_limit_reads_here();
	expect_true(ta_quota_observe(false));
	expect_eq(ta_shm_limit_reads_here(), before + 1);
	test_context("... and a process whose turn it is not reads neither");
	expect_true(!ta_quota_observe(false));
	expect_eq(ta_shm_limit_reads_here(), before + 1);
	test_context("%s", "");
}

/* A process joining the segment with extra (or NULL): how many times its start-up read them. */
static int joiner_reads(char *self, const char *extra)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (extra != NULL)
			putenv((char *)extra);
		char *args[] = { self, "--joiner", NULL };
		execv(self, args);
		_exit(127);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		test_hard("the joining process did not run");
	return WEXITSTATUS(status);
}

static void test_join(char *self)
{
	test_context("a joining process reads the limits only when they are old");
	atomic_store(&ta_shm.hdr->limits_read_ns, mono_ns());
	expect_eq(joiner_reads(self, NULL), 0);
	atomic_store(&ta_shm.hdr->limits_read_ns, mono_ns() - 1500000000ull);
	expect_eq(joiner_reads(self, NULL), 1);
	test_context("... or when its options change them");
	atomic_store(&ta_shm.hdr->limits_read_ns, mono_ns());
	expect_eq(joiner_reads(self, "TIERALLOC_SPLIT=0=75;1=25"), 1);
	expect_eq(joiner_reads(self, "TIERALLOC_TIER_LIMITS=1.max=64M"), 1);
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--joiner") == 0)
		return (int)ta_shm_limit_reads_here();
	snprintf(shm_name_var, sizeof(shm_name_var), "TIERALLOC_SHM_NAME=/ta-unit-limits-%d",
		 (int)getpid());
	const char *const env[] = { shm_name_var, "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
				    "TIERALLOC_PROMOTION=never", NULL };
	test_reexec_with_env(argv, env);
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm%s", strchr(shm_name_var, '=') + 1);
	if (!atomic_load(&ta_shm.active)) {
		unlink(path);
		test_skip("no shared segment (%s)", path);
	}
	/* Start-up read them, on this thread. */
	expect_ge(ta_shm_limit_reads_here(), 1);
	test_stale_rule();
	test_join(argv[0]);
	test_observe_reads_limits();
	test_not_in_malloc();
	unlink(path);
	return test_done();
}
