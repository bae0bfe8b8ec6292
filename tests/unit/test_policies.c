/* SPDX-License-Identifier: MIT */
/*
 * The agent's policies' status file (common/policies.h): what agent/status.c writes, the parser
 * tieralloc-stat uses reads back the same, and a line that is not the format is skipped and
 * counted, never half taken: a bad kind or key, a bad escape, a control byte, a key twice, too
 * many keys, a value too long, no path, a last line cut short, a file without the first line.
 * tests/bpf/test_agent_protect.sh runs the agent and tieralloc-stat on the real file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "status.h"
#include "test.h"

#define MAX 8
static struct ta_policy got[MAX];

static int parse(const char *text, unsigned *bad)
{
	return ta_policies_parse(text, strlen(text), got, MAX, bad);
}

static void test_round_trip(void)
{
	/* A cgroup name may hold any byte but '/' and NUL: space, newline, backslash, DEL. */
	static const char nasty[] = "/sys/fs/cgroup/a b\n\\x41\x7f\x01\xc3\xa9";
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	expect_true(f != NULL);
	fputs(TA_POLICIES_MAGIC "\n", f);
	fputs("protect low_bytes=5 cap_bytes=max", f);
	expect_eq(ta_status_path(f, "path", nasty), 0);
	fputs("\nreclaim priority=3 pressured=psi,refaults", f);
	expect_eq(ta_status_path(f, "for", "/sys/fs/cgroup/hi"), 0);
	expect_eq(ta_status_path(f, "path", "/sys/fs/cgroup/lo"), 0);
	fputc('\n', f);
	fclose(f);
	test_context("a path written escaped holds no space or newline");
	const char *line2 = strchr(text, '\n') + 1;
	const char *nl = strchr(line2, '\n');
	expect_true(nl != NULL && memchr(line2, ' ', (size_t)(nl - line2)) != NULL);
	test_context("and reads back whole");
	unsigned bad = 99;
	expect_eq(ta_policies_parse(text, len, got, MAX, &bad), 2);
	expect_eq(bad, 0);
	expect_str_eq(got[0].kind, "protect");
	expect_str_eq(ta_policy_get(&got[0], "path"), nasty);
	expect_str_eq(ta_policy_get(&got[0], "cap_bytes"), "max");
	expect_str_eq(ta_policy_get(&got[1], "pressured"), "psi,refaults");
	expect_str_eq(ta_policy_get(&got[1], "for"), "/sys/fs/cgroup/hi");
	expect_str_eq(ta_policy_get(&got[1], "path"), "/sys/fs/cgroup/lo");
	expect_true(ta_policy_get(&got[1], "nothing") == NULL);
	free(text);
}

static void test_bad_lines(void)
{
	static const struct {
		const char *line, *why;
	} bad[] = {
		{ "Protect path=/a", "a kind in capitals" },
		{ "protect", "no path" },
		{ "protect low_bytes=1", "no path" },
		{ "protect path=", "an empty path" },
		{ "protect path=/a path=/b", "a key twice" },
		{ "protect Low=1 path=/a", "a key in capitals" },
		{ "protect =1 path=/a", "no key" },
		{ "protect low path=/a", "a key without a value" },
		{ "protect  path=/a", "two spaces" },
		{ "protect path=/a ", "a trailing space" },
		{ "protect path=/a\\", "a lone backslash" },
		{ "protect path=/a\\x4", "a short escape" },
		{ "protect path=/a\\x4G", "a bad hex digit" },
		{ "protect path=/a\\x00b", "an escaped NUL" },
		{ "protect path=/a\tb", "a raw control byte" },
		{ "protect path=/a\x1b[2J", "a raw escape sequence" },
		{ "protect k_123456789012345678901234567890=1 path=/a", "a key too long" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "%s\n%s\nreclaim path=/ok\n", TA_POLICIES_MAGIC,
			 bad[i].line);
		test_context("skipped: %s", bad[i].why);
		unsigned nbad = 0;
		expect_eq(parse(text, &nbad), 1);
		expect_eq(nbad, 1);
		expect_str_eq(ta_policy_get(&got[0], "path"), "/ok");
	}
}

static void test_limits(void)
{
	unsigned bad = 0;
	test_context("not the agent's file: -1");
	expect_eq(parse("", &bad), -1);
	expect_eq(parse("tierallocd-policies 2\nprotect path=/a\n", &bad), -1);
	expect_eq(parse("tierallocd-policies 1", &bad), -1);
	test_context("an empty list is a list");
	expect_eq(parse(TA_POLICIES_MAGIC "\n", &bad), 0);
	expect_eq(bad, 0);
	test_context("a last line without its newline was cut short: skipped");
	expect_eq(parse(TA_POLICIES_MAGIC "\nprotect path=/a\nprotect path=/b", &bad), 1);
	expect_eq(bad, 1);
	test_context("too many keys");
	char text[4096];
	int n = snprintf(text, sizeof(text), "%s\nprotect", TA_POLICIES_MAGIC);
	for (int k = 0; k < TA_POLICY_KEYS; k++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, " k%d=1", k);
	snprintf(text + n, sizeof(text) - (size_t)n, " path=/a\n");
	expect_eq(parse(text, &bad), 0);
	expect_eq(bad, 1);
	test_context("a value longer than TA_POLICY_PATH_MAX");
	char *big = malloc(TA_POLICY_PATH_MAX + 64);
	n = snprintf(big, 64, "%s\nprotect path=/", TA_POLICIES_MAGIC);
	memset(big + n, 'x', TA_POLICY_PATH_MAX);
	strcpy(big + n + TA_POLICY_PATH_MAX, "\n");
	expect_eq(parse(big, &bad), 0);
	expect_eq(bad, 1);
	test_context("exactly TA_POLICY_PATH_MAX bytes fit");
	strcpy(big + n + TA_POLICY_PATH_MAX - 1, "\n");
	expect_eq(parse(big, &bad), 1);
	expect_eq(strlen(ta_policy_get(&got[0], "path")), TA_POLICY_PATH_MAX);
	free(big);
	test_context("more lines than room: the rest counted as not taken");
	n = snprintf(text, sizeof(text), "%s\n", TA_POLICIES_MAGIC);
	for (int k = 0; k < MAX + 2; k++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "protect path=/%d\n", k);
	expect_eq(parse(text, &bad), MAX);
	expect_eq(bad, 2);
}

int main(void)
{
	test_round_trip();
	test_bad_lines();
	test_limits();
	return test_done();
}
