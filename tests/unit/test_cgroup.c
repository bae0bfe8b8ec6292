/* SPDX-License-Identifier: MIT */
/*
 * The memory cgroup (src/quota/cgroup.c) against fixture trees built in a temp dir, one per case:
 * proc/self/{cgroup,mountinfo} and the sys/fs/cgroup/... files, written next to the assertions.
 * Cases: cgroup v2, v1, hybrid (v1 memory wins), none, container mounts whose root is the cgroup,
 * escaped paths, garbage and truncated files, over-long paths; limits ("max", numbers, missing
 * files, ancestors, v1's "unlimited"); memory.numa_stat; memory.reclaim; the split of a limit.
 * The real system is only looked at (printed), never asserted on: its cgroups vary.
 */
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include "quota/cgroup.h"
#include "internal.h"
#include "test.h"

#define UNL TA_SHM_UNLIMITED

static char root[512]; /* the fixture tree of the current case */

/* ---- fixture trees ---- */

static void fixture_new(const char *what)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(root, sizeof(root), "%s/ta-cgroup-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
	if (mkdtemp(root) == NULL)
		test_hard("mkdtemp %s", root);
	test_context("%s", what);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void fixture_done(void)
{
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	test_context("%s", "");
}

/* mkdir -p root/rel; rel may end with a slash. */
static void mkdirs(const char *rel)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s/", root, rel);
	for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			test_hard("mkdir %s", path);
		*s = '/';
	}
}

/* Write len bytes to root/rel, creating its directories. */
static void put_bytes(const char *rel, const void *data, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", rel);
	char *slash = strrchr(dir, '/');
	if (slash != NULL) {
		*slash = '\0';
		mkdirs(dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		test_hard("fopen %s", path);
	if (len > 0 && fwrite(data, 1, len, f) != len)
		test_hard("fwrite %s", path);
	fclose(f);
}

static __attribute__((format(printf, 2, 3))) void put(const char *rel, const char *fmt, ...)
{
	char text[16384];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(text))
		test_hard("fixture text too long for %s", rel);
	put_bytes(rel, text, (size_t)n);
}

static char *slurp(const char *rel, char *buf, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "r");
	buf[0] = '\0';
	if (f == NULL)
		return buf;
	size_t n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static uint64_t inode_of(const char *abs)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s%s", root, abs);
	if (stat(path, &st) != 0)
		test_hard("stat %s", path);
	return (uint64_t)st.st_ino;
}

/* mountinfo lines as a typical host writes them. */
#define MI_HEAD                                                                                    \
	"21 26 0:20 / /proc rw,relatime shared:12 - proc proc rw\n"                                \
	"22 26 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n"            \
	"26 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n"
#define MI_V2                                                                                      \
	"40 22 0:37 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "  \
	"rw,nsdelegate\n"
#define MI_V2_HYBRID "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
#define MI_V1_MEMORY                                                                               \
	"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:16 - cgroup cgroup rw,memory\n"
#define MI_V1_OTHERS                                                                               \
	"31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"     \
	"39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"

static void self_expect_none(int rc_want, const struct ta_cgroup *cg, int rc)
{
	expect_eq(rc, rc_want);
	expect_eq(cg->version, 0);
	expect_str_eq(cg->path, "");
	expect_eq(cg->id, 0);
	expect_eq(cg->mount_len, 0);
	expect_str_eq(cg->key, "machine");
}

static void expect_v1_key(const struct ta_cgroup *cg)
{
	char key[64];
	snprintf(key, sizeof(key), "v1-%016" PRIx64, ta_cgroup_hash(cg->path));
	expect_str_eq(cg->key, key);
}

/* ---- finding the cgroup ---- */

