/* SPDX-License-Identifier: MIT */
/*
 * Other cgroups' memory control files through libcgroup (issue 17 item 6): the agent's reads of
 * memory.current, memory.low, memory.min, memory.pressure, memory.events and memory.stat, and
 * its writes of memory.reclaim. Paths are the cgroup's, absolute (as in a segment's header and
 * in --priority) or relative to the memory controller's mount.
 */
#include <errno.h>
#include <libcgroup.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "cgctl.h"
#include "reclaim.h"

static char mount_point[4096];
static int version;

int ta_cgctl_init(char *err, size_t errlen)
{
	int rc = cgroup_init();
	if (rc != 0) {
		snprintf(err, errlen, "libcgroup cannot start (%s)", cgroup_strerror(rc));
		return -1;
	}
	char *mp = NULL;
	rc = cgroup_get_subsys_mount_point("memory", &mp);
	if (rc != 0 || mp == NULL) {
		snprintf(err, errlen, "no memory controller mounted (%s)", cgroup_strerror(rc));
		free(mp);
		return -1;
	}
	snprintf(mount_point, sizeof(mount_point), "%s", mp);
	free(mp);
	/* v2's root has cgroup.controllers; a v1 memory hierarchy has none. */
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/cgroup.controllers", mount_point);
	version = access(probe, F_OK) == 0 ? 2 : 1;
	return 0;
}

int ta_cgctl_version(void)
{
	return version;
}

const char *ta_cgctl_mount(void)
{
	return mount_point;
}

/* The path relative to the mount, as libcgroup takes it ("/" for the root); NULL when an
 * absolute path is not under the mount or climbs out of it. */
static const char *relative(const char *path)
{
	if (strstr(path, "/../") != NULL || strcmp(path, "..") == 0 ||
	    (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0))
		return NULL;
	size_t mlen = strlen(mount_point);
	if (mlen == 0 || strncmp(path, "/sys/fs/cgroup", 14) != 0)
		return path; /* relative to the mount already */
	if (strncmp(path, mount_point, mlen) != 0 || (path[mlen] != '/' && path[mlen] != '\0'))
		return NULL;
	return path[mlen] == '\0' ? "/" : path + mlen;
}

int ta_cgctl_read(const char *path, const char *file, char *buf, size_t len)
{
	const char *rel = relative(path);
	if (rel == NULL || len < 2 || len > INT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	void *handle = NULL;
	size_t used = 0;
	buf[0] = '\0';
	/* libcgroup 2.0 takes the name as char *, and does not write it. */
	char name[64];
	if (snprintf(name, sizeof(name), "%s", file) >= (int)sizeof(name)) {
		errno = EINVAL;
		return -1;
	}
	int rc = cgroup_read_value_begin("memory", rel, name, &handle, buf, (int)len);
	if (rc != 0 && rc != ECGEOF) {
		int e = cgroup_get_last_errno();
		/* libcgroup 2.0's end dereferences the handle: NULL when the file did not open. */
		if (handle != NULL)
			cgroup_read_value_end(&handle);
		errno = e != 0 ? e : ENOENT;
		return -1;
	}
	/* One line per call: appended until the end or the buffer is full. */
	while (rc == 0) {
		used += strlen(buf + used);
		if (used + 1 >= len)
			break;
		rc = cgroup_read_value_next(&handle, buf + used, (int)(len - used));
		if (rc != 0)
			buf[used] = '\0';
	}
	if (handle != NULL)
		cgroup_read_value_end(&handle);
	return (int)strlen(buf);
}

int ta_cgctl_write(const char *path, const char *file, const char *value)
{
	const char *rel = relative(path);
	if (rel == NULL) {
		errno = EINVAL;
		return -1;
	}
	struct cgroup *cg = cgroup_new_cgroup(rel);
	struct cgroup_controller *c = cg != NULL ? cgroup_add_controller(cg, "memory") : NULL;
	int rc = c != NULL ? cgroup_add_value_string(c, file, value) : ECGFAIL;
	if (rc == 0)
		rc = cgroup_modify_cgroup(cg);
	int e = cgroup_get_last_errno();
	cgroup_free(&cg);
	if (rc == 0)
		return 0;
	errno = rc == ECGROUPVALUENOTEXIST ? ENOENT : e != 0 ? e : EIO;
	return -1;
}

static bool read_value(const char *path, const char *file, uint64_t *out)
{
	char buf[64];
	return ta_cgctl_read(path, file, buf, sizeof(buf)) > 0 && ta_cgstat_value(buf, out) == 0;
}

unsigned ta_cgctl_sample(const char *path, struct ta_press_sample *s)
{
	/* memory.stat is the longest (about 2 KiB on 6.12). */
	char buf[8192];
	unsigned have = 0;
	memset(s, 0, sizeof(*s));
	bool v2 = version == 2;
	if (read_value(path, v2 ? "memory.current" : "memory.usage_in_bytes", &s->current))
		have |= TA_CG_HAVE_CURRENT;
	else
		return 0;
	if (v2 && read_value(path, "memory.low", &s->low) &&
	    read_value(path, "memory.min", &s->min))
		have |= TA_CG_HAVE_LOW;
	if (!v2 || !read_value(path, "memory.high", &s->high))
		s->high = UINT64_MAX;
	/* v1's soft limit is no protection, but the closest thing to one: kept as the floor. */
	if (!v2 && read_value(path, "memory.soft_limit_in_bytes", &s->low))
		have |= TA_CG_HAVE_LOW;
	if (v2 && ta_cgctl_read(path, "memory.pressure", buf, sizeof(buf)) > 0 &&
	    ta_cgstat_psi_total(buf, "some", &s->psi_us) == 0)
		have |= TA_CG_HAVE_PSI;
	uint64_t high = 0, max = 0;
	if (v2 && ta_cgctl_read(path, "memory.events", buf, sizeof(buf)) > 0 &&
	    ta_cgstat_key(buf, "high", &high) == 0 && ta_cgstat_key(buf, "max", &max) == 0) {
		s->events = high + max;
		have |= TA_CG_HAVE_EVENTS;
	}
	if (!v2 && read_value(path, "memory.failcnt", &s->events))
		have |= TA_CG_HAVE_EVENTS;
	uint64_t anon = 0, file = 0;
	if (ta_cgctl_read(path, "memory.stat", buf, sizeof(buf)) > 0 &&
	    ta_cgstat_key(buf, "workingset_refault_anon", &anon) == 0 &&
	    ta_cgstat_key(buf, "workingset_refault_file", &file) == 0) {
		s->refaults = anon + file;
		have |= TA_CG_HAVE_REFAULTS;
	}
	return have;
}

int ta_cgctl_reclaim(const char *path, uint64_t bytes)
{
	if (version != 2) {
		errno = EOPNOTSUPP;
		return -1;
	}
	char value[32];
	snprintf(value, sizeof(value), "%llu", (unsigned long long)bytes);
	return ta_cgctl_write(path, "memory.reclaim", value);
}
