/* SPDX-License-Identifier: MIT */
/*
 * Per-tier arenas: 4 MiB chunks from the tier's memkind kind, cut into runs of 64 KiB pages, one
 * size class per run, and a central free list per class that the thread caches fill from and
 * flush to in batches. The chunk map (one byte per 4 MiB of address space, reserved but only
 * touched where chunks are) answers "is this pointer in a chunk, and of which tier" in one load.
 * Small-object memory is kept for reuse, never returned to memkind.
 *
 * Charging is by the run: cutting a run charges the tier its pages, at the limit level the
 * steering asks for, and a refused charge cuts no run. Objects handed out and freed again move no
 * charge: their memory stays the process's, in that tier, as the kernel sees it. So reusing a free
 * object never needs headroom, and what the kernel reports beyond the charges (untracked) is only
 * what tieralloc does not hold: metadata, page cache, pages the kernel moved.
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "shm.h"

struct ta_arena ta_arenas[TA_MAX_TIERS];
uint8_t *ta_chunk_map;
static unsigned arena_count;

int ta_arena_init(unsigned ntiers, const uint64_t limits[TA_MAX_TIERS])
{
	size_t map_size = (size_t)1 << (TA_ADDR_BITS - TA_CHUNK_SHIFT);
	void *map = ta_pages_map(map_size, true); /* a few bytes of it are touched */
	if (map == NULL)
		return -ENOMEM;
	for (unsigned t = 0; t < TA_MAX_TIERS; t++) {
		struct ta_arena *a = &ta_arenas[t];
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			pthread_mutex_init(&a->bins[c].lock, NULL);
		pthread_mutex_init(&a->chunk_lock, NULL);
		atomic_store(&a->limit, t < ntiers ? limits[t] : 0);
	}
	arena_count = ntiers;
	ta_chunk_map = map;
	return 0;
}

/*
 * A tier's first chunks get no transparent huge pages. Under THP "always" the first touch of any
 * 2 MiB of a chunk faults all of it, so the chunk runs are being cut from costs up to 2 MiB more
 * than what is in use: for a program holding a few MiB that is most of what it holds. Past
 * TA_THP_AFTER chunks (64 MiB) that bound is under 3% of the tier's chunks, and the rest of them
 * get huge pages as the kernel's setting says.
 */
#define TA_THP_AFTER 16

static struct ta_chunk *chunk_new(unsigned tier)
{
	struct ta_chunk *c = ta_backend_alloc(tier, TA_CHUNK_SIZE, TA_CHUNK_SIZE, false);
	if (c == NULL) {
		atomic_fetch_add(&ta_arenas[tier].backend_failures, 1);
		return NULL;
	}
	if (atomic_load_explicit(&ta_arenas[tier].nchunks, memory_order_relaxed) < TA_THP_AFTER)
		syscall(SYS_madvise, c, TA_CHUNK_SIZE, MADV_NOHUGEPAGE);
	c->magic = TA_CHUNK_MAGIC;
	c->tier = tier;
	c->pages_used = 1; /* page 0 holds this header */
	c->carved_ns = ta_monotonic_ns();
	c->gate_state = 0;
	c->demoted = 0;
	memset(c->page_class, TA_PAGE_NONE, sizeof(c->page_class));
	memset(c->run_pages, 0, sizeof(c->run_pages));
	struct ta_arena *a = &ta_arenas[tier];
	c->next = a->chunks;
	a->chunks = c;
	atomic_fetch_add(&a->nchunks, 1);
	/* Publish last: free() trusts the map. */
	__atomic_store_n(&ta_chunk_map[(uintptr_t)c >> TA_CHUNK_SHIFT], (uint8_t)(tier + 1),
			 __ATOMIC_RELEASE);
	return c;
}

/* A run of pages for cls, its pages charged as ch says; sets *end. Called with the class's
 * central lock held. */
