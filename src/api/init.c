/* SPDX-License-Identifier: MIT */
/*
 * Initialisation: UNINIT -> INITIALIZING -> READY or PASSTHROUGH, run once by our constructor.
 * Until then (the dynamic loader, libnuma's and other constructors allocate before ours runs)
 * and during it (memkind, dlsym and setenv allocate), allocations come from the bootstrap buffer:
 * initialising memkind from inside libnuma's own constructor would use libnuma half-built.
 * Nothing here may abort the host program, except TIERALLOC_STRICT=1 on a bad configuration.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/api.h"

extern char **environ;

static bool resolve_real(void)
{
	ta_real.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	ta_real.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	ta_real.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	ta_real.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	ta_real.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
	ta_real.usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	return ta_real.malloc && ta_real.free && ta_real.calloc && ta_real.realloc &&
	       ta_real.memalign && ta_real.usable_size;
}

/*
 * Our locks are taken before memkind's (its jemalloc's), in fork as everywhere, and the child's
 * own work runs after jemalloc's child handler has made its locks usable. pthread_atfork runs
 * prepare handlers last registered first and the others first registered first, so ours must be
 * registered after memkind's: at start, and again when memkind starts later (backend.c). Of the
 * sets glibc runs for one fork, the first prepare (the latest registered) does the work, and only
 * the same set's parent or child handler undoes it.
 */
enum { FORK_NONE, FORK_SET_START, FORK_SET_MEMKIND };
static __thread int fork_prepared_by __attribute__((tls_model("initial-exec")));
static bool fork_memkind_set;

static void fork_prepare(int set)
{
	if (fork_prepared_by != FORK_NONE)
		return;
	fork_prepared_by = set;
	ta_tcache_fork_prepare();
	ta_arena_fork_prepare();
	ta_large_fork_prepare();
	ta_lheap_fork_prepare();
	ta_backend_fork_prepare();
	ta_maps_fork_prepare(); /* a leaf: never held while another lock is taken */
}

static void fork_parent(int set)
{
	if (fork_prepared_by != set)
		return;
	fork_prepared_by = FORK_NONE;
	ta_maps_fork_parent();
	ta_backend_fork_parent();
	ta_lheap_fork_parent();
	ta_large_fork_parent();
	ta_arena_fork_parent();
	ta_tcache_fork_parent();
}

static void fork_child(int set)
{
	if (fork_prepared_by != set)
		return;
	fork_prepared_by = FORK_NONE;
	ta_maps_fork_child();
	ta_backend_fork_child();
	ta_lheap_fork_child();
	ta_large_fork_child();
	ta_arena_fork_child();
	ta_tcache_fork_child();
	ta_enforce_fork_child();
	/* The child's heap is the parent's, copy-on-write, and charged in the parent's slot: the
	 * child's own slot starts empty (quota/charge.c, inherited). */
	ta_charge_fork_inherit();
	ta_shm_fork_child();
}

static void prepare_start(void)
{
	fork_prepare(FORK_SET_START);
}
static void parent_start(void)
{
	fork_parent(FORK_SET_START);
}
static void child_start(void)
{
	fork_child(FORK_SET_START);
}
static void prepare_memkind(void)
{
	fork_prepare(FORK_SET_MEMKIND);
}
static void parent_memkind(void)
{
	fork_parent(FORK_SET_MEMKIND);
}
static void child_memkind(void)
{
	fork_child(FORK_SET_MEMKIND);
}

/* memkind's late start (alloc/backend.c), under its start lock, once. */
static void memkind_starting(bool started)
{
	if (!started) {
		ta_startup_late_begin();
		return;
	}
	ta_startup_late_end();
	if (fork_memkind_set)
		return;
	fork_memkind_set = true;
	pthread_atfork(prepare_memkind, parent_memkind, child_memkind);
}

