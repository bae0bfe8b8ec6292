/* SPDX-License-Identifier: MIT */
/*
 * Cgroup paths as the kernel gives them, for the agent and the tools (cgpath.c, pure): a path in
 * canonical form, so that two spellings of one directory compare equal; the cgroup v2 line of
 * /proc/PID/cgroup; and where cgroup2 is mounted, from /proc/self/mountinfo.
 *
 * A segment's header holds a cgroup path and id that its owner wrote: what the agent acts on
 * comes from the kernel instead (the /proc/PID/cgroup of the segment's live processes), and the
 * header is only checked against it.
 */
#ifndef TA_COMMON_CGPATH_H
#define TA_COMMON_CGPATH_H

#include <stdbool.h>
#include <stddef.h>

/* PATH (absolute) in canonical form into out: no empty component ("//"), no trailing "/", no
 * "." component; "/" stays "/". 0, or -1 when it is not absolute, has a ".." component, holds a
 * control character, or does not fit in len. */
int ta_cgpath_canon(const char *path, char *out, size_t len);

/* Whether a and b name the same path once canonical (false when either cannot be). */
bool ta_cgpath_same(const char *a, const char *b);

/* The cgroup v2 line ("0::/path") of a /proc/PID/cgroup text: its path (from the hierarchy's
 * root, canonical) into out. 0, or -1 without such a line, or with a path that is not absolute,
 * not canonical, or does not fit. */
int ta_cgpath_proc_v2(const char *text, char *out, size_t len);

/* The mount point of the cgroup2 file system from a /proc/self/mountinfo text (the first one
 * whose root is the hierarchy's root), its octal escapes undone. 0, or -1 without one. */
int ta_cgpath_mount_v2(const char *mountinfo, char *out, size_t len);

/* mount + rel (rel from ta_cgpath_proc_v2: "/" is the mount itself) into out. 0, or -1 when it
 * does not fit. */
int ta_cgpath_join(const char *mount, const char *rel, char *out, size_t len);

/* Whether tail (a canonical path) is, component by component, the end of path (canonical):
 * "/a/b" ends "/x/a/b" and itself; "/" ends every path; "/b" does not end "/ab". */
bool ta_cgpath_ends_with(const char *path, const char *tail);

#endif /* TA_COMMON_CGPATH_H */