static void test_v2(void)
{
	struct ta_cgroup cg;
	fixture_new("v2 only");
	put("proc/self/cgroup", "0::/user.slice/app.service\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	mkdirs("sys/fs/cgroup/user.slice/app.service");
	int rc = ta_cgroup_self(root, &cg);
	expect_eq(rc, 0);
	expect_eq(cg.version, 2);
	expect_str_eq(cg.path, "/sys/fs/cgroup/user.slice/app.service");
	expect_eq(cg.mount_len, strlen("/sys/fs/cgroup"));
	uint64_t ino = inode_of("/sys/fs/cgroup/user.slice/app.service");
	expect_eq(cg.id, ino);
	char key[64];
	snprintf(key, sizeof(key), "cg%" PRIu64, ino);
	expect_str_eq(cg.key, key);
	fixture_done();

	/* The root cgroup (a process in "0::/"). */
	fixture_new("v2 root cgroup");
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 2);
	expect_str_eq(cg.path, "/sys/fs/cgroup");
	expect_eq(cg.id, inode_of("/sys/fs/cgroup"));
	fixture_done();

	/* v2 mounted, but the memory controller is not offered: none. */
	fixture_new("v2 without memory");
	put("proc/self/cgroup", "0::/a\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io pids memoryx\n");
	mkdirs("sys/fs/cgroup/a");
	self_expect_none(0, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* ...and no cgroup.controllers at all (a kernel too old for it). */
	fixture_new("v2 without cgroup.controllers");
	put("proc/self/cgroup", "0::/a\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	mkdirs("sys/fs/cgroup/a");
	self_expect_none(0, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* The directory is gone (" (deleted)" or removed since): -ENOENT, none. */
	fixture_new("v2 directory missing");
	put("proc/self/cgroup", "0::/gone (deleted)\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	self_expect_none(-ENOENT, &cg, ta_cgroup_self(root, &cg));
	fixture_done();
}

static void test_v1(void)
{
	struct ta_cgroup cg;
	fixture_new("v1 only");
	put("proc/self/cgroup", "12:pids:/x\n4:memory:/process_api/abc\n1:name=systemd:/\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_OTHERS MI_V1_MEMORY);
	mkdirs("sys/fs/cgroup/memory/process_api/abc");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/process_api/abc");
	expect_eq(cg.mount_len, strlen("/sys/fs/cgroup/memory"));
	expect_eq(cg.id, 0);
	expect_v1_key(&cg);
	expect_eq(strlen(cg.key), 19);
	fixture_done();

	/* Memory co-mounted with cpu; "name=memory" is a named hierarchy, not the controller. */
	fixture_new("v1 co-mounted");
	put("proc/self/cgroup", "5:name=memory:/wrong\n3:cpu,memory:/right\n");
	put("proc/self/mountinfo",
	    MI_HEAD "50 30 0:40 / /cg/named rw - cgroup cgroup rw,name=memory\n"
		    "51 30 0:41 / /cg/cpu,memory rw,relatime - cgroup cgroup rw,cpu,memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/cg/cpu,memory/right");
	fixture_done();

	/* The path of the root cgroup is the mount point itself, without a trailing slash; a
	 * last line without its newline still counts. */
	fixture_new("v1 root cgroup");
	put("proc/self/cgroup", "4:memory:/");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory");
	expect_v1_key(&cg);
	fixture_done();

	/* A memory line but no memory hierarchy mounted, and no v2: none. */
	fixture_new("v1 line, not mounted");
	put("proc/self/cgroup", "4:memory:/a\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_OTHERS);
	self_expect_none(0, &cg, ta_cgroup_self(root, &cg));
	fixture_done();
}

static void test_hybrid(void)
{
	struct ta_cgroup cg;
	/* This development host: v2 at .../unified without memory, v1 memory next to it. */
	fixture_new("hybrid");
	put("proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/1d13\n0::/\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_OTHERS MI_V1_MEMORY MI_V2_HYBRID);
	put("sys/fs/cgroup/unified/cgroup.controllers", "\n");
	mkdirs("sys/fs/cgroup/memory/process_api/1d13");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/process_api/1d13");
	expect_v1_key(&cg);
	fixture_done();

	/* v1 memory wins even when listed after a cgroup2 mount that claims memory. */
	fixture_new("hybrid, v2 first");
	put("proc/self/cgroup", "0::/u\n4:memory:/m\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2_HYBRID MI_V1_MEMORY);
	put("sys/fs/cgroup/unified/cgroup.controllers", "memory\n");
	mkdirs("sys/fs/cgroup/unified/u");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/m");
	fixture_done();
}

static void test_none(void)
{
	struct ta_cgroup cg;
	fixture_new("no cgroup mounts");
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo", MI_HEAD);
	self_expect_none(0, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	fixture_new("no /proc/self/cgroup");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	self_expect_none(-ENOENT, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	fixture_new("no /proc/self/mountinfo");
	put("proc/self/cgroup", "0::/\n");
	self_expect_none(-ENOENT, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* A root that does not exist at all; a NULL root is the real system. */
	struct ta_cgroup real;
	self_expect_none(-ENOENT, &cg, ta_cgroup_self("/nonexistent/ta-cgroup-test", &cg));
	int rc = ta_cgroup_self(NULL, &real);
	expect_true(rc <= 0);
	expect_true(real.key[0] != '\0');
}

static void test_container_root(void)
{
	struct ta_cgroup cg;
	/* Docker on v1 without a cgroup namespace: the mount shows only the container's cgroup. */
	fixture_new("container mount root = cgroup");
	put("proc/self/cgroup", "4:memory:/docker/0123abcd\n");
	put("proc/self/mountinfo",
	    MI_HEAD "34 30 0:31 /docker/0123abcd /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup "
		    "rw,memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory");
	expect_eq(cg.mount_len, strlen("/sys/fs/cgroup/memory"));
	fixture_done();

	/* A sub-cgroup of the container's. */
	fixture_new("container mount root, sub-cgroup");
	put("proc/self/cgroup", "4:memory:/docker/0123abcd/job/7\n");
	put("proc/self/mountinfo", MI_HEAD
	    "34 30 0:31 /docker/0123abcd /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/job/7");
	fixture_done();

	/* A root that is not a prefix of our path, or only a string prefix ("/docker/0123" of
	 * "/docker/0123abcd"): no mount reaches the cgroup. */
	fixture_new("container mount root elsewhere");
	put("proc/self/cgroup", "4:memory:/docker/0123abcd\n");
	put("proc/self/mountinfo",
	    MI_HEAD "34 30 0:31 /docker/0123 /sys/fs/cgroup/memory ro - cgroup "
		    "cgroup rw,memory\n"
		    "35 30 0:31 /other /mnt/m ro - cgroup cgroup rw,memory\n");
	self_expect_none(-ENOENT, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* The first mount of the hierarchy cannot reach us, a second (bind) mount can. */
	fixture_new("second mount reaches");
	put("proc/self/cgroup", "4:memory:/a/b\n");
	put("proc/self/mountinfo", MI_HEAD "34 30 0:31 /x /mnt/x rw - cgroup cgroup rw,memory\n"
					   "35 30 0:31 /a /mnt/a rw - cgroup cgroup rw,memory\n"
					   "36 30 0:31 / /mnt/all rw - cgroup cgroup rw,memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_str_eq(cg.path, "/mnt/a/b");
	expect_eq(cg.mount_len, strlen("/mnt/a"));
	fixture_done();

	/* v2 with a cgroup namespace: the mount root is "/" and so is our path. */
	fixture_new("v2 cgroup namespace");
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 2);
	expect_str_eq(cg.path, "/sys/fs/cgroup");
	fixture_done();

	/* A process outside its namespace's root: "/../sibling" is reachable by no mount. */
	fixture_new("v2 path with ..");
	put("proc/self/cgroup", "0::/../sibling\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	mkdirs("sys/fs/cgroup/sibling");
	mkdirs("sys/fs/sibling"); /* where "/sys/fs/cgroup/../sibling" would lead */
	self_expect_none(-ENOENT, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* v2 mount of a sub-tree (systemd-nspawn style): root prefix stripped; the
	 * controllers are those of the mount point's directory. */
	fixture_new("v2 mount root prefix");
	put("proc/self/cgroup", "0::/machine.slice/vm/payload\n");
	put("proc/self/mountinfo",
	    MI_HEAD "40 22 0:37 /machine.slice/vm /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/cgroup.controllers", "memory pids\n");
	mkdirs("sys/fs/cgroup/payload");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 2);
	expect_str_eq(cg.path, "/sys/fs/cgroup/payload");
	expect_eq(cg.id, inode_of("/sys/fs/cgroup/payload"));
	fixture_done();
}

static void test_escapes(void)
{
	struct ta_cgroup cg;
	/* mountinfo escapes spaces (\040), tabs, newlines and backslashes; /proc/self/cgroup
	 * does not escape anything. */
	fixture_new("paths with spaces");
	put("proc/self/cgroup", "4:memory:/a b/c\\d\n");
	put("proc/self/mountinfo",
	    MI_HEAD "34 30 0:31 / /sys/fs/cgroup/my\\040mem\\134x rw - cgroup cgroup rw,memory\n");
	mkdirs("sys/fs/cgroup/my mem\\x/a b");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/my mem\\x/a b/c\\d");
	fixture_done();

	fixture_new("v2 mount point with a space");
	put("proc/self/cgroup", "0::/job 1\n");
	put("proc/self/mountinfo",
	    MI_HEAD "40 22 0:37 / /sys/fs/cgroup\\040two rw shared:4 master:1 - cgroup2 none rw\n");
	put("sys/fs/cgroup two/cgroup.controllers", "memory\n");
	mkdirs("sys/fs/cgroup two/job 1");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 2);
	expect_str_eq(cg.path, "/sys/fs/cgroup two/job 1");
	expect_eq(cg.id, inode_of("/sys/fs/cgroup two/job 1"));
	fixture_done();

	/* An escaped mount root is decoded before it is compared with our path. */
	fixture_new("escaped mount root");
	put("proc/self/cgroup", "4:memory:/my pod/x\n");
	put("proc/self/mountinfo",
	    MI_HEAD "34 30 0:31 /my\\040pod /m rw - cgroup cgroup rw,memory\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_str_eq(cg.path, "/m/x");
	fixture_done();
}

static void test_garbage(void)
{
	struct ta_cgroup cg;
	static const struct {
		const char *text;
		size_t len; /* 0: strlen */
		const char *what;
	} bad[] = {
		{ "", 0, "empty" },
		{ "garbage\n", 0, "one word" },
		{ "4:memory", 0, "truncated after the controllers" },
		{ "4:memory:", 0, "truncated before the path" },
		{ "4:memory:relative\n", 0, "relative path" },
		{ "x:memory:/a\n", 0, "hierarchy id not a number" },
		{ ":memory:/a\n", 0, "no hierarchy id" },
		{ "\n\n\n", 0, "empty lines" },
		{ "\x01\x02\xff\0\0:\n:::", 10, "binary" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fixture_new(bad[i].what);
		put_bytes("proc/self/cgroup", bad[i].text,
			  bad[i].len ? bad[i].len : strlen(bad[i].text));
		put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY MI_V2);
		put("sys/fs/cgroup/cgroup.controllers", "memory\n");
		self_expect_none(-EINVAL, &cg, ta_cgroup_self(root, &cg));
		fixture_done();
	}

	/* Good lines among garbage still count. */
	fixture_new("garbage around a good line");
	put("proc/self/cgroup", "junk\n\n::\n4:memory:/ok\nmore junk");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/ok");
	fixture_done();

	/* Garbage and overlong lines in mountinfo: a 5000-byte overlay line, lines with too few
	 * fields, a "-" too close to the end; the cgroup line after them is still found. */
	char big[6000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	static const char overlay[] =
	    "99 1 0:50 / /var/lib/docker/overlay rw - overlay overlay rw,lowerdir=";
	memcpy(big, overlay, strlen(overlay));
	fixture_new("mountinfo garbage");
	put("proc/self/cgroup", "4:memory:/a\n");
	put("proc/self/mountinfo",
	    "%s\n"
	    "1 2\n"
	    "1 2 3 4 5 6 - cgroup\n"
	    "1 2 3 4 5 6 - cgroup cgroup\n"
	    "\n"
	    "-\n"
	    "34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
	    big);
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(cg.version, 1);
	expect_str_eq(cg.path, "/sys/fs/cgroup/memory/a");
	fixture_done();

	/* A cgroup line longer than the reader's buffer: too long, not cut short and used. */
	char longpath[3000];
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	fixture_new("line longer than the buffer");
	put("proc/self/cgroup", "4:memory:%s\n", longpath);
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	self_expect_none(-ENAMETOOLONG, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* A path that fits the line but not TA_SHM_PATH_MAX once under the mount point... */
	longpath[250] = '\0'; /* + "/sys/fs/cgroup" = 264 */
	fixture_new("path too long for the segment");
	put("proc/self/cgroup", "0::%s\n", longpath);
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	self_expect_none(-ENAMETOOLONG, &cg, ta_cgroup_self(root, &cg));
	fixture_done();

	/* ...unless the mount's root takes most of it away. */
	fixture_new("long path, mount root strips it");
	put("proc/self/cgroup", "4:memory:%s/job\n", longpath);
	put("proc/self/mountinfo", MI_HEAD "34 30 0:31 %s /m rw - cgroup cgroup rw,memory\n",
	    longpath);
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_str_eq(cg.path, "/m/job");
	fixture_done();

	/* Exactly the longest path that fits: 255 bytes. */
	char fit[TA_SHM_PATH_MAX];
	size_t mp_len = strlen("/sys/fs/cgroup/memory");
	memset(fit, 'q', sizeof(fit));
	fit[0] = '/';
	fit[TA_SHM_PATH_MAX - 1 - mp_len] = '\0';
	fixture_new("path of 255 bytes");
	put("proc/self/cgroup", "4:memory:%s\n", fit);
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(strlen(cg.path), TA_SHM_PATH_MAX - 1);
	fixture_done();
	fit[TA_SHM_PATH_MAX - 1 - mp_len] = 'q';
	fit[TA_SHM_PATH_MAX - mp_len] = '\0';
	fixture_new("path of 256 bytes");
	put("proc/self/cgroup", "4:memory:%s\n", fit);
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	self_expect_none(-ENAMETOOLONG, &cg, ta_cgroup_self(root, &cg));
	fixture_done();
}

/* Random bytes mixed into valid files: any result, but never a crash (ASan run) and *out valid. */
static void test_fuzz(void)
{
	static const char cg_ok[] = "12:pids:/x\n4:memory:/a b/c\n0::/u\n";
	static const char mi_ok[] = MI_HEAD MI_V1_MEMORY MI_V2_HYBRID
	    "34 30 0:31 /a\\040b /m\\040n rw - cgroup cgroup rw,memory\n";
	static const char alphabet[] = "0123456789:/- \n\\,memorycgroup2N=";
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	fixture_new("fuzz");
	for (int iter = 0; iter < 300; iter++) {
		char cgt[sizeof(cg_ok)], mit[sizeof(mi_ok)];
		memcpy(cgt, cg_ok, sizeof(cg_ok));
		memcpy(mit, mi_ok, sizeof(mi_ok));
		for (int k = 0; k < 1 + iter % 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t r = seed >> 16;
			char c = (r >> 20) % 4 == 0 ? (char)(r >> 24)
						    : alphabet[(r >> 24) % (sizeof(alphabet) - 1)];
			if (r & 1)
				cgt[r % (sizeof(cgt) - 1)] = c;
			else
				mit[r % (sizeof(mit) - 1)] = c;
		}
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		size_t cut_cg = (seed >> 33) % sizeof(cgt), cut_mi = (seed >> 13) % sizeof(mit);
		put_bytes("proc/self/cgroup", cgt, iter % 3 == 0 ? cut_cg : sizeof(cgt) - 1);
		put_bytes("proc/self/mountinfo", mit, iter % 5 == 0 ? cut_mi : sizeof(mit) - 1);
		struct ta_cgroup cg;
		int rc = ta_cgroup_self(root, &cg);
		test_context("fuzz iteration %d", iter);
		expect_true(rc <= 0);
		expect_true(strnlen(cg.path, sizeof(cg.path)) < sizeof(cg.path));
		expect_true(strnlen(cg.key, sizeof(cg.key)) < sizeof(cg.key));
		expect_true(cg.version >= 0 && cg.version <= 2);
		expect_true(cg.version != 0 || strcmp(cg.key, "machine") == 0);
		uint64_t lim[TA_NLIMITS], per_node[TA_CGROUP_NODES];
		expect_true(ta_cgroup_read_limits(root, &cg, lim) <= 0);
		expect_true(ta_cgroup_numa_stat(root, &cg, per_node) <= 0);
	}
	fixture_done();
}

/* ---- limits ---- */

static void v2_tree(void)
{
	put("proc/self/cgroup", "0::/a/b\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	mkdirs("sys/fs/cgroup/a/b");
}

static void limits_of(struct ta_cgroup *cg, uint64_t lim[TA_NLIMITS], int rc_want)
{
	expect_eq(ta_cgroup_self(root, cg), 0);
	memset(lim, 0xa5, TA_NLIMITS * sizeof(lim[0]));
	expect_eq(ta_cgroup_read_limits(root, cg, lim), rc_want);
}

static void test_limits_v2(void)
{
	struct ta_cgroup cg;
	uint64_t lim[TA_NLIMITS];

	fixture_new("v2 limits: numbers and max");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.min", "1048576\n");
	put("sys/fs/cgroup/a/b/memory.low", "max\n");
	put("sys/fs/cgroup/a/b/memory.high", "536870912\n");
	put("sys/fs/cgroup/a/b/memory.max", "max\n");
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_MIN], 1048576);
	expect_eq(lim[TA_LIMIT_LOW], UNL);
	expect_eq(lim[TA_LIMIT_HIGH], 536870912);
	expect_eq(lim[TA_LIMIT_MAX], UNL);
	fixture_done();

	/* Nothing at all (the root cgroup has none of these files). */
	fixture_new("v2 limits: missing files");
	v2_tree();
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_MIN], 0);
	expect_eq(lim[TA_LIMIT_LOW], 0);
	expect_eq(lim[TA_LIMIT_HIGH], UNL);
	expect_eq(lim[TA_LIMIT_MAX], UNL);
	fixture_done();

	/* Ancestors cap max and high; min and low are the cgroup's own. The mount root's files
	 * count, anything above the mount point does not. */
	fixture_new("v2 limits: ancestors");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.max", "8000000000\n");
	put("sys/fs/cgroup/a/b/memory.high", "max\n");
	put("sys/fs/cgroup/a/b/memory.min", "4096\n");
	put("sys/fs/cgroup/a/memory.max", "1073741824\n");
	put("sys/fs/cgroup/a/memory.high", "900000000\n");
	put("sys/fs/cgroup/a/memory.min", "1\n");
	put("sys/fs/cgroup/a/memory.low", "2\n");
	put("sys/fs/cgroup/memory.high", "800000000\n");
	put("sys/fs/memory.max", "4096\n"); /* above the mount point: never read */
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_MIN], 4096);
	expect_eq(lim[TA_LIMIT_LOW], 0);
	expect_eq(lim[TA_LIMIT_HIGH], 800000000);
	expect_eq(lim[TA_LIMIT_MAX], 1073741824);
	fixture_done();

	/* A garbage or empty file counts as absent and is reported; the rest is still read. */
	fixture_new("v2 limits: garbage");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.max", "12abc\n");
	put("sys/fs/cgroup/a/b/memory.high", "\n");
	put("sys/fs/cgroup/a/b/memory.low", "maximum\n");
	put("sys/fs/cgroup/a/b/memory.min", "99999999999999999999999\n"); /* saturates */
	put("sys/fs/cgroup/a/memory.max", "2097152");			  /* no newline */
	limits_of(&cg, lim, -EINVAL);
	expect_eq(lim[TA_LIMIT_MIN], UNL);
	expect_eq(lim[TA_LIMIT_LOW], 0);
	expect_eq(lim[TA_LIMIT_HIGH], UNL);
	expect_eq(lim[TA_LIMIT_MAX], 2097152);
	fixture_done();

	/* A limit file that cannot be read as a file (a directory): reported, as garbage
	 * (ta_read_file returns what it read before the error, nothing here). */
	fixture_new("v2 limits: unreadable");
	v2_tree();
	mkdirs("sys/fs/cgroup/a/b/memory.max");
	put("sys/fs/cgroup/a/memory.max", "4096\n");
	limits_of(&cg, lim, -EINVAL);
	expect_eq(lim[TA_LIMIT_MAX], 4096);
	fixture_done();

	/* Container: the mount root is the cgroup, nothing above it is visible. */
	fixture_new("v2 limits: container root");
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo", MI_HEAD MI_V2);
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	put("sys/fs/cgroup/memory.max", "268435456\n");
	put("sys/fs/memory.max", "4096\n");
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_MAX], 268435456);
	expect_eq(lim[TA_LIMIT_HIGH], UNL);
	fixture_done();
}

static void test_limits_v1(void)
{
	struct ta_cgroup cg;
	uint64_t lim[TA_NLIMITS];
	fixture_new("v1 limits");
	put("proc/self/cgroup", "4:memory:/p/c\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	/* What v1 shows for "no limit": PAGE_COUNTER_MAX pages, in bytes. */
	put("sys/fs/cgroup/memory/p/c/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/p/c/memory.soft_limit_in_bytes", "104857600\n");
	put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "536870912\n");
	put("sys/fs/cgroup/memory/p/memory.soft_limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/memory.soft_limit_in_bytes", "9223372036854771712\n");
	/* v2 names in a v1 directory mean nothing. */
	put("sys/fs/cgroup/memory/p/c/memory.min", "1\n");
	put("sys/fs/cgroup/memory/p/c/memory.max", "1\n");
	limits_of(&cg, lim, 0);
	expect_eq(cg.version, 1);
	expect_eq(lim[TA_LIMIT_MIN], 0);
	expect_eq(lim[TA_LIMIT_LOW], 0);
	expect_eq(lim[TA_LIMIT_HIGH], 104857600);
	expect_eq(lim[TA_LIMIT_MAX], 536870912);
	fixture_done();

	/* Unlimited everywhere, including values just at 2^62 and above. */
	fixture_new("v1 unlimited");
	put("proc/self/cgroup", "4:memory:/p\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "4611686018427387904\n");
	put("sys/fs/cgroup/memory/p/memory.soft_limit_in_bytes", "18446744073709551615\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_HIGH], UNL);
	expect_eq(lim[TA_LIMIT_MAX], UNL);
	fixture_done();

	/* Just below 2^62 is a real limit. */
	fixture_new("v1 just below 2^62");
	put("proc/self/cgroup", "4:memory:/p\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "4611686018427387903\n");
	limits_of(&cg, lim, 0);
	expect_eq(lim[TA_LIMIT_MAX], (1ull << 62) - 1);
	fixture_done();
}

static void test_limits_none(void)
{
	uint64_t lim[TA_NLIMITS];
	struct ta_cgroup cg;
	memset(&cg, 0, sizeof(cg));
	memset(lim, 0x5a, sizeof(lim));
	expect_eq(ta_cgroup_read_limits("", &cg, lim), 0);
	expect_eq(lim[TA_LIMIT_MIN], 0);
	expect_eq(lim[TA_LIMIT_LOW], 0);
	expect_eq(lim[TA_LIMIT_HIGH], UNL);
	expect_eq(lim[TA_LIMIT_MAX], UNL);
	memset(lim, 0x5a, sizeof(lim));
	expect_eq(ta_cgroup_read_limits("", NULL, lim), 0);
	expect_eq(lim[TA_LIMIT_MAX], UNL);

	/* A struct that ta_cgroup_self did not produce is refused, with the defaults written. */
	cg.version = 2;
	memset(cg.path, 'x', sizeof(cg.path)); /* not terminated */
	memset(lim, 0x5a, sizeof(lim));
	expect_eq(ta_cgroup_read_limits("", &cg, lim), -EINVAL);
	expect_eq(lim[TA_LIMIT_MAX], UNL);
	uint64_t per_node[TA_CGROUP_NODES];
	expect_eq(ta_cgroup_numa_stat("", &cg, per_node), -EINVAL);
	expect_eq(ta_cgroup_reclaim("", &cg, 4096), -EINVAL);
	strcpy(cg.path, "/sys");
	cg.mount_len = 10; /* past the end */
	expect_eq(ta_cgroup_read_limits("", &cg, lim), -EINVAL);
	cg.mount_len = 0;
	cg.version = 3;
	expect_eq(ta_cgroup_read_limits("", &cg, lim), -EINVAL);
}

/* ---- memory.numa_stat ---- */

static void test_numa_stat(void)
{
	struct ta_cgroup cg;
	uint64_t per_node[TA_CGROUP_NODES];

	fixture_new("numa_stat");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.numa_stat", "anon N0=4096 N1=8192 N12=100\n"
						  "file N0=1 N1=2 N12=3 N63=7\n"
						  "kernel_stack N0=999\n"
						  "anon_thp N0=999 N1=999\n"
						  "file_mapped N0=999\n"
						  "shmem N0=999\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), 0);
	expect_eq(per_node[0], 4097);
	expect_eq(per_node[1], 8194);
	expect_eq(per_node[12], 103);
	expect_eq(per_node[63], 7);
	expect_eq(per_node[2], 0);
	fixture_done();

	/* Malformed entries are skipped one by one; the good ones on the same line count. A node
	 * past 63 is ignored; values saturate instead of wrapping. Tabs separate too. */
	fixture_new("numa_stat malformed");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.numa_stat",
	    "anon N0=12x N2=5 N=3 Nx=4 N3= =7 N4 X5=1 N64=9 N99999999999=1 N6=6\n"
	    "file\tN7=18446744073709551615 N7=10 N8=99999999999999999999999\n"
	    "garbage line without form\n"
	    "anon N9=1"); /* no newline at the end */
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), 0);
	expect_eq(per_node[0], 0);
	expect_eq(per_node[2], 5);
	expect_eq(per_node[3], 0);
	expect_eq(per_node[4], 0);
	expect_eq(per_node[6], 6);
	expect_eq(per_node[7], UINT64_MAX);
	expect_eq(per_node[8], UINT64_MAX);
	expect_eq(per_node[9], 1);
	fixture_done();

	/* 1024 nodes on one line (longer than any buffer of the parser). */
	fixture_new("numa_stat long line");
	v2_tree();
	{
		static char text[40000];
		size_t pos = 0;
		pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "anon");
		for (unsigned n = 0; n < 1024; n++)
			pos += (size_t)snprintf(text + pos, sizeof(text) - pos, " N%u=%u", n,
						1000 + n);
		pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "\nfile N63=5\n");
		put_bytes("sys/fs/cgroup/a/b/memory.numa_stat", text, pos);
	}
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), 0);
	expect_eq(per_node[0], 1000);
	expect_eq(per_node[10], 1010);
	expect_eq(per_node[63], 1068);
	fixture_done();

	/* No anon or file line; no file; v1 and none. */
	fixture_new("numa_stat without anon/file");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.numa_stat", "anonymous N0=1\nfiles N0=1\n anon N0=1\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	per_node[0] = 42;
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), -EINVAL);
	expect_eq(per_node[0], 0);
	put("sys/fs/cgroup/a/b/memory.numa_stat", "%s", "");
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), -EINVAL);
	fixture_done();

	fixture_new("numa_stat missing");
	v2_tree();
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), -ENOENT);
	fixture_done();

	fixture_new("numa_stat on v1");
	put("proc/self/cgroup", "4:memory:/p\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	put("sys/fs/cgroup/memory/p/memory.numa_stat", "total=1 N0=1\nanon=1 N0=1\n");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_numa_stat(root, &cg, per_node), -ENOENT);
	fixture_done();

	memset(&cg, 0, sizeof(cg));
	expect_eq(ta_cgroup_numa_stat("", &cg, per_node), -ENOENT);
	expect_eq(ta_cgroup_numa_stat("", NULL, per_node), -ENOENT);
}

