/* SPDX-License-Identifier: MIT */
/*
 * How memkind is set up inside tieralloc (src/alloc/backend.c, src/alloc/memkind_link.c): not
 * started, nor its jemalloc, until a process needs more than its first chunks or a large object,
 * those first chunks bound to the tier's nodes all the same; a chunk that cannot be bound taken
 * from memkind instead; with memkind refused, everything straight from the kernel; fork before and
 * after the start. Then, once started: its jemalloc with our configuration (one automatic arena,
 * no huge pages for metadata), one arena per kind, libdaxctl and libhwloc not loaded at start but
 * working when first called, and the kinds tieralloc uses kept through memkind's finalization.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "test.h"

/* memkind's jemalloc, linked in from its archive (its symbols are ours in this program). */
int jemk_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* From libhwloc and libdaxctl, served by src/alloc/memkind_link.c. */
typedef struct hwloc_bitmap_s *hwloc_bitmap_t;
hwloc_bitmap_t hwloc_bitmap_alloc(void);
int hwloc_bitmap_only(hwloc_bitmap_t bitmap, unsigned id);
int hwloc_bitmap_isset(const struct hwloc_bitmap_s *bitmap, unsigned id);
int hwloc_bitmap_weight(const struct hwloc_bitmap_s *bitmap);
void hwloc_bitmap_free(hwloc_bitmap_t bitmap);
struct daxctl_ctx;
int daxctl_new(struct daxctl_ctx **ctx);
struct daxctl_ctx *daxctl_unref(struct daxctl_ctx *ctx);

/* jemalloc's count of automatic arenas: 0 until it starts. Weak: a memkind whose jemalloc names it
 * otherwise leaves the check undone, with a line saying so. */
extern unsigned je_narenas_auto __attribute__((weak));

#define MiB	  ((size_t)1 << 20)
#define MODE_BIND 2 /* MPOL_BIND */

static bool jemalloc_started(void)
{
	return &je_narenas_auto == NULL || je_narenas_auto != 0;
}

/* The policy of the page at p: MPOL_BIND to exactly the tier's nodes? */
static bool bound_to_tier(const void *p, unsigned tier)
{
	int mode = -1;
	uint64_t mask[16] = { 0 };
	if (syscall(SYS_get_mempolicy, &mode, mask, 64 * 16, p, 2 /* MPOL_F_ADDR */) != 0)
		return false;
	return mode == MODE_BIND && mask[0] == ta_topo.tier[tier].nodes;
}

static bool filled(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != v || p[n - 1] != v)
			return false;
	return true;
}

/* Blocks of 64 KiB (small objects) up to total, written; false when one fails. */
static bool hold_small(void **blocks, unsigned n, unsigned char v)
{
	for (unsigned i = 0; i < n; i++) {
		blocks[i] = tieralloc_malloc(64 * 1024);
		if (blocks[i] == NULL)
			return false;
		memset(blocks[i], v, 64 * 1024);
	}
	return true;
}

