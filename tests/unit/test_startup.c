/* SPDX-License-Identifier: MIT */
/*
 * What a process holds when tieralloc starts is charged to the tier it sits on
 * (src/quota/startup.c): the statm parser against fixtures (bad text charges nothing), and this
 * process's own charge, which must be in tier 0's charge (node 0 is in both of
 * TIERALLOC_TIERS="0;0", and tier 0 comes first) and no more than what it holds now; and what
 * memkind's late start faults in (its jemalloc's metadata, alloc/backend.c) joins it, bounded.
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "test.h"
#include "tiers.h"

static void test_parse(void)
{
	test_context("statm fixtures");
	expect_eq(ta_statm_anon("2000 150 40 10 0 300 0\n", 4096), 110 * 4096);
	expect_eq(ta_statm_anon("2000 150 40", 4096), 110 * 4096);
	expect_eq(ta_statm_anon(" 2000  150  40 ", 65536), 110 * 65536);
	/* Nothing anonymous, or more shared than resident (a torn read): no charge. */
	expect_eq(ta_statm_anon("2000 40 40 10 0 300 0\n", 4096), 0);
	expect_eq(ta_statm_anon("2000 40 150 10 0 300 0\n", 4096), 0);
	/* Malformed. */
	expect_eq(ta_statm_anon("", 4096), 0);
	expect_eq(ta_statm_anon("2000 150", 4096), 0);
	expect_eq(ta_statm_anon("2000 x 40", 4096), 0);
	expect_eq(ta_statm_anon("-1 -150 -40", 4096), 0);
	expect_eq(ta_statm_anon("1 99999999999999999999999 0", 4096), 0);
	test_context("%s", "");
}

static uint64_t anon_now(void)
{
	char buf[256];
	ssize_t n = ta_read_file("/proc/self/statm", buf, sizeof(buf) - 1);
	if (n <= 0)
		test_hard("cannot read /proc/self/statm");
	buf[n] = '\0';
	return ta_statm_anon(buf, (uint64_t)sysconf(_SC_PAGESIZE));
}

static void test_charged(void)
{
	test_context("this process's start-up charge");
	uint64_t st0 = 0, st1 = 0;
	size_t len = sizeof(st0);
	expect_eq(tieralloc_ctl_get("tier.0.startup", &st0, &len), 0);
	len = sizeof(st1);
	expect_eq(tieralloc_ctl_get("tier.1.startup", &st1, &len), 0);
	/* At least our own tables and the relocated libraries; at most what we hold now. */
	expect_ge(st0, 64 * 1024);
	expect_le(st0, anon_now());
	expect_eq(st1, 0);
	expect_ge(charged(0), st0);
	/* It stays: giving back what is held and unused does not take it off. */
	settle();
	expect_ge(charged(0), st0);
	test_context("%s", "");
}

/* In a child: tier 0 with 64 KiB of room left; memkind's start charges no more than that. */
static int child_late_full(void)
{
	uint64_t before = 0, after = 0, limit = charged(0) + (64 << 10);
	size_t len = sizeof(before);
	if (tieralloc_ctl_get("tier.0.startup", &before, &len) != 0 ||
	    tieralloc_ctl_set("tier.0.limit", &limit, sizeof(limit)) != 0)
		return 1;
	void *big = tieralloc_malloc(1 << 20); /* memkind starts; the block goes to tier 1 */
	if (big == NULL || !ta_backend_memkind_started())
		return 2;
	len = sizeof(after);
	if (tieralloc_ctl_get("tier.0.startup", &after, &len) != 0)
		return 3;
	printf("# memkind's start with 64 KiB of room: %llu KiB charged, tier 0 %llu of %llu\n",
	       (unsigned long long)(after - before) >> 10, (unsigned long long)charged(0),
	       (unsigned long long)limit);
	return charged(0) <= limit && after - before <= (64 << 10) ? 0 : 4;
}

static void test_late(void)
{
	test_context("memkind's late start in a full tier: within its max");
	expect_true(!ta_backend_memkind_started());
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int rc = child_late_full();
		fflush(stdout);
		_exit(rc);
	}
	int status = -1;
	expect_eq(waitpid(pid, &status, 0), pid);
	expect_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	test_context("memkind's late start: its metadata joins the start-up charge");
	uint64_t before = 0, after = 0;
	size_t len = sizeof(before);
	expect_eq(tieralloc_ctl_get("tier.0.startup", &before, &len), 0);
	void *big = tieralloc_malloc(1 << 20); /* a large object: memkind starts */
	expect_true(big != NULL);
	expect_true(ta_backend_memkind_started());
	len = sizeof(after);
	expect_eq(tieralloc_ctl_get("tier.0.startup", &after, &len), 0);
	printf("# memkind's start: %llu KiB charged\n", (unsigned long long)(after - before) >> 10);
	expect_gt(after, before);
	expect_le(after - before, (uint64_t)2 << 20);
	expect_ge(charged(0), after);
	tieralloc_free(big);
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_TIERS=0;0", "TIERALLOC_ENFORCE=off",
					   "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	test_parse();
	if (tieralloc_tier_count() != 2)
		test_skip("TIERALLOC_TIERS=\"0;0\" did not give two tiers (%d)",
			  tieralloc_tier_count());
	test_charged();
	test_late();
	return test_done();
}