/* ---- memory.reclaim ---- */

static void test_reclaim(void)
{
	struct ta_cgroup cg;
	char text[64];
	fixture_new("reclaim");
	v2_tree();
	put("sys/fs/cgroup/a/b/memory.reclaim", "%s", "");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_reclaim(root, &cg, 0), 0);
	expect_str_eq(slurp("sys/fs/cgroup/a/b/memory.reclaim", text, sizeof(text)), "");
	expect_eq(ta_cgroup_reclaim(root, &cg, 1048576), 0);
	expect_str_eq(slurp("sys/fs/cgroup/a/b/memory.reclaim", text, sizeof(text)), "1048576");
	put("sys/fs/cgroup/a/b/memory.reclaim", "%s", "");
	expect_eq(ta_cgroup_reclaim(root, &cg, UINT64_MAX), 0);
	expect_str_eq(slurp("sys/fs/cgroup/a/b/memory.reclaim", text, sizeof(text)),
		      "18446744073709551615");
	fixture_done();

	/* The file is never created: a kernel without memory.reclaim gives -ENOENT. */
	fixture_new("reclaim without the file");
	v2_tree();
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_reclaim(root, &cg, 4096), -ENOENT);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/a/b/memory.reclaim", root);
	expect_true(access(path, F_OK) != 0);
	fixture_done();

	fixture_new("reclaim on v1");
	put("proc/self/cgroup", "4:memory:/p\n");
	put("proc/self/mountinfo", MI_HEAD MI_V1_MEMORY);
	put("sys/fs/cgroup/memory/p/memory.reclaim", "%s", "");
	expect_eq(ta_cgroup_self(root, &cg), 0);
	expect_eq(ta_cgroup_reclaim(root, &cg, 4096), -ENOENT);
	expect_str_eq(slurp("sys/fs/cgroup/memory/p/memory.reclaim", text, sizeof(text)), "");
	fixture_done();

	memset(&cg, 0, sizeof(cg));
	expect_eq(ta_cgroup_reclaim("", &cg, 4096), -ENOENT);
	expect_eq(ta_cgroup_reclaim("", NULL, 4096), -ENOENT);
}