static void show_config(void)
{
	char line[512];
	for (unsigned i = 0; i < ta_opt_count; i++) {
		char val[300];
		ta_opt_render(&ta_opt_table[i], &ta_opts, val, sizeof(val));
		size_t n = ta_format(line, sizeof(line), "tieralloc: config: TIERALLOC_%s=%s\n",
				     ta_opt_table[i].name, val);
		ta_write_all(STDERR_FILENO, line, n);
	}
	if (atomic_load(&ta_state) == TA_PASSTHROUGH) {
		ta_write_all(STDERR_FILENO, "tieralloc: config: pass-through\n", 32);
		return;
	}
	for (unsigned t = 0; t < ta_ntiers; t++) {
		const struct ta_tier_desc *d = &ta_topo.tier[t];
		char nodes[128];
		ta_nodelist_format(d->nodes, nodes, sizeof(nodes));
		uint64_t limit = atomic_load(&ta_charges[t].limit);
		size_t n = ta_format(line, sizeof(line),
				     "tieralloc: config: tier %u %s nodes=%s kind=%s capacity=%llu "
				     "share=%u.%u%% limit=%s%llu (from %s)\n",
				     t, d->name, nodes, ta_backend[t].kind_name,
				     (unsigned long long)d->capacity, d->share_ppm / 10000,
				     (d->share_ppm / 1000) % 10, limit == UINT64_MAX ? "none:" : "",
				     (unsigned long long)(limit == UINT64_MAX ? 0 : limit),
				     ta_topo.source);
		ta_write_all(STDERR_FILENO, line, n);
	}
}

static int finish(int state)
{
	/* Configuration lines: once per cgroup where the segment can tell, else by every process.
	 */
	ta_config_release(state == TA_READY && !(ta_opts.strict && ta_opts.nerrors > 0)
			      ? ta_quota_first_to_say
			      : NULL);
	if (ta_opts.strict && ta_opts.nerrors > 0) {
		ta_log(TA_LOG_ERROR, "TIERALLOC_STRICT=1 and %u configuration error(s): exiting",
		       ta_opts.nerrors);
		_exit(1);
	}
	if (state == TA_PASSTHROUGH && !resolve_real()) {
		/* No C library allocator to pass to: stay on bootstrap memory. */
		ta_log(TA_LOG_ERROR, "cannot find the C library's malloc; using fallback memory");
		return TA_INITIALIZING;
	}
	atomic_store_explicit(&ta_state, state, memory_order_release);
	if (ta_opts.show_config)
		show_config();
	return state;
}

int ta_init(void)
{
	ta_pages_statics_no_huge();
	int expected = TA_UNINIT;
	if (!atomic_compare_exchange_strong(&ta_state, &expected, TA_INITIALIZING))
		return expected;

	ta_config_hold();
	ta_env_parse(environ, &ta_opts);
	ta_log_level = ta_opts.log_level;
	if (ta_opts.disable)
		return finish(TA_PASSTHROUGH);
	ta_check_init(); /* before the first object: they are marked and linked with its secrets */

	if (ta_topo_discover("", ta_opts.tiers, &ta_topo, &ta_opts) != 0) {
		ta_log(TA_LOG_WARN, "no NUMA node with memory found; passing through to libc");
		return finish(TA_PASSTHROUGH);
	}
	uint64_t limits[TA_MAX_TIERS];
	ta_topo_parse_limits(&ta_topo, ta_opts.process_limit, limits, &ta_opts);
	if (ta_backend_init(&ta_topo, &ta_opts) != 0) {
		ta_log(TA_LOG_WARN, "memkind unusable; passing through to libc");
		return finish(TA_PASSTHROUGH);
	}
	ta_ntiers = ta_topo.ntiers;
	if (ta_arena_init(ta_ntiers, limits) != 0 || ta_tcache_init() != 0) {
		ta_log(TA_LOG_WARN, "cannot set up allocator metadata; passing through to libc");
		return finish(TA_PASSTHROUGH);
	}
	ta_arena_set_pack_limit(ta_opts.pack);
	ta_quota_attach();
	ta_startup_charge();
	ta_alloc_poke = ta_enforce_poke;
	pthread_atfork(prepare_start, parent_start, child_start);
	ta_backend_on_start = memkind_starting;
	return finish(TA_READY);
}

__attribute__((constructor(101))) static void ta_constructor(void)
{
	ta_init();
}

__attribute__((destructor)) static void ta_destructor(void)
{
	/* Arenas are never torn down: destructors and atexit handlers after us still allocate. */
	if (ta_opts.summary[0] != '\0' && atomic_load(&ta_state) != TA_UNINIT)
		ta_summary_write(ta_opts.summary);
}
