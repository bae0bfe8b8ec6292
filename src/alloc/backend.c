/* SPDX-License-Identifier: MIT */
/*
 * The per-tier memory source: one memkind kind per tier, bound to exactly that tier's nodes, and
 * in front of it the kernel itself for a process's first chunks. This is the only file that
 * includes memkind.h, so that another backend can replace memkind (discontinued upstream) without
 * touching the allocator.
 *
 * memkind starts late. Its jemalloc's metadata (arena 0 and its own arena per kind, the stats its
 * mallctl keeps for each, radix-tree leaves) is about 0.3 MiB resident in every process that
 * starts it, and starting it is most of what a preloaded process spends before main() (issue 11):
 * for a container of many small processes that was most of what tieralloc cost. So the first
 * TA_DIRECT_CHUNKS chunks of a process (16 MiB) are mapped here and bound with mbind(MPOL_BIND) to
 * the tier's nodes, which is the policy memkind's kinds give their memory, and memkind starts when
 * a process needs more chunks or its first large object: by then its metadata is under 2% of what
 * the process holds. It starts at once under TIERALLOC_SHOW_CONFIG and TIERALLOC_STRICT, whose
 * output and verdict are about the kinds. It starts on whichever thread needs it first, possibly
 * inside the allocator's locks: whatever it allocates meanwhile on that thread comes from the boot
 * allocator (alloc.c), never from a bin or a chunk. Should memkind not start, the kernel serves
 * every request the same way, with a warning.
 *
 * memkind has no "bind to this node set" kind, but three of its kinds bind (MPOL_BIND) to a node
 * set that an environment variable can name, which gives up to three tiers:
 *   - MEMKIND_REGULAR binds to every node with CPUs: used for a tier that is exactly those nodes;
 *   - MEMKIND_DAX_KMEM_ALL binds to MEMKIND_DAX_KMEM_NODES (memkind's kind for CPU-less memory);
 *   - MEMKIND_HBW_ALL binds to MEMKIND_HBW_NODES.
 * memkind reads those variables once, when a kind is first used, so tieralloc shows memkind its
 * own value while the kinds initialise; a user's own value does not apply to the kinds tieralloc
 * uses, and the program's environment is never changed.
 * A tier no kind can express falls back to MEMKIND_DEFAULT (the kernel's default placement) with
 * one error line: its memory then lands wherever the task's policy puts it.
 *
 * Footprint. tieralloc asks memkind for 4 MiB chunks and large objects only; its own thread caches
 * do the rest. So memkind is set up for the least memory, not for concurrency:
 *   - one arena per kind (MEMKIND_ARENA_NUM_PER_KIND=1, in the environment memkind sees while the
 *     kinds initialise): memkind's default, four per CPU, gave every arena its own 2 MiB metadata
 *     block, a whole huge page once touched under THP "always";
 *   - memkind is linked from its static archive (configure.ac), so its jemalloc is configured
 *     through the jemk_malloc_conf symbol, read whenever it starts: one automatic arena
 *     (memkind's build asks for 256, and each cost a touched page of a 37 KiB block, 1 MiB in
 *     all), and no huge pages for its metadata. A user's JEMK_MALLOC_CONF still applies on top;
 *   - no huge pages in our .bss, which holds jemalloc's 2 MiB radix-tree root (a few entries of
 *     it are used) and our own sparsely touched tables (base/pages.c, before init writes any).
 */
#include <limits.h>
#include <memkind.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc/alloc.h"

#define TA_DIRECT_CHUNKS 4u /* a process's chunks mapped before memkind starts: 16 MiB */

struct ta_backend_tier ta_backend[TA_MAX_TIERS];
static memkind_t tier_kind[TA_MAX_TIERS];
/* The jemalloc arena of each tier's kind (one per kind): ARENA_UNSEEN until the tier's first
 * allocation shows it, UINT_MAX when it could not be set up. */
#define ARENA_UNSEEN (UINT_MAX - 1)
static _Atomic unsigned tier_arena[TA_MAX_TIERS];

enum { MEMKIND_IDLE, MEMKIND_UP, MEMKIND_FAILED };
static _Atomic int memkind_state;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct ta_topology *start_topo;
static struct ta_options *start_opts;
static _Atomic unsigned direct_chunks;
__thread bool ta_backend_starting __attribute__((tls_model("initial-exec")));
void (*ta_backend_on_start)(bool started);