/* ---- splitting and hashing ---- */

static uint64_t split_ref(uint64_t v, uint32_t ppm)
{
	if (v == UNL)
		return UNL;
	if (ppm > 1000000)
		ppm = 1000000;
	return (uint64_t)((unsigned __int128)v * ppm / 1000000);
}

static void test_split(void)
{
	test_context("split");
	expect_eq(ta_cgroup_split(UNL, 0), UNL);
	expect_eq(ta_cgroup_split(UNL, 500000), UNL);
	expect_eq(ta_cgroup_split(UNL, 1000000), UNL);
	expect_eq(ta_cgroup_split(0, 500000), 0);
	expect_eq(ta_cgroup_split(1ull << 30, 0), 0);
	expect_eq(ta_cgroup_split(1ull << 30, 1000000), 1ull << 30);
	expect_eq(ta_cgroup_split(1ull << 30, 4000000000u), 1ull << 30);
	expect_eq(ta_cgroup_split(1ull << 30, 250000), 1ull << 28);
	expect_eq(ta_cgroup_split(999999, 1), 0); /* rounded down */
	expect_eq(ta_cgroup_split(1000000, 1), 1);
	/* (1 << 62) * 999999 needs 82 bits. */
	expect_eq(ta_cgroup_split(1ull << 62, 999999), 4611681406741369476ull);
	expect_eq(ta_cgroup_split(UNL - 1, 999999), 18446725626965477904ull);
	expect_eq(ta_cgroup_split(UNL - 1, 1000000), UNL - 1);
	/* Against 128-bit arithmetic, and: the shares of a limit never sum above it. */
	static const uint64_t values[] = { 1,
					   4095,
					   4096,
					   1000001,
					   123456789012345ull,
					   (1ull << 62) - 1,
					   1ull << 62,
					   (1ull << 63) + 12345,
					   UNL - 1 };
	static const uint32_t shares[] = { 0, 1, 3, 333333, 500000, 666667, 999999, 1000000 };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		for (size_t j = 0; j < sizeof(shares) / sizeof(shares[0]); j++)
			expect_eq(ta_cgroup_split(values[i], shares[j]),
				  split_ref(values[i], shares[j]));
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t a = ta_cgroup_split(values[i], 333333);
		uint64_t b = ta_cgroup_split(values[i], 333333);
		uint64_t c = ta_cgroup_split(values[i], 333334);
		expect_true((unsigned __int128)a + b + c <= values[i]);
	}
	test_context("%s", "");
}