static int wait_child(pid_t pid)
{
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* In a child: a large object starts memkind; then a fork and allocations in the grandchild (the
 * fork handlers registered again after memkind's). */
static int child_large_then_fork(void)
{
	unsigned char *big = tieralloc_malloc(3 * MiB);
	if (big == NULL || !ta_backend_memkind_started() || !jemalloc_started())
		return 1;
	memset(big, 0x5a, 3 * MiB);
	pid_t pid = fork();
	if (pid == 0) {
		void *blocks[64];
		unsigned char *again = tieralloc_malloc(2 * MiB);
		bool ok = again != NULL && hold_small(blocks, 64, 7) && filled(big, 3 * MiB, 0x5a);
		_exit(ok ? 0 : 2);
	}
	int rc = wait_child(pid);
	if (rc != 0)
		return 10 + rc;
	return filled(big, 3 * MiB, 0x5a) ? 0 : 3;
}

/* In a child: the tier's nodes cannot be bound (a node that does not exist), so its first chunk
 * comes from memkind, which starts for it. */
static int child_unbindable(void)
{
	ta_topo.tier[0].nodes = 1ull << 62;
	void *blocks[4];
	if (!hold_small(blocks, 4, 9))
		return 1;
	return ta_backend_memkind_started() && filled(blocks[3], 64 * 1024, 9) ? 0 : 2;
}

/* In a child: memkind refused, as when it cannot start: chunks past the first, large objects and
 * their return all come straight from the kernel. */
static int child_refused(void)
{
	ta_backend_refuse_memkind();
	static void *blocks[512];
	if (!hold_small(blocks, 512, 3)) /* 32 MiB: past the first chunks */
		return 1;
	unsigned char *big = tieralloc_malloc(5 * MiB);
	if (big == NULL)
		return 2;
	memset(big, 4, 5 * MiB);
	void *raw = ta_backend_alloc(0, 2 * MiB, 2 * MiB, true);
	if (raw == NULL || ((uintptr_t)raw & (2 * MiB - 1)) != 0 || !bound_to_tier(raw, 0) ||
	    ((unsigned char *)raw)[MiB] != 0)
		return 3;
	ta_backend_free(0, raw, 2 * MiB);
	for (unsigned i = 0; i < 512; i++)
		if (!filled(blocks[i], 64 * 1024, 3))
			return 4;
	bool ok = filled(big, 5 * MiB, 4);
	tieralloc_free(big);
	ta_trim(0);
	return ok && !ta_backend_memkind_started() && !jemalloc_started() ? 0 : 5;
}

static bool mapped(const char *name);

static void test_memkind_late(void)
{
	if (&je_narenas_auto == NULL)
		printf(
		    "# jemalloc's je_narenas_auto not found: whether it started is not checked\n");
	test_context("late: started, neither memkind nor its jemalloc");
	expect_true(!ta_backend_memkind_started());
	expect_true(&je_narenas_auto == NULL || !jemalloc_started());
	expect_true(strcmp(ta_backend[0].kind_name, "mbind") == 0);
	expect_true(!mapped("libnuma")); /* loaded by memkind's start (memkind_link.c) */

	test_context("late: child, refused: everything from the kernel");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(child_refused());
	expect_eq(wait_child(pid), 0);
	test_context("late: child, a tier that cannot be bound: its chunk from memkind");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(child_unbindable());
	expect_eq(wait_child(pid), 0);
	test_context("late: child, a large object starts memkind; fork after");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(child_large_then_fork());
	expect_eq(wait_child(pid), 0);

	/* Here: 8 MiB of small objects, on chunks straight from the kernel, bound to tier 0. */
	static void *blocks[512];
	test_context("late: 8 MiB of small objects");
	expect_true(hold_small(blocks, 128, 1));
	expect_true(!ta_backend_memkind_started());
	expect_true(&je_narenas_auto == NULL || !jemalloc_started());
	for (unsigned i = 0; i < 128; i += 16) {
		test_context("late: block %u bound to tier 0's nodes", i);
		expect_true(bound_to_tier(blocks[i], 0));
	}
	test_context("late: 32 MiB: past the first chunks, memkind started");
	expect_true(hold_small(blocks + 128, 384, 2));
	expect_true(ta_backend_memkind_started());
	expect_true(jemalloc_started());
	expect_true(mapped("libnuma"));
	expect_true(strstr(ta_backend[0].kind_name, "MEMKIND_") != NULL);
	for (unsigned i = 0; i < 512; i++)
		if (!filled(blocks[i], 64 * 1024, i < 128 ? 1 : 2)) {
			test_context("late: block %u", i);
			expect_true(false);
			break;
		}
	expect_true(bound_to_tier(blocks[511], 0) || !ta_backend[0].bound);
	test_context("%s", "");
}

/* Is a library whose path contains name mapped into this process? */
static bool mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (f == NULL)
		test_hard("cannot read /proc/self/maps");
	char line[512];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

static void test_jemalloc_options(void)
{
	unsigned narenas = 0;
	size_t len = sizeof(narenas);
	expect_eq(jemk_mallctl("opt.narenas", &narenas, &len, NULL, 0), 0);
	expect_eq(narenas, 1);
	const char *thp = NULL, *metadata_thp = NULL;
	len = sizeof(thp);
	expect_eq(jemk_mallctl("opt.thp", &thp, &len, NULL, 0), 0);
	expect_true(thp != NULL && strcmp(thp, "never") == 0);
	len = sizeof(metadata_thp);
	expect_eq(jemk_mallctl("opt.metadata_thp", &metadata_thp, &len, NULL, 0), 0);
	expect_true(metadata_thp != NULL && strcmp(metadata_thp, "disabled") == 0);
	/* The automatic one, and one per kind initialised (at most the three probed); memkind's
	 * default is four per CPU and kind. */
	len = sizeof(narenas);
	expect_eq(jemk_mallctl("arenas.narenas", &narenas, &len, NULL, 0), 0);
	expect_le(narenas, 4);
}

static void test_lazy_libraries(void)
{
	/* Not loaded by starting tieralloc: that is the point of loading them lazily. */
	expect_true(!mapped("libhwloc"));
	expect_true(!mapped("libdaxctl"));
	expect_true(!mapped("libcrypto"));
	/* Working when called. */
	hwloc_bitmap_t b = hwloc_bitmap_alloc();
	expect_true(b != NULL);
	if (b != NULL) {
		expect_eq(hwloc_bitmap_only(b, 3), 0);
		expect_eq(hwloc_bitmap_isset(b, 3), 1);
		expect_eq(hwloc_bitmap_isset(b, 2), 0);
		expect_eq(hwloc_bitmap_weight(b), 1);
		hwloc_bitmap_free(b);
	}
	expect_true(mapped("libhwloc"));
	struct daxctl_ctx *ctx = NULL;
	expect_eq(daxctl_new(&ctx), 0);
	expect_true(ctx != NULL);
	if (ctx != NULL)
		daxctl_unref(ctx);
	expect_true(mapped("libdaxctl"));
}

static void test_kinds_kept(void)
{
	/* Every kind serving a tier outlives memkind's destructor; a kind of nobody's does not. */
	for (unsigned t = 0; t < ta_ntiers; t++) {
		test_context("tier %u", t);
		void *p = ta_backend_alloc(t, 4096, 16, false);
		expect_true(p != NULL);
		ta_backend_free(t, p, 4096);
	}
	test_context("%s", "");
	expect_true(!ta_backend_kind_kept(NULL));
	int not_a_kind;
	expect_true(!ta_backend_kind_kept(&not_a_kind));
}

int main(int argc, char **argv)
{
	test_reexec_with_env(argv, NULL);
	if (atomic_load(&ta_state) != TA_READY)
		test_hard("tieralloc did not start");
	test_memkind_late();
	test_jemalloc_options();
	test_lazy_libraries();
	test_kinds_kept();
	return test_done();
}
