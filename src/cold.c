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

static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ta_large *large_head[TA_MAX_TIERS], *large_tail[TA_MAX_TIERS];

static void list_append(struct ta_large *l, unsigned tier)
{
	l->next = NULL;
	l->prev = large_tail[tier];
	if (l->prev != NULL)
		l->prev->next = l;
	else
		large_head[tier] = l;
	large_tail[tier] = l;
}

static void list_remove(struct ta_large *l)
{
	unsigned t = l->placed;
	if (l->prev != NULL)
		l->prev->next = l->next;
	else
		large_head[t] = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	else
		large_tail[t] = l->prev;
	l->prev = l->next = NULL;
}

struct ta_large *ta_large_register(void *user, uint64_t size, unsigned tier, bool aligned)
{
	uint64_t now = ta_monotonic_ns();
	pthread_mutex_lock(&large_lock);
	struct ta_large *l = ta_large_record_new();
	if (l != NULL) {
		l->size = size;
		l->born_ns = now;
		l->placed = l->tier = tier;
		l->state = 0;
		l->aligned = aligned;
		__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
		if (ta_large_table_set(user, l)) {
			list_append(l, tier);
		} else {
			ta_large_record_free(l);
			l = NULL;
		}
	}
	pthread_mutex_unlock(&large_lock);
	return l;
}

bool ta_large_unregister(struct ta_large *l, struct ta_large *last, bool freeing)
{
	pthread_mutex_lock(&large_lock);
	*last = *l;
	if (l->state & TA_LARGE_BUSY) {
		if (freeing)
			l->state |= TA_LARGE_FREED;
		pthread_mutex_unlock(&large_lock);
		return false;
	}
	if (!freeing) {
		/* In place only when nothing about its range changed, and its new address will
		 * have a table entry whatever it is. */
		if (l->state != 0 || l->placed != l->tier || !ta_large_table_reserve()) {
			pthread_mutex_unlock(&large_lock);
			return false;
		}
		ta_large_table_clear(l->user);
	}
	list_remove(l);
	if (freeing)
		ta_large_record_free(l);
	pthread_mutex_unlock(&large_lock);
	return true;
}

void ta_large_reregister(struct ta_large *l, void *user, uint64_t size)
{
	pthread_mutex_lock(&large_lock);
	__atomic_store_n(&l->user, user, __ATOMIC_RELEASE);
	l->size = size;
	if (!ta_large_table_set(user, l))
		ta_log(TA_LOG_ERROR, "large object %p has no table entry; its free will be refused",
		       user);
	list_append(l, l->tier);
	pthread_mutex_unlock(&large_lock);
}

void ta_large_forget(struct ta_large *l)
{
	pthread_mutex_lock(&large_lock);
	ta_large_record_free(l);
	pthread_mutex_unlock(&large_lock);
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

static unsigned take_large(unsigned tier, struct ta_cold_range *out, unsigned max, uint64_t now)
{
	unsigned n = 0;
	pthread_mutex_lock(&large_lock);
	for (struct ta_large *l = large_head[tier]; l != NULL && n < max; l = l->next) {
		if (l->state & TA_LARGE_BUSY)
			continue;
		l->state |= TA_LARGE_BUSY;
		struct ta_cold_range *r = &out[n++];
		memset(r, 0, sizeof(*r));
		r->kind = TA_RANGE_LARGE;
		r->owner = l;
		/* The object itself: the header and link lines before it are not worth a page. */
		r->addr = l->user;
		r->len = l->size;
		r->charge = r->len;
		r->age_ns = now > l->born_ns ? now - l->born_ns : 0;
	}
	pthread_mutex_unlock(&large_lock);
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
		r->charge = (uint64_t)info[i].pages_used * TA_PAGE_SIZE;
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
	pthread_mutex_lock(&large_lock);
	if (moved_to >= 0 && (unsigned)moved_to != l->placed) {
		list_remove(l);
		l->placed = (uint32_t)moved_to;
		list_append(l, (unsigned)moved_to);
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
		list_remove(l);
	pthread_mutex_unlock(&large_lock);
	if (freed)
		ta_large_destroy(l);
}

void ta_large_fork_prepare(void)
{
	pthread_mutex_lock(&large_lock);
}

void ta_large_fork_parent(void)
{
	pthread_mutex_unlock(&large_lock);
}

/* The child has no pass running: nothing stays busy. An object freed while busy in the parent
 * stays allocated in the child (one object, only when fork meets a pass). */
void ta_large_fork_child(void)
{
	pthread_mutex_init(&large_lock, NULL);
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		for (struct ta_large *l = large_head[t]; l != NULL; l = l->next)
			l->state &= ~(TA_LARGE_BUSY | TA_LARGE_FREED);
}
