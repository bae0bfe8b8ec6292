/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches. Each thread keeps, per tier and size class, a stack of free objects, and per
 * tier a stock of bytes already charged to the tier (struct ta_stock, which charge.c alone
 * changes): the fast paths touch only this thread's memory. Exact statistics come from summing
 * the registered caches' counters, not from counting in the fast path.
 *
 * Caches are mmap'd, never malloc'd, and recycled when threads exit.
 */
#include <string.h>
#include <unistd.h>

#include "alloc/alloc.h"

__thread struct ta_tcache *ta_tls __attribute__((tls_model("initial-exec")));
#ifdef TA_DEBUG
__thread uint32_t ta_locks_held __attribute__((tls_model("initial-exec")));
#endif
static __thread bool tls_retired __attribute__((tls_model("initial-exec")));

static pthread_key_t exit_key;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ta_tcache *registry; /* live caches */
static struct ta_tcache *spare;	   /* retired caches, ready for reuse */
static size_t tcache_size;	   /* the structure plus its slot arrays */

static void thread_exit(void *arg)
{
	struct ta_tcache *tc = arg;
	if (tc == NULL)
		return;
	ta_tcache_retire(tc);
}

int ta_tcache_init(void)
{
	size_t slots = 0;
	for (unsigned c = 0; c < TA_NCLASSES; c++)
		slots += ta_class_cache_cap[c];
	/* Twice the slots: a bin's array is replaced by one twice its size as it grows. */
	tcache_size = sizeof(struct ta_tcache) + 2 * (size_t)ta_ntiers * slots * sizeof(void *);
	tcache_size = (tcache_size + 4095) & ~(size_t)4095;
	return -pthread_key_create(&exit_key, thread_exit);
}

/* fresh: tc is new from the kernel, all zero. A bin gets its slots on first use (ta_tcache_grow):
 * those of the classes a thread uses sit together, and a bin never used is never written (with
 * 224 classes, half of them unused in a young process, 16 slots for every bin at the start spread
 * the used ones over twice the pages). */
static void tcache_setup(struct ta_tcache *tc, size_t map_size, bool fresh)
{
	if (!fresh)
		memset(tc, 0, sizeof(*tc));
	tc->map_size = map_size;
	tc->slot_next = (void **)(tc + 1);
	tc->slot_end = (void **)((char *)tc + map_size);
	tc->retag_gen = atomic_load_explicit(&ta_retag_gen, memory_order_relaxed); /* none cached */
	ta_stock_init(&tc->stock);
}

bool ta_tcache_grow(struct ta_tcache *tc, unsigned tier, unsigned cls)
{
	struct ta_bin *bin = &tc->bins[tier][cls];
	unsigned full = ta_class_cache_cap[cls], cap;
	if (bin->cap == 0)
		cap = full < 16 ? full : 16;
	else
		cap = bin->cap * 2u < full ? bin->cap * 2u : full;
	if (cap <= bin->cap || tc->slot_end - tc->slot_next < (ptrdiff_t)cap)
		return false;
	void **slots = tc->slot_next;
	tc->slot_next += cap;
	if (bin->count > 0)
		memcpy(slots, bin->slots, bin->count * sizeof(void *));
	bin->slots = slots;
	bin->cap = (uint16_t)cap;
	if (bin->fill == 0) /* the first refill: 8 objects (half the cap for the biggest classes) */
		bin->fill = (uint16_t)(full / 2 < 8 ? full / 2 : 8);
	return true;
}

/* A thread that allocated nothing in the tier since the tier's last full bin only frees there,
 * as a consumer of another thread's objects does: its bins give all back, and stay at their first
 * size, instead of each growing to its cap and holding what the producer's refills then take
 * from fresh runs (prog_handoff). Any other thread grows the bin, or keeps half. */
void ta_tcache_make_room(struct ta_tcache *tc, unsigned tier, unsigned cls)
{
	struct ta_bin *bin = &tc->bins[tier][cls];
	uint64_t allocs = tc->cnt[tier][0] + tc->cnt[tier][1] + tc->cnt[tier][2];
	bool frees_only = allocs == tc->allocs_when_full[tier];
	tc->allocs_when_full[tier] = allocs;
	if (frees_only && bin->cap > 0)
		ta_tcache_flush_bin(tc, tier, cls, 0);
	else if (!ta_tcache_grow(tc, tier, cls))
		ta_tcache_flush_bin(tc, tier, cls, bin->cap / 2);
}

struct ta_tcache *ta_tcache_get(void)
{
	if (ta_tls != NULL)
		return ta_tls;
	if (tls_retired || atomic_load(&ta_state) != TA_READY)
		return NULL;
	ta_lock(&registry_lock, TA_RANK_REGISTRY);
	struct ta_tcache *tc = spare;
	if (tc != NULL) {
		spare = tc->next;
		tcache_setup(tc, tc->map_size, false);
	} else {
		tc = ta_pages_map(tcache_size, false);
		if (tc == NULL) {
			ta_unlock(&registry_lock, TA_RANK_REGISTRY);
			return NULL;
		}
		tcache_setup(tc, tcache_size, true);
	}
	tc->next = registry;
	if (registry != NULL)
		registry->prev = tc;
	registry = tc;
	ta_unlock(&registry_lock, TA_RANK_REGISTRY);
	/* Set before pthread_setspecific, which may itself allocate. */
	ta_tls = tc;
	pthread_setspecific(exit_key, tc);
	return tc;
}

