/* SPDX-License-Identifier: MIT */
/*
 * The program's own anonymous private mappings (docs/runtimes.md): Python's arenas, V8's and the
 * JVM's heaps, anything a program maps for itself instead of asking malloc. The preload's mmap,
 * munmap and mremap (api/maps.c) record them here, so that tieralloc knows where the memory it
 * does not hand out lies and can sample how much of it is resident on each node.
 *
 * A sorted array of disjoint ranges, neighbours merged: runtimes map next to what they mapped
 * before, so a heap of many mappings is a few ranges. The array has a fixed ceiling (its pages
 * are mapped once, on first use, and touched as it fills): a program that keeps a million small
 * mappings apart fills it, and what does not fit is counted as refused instead of growing the
 * books without bound. An insertion moves at most the whole array (TA_MAPS_MAX ranges, 64 KiB).
 *
 * One lock, a spin on a flag with every signal blocked (a handler that maps memory on the same
 * thread would otherwise wait for itself). Callers that free or replace address space hold it
 * across the system call (api/maps.c says why).
 */
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc/alloc.h"

struct ta_maps ta_maps;
_Atomic bool ta_maps_recorded;
_Atomic uint64_t ta_maps_bytes;
static _Atomic bool maps_locked;
static sigset_t fork_mask; /* the forking thread's mask, while fork holds the lock */
static struct ta_maps_range *maps_storage; /* TA_MAPS_MAX ranges, mapped on first use */
static _Atomic bool sampling;		   /* the worker and the exit summary: one at a time */

/* The first range whose end is above addr (n when none). */
static unsigned first_ending_after(const struct ta_maps *m, uintptr_t addr)
{
	unsigned lo = 0, hi = m->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (m->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void put_at(struct ta_maps *m, unsigned i, uintptr_t start, uintptr_t end)
{
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(m->r[0]));
	m->r[i].start = start;
	m->r[i].end = end;
	m->n++;
}

static void drop_at(struct ta_maps *m, unsigned i)
{
	memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(m->r[0]));
	m->n--;
}

void ta_maps_erase(struct ta_maps *m, uintptr_t start, uintptr_t end)
{
	if (start >= end)
		return;
	unsigned i = first_ending_after(m, start);
	while (i < m->n && m->r[i].start < end) {
		struct ta_maps_range *r = &m->r[i];
		uintptr_t cut_from = r->start > start ? r->start : start;
		uintptr_t cut_to = r->end < end ? r->end : end;
		m->bytes -= cut_to - cut_from;
		if (r->start < start && r->end > end) {
			/* A hole in the middle: two ranges, or, when there is no room for the
			 * second, the first alone and the rest no longer known (counted as
			 * refused). */
			uintptr_t right_end = r->end;
			r->end = start;
			if (m->n < m->cap) {
				put_at(m, i + 1, end, right_end);
			} else {
				m->bytes -= right_end - end;
				m->refused++;
				m->refused_bytes += right_end - end;
			}
			return;
		}
		if (r->start < start) {
			r->end = start;
			i++;
		} else if (r->end > end) {
			r->start = end;
			return;
		} else {
			drop_at(m, i);
		}
	}
}

bool ta_maps_insert(struct ta_maps *m, uintptr_t start, uintptr_t end)
{
	if (start >= end)
		return true;
	ta_maps_erase(m, start, end);
	unsigned i = first_ending_after(m, start);
	/* i is the first range after [start, end); i - 1 the one before it. */
	bool joins_left = i > 0 && m->r[i - 1].end == start;
	bool joins_right = i < m->n && m->r[i].start == end;
	if (joins_left && joins_right) {
		m->r[i - 1].end = m->r[i].end;
		drop_at(m, i);
	} else if (joins_left) {
		m->r[i - 1].end = end;
	} else if (joins_right) {
		m->r[i].start = start;
	} else if (m->n < m->cap) {
		put_at(m, i, start, end);
	} else {
		m->refused++;
		m->refused_bytes += end - start;
		return false;
	}
	m->bytes += end - start;
	return true;
}

