/* SPDX-License-Identifier: MIT */
/*
 * How memkind is set up inside tieralloc (src/backend.c, src/memkind_link.c): its jemalloc started
 * with our configuration (one automatic arena, no huge pages for metadata), one arena per kind,
 * libdaxctl and libhwloc not loaded at start but working when first called, and the kinds
 * tieralloc uses kept through memkind's finalization.
 */
#include <stdio.h>

#include "internal.h"
#include "test.h"

/* memkind's jemalloc, linked in from its archive (its symbols are ours in this program). */
int jemk_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* From libhwloc and libdaxctl, served by src/memkind_link.c. */
typedef struct hwloc_bitmap_s *hwloc_bitmap_t;
hwloc_bitmap_t hwloc_bitmap_alloc(void);
int hwloc_bitmap_only(hwloc_bitmap_t bitmap, unsigned id);
int hwloc_bitmap_isset(const struct hwloc_bitmap_s *bitmap, unsigned id);
int hwloc_bitmap_weight(const struct hwloc_bitmap_s *bitmap);
void hwloc_bitmap_free(hwloc_bitmap_t bitmap);
struct daxctl_ctx;
int daxctl_new(struct daxctl_ctx **ctx);
struct daxctl_ctx *daxctl_unref(struct daxctl_ctx *ctx);

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
		ta_backend_free(t, p);
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
	test_jemalloc_options();
	test_lazy_libraries();
	test_kinds_kept();
	return test_done();
}
