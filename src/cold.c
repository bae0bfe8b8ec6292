/* SPDX-License-Identifier: MIT */
/*
 * What memory this process has in each tier and which of it is coldest: the record of large
 * objects (a list per tier, in allocation order) and the ranking of demotion candidates, chunks
 * and large objects together.
 *
 * The default policy is age: a large object is as cold as it is old, a chunk as long ago as a run
 * was last cut from it. Access bits are not visible without privileges (idle page tracking and
 * /proc/kpageflags need root; soft-dirty sees writes only), so age is the honest first cut; a
 * hotness source (NUMA hinting faults counted by BPF, the agent of a later issue) replaces the
 * score function through ta_cold_policy.
 *
 * A large object the pass is working on is marked busy under the registry's lock; a free that
 * finds it busy leaves it to the pass (TA_LARGE_FREED), so the pass never calls mbind on memory
 * that went back to memkind, and no allocating thread ever waits for an mbind.
 */
#include <string.h>

#include "internal.h"

/* The record is sharded by thread: threads allocating and freeing large objects at once would
 * otherwise take turns on one lock (two threads of bench-malloc's large band spent their time in
 * futex waits). An object stays in the shard that recorded it; the pass looks at all of them. */
#define LARGE_SHARDS 8

struct shard {
	pthread_mutex_t lock;
	struct ta_large *head[TA_MAX_TIERS], *tail[TA_MAX_TIERS];
	struct ta_large_pool pool;
} __attribute__((aligned(64)));

