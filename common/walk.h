/* SPDX-License-Identifier: MIT */
/*
 * Walking into another mount namespace's directories without trusting them (walk.c), for the
 * agent (root) and tieralloc-stat alike: a container's owner decides what its /dev/shm and /proc
 * are, and can make either a symbolic link (which resolves in the walker's own root, not the
 * container's), or a FUSE file system whose server never answers.
 *
 * Every component is opened with O_PATH | O_NOFOLLOW and looked at before anything is looked up
 * in it or read from it; only then is the last one opened for reading. Looked at without asking
 * its file system first: the type of its mount comes from the namespace's mount table (by the
 * mount id statx gives with AT_STATX_DONT_SYNC, which FUSE answers from its cache), and only a
 * file system that no process serves is asked its statfs (which a FUSE server that lets the
 * walker in would have to answer).
 */
#ifndef TA_COMMON_WALK_H
#define TA_COMMON_WALK_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a file system of this type (statfs' f_type) is served by a process or over a network
 * (FUSE, NFS, CIFS/SMB, 9p, Ceph, AFS, Coda): an access to it can block for as long as the
 * server wants. */
bool ta_walk_served(long type);
/* The same by a mount table's type name ("fuse.sshfs", "nfs4", "tmpfs"...). */
bool ta_walk_served_name(const char *type);

/* The type of the mount fd is on, from the mount table of process pid (0: ours), found by the
 * mount id statx gives without asking the file system: 0 with the name in out, -1 when it
 * cannot be told (a kernel before 5.8, or the table cannot be read). */
int ta_walk_mount_type(int fd, int pid, char *out, size_t len);

/* The directory rel (relative: "dev/shm") beneath the directory dirfd (any descriptor, O_PATH
 * too) of process pid's mount namespace (0: ours), one component at a time: no symbolic link,
 * no ".." and no served file system (dirfd's included) on the way, and the last one a directory
 * on a file system of type magic (0: any not served). Returns a descriptor open O_RDONLY |
 * O_DIRECTORY, or -1 with errno: ELOOP (a link), EXDEV (a file system refused), ENOTDIR, EINVAL
 * (a ".." component) or what openat said. */
int ta_walk_dir(int dirfd, int pid, const char *rel, long magic);

/* The same from the root of process pid's mount namespace (/proc/PID/root). */
int ta_walk_root(int pid, const char *rel, long magic);

/* An absolute path of the caller's own namespace, links followed (the host's own are root's),
 * opened O_PATH and checked before it is opened for reading: a directory on a file system of
 * type magic (0: any not served). A descriptor open O_RDONLY | O_DIRECTORY, or -1 with errno. */
int ta_walk_own(const char *path, long magic);

/* A file beneath dirfd (rel: "1234/stat"), opened with flags (O_RDONLY...) without following a
 * link and, where the kernel has openat2 (5.6), without crossing a mount point: a bind mount over
 * a file of a container's /proc cannot stand in for it. -1 with errno. */
int ta_walk_file(int dirfd, const char *rel, int flags);

#endif /* TA_COMMON_WALK_H */
