/* SPDX-License-Identifier: MIT */
/*
 * The careful walk of walk.h. A FUSE mount answers statfs without its server only for processes
 * it does not let in (an unprivileged user's mount, for root); one mounted by root with
 * allow_other asks its server, which may never answer. So the type of each component's mount is
 * read first from the namespace's mount table, and the walk stops at the first served file
 * system, before any statfs, lookup or open in it.
 */
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CEPH_SUPER_MAGIC
#define CEPH_SUPER_MAGIC 0x00c36400
#endif
#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

bool ta_walk_served(long type)
{
	switch ((unsigned long)type & 0xffffffffu) {
	case FUSE_SUPER_MAGIC:
	case NFS_SUPER_MAGIC:
	case SMB_SUPER_MAGIC:
	case CIFS_SUPER_MAGIC:
	case SMB2_SUPER_MAGIC:
	case V9FS_MAGIC:
	case CEPH_SUPER_MAGIC:
	case AFS_SUPER_MAGIC:
	case AFS_FS_MAGIC:
	case CODA_SUPER_MAGIC:
		return true;
	}
	return false;
}

bool ta_walk_served_name(const char *type)
{
	static const char *const served[] = { "fuse",	  "nfs",       "cifs",	"smb",
					      "9p",	  "ceph",      "afs",	"coda",
					      "virtiofs", "glusterfs", "lustre" };
	for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++)
		if (strncmp(type, served[i], strlen(served[i])) == 0)
			return true;
	return false;
}

int ta_walk_mount_type(int fd, int pid, char *out, size_t len)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return -1;
	char path[64];
	if (pid != 0)
		snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/mountinfo");
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return -1;
	/* "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
	char *line = NULL;
	size_t cap = 0;
	int rc = -1;
	while (rc != 0 && getline(&line, &cap, f) > 0) {
		char *end;
		unsigned long long id = strtoull(line, &end, 10);
		const char *sep = strstr(line, " - ");
		if (end == line || *end != ' ' || id != stx.stx_mnt_id || sep == NULL)
			continue;
		size_t n = strcspn(sep + 3, " \n");
		if (n + 1 > len)
			break;
		memcpy(out, sep + 3, n);
		out[n] = '\0';
		rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

/* fd's file system (fd of process pid's namespace): 0 when it may be walked into, else -1 with
 * errno EXDEV. Only a file system its mount table says is not served is asked its statfs. */
static int fs_ok(int fd, int pid, long magic)
{
	char type[64];
	if (ta_walk_mount_type(fd, pid, type, sizeof(type)) == 0 && ta_walk_served_name(type)) {
		errno = EXDEV;
		return -1;
	}
	struct statfs fs;
	if (fstatfs(fd, &fs) != 0)
		return -1;
	if (ta_walk_served((long)fs.f_type) ||
	    (magic != 0 && ((unsigned long)fs.f_type & 0xffffffffu) != (unsigned long)magic)) {
		errno = EXDEV;
		return -1;
	}
	return 0;
}

/* An O_PATH descriptor of a directory, checked, reopened for reading (it is closed). */
static int reopen_dir(int fd, int pid, long magic)
{
	struct stat st;
	int out = -1;
	if (fs_ok(fd, pid, magic) == 0) {
		if (fstat(fd, &st) != 0)
			;
		else if (!S_ISDIR(st.st_mode))
			errno = ENOTDIR;
		else
			out = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	int err = errno;
	close(fd);
	errno = err;
	return out;
}

int ta_walk_dir(int dirfd, int pid, const char *rel, long magic)
{
	int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -1;
	const char *p = rel;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		char name[256];
		if (n >= sizeof(name) || (n == 2 && p[0] == '.' && p[1] == '.')) {
			close(cur);
			errno = n >= sizeof(name) ? ENAMETOOLONG : EINVAL;
			return -1;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (strcmp(name, ".") == 0)
			continue;
		/* Nothing is looked up in a directory before its file system was looked at. */
		struct stat st;
		int next = fs_ok(cur, pid, 0) == 0
			       ? openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
			       : -1;
		int err = errno;
		close(cur);
		if (next < 0) {
			errno = err;
			return -1;
		}
		if (fs_ok(next, pid, 0) != 0 || fstat(next, &st) != 0) {
			err = errno;
			close(next);
			errno = err;
			return -1;
		}
		if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
			close(next);
			errno = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
			return -1;
		}
		cur = next;
	}
	return reopen_dir(cur, pid, magic);
}

int ta_walk_root(int pid, const char *rel, long magic)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/root", pid);
	int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	int fd = ta_walk_dir(root, pid, rel, magic);
	int err = errno;
	close(root);
	errno = err;
	return fd;
}

int ta_walk_own(const char *path, long magic)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -1 : reopen_dir(fd, 0, magic);
}

int ta_walk_file(int dirfd, const char *rel, int flags)
{
#ifdef SYS_openat2
	struct open_how how = { .flags = (unsigned)(flags | O_NOFOLLOW | O_CLOEXEC),
				.resolve =
				    RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return (int)fd;
#endif
	return openat(dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC);
}