static struct shard shards[LARGE_SHARDS] = {
	[0 ... LARGE_SHARDS - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};
static _Atomic unsigned next_shard;
static __thread unsigned my_shard_plus1 __attribute__((tls_model("initial-exec"))); /* 0: none */

static struct shard *my_shard(void)
{
	if (my_shard_plus1 == 0)
		my_shard_plus1 = atomic_fetch_add(&next_shard, 1) % LARGE_SHARDS + 1;
	return &shards[my_shard_plus1 - 1];
}

static struct shard *shard_of(const struct ta_large *l)
{
	return &shards[l->shard % LARGE_SHARDS];
}

static void list_append(struct shard *sh, struct ta_large *l, unsigned tier)
{
	l->next = NULL;
	l->prev = sh->tail[tier];
	if (l->prev != NULL)
		l->prev->next = l;
	else
		sh->head[tier] = l;
	sh->tail[tier] = l;
}

static void list_remove(struct shard *sh, struct ta_large *l)
{
	unsigned t = l->placed;
	if (l->prev != NULL)
		l->prev->next = l->next;
	else
		sh->head[t] = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	else
		sh->tail[t] = l->prev;
	l->prev = l->next = NULL;
}

struct ta_large *ta_large_register(void *user, uint64_t size, unsigned tier, bool aligned)
{
	uint64_t now = ta_monotonic_ns();
	struct shard *sh = my_shard();
	pthread_mutex_lock(&sh->lock);
	struct ta_large *l = ta_large_record_new(&sh->pool);
	if (l != NULL) {
		l->size = size;
		l->born_ns = now;
		l->placed = l->tier = tier;
		l->state = 0;
		l->aligned = aligned;
		l->shard = (uint32_t)(sh - shards);
		__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
		if (ta_large_table_set(user, l, &sh->pool)) {
			list_append(sh, l, tier);
		} else {
			ta_large_record_free(&sh->pool, l);
			l = NULL;
		}
	}
	pthread_mutex_unlock(&sh->lock);
	return l;
}

bool ta_large_unregister(struct ta_large *l, struct ta_large *last, bool freeing)
{
	struct shard *sh = shard_of(l);
	pthread_mutex_lock(&sh->lock);
	*last = *l;
	if (l->state & TA_LARGE_BUSY) {
		if (freeing)
			l->state |= TA_LARGE_FREED;
		pthread_mutex_unlock(&sh->lock);
		return false;
	}
	if (!freeing) {
		/* In place only when nothing about its range changed, and its new address will
		 * have a table entry whatever it is. */
		if (l->state != 0 || l->placed != l->tier || !ta_large_table_reserve(&sh->pool)) {
			pthread_mutex_unlock(&sh->lock);
			return false;
		}
		ta_large_table_clear(l->user);
	}
	list_remove(sh, l);
	if (freeing)
		ta_large_record_free(&sh->pool, l);
	pthread_mutex_unlock(&sh->lock);
	return true;
}

void ta_large_reregister(struct ta_large *l, void *user, uint64_t size)
{
	struct shard *sh = shard_of(l);
	pthread_mutex_lock(&sh->lock);
	__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
	l->size = size;
	if (!ta_large_table_set(user, l, &sh->pool))
		ta_log(TA_LOG_ERROR, "large object %p has no table entry; its free will be refused",
		       user);
	list_append(sh, l, l->tier);
	pthread_mutex_unlock(&sh->lock);
}

void ta_large_forget(struct ta_large *l)
{
	struct shard *sh = shard_of(l);
	pthread_mutex_lock(&sh->lock);
	ta_large_record_free(&sh->pool, l);
	pthread_mutex_unlock(&sh->lock);
}

static uint64_t score_by_age(const struct ta_cold_range *r)
{
	return UINT64_MAX - r->age_ns;
}

static const struct ta_cold_policy age_policy = { "age", score_by_age };
const struct ta_cold_policy *ta_cold_policy = &age_policy;

/* Shell sort by score: no malloc (qsort may allocate), and n is a few thousand at most. */
static void sort_by_score(struct ta_cold_range *r, unsigned n)
{
	static const unsigned gaps[] = { 1750, 701, 301, 132, 57, 23, 10, 4, 1 };
	for (unsigned g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
		unsigned gap = gaps[g];
		for (unsigned i = gap; i < n; i++) {
			struct ta_cold_range tmp = r[i];
			unsigned j = i;
			for (; j >= gap && r[j - gap].score > tmp.score; j -= gap)
				r[j] = r[j - gap];
			r[j] = tmp;
		}
	}
}

/* Up to quota of a shard's not busy objects of the tier, oldest first, marked busy. */
static unsigned take_from(struct shard *sh, unsigned tier, struct ta_cold_range *out,
			  unsigned quota, uint64_t now)
{
	unsigned n = 0;
	pthread_mutex_lock(&sh->lock);
	for (struct ta_large *l = sh->head[tier]; l != NULL && n < quota; l = l->next) {
		if (l->state & TA_LARGE_BUSY)
			continue;
		l->state |= TA_LARGE_BUSY;
		struct ta_cold_range *r = &out[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_LARGE;
		r->owner = l;
		r->addr = l->user;
		r->len = l->size;
		r->charge = r->len;
		r->age_ns = now > l->born_ns ? now - l->born_ns : 0;
	}
	pthread_mutex_unlock(&sh->lock);
	return n;
}

static unsigned take_large(unsigned tier, struct ta_cold_range *out, unsigned max, uint64_t now)
{
	/* An even part from every shard first (each list is oldest first, so no shard's old
	 * objects are crowded out by another's), then whatever room is left. The busy mark keeps
	 * the second round from taking an object twice. */
	unsigned n = 0, even = max / LARGE_SHARDS > 0 ? max / LARGE_SHARDS : 1;
	for (unsigned round = 0; round < 2; round++)
		for (unsigned i = 0; i < LARGE_SHARDS && n < max; i++) {
			unsigned quota = round == 0 && even < max - n ? even : max - n;
			n += take_from(&shards[i], tier, out + n, quota, now);
		}
	return n;
}

unsigned ta_cold_large_all(unsigned tier, struct ta_cold_range *out, unsigned max)
{
	return take_large(tier, out, max, ta_monotonic_ns());
}

#define MAX_CANDIDATES 4096

unsigned ta_cold_collect(unsigned tier, struct ta_cold_range *out, unsigned max)
{
	/* Every range of the tier is a candidate (the pass runs one at a time: static is fine):
	 * ranking only some would leave the oldest of a large heap out. */
	static struct ta_cold_range all[MAX_CANDIDATES];
	static struct ta_chunk_info info[MAX_CANDIDATES];
	uint64_t now = ta_monotonic_ns();
	unsigned n = take_large(tier, all, MAX_CANDIDATES / 4, now);
	unsigned nc = ta_arena_chunks(tier, info, MAX_CANDIDATES - n, true);
	for (unsigned i = 0; i < nc; i++) {
		struct ta_cold_range *r = &all[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_CHUNK;
		r->owner = info[i].chunk;
		r->addr = info[i].chunk;
		r->len = TA_CHUNK_SIZE;
		/* What the chunk holds in pages: what moving it takes off the tier. */
		r->charge = (uint64_t)info[i].pages_held * TA_PAGE_SIZE;
		r->age_ns = now > info[i].carved_ns ? now - info[i].carved_ns : 0;
	}
	for (unsigned i = 0; i < n; i++)
		all[i].score = ta_cold_policy->score(&all[i]);
	sort_by_score(all, n);
	unsigned kept = n < max ? n : max;
	memcpy(out, all, kept * sizeof(*out));
	for (unsigned i = kept; i < n; i++)
		ta_cold_release(&all[i], -1, -1);
	return kept;
}

void ta_cold_release(struct ta_cold_range *r, int moved_to, int relaxed)
{
	if (r->kind != TA_RANGE_LARGE)
		return;
	struct ta_large *l = r->owner;
	struct shard *sh = shard_of(l);
	pthread_mutex_lock(&sh->lock);
	if (moved_to >= 0 && (unsigned)moved_to != l->placed) {
		list_remove(sh, l);
		l->placed = (uint32_t)moved_to;
		list_append(sh, l, (unsigned)moved_to);
	}
	if (moved_to >= 0) {
		l->state |= TA_LARGE_REBOUND;
		l->state &= ~TA_LARGE_RELAXED; /* bound to its new tier by the move */
	}
	if (relaxed == 1)
		l->state |= TA_LARGE_REBOUND | TA_LARGE_RELAXED;
	else if (relaxed == 0)
		l->state &= ~TA_LARGE_RELAXED; /* bound to its tier again; REBOUND stays */
	l->state &= ~TA_LARGE_BUSY;
	bool freed = (l->state & TA_LARGE_FREED) != 0;
	if (freed)
		list_remove(sh, l);
	pthread_mutex_unlock(&sh->lock);
	if (freed)
		ta_large_destroy(l);
}

void ta_large_fork_prepare(void)
{
	for (unsigned i = 0; i < LARGE_SHARDS; i++)
		pthread_mutex_lock(&shards[i].lock);
}

void ta_large_fork_parent(void)
{
	for (unsigned i = LARGE_SHARDS; i-- > 0;)
		pthread_mutex_unlock(&shards[i].lock);
}

/* The child has no pass running: nothing stays busy. An object freed while busy in the parent
 * stays allocated in the child (one object, only when fork meets a pass). */
void ta_large_fork_child(void)
{
	for (unsigned i = 0; i < LARGE_SHARDS; i++) {
		pthread_mutex_init(&shards[i].lock, NULL);
		for (unsigned t = 0; t < TA_MAX_TIERS; t++)
			for (struct ta_large *l = shards[i].head[t]; l != NULL; l = l->next)
				l->state &= ~(TA_LARGE_BUSY | TA_LARGE_FREED);
	}
}
