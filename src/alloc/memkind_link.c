/* SPDX-License-Identifier: MIT */
/*
 * What linking memkind's static archive into tieralloc needs (configure.ac says why it is linked
 * so).
 *
 * Two variables of other libraries. The archive's objects were built for executables and read
 * libnuma's numa_all_nodes_ptr and libc's stderr directly, which a shared library cannot; the
 * build renames them (src/local.mk) to these, set before memkind's own constructor runs.
 *
 * libnuma, loaded when memkind starts (src/alloc/backend.c). Linked, it was loaded by every
 * process and its constructor read /proc/self/status twice, the nodes in sysfs and the task's
 * policy: 0.65 ms of a preloaded /bin/true's 1.1 ms, for a library only memkind uses. memkind's
 * numa_* calls come here and go to the real functions once ta_memkind_link_start has loaded it;
 * mbind is the system call itself.
 *
 * libdaxctl and libhwloc, loaded on first use. memkind's archive names them for kinds tieralloc
 * never initialises (MEMKIND_DAX_KMEM without a node list: tieralloc always gives one; the
 * HIGHEST_* kinds, which ask hwloc for memory attributes). Linked normally, every process would
 * load them and what they need at start: libkmod, libcrypto, libudev, libzstd, liblzma, libuuid,
 * about 1.4 ms and 0.5 MiB of relocated data per process on the development host. Each function
 * here loads its library when first called and calls the real one; when the library cannot be
 * loaded it returns what the real one returns on failure, which memkind handles as "kind not
 * available".
 *
 * The prototypes are the libraries' (libdaxctl 74 of ndctl, hwloc 2.9), with their types opaque:
 * memkind passes only pointers, integers and enums, so no layout is needed here.
 */
#include <dlfcn.h>
#include <errno.h>
#include <numa.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"

/* Read by memkind's jemalloc when it starts; overrides the archive's weak definition. The reasons
 * are in src/alloc/backend.c. */
const char *jemk_malloc_conf = "narenas:1,tcache:false,thp:never,metadata_thp:disabled";

/* memkind's kinds name memkind_arena_finalize in their operations; the link (--wrap, src/local.mk)
 * makes them name this instead, which keeps tieralloc's kinds alive (src/alloc/backend.c). */
int __real_memkind_arena_finalize(void *kind);
int __wrap_memkind_arena_finalize(void *kind);
int __wrap_memkind_arena_finalize(void *kind)
{
	return ta_backend_kind_kept(kind) ? 0 : __real_memkind_arena_finalize(kind);
}

struct bitmask *ta_numa_all_nodes_ptr;
FILE *ta_memkind_stderr;

/* Priority 101: before the constructors without one, memkind's among them. */
__attribute__((constructor(101))) static void memkind_imports(void)
{
	ta_pages_statics_no_huge(); /* maybe the first constructor of ours: before a .bss write */
	ta_memkind_stderr = stderr;
}

struct lazy_lib {
	const char *soname;
	void *_Atomic handle;
};

static struct lazy_lib numa_lib = { "libnuma.so.1", NULL };
static struct lazy_lib daxctl_lib = { "libdaxctl.so.1", NULL };
static struct lazy_lib hwloc_lib = { "libhwloc.so.15", NULL };

/* The address of name in lib, loading lib first; NULL when either is missing. */
static void *lazy_sym(struct lazy_lib *lib, const char *name)
{
	void *h = atomic_load_explicit(&lib->handle, memory_order_acquire);
	if (h == NULL) {
		h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			ta_log(TA_LOG_INFO,
			       "%s is not available: memkind's kinds that need it are not",
			       lib->soname);
			return NULL;
		}
		void *expected = NULL;
		if (!atomic_compare_exchange_strong(&lib->handle, &expected, h)) {
			dlclose(h);
			h = expected;
		}
	}
	return dlsym(h, name);
}

