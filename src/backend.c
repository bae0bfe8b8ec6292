/* SPDX-License-Identifier: MIT */
/*
 * The per-tier memory source: one memkind kind per tier, bound to exactly that tier's nodes.
 * This is the only file that includes memkind.h, so that another backend can replace memkind
 * (discontinued upstream) without touching the allocator.
 *
 * memkind has no "bind to this node set" kind, but three of its kinds bind (MPOL_BIND) to a node
 * set that an environment variable can name, which gives up to three tiers:
 *   - MEMKIND_REGULAR binds to every node with CPUs: used for a tier that is exactly those nodes;
 *   - MEMKIND_DAX_KMEM_ALL binds to MEMKIND_DAX_KMEM_NODES (memkind's kind for CPU-less memory);
 *   - MEMKIND_HBW_ALL binds to MEMKIND_HBW_NODES.
 * memkind reads those variables once, when a kind is first used, so tieralloc shows memkind its
 * own value during memkind_check_available() (check_kind_with_nodes); a user's own value does not
 * apply to the kinds tieralloc uses, and the program's environment is never changed.
 * A tier no kind can express falls back to MEMKIND_DEFAULT (the kernel's default placement) with
 * one error line: its memory then lands wherever the task's policy puts it.
 */
#include <dlfcn.h>
#include <memkind.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ta_backend_tier ta_backend[TA_MAX_TIERS];
static memkind_t tier_kind[TA_MAX_TIERS];

enum { SLOT_DAX, SLOT_HBW, NSLOTS };

static int kind_check(memkind_t kind)
{
	return memkind_check_available(kind);
}

/*
 * Point memkind's kind at nodes through its environment variable while memkind initialises the
 * kind (it reads the variable once, then), without touching the program's environment: a private
 * environ holding the variable and the program's other MEMKIND_* entries is swapped in for the
 * call. setenv() is not used: some programs (bash) define their own, which does not write environ
 * before their main() runs, and the variable would leak into the program and its children.
 * Only the initialising thread runs here; another thread reading the environment at this moment
 * would see the short list.
 */
extern char **environ;

static int check_kind_with_nodes(memkind_t kind, const char *var, const char *nodes)
{
	static char entry[192];
	static char *private_env[64];
	size_t vlen = strlen(var);
	unsigned n = 0;
	ta_format(entry, sizeof(entry), "%s=%s", var, nodes);
	private_env[n++] = entry;
	for (char **e = environ; e != NULL && *e != NULL && n + 1 < 64; e++) {
		bool same = strncmp(*e, var, vlen) == 0 && (*e)[vlen] == '=';
		if (strncmp(*e, "MEMKIND_", 8) == 0 && !same)
			private_env[n++] = *e;
	}
	private_env[n] = NULL;
	char **saved = environ;
	environ = private_env;
	int rc = kind_check(kind);
	environ = saved;
	return rc;
}

static void use_kind(unsigned t, memkind_t kind, const char *name, bool bound)
{
	tier_kind[t] = kind;
	ta_format(ta_backend[t].kind_name, sizeof(ta_backend[t].kind_name), "%s", name);
	ta_backend[t].bound = bound;
}

int ta_backend_init(const struct ta_topology *topo, struct ta_options *opts)
{
	bool regular_used = false, slot_used[NSLOTS] = { false, false };
	static const char *const slot_env[NSLOTS] = { "MEMKIND_DAX_KMEM_NODES",
						      "MEMKIND_HBW_NODES" };
	static const char *const slot_name[NSLOTS] = { "MEMKIND_DAX_KMEM_ALL", "MEMKIND_HBW_ALL" };
	memkind_t slot_kind[NSLOTS] = { MEMKIND_DAX_KMEM_ALL, MEMKIND_HBW_ALL };

	if (kind_check(MEMKIND_DEFAULT) != 0) {
		ta_log(TA_LOG_ERROR, "memkind's default kind is unavailable");
		return -ENODEV;
	}
	for (unsigned t = 0; t < topo->ntiers; t++) {
		const struct ta_tier_desc *d = &topo->tier[t];
		char nodes[128];
		ta_nodelist_format(d->nodes, nodes, sizeof(nodes));
		if (!regular_used && d->nodes == topo->cpu_nodes &&
		    kind_check(MEMKIND_REGULAR) == 0) {
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
			if (check_kind_with_nodes(slot_kind[s], slot_env[s], nodes) != 0) {
				ta_log(TA_LOG_INFO, "tier %u (%s): %s with nodes %s unavailable", t,
				       d->name, slot_name[s], nodes);
				continue;
			}
			use_kind(t, slot_kind[s], slot_name[s], true);
			done = true;
		}
		if (!done) {
			ta_log(
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

void *ta_backend_alloc(unsigned tier, size_t size, size_t align, bool zero)
{
	void *p = NULL;
	if (align <= 16) {
		p = zero ? memkind_calloc(tier_kind[tier], 1, size)
			 : memkind_malloc(tier_kind[tier], size);
	} else if (memkind_posix_memalign(tier_kind[tier], &p, align, size) != 0) {
		p = NULL;
	} else if (zero) {
		memset(p, 0, size);
	}
	return p;
}

void *ta_backend_realloc(unsigned tier, void *raw, size_t size)
{
	return memkind_realloc(tier_kind[tier], raw, size);
}

void ta_backend_free(unsigned tier, void *raw)
{
	memkind_free(tier_kind[tier], raw);
}

size_t ta_backend_usable_size(unsigned tier, void *raw)
{
	return memkind_malloc_usable_size(tier_kind[tier], raw);
}

/*
 * memkind's destructor (memkind_finalize) destroys the arenas of every kind it initialised, which
 * gives our memory back to the kernel while the process still uses it: stdio flushes its buffers
 * after every destructor has run, so a program's last output would read zeros. memkind calls
 * memkind_arena_destroy() through its PLT, so this definition wins; it keeps our kinds alive until
 * the process ends and passes any other kind (a caller's own) to memkind.
 */
int memkind_arena_destroy(memkind_t kind) __attribute__((visibility("default")));
int memkind_arena_destroy(memkind_t kind)
{
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		if (kind != NULL && kind == tier_kind[t])
			return 0;
	if (kind == MEMKIND_REGULAR || kind == MEMKIND_DAX_KMEM_ALL || kind == MEMKIND_HBW_ALL)
		return 0; /* probed during start-up, maybe holding a chunk */
	static int (*real_destroy)(memkind_t);
	if (real_destroy == NULL)
		real_destroy = (int (*)(memkind_t))dlsym(RTLD_NEXT, "memkind_arena_destroy");
	return real_destroy != NULL ? real_destroy(kind) : 0;
}