static char *run_new(unsigned tier, unsigned cls, struct ta_fill_charge *ch, char **end)
{
	struct ta_arena *a = &ta_arenas[tier];
	pthread_mutex_lock(&a->chunk_lock);
	struct ta_chunk *c = a->cur;
	/* The end of a chunk takes a shorter run rather than being left unused. */
	unsigned pages = c != NULL ? ta_class_run_fit(cls, TA_CHUNK_PAGES - c->pages_used) : 0;
	bool fresh = pages == 0;
	if (fresh)
		pages = ta_class_run_pages(cls);
	uint64_t bytes = (uint64_t)pages * TA_PAGE_SIZE;
	if (!ta_arena_charge(tier, bytes, ch->level, ch->force)) {
		ch->refused = true;
		pthread_mutex_unlock(&a->chunk_lock);
		return NULL;
	}
	if (fresh) {
		c = chunk_new(tier);
		if (c == NULL) {
			ta_arena_uncharge(tier, bytes);
			pthread_mutex_unlock(&a->chunk_lock);
			return NULL;
		}
		a->cur = c;
	}
	unsigned first = c->pages_used;
	for (unsigned i = 0; i < pages; i++)
		c->page_class[first + i] = (uint8_t)cls;
	c->run_pages[first] = (uint8_t)pages;
	c->pages_used += pages;
	c->carved_ns = ta_monotonic_ns();
	pthread_mutex_unlock(&a->chunk_lock);
	char *start = (char *)c + (size_t)first * TA_PAGE_SIZE;
	size_t size = ta_class_size[cls];
	size_t nobj = (size_t)pages * TA_PAGE_SIZE / size;
	*end = start + nobj * size;
	return start;
}

unsigned ta_arena_fill(unsigned tier, unsigned cls, void **out, unsigned want,
		       struct ta_fill_charge *ch)
{
	struct ta_central_bin *b = &ta_arenas[tier].bins[cls];
	size_t size = ta_class_size[cls];
	unsigned got = 0;
	pthread_mutex_lock(&b->lock);
	while (got < want && b->head != NULL) {
		void *p = b->head;
		b->head = *(void **)p;
		out[got++] = p;
	}
	b->count -= got < b->count ? got : b->count;
	while (got < want) {
		if (b->bump == b->bump_end) {
			b->bump = run_new(tier, cls, ch, &b->bump_end);
			if (b->bump == NULL) {
				b->bump = b->bump_end = NULL;
				break;
			}
		}
		/* Fresh objects are not touched here: first touch happens in the caller's hands. */
		while (got < want && b->bump != b->bump_end) {
			out[got++] = b->bump;
			b->bump += size;
		}
	}
	pthread_mutex_unlock(&b->lock);
	return got;
}

void ta_arena_flush(unsigned tier, unsigned cls, void *const *objs, unsigned n)
{
	if (n == 0)
		return;
	/* Link outside the lock; the objects are ours alone until spliced in. */
	for (unsigned i = 0; i + 1 < n; i++)
		*(void **)objs[i] = objs[i + 1];
	struct ta_central_bin *b = &ta_arenas[tier].bins[cls];
	pthread_mutex_lock(&b->lock);
	*(void **)objs[n - 1] = b->head;
	b->head = objs[0];
	b->count += n;
	pthread_mutex_unlock(&b->lock);
}

bool ta_arena_charge(unsigned tier, uint64_t bytes, int level, bool force)
{
	struct ta_arena *a = &ta_arenas[tier];
	uint64_t limit = atomic_load_explicit(&a->limit, memory_order_relaxed);
	uint64_t now = atomic_fetch_add(&a->charged, bytes) + bytes;
	if (now > limit && !force) {
		atomic_fetch_sub(&a->charged, bytes);
		return false;
	}
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire) &&
	    !ta_shm_charge(tier, bytes, level, force)) {
		atomic_fetch_sub(&a->charged, bytes);
		return false;
	}
	return true;
}

