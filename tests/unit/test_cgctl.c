/* SPDX-License-Identifier: MIT */
/*
 * The agent's reads of other cgroups' control files through libcgroup (agent/cgctl.c), on this
 * host's real hierarchy (v1 or v2; no root needed): a file that exists reads, a file that does
 * not is -1 with errno and no crash (libcgroup 2.0's cgroup_read_value_end dereferences the
 * NULL handle a failed open leaves: the agent died of it in the guest suite, reading the root
 * cgroup's absent memory.max), a path that climbs out of the mount is refused, and a cgroup
 * that does not exist samples as gone.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cgctl.h"
#include "reclaim.h"
#include "test.h"

int main(void)
{
	char err[300], buf[256];
	if (ta_cgctl_init(err, sizeof(err)) != 0) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	const char *mount = ta_cgctl_mount();
	test_context("the memory controller at %s, cgroup v%d", mount, ta_cgctl_version());
	expect_true(ta_cgctl_version() == 1 || ta_cgctl_version() == 2);

	test_context("a file the root has: read");
	expect_true(ta_cgctl_read(mount, "cgroup.procs", buf, sizeof(buf)) > 0);

	test_context("a file nobody has: -1, errno set, no crash");
	errno = 0;
	expect_eq(ta_cgctl_read(mount, "memory.tieralloc-none", buf, sizeof(buf)), -1);
	expect_ne(errno, 0);
	char below[4200];
	snprintf(below, sizeof(below), "%s/tieralloc-no-such-cgroup", mount);
	expect_eq(ta_cgctl_read(below, "memory.max", buf, sizeof(buf)), -1);

	test_context("climbing out of the mount: refused before libcgroup sees it");
	snprintf(below, sizeof(below), "%s/../../tmp", mount);
	errno = 0;
	expect_eq(ta_cgctl_read(below, "memory.stat", buf, sizeof(buf)), -1);
	expect_eq(errno, EINVAL);
	expect_eq(ta_cgctl_read("..", "memory.stat", buf, sizeof(buf)), -1);

	test_context("a cgroup that does not exist samples as gone");
	struct ta_press_sample s;
	snprintf(below, sizeof(below), "%s/tieralloc-no-such-cgroup", mount);
	expect_eq(ta_cgctl_sample(below, &s), 0);
	return test_done();
}
