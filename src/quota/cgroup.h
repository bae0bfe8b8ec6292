/* SPDX-License-Identifier: MIT */
/*
 * This process's memory cgroup (src/quota/cgroup.c): which one it is, the name of its shared
 * segment, its limits, the kernel's per-node usage and the memory.reclaim writer. Everything runs
 * inside the allocator (malloc's slow paths, the worker thread): raw syscalls and stack buffers
 * only, and odd input (missing or truncated files, garbage, paths too long) gives -errno, never a
 * crash.
 *
 * Every function takes a root: "" for the real system, or a fixture directory that holds
 * proc/self/{cgroup,mountinfo} and the sys/fs/cgroup/... tree, so that tests describe a machine.
 * Paths kept in struct ta_cgroup are as the process sees them, without that root.
 */
#ifndef TA_CGROUP_H
#define TA_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "tieralloc/shm_abi.h"

#define TA_CGROUP_KEY_MAX 64
#define TA_CGROUP_NODES	  64 /* per_node[] entries of ta_cgroup_numa_stat(), = TA_MAX_NODES */

struct ta_cgroup {
	/* 2: cgroup v2 with the memory controller; 1: a v1 hierarchy with the memory controller;
	 * 0: none (no memory cgroup, or it could not be found). */
	int version;
	/* Length of the mount point at the start of path: the ancestor walk of the limits stops
	 * there (what lies above a mount's root is not visible). 0 when version is 0. */
	unsigned mount_len;
	/* Absolute directory of this process's memory cgroup ("/sys/fs/cgroup/a/b"), "" if none. */
	char path[TA_SHM_PATH_MAX];
	/* v2: the directory's inode, which on 64-bit kernels >= 5.5 is the cgroup id that
	 * bpf_get_current_cgroup_id() reports; 0 otherwise. */
	uint64_t id;
	/* Segment key: "cg<id>" (v2), "v1-<16 hex digits of ta_cgroup_hash(path)>" (v1),
	 * "machine" (none). */
	char key[TA_CGROUP_KEY_MAX];
};

/*
 * Find this process's memory cgroup from <root>/proc/self/cgroup and <root>/proc/self/mountinfo.
 * A mounted v1 memory hierarchy wins (hybrid hosts mount a cgroup2 without the memory controller
 * next to it); else a cgroup2 mount whose root directory's cgroup.controllers lists "memory"; else
 * none. Returns 0 (out->version says which, 0 included), or -errno when the cgroup could not be
 * determined: -ENOENT (files missing, or a memory hierarchy is mounted but no mount of it reaches
 * our cgroup), -EINVAL (no usable line in /proc/self/cgroup), -ENAMETOOLONG (path does not fit
 * TA_SHM_PATH_MAX). *out is always valid: on error it describes no cgroup (key "machine").
 */
int ta_cgroup_self(const char *root, struct ta_cgroup *out);

/*
 * The cgroup's memory limits in bytes, indexed by TA_LIMIT_{MIN,LOW,HIGH,MAX}; TA_SHM_UNLIMITED
 * means none ("max" in a v2 file, a missing file, v1's PAGE_COUNTER_MAX).
 * - v2: memory.min, memory.low, memory.high, memory.max.
 * - v1: memory.limit_in_bytes -> MAX; memory.soft_limit_in_bytes -> HIGH (the soft limit is the
 *   level v1's reclaim pushes a cgroup back to, the closest thing to v2's high); MIN = LOW = 0.
 *   Values >= 2^62 are unlimited: v1 shows "no limit" as PAGE_COUNTER_MAX pages in bytes.
 * - none: MIN = LOW = 0, HIGH = MAX = unlimited.
 * HIGH and MAX are effective values: the minimum over the cgroup and its ancestors up to the
 * mount's root, since an ancestor's limit caps every descendant. MIN and LOW are the cgroup's own
 * (their effective value depends on siblings' usage, which the kernel alone knows). A v2 cgroup
 * whose parent does not delegate the memory controller has no memory.* files: its own limits read
 * as absent and the ancestors' high and max still apply, as they do in the kernel.
 * limits[] is always fully written; a file that cannot be read or parsed counts as absent. Returns
 * 0, or the first error other than a missing file (-EACCES, -EINVAL for garbage...).
 */
int ta_cgroup_read_limits(const char *root, const struct ta_cgroup *cg,
			  uint64_t limits[TA_NLIMITS]);

/*
 * v2 only: bytes of the cgroup's memory on each NUMA node, the "anon" plus the "file" line of
 * memory.numa_stat ("anon N0=123 N1=456"). per_node[] is zeroed first; nodes >= TA_CGROUP_NODES
 * and malformed entries are skipped. 0, -ENOENT on v1 or none (v1's numa_stat counts pages in
 * another format), -EINVAL when neither line was found, or the error of reading the file.
 */
int ta_cgroup_numa_stat(const char *root, const struct ta_cgroup *cg,
			uint64_t per_node[TA_CGROUP_NODES]);

/* The same parse from a file the caller opened (tieralloc-stat opens it without trusting the
 * path a segment gives): 0, -EINVAL when neither line was found, or the read's error. */
int ta_cgroup_numa_stat_fd(int fd, uint64_t per_node[TA_CGROUP_NODES]);

/*
 * v2 only: ask the kernel to reclaim bytes from the cgroup (write to memory.reclaim, kernel
 * >= 5.19). It can block for a long time: worker thread only, never with an allocator lock held.
 * 0 (bytes 0 writes nothing), -ENOENT on v1/none or without the file, -EAGAIN when the kernel
 * reclaimed less than asked, or another -errno of the write.
 */
int ta_cgroup_reclaim(const char *root, const struct ta_cgroup *cg, uint64_t bytes);

/* v2 only: the cgroup's memory.current in bytes. 0, -ENOENT on v1/none, or the read's error. */
int ta_cgroup_current(const char *root, const struct ta_cgroup *cg, uint64_t *bytes);

/* A cgroup-wide limit's share for one tier: value * share_ppm / 1000000, rounded down (the
 * shares of a limit never add up to more than it). Unlimited stays unlimited; share_ppm above
 * 1000000 counts as 1000000. No overflow for any value. */
uint64_t ta_cgroup_split(uint64_t value, uint32_t share_ppm);

/* FNV-1a 64 of a NUL-terminated string: the v1 segment key is "v1-" and this hash of the
 * cgroup's absolute directory, in 16 lower-case hex digits. */
uint64_t ta_cgroup_hash(const char *s);

#endif /* TA_CGROUP_H */
