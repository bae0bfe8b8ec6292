/* SPDX-License-Identifier: MIT */
/*
 * What the agent and tieralloc-stat share (common/, issue 31): cgroup paths in canonical form,
 * the cgroup v2 line of /proc/PID/cgroup and the cgroup2 mount from mountinfo (tables of what an
 * owner or a kernel could write), and the careful walk into a directory tree of links, files
 * and other file systems: a temporary tree on tmpfs, /proc, and this process's own root.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgpath.h"
#include "test.h"
#include "walk.h"

static void test_canon(void)
{
	static const struct {
		const char *in, *out; /* out NULL: refused */
	} cases[] = {
		{ "/sys/fs/cgroup/batch", "/sys/fs/cgroup/batch" },
		{ "/sys/fs/cgroup/batch/", "/sys/fs/cgroup/batch" },
		{ "/sys/fs/cgroup//batch", "/sys/fs/cgroup/batch" },
		{ "//sys///fs/cgroup/par//att//", "/sys/fs/cgroup/par/att" },
		{ "/sys/fs/cgroup/./par/./att/.", "/sys/fs/cgroup/par/att" },
		{ "/", "/" },
		{ "//", "/" },
		{ "/.", "/" },
		{ "/sys/fs/cgroup/..", NULL },
		{ "/sys/fs/cgroup/par/../vic", NULL },
		{ "/sys/fs/cgroup/..hidden", "/sys/fs/cgroup/..hidden" },
		{ "/sys/fs/cgroup/a.b/.c", "/sys/fs/cgroup/a.b/.c" },
		{ "sys/fs/cgroup/batch", NULL },
		{ "", NULL },
		{ "/sys/fs/cgroup/new\nline", NULL },
		{ "/sys/fs/cgroup/esc\x1b[2J", NULL },
		{ "/sys/fs/cgroup/with space", "/sys/fs/cgroup/with space" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[64];
		test_context("canon \"%s\"", cases[i].in);
		int rc = ta_cgpath_canon(cases[i].in, out, sizeof(out));
		if (cases[i].out == NULL) {
			expect_eq(rc, -1);
		} else {
			expect_eq(rc, 0);
			expect_str_eq(out, cases[i].out);
		}
	}
	test_context("canon: too long for the buffer");
	char small[8];
	expect_eq(ta_cgpath_canon("/sys/fs/cgroup", small, sizeof(small)), -1);
	expect_eq(ta_cgpath_canon("/a//b/", small, sizeof(small)), 0);
	expect_str_eq(small, "/a/b");
	test_context("same: spellings of one path, and not of another");
	expect_true(ta_cgpath_same("/sys/fs/cgroup/batch/", "/sys/fs/cgroup/batch"));
	expect_true(ta_cgpath_same("/sys/fs/cgroup/par//att", "/sys/fs/cgroup/par/./att/"));
	expect_true(!ta_cgpath_same("/sys/fs/cgroup/par/att", "/sys/fs/cgroup/par/vic"));
	expect_true(!ta_cgpath_same("/sys/fs/cgroup/par/../vic", "/sys/fs/cgroup/vic"));
	expect_true(!ta_cgpath_same("/sys/fs/cgroup/batchx", "/sys/fs/cgroup/batch"));
	test_context("ends_with: component by component");
	expect_true(ta_cgpath_ends_with("/x/a/b", "/a/b"));
	expect_true(ta_cgpath_ends_with("/a/b", "/a/b"));
	expect_true(ta_cgpath_ends_with("/a/b", "/"));
	expect_true(!ta_cgpath_ends_with("/ab", "/b"));
	expect_true(!ta_cgpath_ends_with("/b", "/a/b"));
	test_context("join: the mount and the kernel's path");
	char j[64];
	expect_eq(ta_cgpath_join("/sys/fs/cgroup", "/par/att", j, sizeof(j)), 0);
	expect_str_eq(j, "/sys/fs/cgroup/par/att");
	expect_eq(ta_cgpath_join("/sys/fs/cgroup", "/", j, sizeof(j)), 0);
	expect_str_eq(j, "/sys/fs/cgroup");
	expect_eq(ta_cgpath_join("/", "/a", j, sizeof(j)), 0);
	expect_str_eq(j, "/a");
	expect_eq(ta_cgpath_join("/", "/", j, sizeof(j)), 0);
	expect_str_eq(j, "/");
	expect_eq(ta_cgpath_join("/sys/fs/cgroup", "/par/att", j, 10), -1);
	test_context("%s", "");
}

