/* SPDX-License-Identifier: MIT */
/*
 * What one write of a memory cgroup control file costs three ways (docs/DESIGN-NOTES.md, "Policy
 * 2"): pwrite on a descriptor opened once (what tierallocd --protect does on its hot path),
 * open + write + close per value, and libcgroup's cgroup_set_value_uint64 + cgroup_modify_cgroup
 * (which opens, writes and closes the file each time, after its own bookkeeping).
 *   cc -O2 bench/cgroup-write-cost.c -lcgroup -o cgroup-write-cost
 *   cgroup-write-cost MOUNT NAME FILE N     e.g. /sys/fs/cgroup/memory ta-bench
 *                                           memory.soft_limit_in_bytes 20000 (v1), or
 *                                           /sys/fs/cgroup ta-bench memory.low 20000 (v2)
 * Makes MOUNT/NAME, writes values of 1 to 64 MiB N times each way, prints the microseconds per
 * write, removes the cgroup. Root; libcgroup-dev (Debian 12: 2.0).
 */
#include <fcntl.h>
#include <libcgroup.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: cgroup-write-cost MOUNT NAME FILE N\n");
		return 2;
	}
	int n = atoi(argv[4]);
	char dir[512], path[600], buf[32];
	snprintf(dir, sizeof(dir), "%s/%s", argv[1], argv[2]);
	snprintf(path, sizeof(path), "%s/%s", dir, argv[3]);
	if (mkdir(dir, 0755) != 0) {
		perror(dir);
		return 1;
	}
	int rc = 1, fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		goto out;
	}
	double t0 = now();
	for (int i = 0; i < n; i++) {
		int l = snprintf(buf, sizeof(buf), "%d", (i % 64 + 1) << 20);
		if (pwrite(fd, buf, (size_t)l, 0) != l)
			goto out;
	}
	double t1 = now();
	for (int i = 0; i < n; i++) {
		int l = snprintf(buf, sizeof(buf), "%d", (i % 64 + 1) << 20);
		int f = open(path, O_WRONLY);
		if (f < 0 || write(f, buf, (size_t)l) != l)
			goto out;
		close(f);
	}
	double t2 = now();
	if (cgroup_init() != 0)
		goto out;
	struct cgroup *cg = cgroup_new_cgroup(argv[2]);
	struct cgroup_controller *c = cg != NULL ? cgroup_add_controller(cg, "memory") : NULL;
	if (c == NULL)
		goto out;
	double t3 = now();
	for (int i = 0; i < n; i++) {
		cgroup_set_value_uint64(c, argv[3], (uint64_t)(i % 64 + 1) << 20);
		int e = cgroup_modify_cgroup(cg);
		if (e != 0) {
			fprintf(stderr, "cgroup_modify_cgroup: %s\n", cgroup_strerror(e));
			goto out;
		}
	}
	double t4 = now();
	cgroup_free(&cg);
	printf("%d writes: pwrite %.2f us, open+write+close %.2f us, libcgroup %.2f us per write\n",
	       n, (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t4 - t3) / n * 1e6);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	rmdir(dir);
	return rc;
}