void ta_arena_note_peak(unsigned tier)
{
	struct ta_arena *a = &ta_arenas[tier];
	uint64_t now = atomic_load_explicit(&a->charged, memory_order_relaxed);
	uint64_t peak = atomic_load_explicit(&a->peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak(&a->peak, &peak, now))
		;
}

void ta_arena_uncharge(unsigned tier, uint64_t bytes)
{
	atomic_fetch_sub(&ta_arenas[tier].charged, bytes);
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		ta_shm_uncharge(tier, bytes);
}

void ta_arena_move_charge(unsigned from, unsigned to, uint64_t bytes)
{
	struct ta_arena *a = &ta_arenas[from], *b = &ta_arenas[to];
	atomic_fetch_sub(&a->charged, bytes);
	atomic_fetch_add(&b->charged, bytes);
	atomic_fetch_add(&a->demoted, bytes);
	ta_arena_note_peak(to);
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire)) {
		ta_shm_uncharge(from, bytes);
		ta_shm_charge(to, bytes, TA_LIMIT_MAX, true);
		atomic_fetch_add(&ta_shm.tiers[from].demoted, bytes);
	}
}

void ta_arena_move_live(unsigned from, unsigned to, uint64_t bytes)
{
	/* Statistics: the moved objects' live bytes are now counted in the lower tier. */
	atomic_fetch_sub(&ta_arenas[from].folded_live, (int64_t)bytes);
	atomic_fetch_add(&ta_arenas[to].folded_live, (int64_t)bytes);
}

/* Is a class's current run (the bump range) inside chunk c? Called with that class's lock. */
static bool bump_in(const struct ta_central_bin *b, const struct ta_chunk *c)
{
	return (uintptr_t)b->bump - (uintptr_t)c < TA_CHUNK_SIZE && b->bump != b->bump_end;
}

static bool chunk_movable(unsigned tier, struct ta_chunk *c)
{
	struct ta_arena *a = &ta_arenas[tier];
	if (c == a->cur)
		return false;
	bool seen[TA_NCLASSES] = { false };
	for (unsigned p = 1; p < c->pages_used; p++) {
		unsigned cls = c->page_class[p];
		if (cls >= TA_NCLASSES || seen[cls])
			continue;
		seen[cls] = true;
		struct ta_central_bin *b = &a->bins[cls];
		pthread_mutex_lock(&b->lock);
		bool busy = bump_in(b, c);
		pthread_mutex_unlock(&b->lock);
		if (busy)
			return false;
	}
	return true;
}

unsigned ta_arena_chunks(unsigned tier, struct ta_chunk_info *out, unsigned max, bool movable)
{
	struct ta_arena *a = &ta_arenas[tier];
	unsigned n = 0;
	pthread_mutex_lock(&a->chunk_lock);
	for (struct ta_chunk *c = a->chunks; c != NULL && n < max; c = c->next) {
		if (movable && c == a->cur)
			continue;
		out[n].chunk = c;
		out[n].carved_ns = c->carved_ns;
		out[n].pages_used = c->pages_used;
		n++;
	}
	pthread_mutex_unlock(&a->chunk_lock);
	/* A chunk stops being current for good once another one is: checking after is enough. */
	if (movable) {
		unsigned kept = 0;
		for (unsigned i = 0; i < n; i++)
			if (chunk_movable(tier, out[i].chunk))
				out[kept++] = out[i];
		n = kept;
	}
	return n;
}

/* Take chunk c's objects off one central list; returns their bytes. */
static uint64_t unlink_chunk_objects(struct ta_central_bin *from, struct ta_central_bin *to,
				     const struct ta_chunk *c, size_t size)
{
	void *head = NULL, *tail = NULL;
	uint32_t n = 0;
	pthread_mutex_lock(&from->lock);
	void **link = &from->head;
	while (*link != NULL) {
		void *p = *link;
		if ((uintptr_t)p - (uintptr_t)c < TA_CHUNK_SIZE) {
			*link = *(void **)p;
			*(void **)p = head;
			head = p;
			if (tail == NULL)
				tail = p;
			n++;
		} else {
			link = (void **)p;
		}
	}
	from->count -= n < from->count ? n : from->count;
	pthread_mutex_unlock(&from->lock);
	if (n == 0)
		return 0;
	pthread_mutex_lock(&to->lock);
	*(void **)tail = to->head;
	to->head = head;
	to->count += n;
	pthread_mutex_unlock(&to->lock);
	return (uint64_t)n * size;
}