static void test_proc_cgroup(void)
{
	static const struct {
		const char *text, *out; /* out NULL: no cgroup v2 path */
	} cases[] = {
		{ "0::/par/att\n", "/par/att" },
		{ "0::/\n", "/" },
		{ "12:memory:/docker/abc\n1:name=systemd:/x\n0::/system.slice/a.service\n",
		  "/system.slice/a.service" },
		{ "0::/par/att", "/par/att" },	     /* no final newline */
		{ "12:memory:/docker/abc\n", NULL }, /* cgroup v1 only */
		{ "1::/not/v2\n", NULL },
		{ "0::par/att\n", NULL },
		{ "0::/par//att\n", NULL }, /* not as the kernel writes it */
		{ "0::/par/../vic\n", NULL },
		{ "0::\n", NULL },
		{ "", NULL },
		{ "x0::/a\n0::/b\n", "/b" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[64];
		test_context("proc cgroup case %zu", i);
		int rc = ta_cgpath_proc_v2(cases[i].text, out, sizeof(out));
		if (cases[i].out == NULL) {
			expect_eq(rc, -1);
		} else {
			expect_eq(rc, 0);
			expect_str_eq(out, cases[i].out);
		}
	}
	static const struct {
		const char *text, *out;
	} mounts[] = {
		{ "22 1 0:21 / /proc rw - proc proc rw\n"
		  "30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n",
		  "/sys/fs/cgroup" },
		/* Debian's hybrid layout: v1 controllers and v2 at unified. */
		{ "31 25 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 "
		  "rw,nsdelegate\n"
		  "32 25 0:28 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n",
		  "/sys/fs/cgroup/unified" },
		/* A bind of a sub-hierarchy first (a container's), then the whole one. */
		{ "40 1 0:26 /kubepods /mnt/cg rw - cgroup2 cgroup2 rw\n"
		  "41 1 0:26 / /mnt/all\\040cg rw - cgroup2 cgroup2 rw\n",
		  "/mnt/all cg" },
		{ "32 25 0:28 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n",
		  NULL },
		{ "", NULL },
	};
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		char out[64];
		test_context("mountinfo case %zu", i);
		int rc = ta_cgpath_mount_v2(mounts[i].text, out, sizeof(out));
		if (mounts[i].out == NULL) {
			expect_eq(rc, -1);
		} else {
			expect_eq(rc, 0);
			expect_str_eq(out, mounts[i].out);
		}
	}
	test_context("%s", "");
}

static char tree[64];

static void mk(const char *rel, bool dir)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	if (dir ? mkdir(path, 0755) != 0 : close(open(path, O_CREAT | O_WRONLY, 0600)) != 0)
		test_hard("cannot make %s", path);
}

static void ln(const char *target, const char *rel)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	if (symlink(target, path) != 0)
		test_hard("cannot link %s", path);
}

/* ta_walk_dir from the tree: the errno, 0 when it opened (the descriptor closed). */
static int walk(const char *rel, long magic)
{
	int root = open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
	errno = 0;
	int fd = ta_walk_dir(root, 0, rel, magic);
	int err = fd >= 0 ? 0 : errno;
	if (fd >= 0)
		close(fd);
	close(root);
	return err;
}

