/* SPDX-License-Identifier: MIT */
/*
 * The promotion gate (seed 000, patch 13, from user space). memkind binds every kind's memory to
 * its tier (MPOL_BIND), which NUMA balancing leaves alone: by itself tieralloc's lower-tier
 * memory is never promoted. TIERALLOC_PROMOTION says what the kernel may do:
 *   never   leave it so;
 *   always  relax every lower-tier range (MPOL_BIND over its tier and the faster ones, with
 *           MPOL_F_NUMA_BALANCING) so that the kernel promotes what is hot, quota or not;
 *   gated   (default) relax a tier's ranges while every faster tier up to the target has
 *           headroom; when one comes within half a margin of its high share (ta_shm_gate_margin:
 *           an eighth of it), bind them back with MPOL_MF_MOVE, which also returns the pages
 *           the kernel had promoted; reopen once it is a whole margin below.
 * Memory that tieralloc demoted is never relaxed: the kernel would bring back what was just
 * moved down, and the two would take turns.
 * Only ranges whose pages are all present are relaxed: under the relaxed policy a new fault
 * would land on the faulting CPU's node. A freed large object's range gets its home policy back
 * (ta_restore_range); chunks are never freed.
 */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "enforce/enforce.h"

/* Per tier: the fastest tier its ranges may be promoted into; == the tier itself when bound. */
static unsigned relaxed_upto[TA_MAX_TIERS];
static _Atomic bool unsupported;

/* Are all pages of the range present? mincore needs no privileges. */
static bool resident(void *addr, size_t len)
{
	unsigned char vec[1024]; /* one 4 MiB chunk */
	uintptr_t a = ((uintptr_t)addr + 4095) & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)addr + len) & ~(uintptr_t)4095;
	while (a < e) {
		size_t n = (e - a) / 4096 < sizeof(vec) ? (e - a) / 4096 : sizeof(vec);
		if (syscall(SYS_mincore, a, n * 4096, vec) != 0)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!(vec[i] & 1))
				return false;
		a += n * 4096;
	}
	return true;
}

static void relax_failed(int rc)
{
	if (!atomic_exchange(&unsupported, true))
		ta_log(TA_LOG_INFO,
		       "promotion gate: this kernel cannot let NUMA balancing act on bound memory "
		       "(mbind MPOL_F_NUMA_BALANCING: %d, Linux >= 5.15); lower tiers stay bound",
		       rc);
}

/* Bring tier t's ranges to the wanted state; want == t binds. Chunks are relaxed whole, 4 MiB
 * aligned: a policy boundary inside a transparent huge page splits its mapping, and NUMA
 * balancing skips PTE-mapped huge pages (Linux 6.1). Only chunks no run will be cut from any
 * more, whose runs are all present: the rest of the chunk (its header page) is never faulted. */
static void apply(unsigned t, unsigned want, bool changed)
{
	static struct ta_cold_range ranges[1024];
	static struct ta_chunk_info info[4096]; /* 16 GiB of chunks; the pass runs alone */
	unsigned n = ta_arena_chunks(t, info, 4096, want < t);
	for (unsigned i = 0; i < n; i++) {
		struct ta_chunk *c = info[i].chunk;
		/* gate_state is read by the allocator (arena.c: no run is cut in a relaxed chunk's
		 * holes) under the chunk lock, which the pass does not take: relaxed atomics. */
		if (want == t || changed) {
			/* Written only when it changes: a store to the header page of a chunk
			 * backed by a huge page makes 2 MiB of it read as written (access.c), and
			 * every lower-tier chunk passes here each pass. */
			if (__atomic_load_n(&c->gate_state, __ATOMIC_RELAXED) != 0) {
				ta_bind_range(c, TA_CHUNK_SIZE, t, true);
				__atomic_store_n(&c->gate_state, 0, __ATOMIC_RELAXED);
			}
			if (want == t)
				continue;
		}
		/* Demoted memory went down by decision: letting the kernel bring it back would
		 * undo the demotion (the two would take turns). */
		uint32_t end = info[i].pages_used;
		if (c->demoted || __atomic_load_n(&c->gate_state, __ATOMIC_RELAXED) != 0 ||
		    end <= 1 || !resident((char *)c + TA_PAGE_SIZE, (end - 1) * TA_PAGE_SIZE))
			continue;
		/* Marked first: a run cut from its holes from now on would fault where the CPU is.
		 */
		__atomic_store_n(&c->gate_state, 1, __ATOMIC_RELAXED);
		int rc = ta_relax_range(c, TA_CHUNK_SIZE, t, want);
		if (rc != 0) {
			__atomic_store_n(&c->gate_state, 0, __ATOMIC_RELAXED);
			relax_failed(rc);
			return;
		}
	}
	/* Large objects: only when the state changed, or to relax new ones. */
	if (want == t && !changed)
		return;
	n = ta_cold_large_all(t, ranges, 1024);
	for (unsigned i = 0; i < n; i++) {
		struct ta_cold_range *r = &ranges[i];
		struct ta_large *l = r->owner;
		int relaxed = -1;
		bool demoted = l->placed != l->tier;
		if (want < t && !(l->state & TA_LARGE_RELAXED) && !demoted &&
		    resident(r->addr, r->len)) {
			if (ta_relax_range(r->addr, r->len, t, want) == 0)
				relaxed = 1;
		} else if (want == t && (l->state & TA_LARGE_RELAXED)) {
			ta_bind_range(r->addr, r->len, t, true);
			relaxed = 0;
		}
		ta_cold_release(r, -1, relaxed);
	}
}

bool ta_gate_update(const bool gate[TA_MAX_TIERS])
{
	bool closed = false;
	static bool started;
	int mode = ta_opts.promotion;
	if (!started) {
		/* memkind's binding: every tier starts closed. */
		for (unsigned t = 0; t < TA_MAX_TIERS; t++)
			relaxed_upto[t] = t;
		started = true;
	}
	bool shown[TA_MAX_TIERS];
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		shown[t] = mode != TA_PROMOTION_ALWAYS && gate[t];
	ta_quota_publish_gated(shown);
	if (mode == TA_PROMOTION_NEVER || atomic_load(&unsupported))
		return false;
	for (unsigned t = 1; t < ta_ntiers; t++) {
		unsigned want = 0;
		if (mode == TA_PROMOTION_GATED) {
			/* The fastest tier reachable without crossing one at its share. */
			want = t;
			while (want > 0 && !gate[want - 1])
				want--;
		}
		bool changed = want != relaxed_upto[t];
		if (changed && want > relaxed_upto[t])
			closed = true;
		relaxed_upto[t] = want;
		apply(t, want, changed);
	}
	return closed;
}