int64_t ta_arena_retag_chunk(struct ta_chunk *c, unsigned to, uint64_t *live)
{
	unsigned from = c->tier;
	struct ta_arena *a = &ta_arenas[from], *b = &ta_arenas[to];
	if (from == to || !chunk_movable(from, c))
		return -1;
	/* From here on frees of its objects go to the new tier. */
	c->tier = to;
	c->demoted = 1;
	c->gate_state = 0; /* the move bound it to its new tier */
	__atomic_store_n(&ta_chunk_map[(uintptr_t)c >> TA_CHUNK_SHIFT], (uint8_t)(to + 1),
			 __ATOMIC_RELEASE);
	uint64_t carved = 0, listed = 0;
	bool seen[TA_NCLASSES] = { false };
	for (unsigned p = 1; p < c->pages_used; p++) {
		unsigned cls = c->page_class[p];
		if (cls >= TA_NCLASSES)
			continue;
		size_t size = ta_class_size[cls];
		unsigned run = c->run_pages[p] != 0 ? c->run_pages[p] : 1;
		carved += (uint64_t)((size_t)run * TA_PAGE_SIZE / size) * size;
		p += run - 1;
		if (seen[cls])
			continue;
		seen[cls] = true;
		listed += unlink_chunk_objects(&a->bins[cls], &b->bins[cls], c, size);
	}
	/* Off the old tier's list, onto the new one's. */
	pthread_mutex_lock(&a->chunk_lock);
	for (struct ta_chunk **link = &a->chunks; *link != NULL; link = &(*link)->next) {
		if (*link == c) {
			*link = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&a->chunk_lock);
	atomic_fetch_sub(&a->nchunks, 1);
	pthread_mutex_lock(&b->chunk_lock);
	c->next = b->chunks;
	b->chunks = c;
	pthread_mutex_unlock(&b->chunk_lock);
	atomic_fetch_add(&b->nchunks, 1);
	atomic_fetch_add(&a->demotions, 1);
	/* Its runs were charged to the old tier when they were cut: that charge moves whole. For
	 * the statistics, the objects in use were counted live in the old tier and will be freed
	 * to the new one; those cached by threads are handed out as the new tier's (alloc.c). */
	uint64_t cached = ta_tcache_cached_in(from, c, TA_CHUNK_SIZE);
	*live = carved > listed + cached ? carved - listed - cached : 0;
	return (int64_t)(c->pages_used - 1) * (int64_t)TA_PAGE_SIZE;
}

/* Fork: take every arena lock so that the child sees consistent lists, in one fixed order. */
void ta_arena_fork_prepare(void)
{
	for (unsigned t = 0; t < arena_count; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			pthread_mutex_lock(&ta_arenas[t].bins[c].lock);
		pthread_mutex_lock(&ta_arenas[t].chunk_lock);
	}
}

void ta_arena_fork_parent(void)
{
	for (unsigned t = arena_count; t-- > 0;) {
		pthread_mutex_unlock(&ta_arenas[t].chunk_lock);
		for (unsigned c = TA_NCLASSES; c-- > 0;)
			pthread_mutex_unlock(&ta_arenas[t].bins[c].lock);
	}
}

void ta_arena_fork_child(void)
{
	/* The forking thread owns every lock; re-initialising is the robust choice. */
	for (unsigned t = 0; t < arena_count; t++) {
		for (unsigned c = 0; c < TA_NCLASSES; c++)
			pthread_mutex_init(&ta_arenas[t].bins[c].lock, NULL);
		pthread_mutex_init(&ta_arenas[t].chunk_lock, NULL);
	}
}