static void test_walk(void)
{
	snprintf(tree, sizeof(tree), "/dev/shm/ta-unit-walk-XXXXXX");
	if (mkdtemp(tree) == NULL)
		test_skip("no tmpfs at /dev/shm");
	/* dev/shm is a directory; a container's dev2/shm a link to an absolute path (our own
	 * /dev/shm: it would be read there, not in their root); dev3 a link; file a file. */
	mk("dev", true);
	mk("dev/shm", true);
	mk("dev2", true);
	ln("/dev/shm", "dev2/shm");
	ln("dev", "dev3");
	mk("file", false);
	ln("/proc", "proc");
	test_context("walk: a directory on tmpfs");
	expect_eq(walk("dev/shm", TMPFS_MAGIC), 0);
	expect_eq(walk("dev//shm/", TMPFS_MAGIC), 0);
	expect_eq(walk("./dev/./shm", TMPFS_MAGIC), 0);
	expect_eq(walk("dev/shm", 0), 0);
	test_context("walk: a link, at the end or on the way, is refused");
	expect_eq(walk("dev2/shm", TMPFS_MAGIC), ELOOP);
	expect_eq(walk("dev3/shm", TMPFS_MAGIC), ELOOP);
	expect_eq(walk("proc", PROC_SUPER_MAGIC), ELOOP);
	test_context("walk: no .., no file, nothing missing");
	expect_eq(walk("dev/../dev/shm", TMPFS_MAGIC), EINVAL);
	expect_eq(walk("file", 0), ENOTDIR);
	expect_eq(walk("file/x", 0), ENOTDIR);
	expect_eq(walk("nothing", 0), ENOENT);
	test_context("walk: the wrong file system");
	expect_eq(walk("dev/shm", PROC_SUPER_MAGIC), EXDEV);
	test_context("walk: our own /proc and /dev/shm, from our root and through /proc/PID/root");
	int fd = ta_walk_own("/proc", PROC_SUPER_MAGIC);
	expect_ge_i(fd, 0);
	errno = 0;
	expect_eq(ta_walk_own("/proc", TMPFS_MAGIC), -1);
	expect_eq(errno, EXDEV);
	int shm = ta_walk_root((int)getpid(), "dev/shm", TMPFS_MAGIC);
	expect_ge_i(shm, 0);
	if (shm >= 0)
		close(shm);
	test_context("walk: files beneath /proc, without links");
	char rel[64];
	snprintf(rel, sizeof(rel), "%d/stat", (int)getpid());
	int f = fd >= 0 ? ta_walk_file(fd, rel, O_RDONLY) : -1;
	expect_ge_i(f, 0);
	if (f >= 0)
		close(f);
	errno = 0;
	expect_eq(fd >= 0 ? ta_walk_file(fd, "self/stat", O_RDONLY) : 0, -1);
	expect_eq(errno, ELOOP);
	if (fd >= 0)
		close(fd);
	test_context("walk: the mount table's type, and what is served");
	char type[64] = "";
	int pfd = open("/proc", O_PATH | O_CLOEXEC);
	if (ta_walk_mount_type(pfd, 0, type, sizeof(type)) == 0)
		expect_str_eq(type, "proc");
	else
		printf("# no mount id from statx (a kernel before 5.8): the walk asks statfs\n");
	close(pfd);
	expect_true(ta_walk_served_name("fuse"));
	expect_true(ta_walk_served_name("fuse.sshfs"));
	expect_true(ta_walk_served_name("fuseblk"));
	expect_true(ta_walk_served_name("nfs4"));
	expect_true(!ta_walk_served_name("tmpfs"));
	expect_true(!ta_walk_served_name("overlay"));
	expect_true(ta_walk_served(0x65735546)); /* FUSE_SUPER_MAGIC */
	expect_true(!ta_walk_served(TMPFS_MAGIC));
	char cmd[100];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tree);
	if (system(cmd) != 0)
		test_hard("cannot remove %s", tree);
	test_context("%s", "");
}

int main(void)
{
	test_canon();
	test_proc_cgroup();
	test_walk();
	return test_done();
}