void ta_tcache_flush_bin(struct ta_tcache *tc, unsigned tier, unsigned cls, unsigned keep)
{
	struct ta_bin *bin = &tc->bins[tier][cls];
	unsigned n = bin->count;
	if (n > bin->cap)
		n = bin->cap; /* a push from a signal handler raced with us: keep what is valid */
	if (n <= keep)
		return;
	/* The oldest objects (bottom of the stack) go back; the most recently freed stay hot. */
	unsigned out = n - keep;
	ta_arena_flush(tier, cls, bin->slots, out);
	memmove(bin->slots, bin->slots + out, keep * sizeof(void *));
	bin->count = keep;
}

/* Whether q, a link read from a deferred object, is an object of ours: a small one (ta_free checks
 * the rest) or a large one on record. */
static bool deferred_ok(const void *q)
{
	return ((uintptr_t)q & 15u) == 0 && (ta_chunk_tier_of(q) >= 0 || ta_large_find(q) != NULL);
}

void ta_tcache_drain_deferred(struct ta_tcache *tc)
{
	void *p = atomic_exchange(&tc->deferred, NULL);
	while (p != NULL) {
		void *next = ta_link_get(p);
		if (unlikely(next != NULL && !deferred_ok(next))) {
			ta_misuse(TA_MISUSE_LINK, "free", p); /* warn: p and the rest leaked */
			return;
		}
		ta_free(p);
		p = next;
	}
}

static void fold_counters(struct ta_tcache *tc)
{
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_arena *a = &ta_arenas[t];
		atomic_fetch_add(&a->folded_live, tc->live[t]);
		atomic_fetch_add(&a->folded_allocs, tc->cnt[t][0] + tc->cnt[t][1] + tc->cnt[t][2]);
		atomic_fetch_add(&a->folded_steered_in, tc->cnt[t][1]);
		atomic_fetch_add(&a->folded_explicit, tc->cnt[t][2]);
	}
}

static void unlink_tcache(struct ta_tcache *tc)
{
	if (tc->prev != NULL)
		tc->prev->next = tc->next;
	else
		registry = tc->next;
	if (tc->next != NULL)
		tc->next->prev = tc->prev;
}

void ta_tcache_retire(struct ta_tcache *tc)
{
	tc->in_slow = 0;
	ta_tcache_drain_deferred(tc);
	tc->in_slow = 1;
	for (unsigned t = 0; t < ta_ntiers; t++)
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			ta_tcache_flush_bin(tc, t, c, 0);
	/* The whole stock goes back; live bytes are folded into the arena. */
	ta_stock_return(&tc->stock);
	ta_tls = NULL;
	tls_retired = true; /* later calls of this thread (other TLS destructors) go uncached */
	ta_lock(&registry_lock, TA_RANK_REGISTRY);
	fold_counters(tc);
	unlink_tcache(tc);
	tc->next = spare;
	spare = tc;
	ta_unlock(&registry_lock, TA_RANK_REGISTRY);
}

void ta_tcache_sum(struct ta_tier_counts out[TA_MAX_TIERS])
{
	memset(out, 0, TA_MAX_TIERS * sizeof(*out));
	ta_lock(&registry_lock, TA_RANK_REGISTRY);
	for (struct ta_tcache *tc = registry; tc != NULL; tc = tc->next) {
		for (unsigned t = 0; t < ta_ntiers; t++) {
			uint64_t preferred = __atomic_load_n(&tc->cnt[t][0], __ATOMIC_RELAXED);
			uint64_t steered = __atomic_load_n(&tc->cnt[t][1], __ATOMIC_RELAXED);
			uint64_t explicit = __atomic_load_n(&tc->cnt[t][2], __ATOMIC_RELAXED);
			out[t].live += __atomic_load_n(&tc->live[t], __ATOMIC_RELAXED);
			out[t].allocs += preferred + steered + explicit;
			out[t].steered_in += steered;
			out[t].explicit_allocs += explicit;
		}
	}
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_arena *a = &ta_arenas[t];
		out[t].live += atomic_load(&a->folded_live);
		out[t].allocs += atomic_load(&a->folded_allocs);
		out[t].steered_in += atomic_load(&a->folded_steered_in);
		out[t].explicit_allocs += atomic_load(&a->folded_explicit);
	}
	ta_unlock(&registry_lock, TA_RANK_REGISTRY);
}

/* Publish this thread's cached objects and stock (tieralloc_ctl "thread.flush"). */
void ta_tcache_flush_all_mine(void)
{
	struct ta_tcache *tc = ta_tls;
	if (tc == NULL)
		return;
	tc->in_slow = 1;
	for (unsigned t = 0; t < ta_ntiers; t++)
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			ta_tcache_flush_bin(tc, t, c, 0);
	ta_stock_return(&tc->stock);
	/* Look at the fastest tier again on the next allocation. */
	tc->pref_tier = 0;
	tc->pref_slot = 0;
	tc->in_slow = 0;
}

void ta_tcache_fork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

void ta_tcache_fork_parent(void)
{
	pthread_mutex_unlock(&registry_lock);
}

/* In the child only the forking thread exists: fold the others' caches into the arenas. Their
 * cached objects are lost to the child (bounded by the cache size); their live bytes stay live. */
void ta_tcache_fork_child(void)
{
	pthread_mutex_init(&registry_lock, NULL);
	struct ta_tcache *tc = registry;
	while (tc != NULL) {
		struct ta_tcache *next = tc->next;
		if (tc != ta_tls) {
			ta_stock_forget(&tc->stock);
			fold_counters(tc);
			unlink_tcache(tc);
			tc->next = spare;
			spare = tc;
		}
		tc = next;
	}
}
