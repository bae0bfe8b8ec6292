/* SPDX-License-Identifier: MIT */
/*
 * A cgroup's control files by path or descriptor, with plain system calls (cgctl.h): for what
 * libcgroup cannot serve. The lease keeper is a child forked from a threaded agent and must not
 * allocate; the protector samples every 50 ms through descriptors opened once (libcgroup opens
 * and closes a file per access); and both are tested on stand-in directories that libcgroup
 * would refuse (not under the controller's mount).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgctl.h"

int ta_cgfile_open(const char *dir, const char *file, int flags)
{
	char path[PATH_MAX + 64];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(path, flags | O_CLOEXEC);
}

int ta_cgfile_get(int fd, uint64_t *v)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return ta_cgstat_value(buf, v);
}

int ta_cgfile_set(int fd, uint64_t v)
{
	char buf[32];
	int len = v == UINT64_MAX ? snprintf(buf, sizeof(buf), "max\n")
				  : snprintf(buf, sizeof(buf), "%" PRIu64 "\n", v);
	return pwrite(fd, buf, (size_t)len, 0) == len ? 0 : -1;
}

int ta_cgfile_read(const char *dir, const char *file, char *buf, size_t len)
{
	int fd = ta_cgfile_open(dir, file, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = '\0';
	return (int)n;
}

int ta_cgfile_value(const char *dir, const char *file, uint64_t *v)
{
	int fd = ta_cgfile_open(dir, file, O_RDONLY);
	if (fd < 0)
		return -1;
	int rc = ta_cgfile_get(fd, v);
	close(fd);
	return rc;
}