/* Define fn with the given return type and parameters, forwarding to the library's own. */
#define LAZY(lib, ret, fail, fn, params, args)                                                     \
	ret fn params;                                                                             \
	ret fn params                                                                              \
	{                                                                                          \
		static ret(*_Atomic real) params;                                                  \
		ret(*f) params = atomic_load_explicit(&real, memory_order_acquire);                \
		if (f == NULL) {                                                                   \
			f = (ret(*) params)lazy_sym(&lib, #fn);                                    \
			if (f == NULL)                                                             \
				return fail;                                                       \
			atomic_store_explicit(&real, f, memory_order_release);                     \
		}                                                                                  \
		return f args;                                                                     \
	}
#define LAZY_VOID(lib, fn, params, args)                                                           \
	void fn params;                                                                            \
	void fn params                                                                             \
	{                                                                                          \
		void(*f) params = (void(*) params)lazy_sym(&lib, #fn);                             \
		if (f != NULL)                                                                     \
			f args;                                                                    \
	}

/* ---- libnuma ---- */
int ta_memkind_link_start(void)
{
	struct bitmask **all = lazy_sym(&numa_lib, "numa_all_nodes_ptr");
	if (all == NULL)
		return -ENOENT;
	ta_numa_all_nodes_ptr = *all; /* set by libnuma's constructor, which has run */
	return 0;
}

long mbind(void *start, unsigned long len, int mode, const unsigned long *nmask,
	   unsigned long maxnode, unsigned flags);
long mbind(void *start, unsigned long len, int mode, const unsigned long *nmask,
	   unsigned long maxnode, unsigned flags)
{
	return syscall(SYS_mbind, start, len, mode, nmask, maxnode, flags);
}

LAZY(numa_lib, int, -1, numa_available, (void), ())
LAZY(numa_lib, int, -1, numa_max_node, (void), ())
LAZY(numa_lib, int, 0, numa_num_configured_nodes, (void), ())
LAZY(numa_lib, int, 0, numa_num_configured_cpus, (void), ())
LAZY(numa_lib, long long, -1, numa_node_size64, (int node, long long *freep), (node, freep))
LAZY(numa_lib, int, -1, numa_node_to_cpus, (int node, struct bitmask *mask), (node, mask))
LAZY(numa_lib, int, 0, numa_distance, (int node1, int node2), (node1, node2))
LAZY(numa_lib, struct bitmask *, NULL, numa_allocate_nodemask, (void), ())
LAZY(numa_lib, struct bitmask *, NULL, numa_allocate_cpumask, (void), ())
LAZY(numa_lib, struct bitmask *, NULL, numa_bitmask_alloc, (unsigned int n), (n))
LAZY_VOID(numa_lib, numa_bitmask_free, (struct bitmask * mask), (mask))
LAZY(numa_lib, struct bitmask *, NULL, numa_bitmask_setall, (struct bitmask * mask), (mask))
LAZY(numa_lib, struct bitmask *, NULL, numa_bitmask_clearall, (struct bitmask * mask), (mask))
LAZY(numa_lib, struct bitmask *, NULL, numa_bitmask_setbit, (struct bitmask * mask, unsigned int n),
     (mask, n))
LAZY(numa_lib, int, 0, numa_bitmask_isbitset, (const struct bitmask *mask, unsigned int n),
     (mask, n))
LAZY(numa_lib, unsigned int, 0, numa_bitmask_weight, (const struct bitmask *mask), (mask))
LAZY_VOID(numa_lib, copy_bitmask_to_bitmask, (struct bitmask * from, struct bitmask *to),
	  (from, to))
LAZY(numa_lib, struct bitmask *, NULL, numa_parse_nodestring, (const char *s), (s))

/* ---- libdaxctl ---- */
struct daxctl_ctx;
struct daxctl_region;
struct daxctl_dev;
struct daxctl_memory;

LAZY(daxctl_lib, int, -ENOSYS, daxctl_new, (struct daxctl_ctx * *ctx), (ctx))
LAZY(daxctl_lib, struct daxctl_ctx *, NULL, daxctl_unref, (struct daxctl_ctx * ctx), (ctx))
LAZY(daxctl_lib, struct daxctl_region *, NULL, daxctl_region_get_first, (struct daxctl_ctx * ctx),
     (ctx))
LAZY(daxctl_lib, struct daxctl_region *, NULL, daxctl_region_get_next,
     (struct daxctl_region * region), (region))
LAZY(daxctl_lib, struct daxctl_dev *, NULL, daxctl_dev_get_first, (struct daxctl_region * region),
     (region))
LAZY(daxctl_lib, struct daxctl_dev *, NULL, daxctl_dev_get_next, (struct daxctl_dev * dev), (dev))
LAZY(daxctl_lib, struct daxctl_memory *, NULL, daxctl_dev_get_memory, (struct daxctl_dev * dev),
     (dev))
LAZY(daxctl_lib, int, -1, daxctl_dev_get_target_node, (struct daxctl_dev * dev), (dev))

/* ---- libhwloc ---- */
typedef struct hwloc_topology *hwloc_topology_t;
typedef struct hwloc_bitmap_s *hwloc_bitmap_t;
typedef const struct hwloc_bitmap_s *hwloc_const_bitmap_t;
typedef struct hwloc_obj *hwloc_obj_t;
struct hwloc_location;

LAZY(hwloc_lib, int, -1, hwloc_topology_init, (hwloc_topology_t * topology), (topology))
LAZY(hwloc_lib, int, -1, hwloc_topology_load, (hwloc_topology_t topology), (topology))
LAZY_VOID(hwloc_lib, hwloc_topology_destroy, (hwloc_topology_t topology), (topology))
LAZY(hwloc_lib, int, -1, hwloc_get_type_depth, (hwloc_topology_t topology, int type),
     (topology, type))
LAZY(hwloc_lib, hwloc_obj_t, NULL, hwloc_get_obj_by_depth,
     (hwloc_topology_t topology, int depth, unsigned idx), (topology, depth, idx))
LAZY(hwloc_lib, int, -1, hwloc_get_local_numanode_objs,
     (hwloc_topology_t topology, struct hwloc_location *location, unsigned *nr, hwloc_obj_t *nodes,
      unsigned long flags),
     (topology, location, nr, nodes, flags))
LAZY(hwloc_lib, int, -1, hwloc_memattr_get_value,
     (hwloc_topology_t topology, unsigned attribute, hwloc_obj_t target,
      struct hwloc_location *initiator, unsigned long flags, uint64_t *value),
     (topology, attribute, target, initiator, flags, value))
LAZY(hwloc_lib, hwloc_bitmap_t, NULL, hwloc_bitmap_alloc, (void), ())
LAZY_VOID(hwloc_lib, hwloc_bitmap_free, (hwloc_bitmap_t bitmap), (bitmap))
LAZY(hwloc_lib, int, -1, hwloc_bitmap_first, (hwloc_const_bitmap_t bitmap), (bitmap))
LAZY(hwloc_lib, int, -1, hwloc_bitmap_next, (hwloc_const_bitmap_t bitmap, int prev), (bitmap, prev))
LAZY(hwloc_lib, int, 0, hwloc_bitmap_isincluded,
     (hwloc_const_bitmap_t sub, hwloc_const_bitmap_t super), (sub, super))
LAZY(hwloc_lib, int, 0, hwloc_bitmap_isset, (hwloc_const_bitmap_t bitmap, unsigned id),
     (bitmap, id))
LAZY(hwloc_lib, int, -1, hwloc_bitmap_only, (hwloc_bitmap_t bitmap, unsigned id), (bitmap, id))
LAZY(hwloc_lib, int, -1, hwloc_bitmap_or,
     (hwloc_bitmap_t res, hwloc_const_bitmap_t a, hwloc_const_bitmap_t b), (res, a, b))
LAZY(hwloc_lib, int, -1, hwloc_bitmap_weight, (hwloc_const_bitmap_t bitmap), (bitmap))
LAZY_VOID(hwloc_lib, hwloc_bitmap_zero, (hwloc_bitmap_t bitmap), (bitmap))