/* memkind's jemalloc, linked in from its archive. */
int jemk_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

enum { SLOT_DAX, SLOT_HBW, NSLOTS };

/*
 * memkind's environment while the kinds initialise: the program's MEMKIND_* entries and
 * JEMK_MALLOC_CONF (memkind's jemalloc starts here), one arena per kind and, for one call, the
 * node list of the kind being set up. Swapped into environ
 * around memkind's calls, without touching the program's environment: setenv() is not used,
 * because some programs (bash) define their own, which does not write environ before their main()
 * runs, and the variables would leak into the program and its children. Only the initialising
 * thread runs here; another thread reading the environment at this moment would see the short
 * list.
 */
extern char **environ;

enum { ENV_MAX = 64 };
static char *private_env[ENV_MAX];
static unsigned private_base; /* entries before the per-call node list */
static char nodes_entry[192];
static char arenas_entry[] = "MEMKIND_ARENA_NUM_PER_KIND=1";

static bool env_is(const char *entry, const char *name)
{
	size_t n = strlen(name);
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static void private_env_build(void)
{
	unsigned n = 0;
	private_env[n++] = arenas_entry;
	for (char **e = environ; e != NULL && *e != NULL && n + 2 < ENV_MAX; e++) {
		/* memkind's jemalloc starts in here too: its JEMK_MALLOC_CONF must be seen. */
		bool memkind = strncmp(*e, "MEMKIND_", 8) == 0 || env_is(*e, "JEMK_MALLOC_CONF");
		if (memkind && !env_is(*e, "MEMKIND_ARENA_NUM_PER_KIND") &&
		    !env_is(*e, "MEMKIND_DAX_KMEM_NODES") && !env_is(*e, "MEMKIND_HBW_NODES"))
			private_env[n++] = *e;
	}
	private_base = n;
	private_env[n] = NULL;
}

/* Check a kind under the private environment; var=nodes added when var is not NULL. */
static int kind_check(memkind_t kind, const char *var, const char *nodes)
{
	unsigned n = private_base;
	if (var != NULL) {
		ta_format(nodes_entry, sizeof(nodes_entry), "%s=%s", var, nodes);
		private_env[n++] = nodes_entry;
	}
	private_env[n] = NULL;
	char **saved = environ;
	environ = private_env;
	int rc = memkind_check_available(kind);
	environ = saved;
	return rc;
}

/*
 * The kind's arena keeps freed pages until keep.c says to purge them (dirty_decay_ms -1): its
 * default purged a freed block of 8 MiB or more at once and the rest after 10 s, without a word
 * to the quotas. Found by asking jemalloc which arena served the tier's first block (a probe of
 * its own would map, under THP "always", a 2 MiB huge page in a tier the program may never use).
 */
static void arena_setup(unsigned t, void *block)
{
	unsigned expect = ARENA_UNSEEN;
	if (!atomic_compare_exchange_strong(&tier_arena[t], &expect, UINT_MAX))
		return; /* another thread does it */
	unsigned arena;
	size_t len = sizeof(arena);
	if (jemk_mallctl("arenas.lookup", &arena, &len, &block, sizeof(block)) == 0) {
		char name[64];
		ssize_t never = -1;
		ta_format(name, sizeof(name), "arena.%u.dirty_decay_ms", arena);
		if (jemk_mallctl(name, NULL, NULL, &never, sizeof(never)) == 0) {
			atomic_store(&tier_arena[t], arena);
			return;
		}
	}
	ta_log(TA_LOG_INFO,
	       "tier %u: its kind's arena not found; freed pages are purged by memkind", t);
}

void ta_backend_purge(unsigned tier)
{
	unsigned arena = tier < TA_MAX_TIERS ? atomic_load(&tier_arena[tier]) : UINT_MAX;
	if (arena >= ARENA_UNSEEN)
		return;
	char name[64];
	ta_format(name, sizeof(name), "arena.%u.purge", arena);
	jemk_mallctl(name, NULL, NULL, NULL, 0);
}

static void use_kind(unsigned t, memkind_t kind, const char *name, bool bound)
{
	tier_kind[t] = kind;
	ta_format(ta_backend[t].kind_name, sizeof(ta_backend[t].kind_name), "%s", name);
	ta_backend[t].bound = bound;
}

static int kinds_init(const struct ta_topology *topo, struct ta_options *opts)
{
	bool regular_used = false, slot_used[NSLOTS] = { false, false };
	static const char *const slot_env[NSLOTS] = { "MEMKIND_DAX_KMEM_NODES",
						      "MEMKIND_HBW_NODES" };
	static const char *const slot_name[NSLOTS] = { "MEMKIND_DAX_KMEM_ALL", "MEMKIND_HBW_ALL" };
	memkind_t slot_kind[NSLOTS] = { MEMKIND_DAX_KMEM_ALL, MEMKIND_HBW_ALL };

	if (ta_memkind_link_start() != 0) {
		ta_log(TA_LOG_WARN, "libnuma.so.1 cannot be loaded: memkind cannot start");
		return -ENODEV;
	}
	ta_log(TA_LOG_DEBUG, "memkind: one arena per kind, its jemalloc started with \"%s\"",
	       jemk_malloc_conf);
	if (kind_check(MEMKIND_DEFAULT, NULL, NULL) != 0) {
		ta_log(TA_LOG_ERROR, "memkind's default kind is unavailable");
		return -ENODEV;
	}
	for (unsigned t = 0; t < topo->ntiers; t++) {
		const struct ta_tier_desc *d = &topo->tier[t];
		char nodes[128];
		ta_nodelist_format(d->nodes, nodes, sizeof(nodes));
		if (!regular_used && d->nodes == topo->cpu_nodes &&
		    kind_check(MEMKIND_REGULAR, NULL, NULL) == 0) {
			regular_used = true;
			use_kind(t, MEMKIND_REGULAR, "MEMKIND_REGULAR", true);
			continue;
		}
		/* CPU-less nodes prefer the DAX_KMEM kind, others HBW; either works for any set. */
		bool cpuless = (d->nodes & topo->cpu_nodes) == 0;
		unsigned order[NSLOTS] = { cpuless ? SLOT_DAX : SLOT_HBW,
					   cpuless ? SLOT_HBW : SLOT_DAX };
		bool done = false;
		for (unsigned i = 0; i < NSLOTS && !done; i++) {
			unsigned s = order[i];
			if (slot_used[s])
				continue;
			slot_used[s] = true;
			if (kind_check(slot_kind[s], slot_env[s], nodes) != 0) {
				ta_log(TA_LOG_INFO, "tier %u (%s): %s with nodes %s unavailable", t,
				       d->name, slot_name[s], nodes);
				continue;
			}
			use_kind(t, slot_kind[s], slot_name[s], true);
			done = true;
		}
		if (!done) {
			ta_config_log(
			    TA_LOG_ERROR,
			    "tier %u (%s, nodes %s): no memkind kind can bind to these nodes; its "
			    "memory is placed by the kernel's default policy",
			    t, d->name, nodes);
			ta_config_error(opts);
			use_kind(t, MEMKIND_DEFAULT, "MEMKIND_DEFAULT", false);
		}
	}
	return 0;
}

/* memkind's start: once per process, by the first thread that needs it. */
static bool memkind_up(void)
{
	int state = atomic_load_explicit(&memkind_state, memory_order_acquire);
	if (likely(state != MEMKIND_IDLE))
		return state == MEMKIND_UP;
	ta_lock(&start_lock, TA_RANK_BACKEND);
	if (atomic_load(&memkind_state) == MEMKIND_IDLE) {
		if (ta_backend_on_start != NULL)
			ta_backend_on_start(false);
		ta_backend_starting = true;
		int rc = kinds_init(start_topo, start_opts);
		ta_backend_starting = false;
		if (rc != 0)
			ta_log(TA_LOG_WARN,
			       "memkind unusable; the tiers' memory comes straight from "
			       "the kernel, bound to their nodes");
		atomic_store_explicit(&memkind_state, rc == 0 ? MEMKIND_UP : MEMKIND_FAILED,
				      memory_order_release);
		if (rc == 0 && ta_backend_on_start != NULL)
			ta_backend_on_start(true);
	}
	ta_unlock(&start_lock, TA_RANK_BACKEND);
	return atomic_load(&memkind_state) == MEMKIND_UP;
}

int ta_backend_init(const struct ta_topology *topo, struct ta_options *opts)
{
	private_env_build();
	start_topo = topo;
	start_opts = opts;
	for (unsigned t = 0; t < TA_MAX_TIERS; t++) {
		atomic_store(&tier_arena[t], ARENA_UNSEEN);
		use_kind(t, NULL, "mbind", true); /* one word: summary lines are key=value */
	}
	if (!opts->show_config && !opts->strict)
		return 0;
	/* Asked to show the kinds, or to fail on a tier no kind binds: they must be known now. */
	if (kinds_init(topo, opts) != 0)
		return -ENODEV;
	atomic_store(&memkind_state, MEMKIND_UP);
	return 0;
}

/* A fork while memkind starts on another thread would leave the child's start lock held. */
void ta_backend_fork_prepare(void)
{
	pthread_mutex_lock(&start_lock);
}

void ta_backend_fork_parent(void)
{
	pthread_mutex_unlock(&start_lock);
}

void ta_backend_fork_child(void)
{
	pthread_mutex_init(&start_lock, NULL);
}

void ta_backend_refuse_memkind(void)
{
	int idle = MEMKIND_IDLE;
	atomic_compare_exchange_strong(&memkind_state, &idle, MEMKIND_FAILED);
}

bool ta_backend_memkind_started(void)
{
	return atomic_load(&memkind_state) == MEMKIND_UP;
}

/* Straight from the kernel: aligned, bound to the tier's nodes, not yet faulted in (reads as
 * zeros). NULL with errno set. */
static void *direct_map(unsigned tier, size_t size, size_t align)
{
	const size_t page = 4096;
	if (align < page)
		align = page;
	size_t span = size + align - page;
	char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	char *p = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	if (m + span > p + size)
		munmap(p + size, (size_t)(m + span - (p + size)));
	int rc = ta_bind_range(p, size, tier, false);
	if (rc != 0) {
		munmap(p, size);
		errno = -rc;
		return NULL;
	}
	return p;
}

void *ta_backend_chunk(unsigned tier)
{
	unsigned n = atomic_load_explicit(&direct_chunks, memory_order_relaxed);
	while (n < TA_DIRECT_CHUNKS && atomic_load(&memkind_state) != MEMKIND_UP) {
		if (!atomic_compare_exchange_weak(&direct_chunks, &n, n + 1))
			continue;
		void *c = direct_map(tier, TA_CHUNK_SIZE, TA_CHUNK_SIZE);
		if (c != NULL)
			return c;
		ta_log(TA_LOG_INFO, "tier %u: a chunk from the kernel failed (%s); from memkind",
		       tier, strerror(errno));
		break;
	}
	return ta_backend_alloc(tier, TA_CHUNK_SIZE, TA_CHUNK_SIZE, false);
}

void *ta_backend_alloc(unsigned tier, size_t size, size_t align, bool zero)
{
	if (unlikely(!memkind_up()))
		return direct_map(tier, size, align); /* zeroed */
	void *p = NULL;
	if (align <= 16) {
		p = zero ? memkind_calloc(tier_kind[tier], 1, size)
			 : memkind_malloc(tier_kind[tier], size);
	} else if (memkind_posix_memalign(tier_kind[tier], &p, align, size) != 0) {
		p = NULL;
	} else if (zero) {
		memset(p, 0, size);
	}
	if (unlikely(atomic_load_explicit(&tier_arena[tier], memory_order_relaxed) ==
		     ARENA_UNSEEN) &&
	    p != NULL)
		arena_setup(tier, p);
	return p;
}

void ta_backend_free(unsigned tier, void *raw, size_t size)
{
	/* Up: every block but the direct chunks (never freed) is memkind's. */
	if (atomic_load(&memkind_state) == MEMKIND_UP)
		memkind_free(tier_kind[tier], raw);
	else
		munmap(raw, size);
}

/*
 * memkind's destructor (memkind_finalize) finalizes every kind it initialised, which destroys the
 * kind's jemalloc arenas and gives our memory back to the kernel while the process still uses it:
 * stdio flushes its buffers after every destructor has run, so a program's last output would read
 * zeros. So the kinds tieralloc uses are kept alive until the process ends, and any other kind (a
 * caller's own) is finalized as memkind would.
 */
bool ta_backend_kind_kept(void *kind)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		if (kind != NULL && kind == tier_kind[t])
			return true;
	/* probed during start-up, maybe holding a chunk */
	return kind == MEMKIND_REGULAR || kind == MEMKIND_DAX_KMEM_ALL || kind == MEMKIND_HBW_ALL;
}