bool ta_maps_overlaps(const struct ta_maps *m, uintptr_t start, uintptr_t end)
{
	unsigned i = first_ending_after(m, start);
	return i < m->n && m->r[i].start < end;
}

/* ---- the process's registry ---- */

void ta_maps_lock(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	/* Held for one system call at most: spin, yielding the CPU to its holder. */
	while (atomic_exchange_explicit(&maps_locked, true, memory_order_acquire))
		while (atomic_load_explicit(&maps_locked, memory_order_relaxed))
			sched_yield();
	if (ta_maps.r == NULL && maps_storage == NULL) {
		maps_storage = ta_pages_map(TA_MAPS_MAX * sizeof(struct ta_maps_range), true);
		if (maps_storage != NULL) {
			ta_maps.r = maps_storage;
			ta_maps.cap = TA_MAPS_MAX;
		}
	}
}

void ta_maps_unlock(const sigset_t *old)
{
	atomic_store_explicit(&ta_maps_bytes, ta_maps.bytes, memory_order_relaxed);
	atomic_store_explicit(&maps_locked, false, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

unsigned ta_maps_copy(struct ta_maps_range *out, unsigned max, uint64_t *bytes)
{
	sigset_t old;
	ta_maps_lock(&old);
	unsigned n = ta_maps.n < max ? ta_maps.n : max;
	if (n > 0)
		memcpy(out, ta_maps.r, n * sizeof(out[0]));
	if (bytes != NULL)
		*bytes = ta_maps.bytes;
	ta_maps_unlock(&old);
	return n;
}

/* fork: no other thread is inside a mapping call while the child's copy is made; the lock and
 * the blocked signals last until the parent's and the child's handlers. */
void ta_maps_fork_prepare(void)
{
	sigset_t old;
	ta_maps_lock(&old);
	fork_mask = old;
}

void ta_maps_fork_parent(void)
{
	ta_maps_unlock(&fork_mask);
}

void ta_maps_fork_child(void)
{
	/* A sample the parent's worker was taking did not come along. */
	atomic_store(&sampling, false);
	ta_maps_unlock(&fork_mask);
}

/* ---- where the recorded mappings are resident ---- */

_Atomic uint64_t ta_maps_resident[TA_MAX_TIERS];
_Atomic uint64_t ta_maps_resident_peak[TA_MAX_TIERS];
_Atomic uint64_t ta_maps_samples;
_Atomic uint64_t ta_maps_sample_ns;
_Atomic uint64_t ta_maps_sample_ns_total;
_Atomic uint64_t ta_maps_moved[TA_MAX_TIERS][TA_MAX_TIERS];

_Atomic bool ta_maps_placing;
_Atomic unsigned ta_maps_place_tier;
_Atomic uint64_t ta_maps_rebinds;
_Atomic uint64_t ta_maps_growth;

void ta_maps_place_locked(uintptr_t start, uintptr_t end)
{
	if (atomic_load_explicit(&ta_maps_placing, memory_order_relaxed))
		ta_prefer_range((void *)start, end - start,
				atomic_load_explicit(&ta_maps_place_tier, memory_order_relaxed));
}

/* Room a tier must have to be picked: what the program may fault before the next sample (as
 * much as it grew since the last), and never less than PICK_MARGIN. A tier picked with less
 * would take pages past its share that demotion then moves again. */
#define PICK_MARGIN ((uint64_t)8 << 20)

static bool room_for(unsigned t, uint64_t bytes)
{
	if (!ta_charge(t, bytes, TA_LIMIT_HIGH, false))
		return false;
	ta_uncharge(t, bytes);
	return true;
}

/* After a sample is charged: the fastest tier with room for the margin within its high share
 * (the last when none has), as steering would pick for an allocation. Under the lock, so that a
 * range recorded meanwhile is placed at the old pick before it is re-placed, never after. */
static void place(uint64_t grew)
{
	if (ta_ntiers < 2 || !ta_charge_shared())
		return;
	atomic_store(&ta_maps_growth, grew);
	uint64_t margin = grew > PICK_MARGIN ? grew : PICK_MARGIN;
	unsigned pick = ta_ntiers - 1;
	for (unsigned t = 0; t + 1 < ta_ntiers; t++) {
		if (room_for(t, margin)) {
			pick = t;
			break;
		}
	}
	if (atomic_load(&ta_maps_placing) && atomic_load(&ta_maps_place_tier) == pick)
		return;
	sigset_t old;
	ta_maps_lock(&old);
	atomic_store(&ta_maps_place_tier, pick);
	atomic_store(&ta_maps_placing, true);
	for (unsigned i = 0; i < ta_maps.n; i++)
		ta_prefer_range((void *)ta_maps.r[i].start, ta_maps.r[i].end - ta_maps.r[i].start,
				pick);
	ta_maps_unlock(&old);
	atomic_fetch_add(&ta_maps_rebinds, 1);
}

/* ---- the recorded mappings in windows, for ranking and moving (enforce/) ---- */

static struct ta_maps_window *windows, *windows_next; /* TA_MAPS_WINDOWS each, on first use */
static unsigned nwindows;

bool ta_maps_windows_take(struct ta_maps_window **w, unsigned *n)
{
	if (atomic_exchange(&sampling, true))
		return false;
	*w = windows;
	*n = windows != NULL ? nwindows : 0;
	return true;
}

void ta_maps_windows_give(void)
{
	atomic_store(&sampling, false);
}

/* The nodes of tier t that no faster tier has. */
static uint64_t own_nodes(unsigned t)
{
	uint64_t nodes = ta_topo.tier[t].nodes;
	for (unsigned f = 0; f < t; f++)
		nodes &= ~ta_topo.tier[f].nodes;
	return nodes;
}

/* Per tier from per node: a node counts in the first tier that has it (tiers that share nodes,
 * TIERALLOC_TIERS "0;0" of the tests, must not count its pages twice). */
static void tiers_of(const uint64_t per_node[TA_MAX_NODES], uint64_t per_tier[TA_MAX_TIERS])
{
	for (unsigned t = 0; t < ta_ntiers; t++) {
		uint64_t sum = 0, nodes = own_nodes(t);
		for (unsigned node = 0; node < TA_MAX_NODES; node++)
			if (nodes & (1ull << node))
				sum += per_node[node];
		per_tier[t] = sum;
	}
}

/* The windows of a sample: each window-aligned piece of a range with pages resident, its heat
 * carried over from the last sample's window at the same address (both lists are sorted).
 * Windows past TA_MAPS_WINDOWS are counted, not ranked. Sampling flag held. */
static void sample_windows(const struct ta_maps_range *r, unsigned n, uint64_t per_tier[])
{
	if (windows == NULL) {
		windows = ta_pages_map(TA_MAPS_WINDOWS * sizeof(*windows), true);
		windows_next = ta_pages_map(TA_MAPS_WINDOWS * sizeof(*windows), true);
	}
	unsigned made = 0, old = 0;
	uint64_t now = ta_monotonic_ns();
	for (unsigned i = 0; i < n; i++) {
		for (uintptr_t a = r[i].start; a < r[i].end;) {
			uintptr_t end = (a & ~(TA_MAPS_WINDOW - 1)) + TA_MAPS_WINDOW;
			if (end > r[i].end)
				end = r[i].end;
			uint64_t per_node[TA_MAX_NODES] = { 0 }, tiers[TA_MAX_TIERS] = { 0 };
			uint64_t found = ta_resident_nodes(a, end - a, per_node);
			tiers_of(per_node, tiers);
			for (unsigned t = 0; t < ta_ntiers; t++)
				per_tier[t] += tiers[t];
			if (found > 0 && windows_next != NULL && made < TA_MAPS_WINDOWS) {
				struct ta_maps_window *w = &windows_next[made++];
				memset(w, 0, sizeof(*w));
				w->start = a;
				w->len = (uint32_t)(end - a);
				w->seen_ns = now;
				for (unsigned t = 0; t < ta_ntiers; t++)
					w->pages[t] = (uint32_t)(tiers[t] / TA_MAPS_PAGE);
				while (windows != NULL && old < nwindows && windows[old].start < a)
					old++;
				if (windows != NULL && old < nwindows && windows[old].start == a) {
					w->heat = windows[old].heat;
					w->seen_ns = windows[old].seen_ns;
				}
			}
			a = end;
		}
	}
	if (windows_next != NULL) {
		struct ta_maps_window *t = windows;
		windows = windows_next;
		windows_next = t;
		nwindows = made;
	}
}

/* A window's pages moved (the caller holds the windows): its figures follow, its heat is the
 * move's until the next sample (enforce.h, TA_HEAT_MOVED). */
static void window_moved(uintptr_t start, unsigned from, unsigned to, uint64_t bytes)
{
	unsigned lo = 0, hi = nwindows;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (windows[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= nwindows || windows[lo].start != start)
		return;
	uint32_t pages = (uint32_t)(bytes / TA_MAPS_PAGE);
	struct ta_maps_window *w = &windows[lo];
	w->pages[from] = w->pages[from] > pages ? w->pages[from] - pages : 0;
	w->pages[to] += pages;
	w->heat = TA_MAPS_HEAT_MOVED;
}

uint64_t ta_maps_move_window(uintptr_t start, size_t len, unsigned from, unsigned to, uint64_t max)
{
	if (from >= ta_ntiers || to >= ta_ntiers || from == to)
		return 0;
	if (atomic_exchange(&sampling, true))
		return 0; /* a sample is under way: the next pass moves it */
	/* A tier's pages are those on its nodes that no faster tier has (as a sample counts them):
	 * tiers sharing one node (TIERALLOC_TIERS "0;0", the tests') have nothing to move. */
	uint64_t moved = 0, from_nodes = own_nodes(from), to_nodes = own_nodes(to);
	if (from_nodes != 0 && to_nodes != 0)
		moved = ta_move_resident(start, len, from_nodes, to_nodes, max);
	if (moved > 0) {
		if (windows != NULL)
			window_moved(start, from, to, moved);
		ta_charge_mapped_moved(from, to, moved);
		uint64_t r = atomic_load(&ta_maps_resident[from]);
		atomic_store(&ta_maps_resident[from], r > moved ? r - moved : 0);
		atomic_fetch_add(&ta_maps_resident[to], moved);
		atomic_fetch_add(&ta_maps_moved[from][to], moved);
	}
	atomic_store(&sampling, false);
	return moved;
}

bool ta_maps_sample(bool wait)
{
	static struct ta_maps_range *copy; /* TA_MAPS_MAX ranges, mapped on first use */
	while (atomic_exchange(&sampling, true)) {
		if (!wait)
			return false;
		/* Another thread's sample (the worker's) ends within its own walk's time. */
		struct timespec ms = { .tv_nsec = 1000000 };
		nanosleep(&ms, NULL);
	}
	if (copy == NULL)
		copy = ta_pages_map(TA_MAPS_MAX * sizeof(*copy), true);
	bool done = false;
	if (copy != NULL) {
		uint64_t began = ta_monotonic_ns();
		unsigned n = ta_maps_copy(copy, TA_MAPS_MAX, NULL);
		uint64_t per_tier[TA_MAX_TIERS] = { 0 };
		sample_windows(copy, n, per_tier);
		for (unsigned t = 0; t < ta_ntiers; t++) {
			atomic_store(&ta_maps_resident[t], per_tier[t]);
			if (per_tier[t] > atomic_load(&ta_maps_resident_peak[t]))
				atomic_store(&ta_maps_resident_peak[t], per_tier[t]);
		}
		/* Seen, then charged: the quotas, steering and enforcement count these pages as
		 * the process's, like its chunks (docs/runtimes.md, step 2). */
		ta_charge_mapped(per_tier, ta_ntiers);
		static uint64_t last_total; /* resident at the last sample */
		uint64_t total = 0;
		for (unsigned t = 0; t < ta_ntiers; t++)
			total += per_tier[t];
		place(total > last_total ? total - last_total : 0);
		last_total = total;
		uint64_t took = ta_monotonic_ns() - began;
		atomic_store(&ta_maps_sample_ns, took);
		atomic_fetch_add(&ta_maps_sample_ns_total, took);
		atomic_fetch_add(&ta_maps_samples, 1);
		done = true;
	}
	atomic_store(&sampling, false);
	return done;
}