static void test_hash(void)
{
	/* FNV-1a 64 reference values. */
	expect_eq(ta_cgroup_hash(""), 0xcbf29ce484222325ull);
	expect_eq(ta_cgroup_hash("a"), 0xaf63dc4c8601ec8cull);
	expect_eq(ta_cgroup_hash("foobar"), 0x85944171f73967e8ull);
}

/* ---- the real system: printed for the log, not asserted ---- */

static void show_real_system(void)
{
	struct ta_cgroup cg;
	uint64_t lim[TA_NLIMITS], per_node[TA_CGROUP_NODES];
	int rc = ta_cgroup_self("", &cg);
	printf("this system: rc %d version %d path \"%s\" id %" PRIu64 " key %s\n", rc, cg.version,
	       cg.path, cg.id, cg.key);
	rc = ta_cgroup_read_limits("", &cg, lim);
	printf("  limits rc %d: min %" PRIu64 " low %" PRIu64 " high %" PRIu64 " max %" PRIu64
	       " (%" PRIu64 " = unlimited)\n",
	       rc, lim[TA_LIMIT_MIN], lim[TA_LIMIT_LOW], lim[TA_LIMIT_HIGH], lim[TA_LIMIT_MAX],
	       UNL);
	rc = ta_cgroup_numa_stat("", &cg, per_node);
	printf("  numa_stat rc %d: node0 %" PRIu64 " node1 %" PRIu64 "\n", rc, per_node[0],
	       per_node[1]);
	expect_true(strnlen(cg.path, sizeof(cg.path)) < sizeof(cg.path));
}

int main(void)
{
	test_v2();
	test_v1();
	test_hybrid();
	test_none();
	test_container_root();
	test_escapes();
	test_garbage();
	test_fuzz();
	test_limits_v2();
	test_limits_v1();
	test_limits_none();
	test_numa_stat();
	test_reclaim();
	test_split();
	test_hash();
	show_real_system();
	return test_done();
}
