/* SPDX-License-Identifier: MIT */
/*
 * Configuration lines said once per cgroup (quota/observe.c's ta_quota_first_to_say): a line
 * another process of the segment said within TA_SHM_SAID_WINDOW_S is not said again; the same
 * line after the window, or a different one, is; when both records are taken by other lines
 * still in the window, the line is said anyway (never lost); a segment made before ABI minor 4
 * gives every process its own lines. The preloaded processes' view is tests/integration's
 * test_env.sh.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "quota/shm.h"
#include "test.h"

static char shm_name_var[64];

static bool say(const char *line)
{
	return ta_quota_first_to_say(line, strlen(line));
}

/* Make every record look said long ago. */
static void age_records(void)
{
	uint64_t now = ta_monotonic_ns() / 1000000000u;
	for (unsigned i = 0; i < 2; i++) {
		uint64_t v = atomic_load(&ta_shm.hdr->said[i]);
		if (v != 0)
			atomic_store(&ta_shm.hdr->said[i],
				     TA_SHM_SAID(v, now - TA_SHM_SAID_WINDOW_S - 1));
	}
}

static void test_once_per_window(void)
{
	test_context("the same line twice: said once");
	const char *a = "tieralloc: warning: TIERALLOC_X=\"1\": bad\n";
	const char *b = "tieralloc: warning: TIERALLOC_Y=\"2\": bad\n";
	const char *c = "tieralloc: warning: TIERALLOC_Z=\"3\": bad\n";
	expect_true(say(a));
	expect_true(!say(a));
	test_context("another line: said, and then not again");
	expect_true(say(b));
	expect_true(!say(b));
	expect_true(!say(a));
	test_context("a third line while both records are in the window: said every time");
	expect_true(say(c));
	expect_true(say(c));
	test_context("after the window: said again, once");
	age_records();
	expect_true(say(a));
	expect_true(!say(a));
	expect_true(say(c)); /* the aged record of b made room */
	expect_true(!say(c));
	test_context("a segment of ABI minor 3 remembers nothing");
	ta_shm.snap.abi_minor = 3;
	expect_true(say(a));
	expect_true(say(a));
	ta_shm.snap.abi_minor = TA_SHM_ABI_MINOR;
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	snprintf(shm_name_var, sizeof(shm_name_var), "TIERALLOC_SHM_NAME=/ta-unit-said-%d",
		 (int)getpid());
	const char *const env[] = { shm_name_var, "TIERALLOC_ENFORCE=off", NULL };
	test_reexec_with_env(argv, env);
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm%s", strchr(shm_name_var, '=') + 1);
	if (!atomic_load(&ta_shm.active)) {
		unlink(path);
		test_skip("no shared segment (%s)", path);
	}
	test_once_per_window();
	unlink(path);
	return test_done();
}
