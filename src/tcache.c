/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches. Each thread keeps, per tier and size class, a stack of free objects, and per
 * tier a stock of bytes already charged to the tier (the kernel's per-cpu memcg stock): the fast
 * paths touch only this thread's memory. A thread's live bytes in a tier are taken - stock, so
 * exact statistics come from summing the registered caches, not from counting in the fast path.
 *
 * Caches are mmap'd, never malloc'd, and recycled when threads exit. Error of the limit check:
 * each thread may hold up to 2 x TIERALLOC_CHARGE_BATCH of stock per tier, so a tier's live bytes
 * stay within its limit, and its charge within limit + the last refill's batch.
 */
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "shm.h"

__thread struct ta_tcache *ta_tls __attribute__((tls_model("initial-exec")));
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
	tcache_size = sizeof(struct ta_tcache) + (size_t)ta_ntiers * slots * sizeof(void *);
	tcache_size = (tcache_size + 4095) & ~(size_t)4095;
	return -pthread_key_create(&exit_key, thread_exit);
}

static void tcache_setup(struct ta_tcache *tc)
{
	size_t map_size = tc->map_size;
	memset(tc, 0, sizeof(*tc));
	tc->map_size = map_size;
	void **slot = (void **)(tc + 1);
	for (unsigned t = 0; t < ta_ntiers; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++) {
			tc->bins[t][c].slots = slot;
			tc->bins[t][c].cap = ta_class_cache_cap[c];
			slot += ta_class_cache_cap[c];
		}
	}
	tc->stock_high = (int64_t)(2 * ta_charge_batch);
}

struct ta_tcache *ta_tcache_get(void)
{
	if (ta_tls != NULL)
		return ta_tls;
	if (tls_retired || atomic_load(&ta_state) != TA_READY)
		return NULL;
	pthread_mutex_lock(&registry_lock);
	struct ta_tcache *tc = spare;
	if (tc != NULL) {
		spare = tc->next;
	} else {
		void *m = ta_pages_map(tcache_size, false);
		if (m == NULL) {
			pthread_mutex_unlock(&registry_lock);
			return NULL;
		}
		tc = m;
		tc->map_size = tcache_size;
	}
	tcache_setup(tc);
	tc->next = registry;
	if (registry != NULL)
		registry->prev = tc;
	registry = tc;
	pthread_mutex_unlock(&registry_lock);
	/* Set before pthread_setspecific, which may itself allocate. */
	ta_tls = tc;
	pthread_setspecific(exit_key, tc);
	return tc;
}

bool ta_tcache_stock_refill(struct ta_tcache *tc, unsigned tier, uint64_t need, int level,
			    bool force)
{
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		ta_shm_refresh_limits(false);
	uint64_t amount = need + ta_charge_batch;
	/* Not a whole batch left: maybe the last bytes before the limit. */
	if (!ta_arena_charge(tier, amount, level, force)) {
		amount = need;
		if (!ta_arena_charge(tier, amount, level, false))
			return false;
	}
	__atomic_store_n(&tc->stock[tier], tc->stock[tier] + (int64_t)amount, __ATOMIC_RELAXED);
	return true;
}

void ta_tcache_stock_trim(struct ta_tcache *tc, unsigned tier)
{
	int64_t give = tc->stock[tier] - (int64_t)ta_charge_batch;
	if (give <= 0)
		return;
	ta_arena_uncharge(tier, (uint64_t)give);
	__atomic_store_n(&tc->stock[tier], tc->stock[tier] - give, __ATOMIC_RELAXED);
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

void ta_tcache_drain_deferred(struct ta_tcache *tc)
{
	void *p = atomic_exchange(&tc->deferred, NULL);
	while (p != NULL) {
		void *next = *(void **)p;
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
	for (unsigned t = 0; t < ta_ntiers; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			ta_tcache_flush_bin(tc, t, c, 0);
		/* Return the whole stock; live bytes are folded into the arena. */
		if (tc->stock[t] > 0)
			ta_arena_uncharge(t, (uint64_t)tc->stock[t]);
		tc->stock[t] = 0;
	}
	ta_tls = NULL;
	tls_retired = true; /* later calls of this thread (other TLS destructors) go uncached */
	pthread_mutex_lock(&registry_lock);
	fold_counters(tc);
	unlink_tcache(tc);
	tc->next = spare;
	spare = tc;
	pthread_mutex_unlock(&registry_lock);
}

void ta_tcache_sum(int64_t live[TA_MAX_TIERS], uint64_t cnt[TA_MAX_TIERS][3])
{
	pthread_mutex_lock(&registry_lock);
	for (struct ta_tcache *tc = registry; tc != NULL; tc = tc->next) {
		for (unsigned t = 0; t < ta_ntiers; t++) {
			live[t] += __atomic_load_n(&tc->live[t], __ATOMIC_RELAXED);
			for (unsigned k = 0; k < 3; k++)
				cnt[t][k] += __atomic_load_n(&tc->cnt[t][k], __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&registry_lock);
}

/* Publish this thread's cached objects and stock (tieralloc_ctl "thread.flush"). */
void ta_tcache_flush_all_mine(void)
{
	struct ta_tcache *tc = ta_tls;
	if (tc == NULL)
		return;
	tc->in_slow = 1;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			ta_tcache_flush_bin(tc, t, c, 0);
		int64_t give = tc->stock[t];
		if (give > 0) {
			ta_arena_uncharge(t, (uint64_t)give);
			__atomic_store_n(&tc->stock[t], 0, __ATOMIC_RELAXED);
		}
	}
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
			for (unsigned t = 0; t < ta_ntiers; t++) {
				if (tc->stock[t] > 0)
					atomic_fetch_sub(&ta_arenas[t].charged,
							 (uint64_t)tc->stock[t]);
				tc->stock[t] = 0;
			}
			fold_counters(tc);
			unlink_tcache(tc);
			tc->next = spare;
			spare = tc;
		}
		tc = next;
	}
}
