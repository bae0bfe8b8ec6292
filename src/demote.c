/* SPDX-License-Identifier: MIT */
/*
 * Moving and binding memory between tiers: the only file that calls mbind(2) and move_pages(2).
 * Everything here runs in the enforcement pass (the worker thread, or the allocating thread with
 * TIERALLOC_ENFORCE=inline) or on a large object's free, never with an allocator lock held: a
 * migration of megabytes takes milliseconds, and whoever waits for it must be only the pass.
 *
 * memkind binds each kind's memory to its nodes (MPOL_BIND without MPOL_F_NUMA_BALANCING, seen
 * as "bind:N" in /proc/PID/numa_maps), so NUMA balancing never promotes tieralloc's memory until
 * the promotion gate relaxes a range (ta_relax_range).
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "shm.h"

#define MODE_BIND	    2	      /* MPOL_BIND */
#define MODE_NUMA_BALANCING (1 << 13) /* MPOL_F_NUMA_BALANCING, Linux >= 5.15 */
#define FLAG_MOVE	    (1 << 1)  /* MPOL_MF_MOVE: this process's pages only */
#define PAGE		    4096ul

static long sys_mbind(uintptr_t start, size_t len, int mode, uint64_t nodes, unsigned flags)
{
	/* maxnode counts bits and the kernel drops the last one: pass one more than we use. */
	return syscall(SYS_mbind, start, len, mode, &nodes, (unsigned long)TA_MAX_NODES + 1, flags);
}

/* The whole pages inside [addr, addr+len): the object's edges share pages with neighbours. */
static bool inner_pages(void *addr, size_t len, uintptr_t *start, size_t *n)
{
	uintptr_t a = ((uintptr_t)addr + PAGE - 1) & ~(PAGE - 1);
	uintptr_t e = ((uintptr_t)addr + len) & ~(PAGE - 1);
	if (e <= a)
		return false;
	*start = a;
	*n = e - a;
	return true;
}

static int policy_call(void *addr, size_t len, int mode, uint64_t nodes, unsigned flags)
{
	uintptr_t start;
	size_t n;
	if (!inner_pages(addr, len, &start, &n))
		return -EINVAL;
	int saved = errno;
	int rc = sys_mbind(start, n, mode, nodes, flags) == 0 ? 0 : -errno;
	errno = saved;
	return rc;
}

/*
 * Bind the range to the tier (policy only: mbind holds the mmap lock for writing, so its own
 * MPOL_MF_MOVE would stall every page fault and mmap of the program for the whole migration),
 * then move its pages with move_pages(2), which takes the lock for reading, a batch at a time.
 */
int ta_demote_range(void *addr, size_t len, unsigned tier)
{
	int rc = policy_call(addr, len, MODE_BIND, ta_topo.tier[tier].nodes, 0);
	if (rc != 0)
		return rc;
	enum { BATCH = 512 };
	void *pages[BATCH];
	int nodes[BATCH], status[BATCH];
	uintptr_t start;
	size_t n;
	if (!inner_pages(addr, len, &start, &n))
		return -EINVAL;
	/* The tier's nodes, taken in turn page by page. */
	int tier_nodes[TA_MAX_NODES];
	unsigned ntier_nodes = 0;
	for (unsigned node = 0; node < TA_MAX_NODES; node++)
		if (ta_topo.tier[tier].nodes & (1ull << node))
			tier_nodes[ntier_nodes++] = (int)node;
	if (ntier_nodes == 0)
		return -EINVAL;
	int saved = errno;
	unsigned turn = 0;
	for (uintptr_t a = start; a < start + n;) {
		unsigned k = 0;
		for (; k < BATCH && a < start + n; k++, a += PAGE) {
			pages[k] = (void *)a;
			nodes[k] = tier_nodes[turn++ % ntier_nodes];
		}
		if (syscall(SYS_move_pages, 0, (unsigned long)k, pages, nodes, status, 0) < 0 &&
		    errno != ENOENT) {
			rc = -errno;
			break;
		}
	}
	errno = saved;
	return rc;
}

int ta_bind_range(void *addr, size_t len, unsigned tier, bool move)
{
	return policy_call(addr, len, MODE_BIND, ta_topo.tier[tier].nodes, move ? FLAG_MOVE : 0);
}

int ta_relax_range(void *addr, size_t len, unsigned tier, unsigned upto)
{
	/* A bind over this tier and the faster ones, with balancing on: pages already here stay
	 * until the kernel finds them misplaced (accessed from a faster node's CPU). Only ranges
	 * whose pages are all present are relaxed: a new fault would land on the nearest node. */
	uint64_t nodes = ta_topo.tier[tier].nodes;
	for (unsigned t = upto; t < tier; t++)
		nodes |= ta_topo.tier[t].nodes;
	return policy_call(addr, len, MODE_BIND | MODE_NUMA_BALANCING, nodes, 0);
}

void ta_restore_range(void *addr, size_t len, unsigned home)
{
	uintptr_t start;
	size_t n;
	if (!inner_pages(addr, len, &start, &n))
		return;
	int saved = errno;
	/* The range goes back to memkind for reuse by the home tier: drop its pages rather than
	 * move them (their contents are dead), so that the next touch faults under home's policy.
	 */
	sys_mbind(start, n, MODE_BIND, ta_topo.tier[home].nodes, 0);
	syscall(SYS_madvise, start, n, MADV_DONTNEED);
	errno = saved;
}

/* At info level: a container whose seccomp profile refuses mbind and move_pages (Docker's
 * default without CAP_SYS_NICE) would otherwise print it in every program. */
static void note_failure(int rc)
{
	static _Atomic unsigned reported;
	if (atomic_fetch_add(&reported, 1) < 4)
		ta_log(TA_LOG_INFO, "demotion: mbind or move_pages failed (%d); the range stays",
		       rc);
}

uint64_t ta_demote(unsigned from, unsigned to, uint64_t bytes)
{
	static struct ta_cold_range ranges[256]; /* the pass runs one at a time (enforce.c) */
	uint64_t moved = 0, progress = 0;
	unsigned n = ta_cold_collect(from, ranges, 256);
	for (unsigned i = 0; i < n; i++) {
		struct ta_cold_range *r = &ranges[i];
		if (progress >= bytes) {
			ta_cold_release(r, -1, -1);
			continue;
		}
		int rc = ta_demote_range(r->addr, r->len, to);
		if (rc != 0) {
			note_failure(rc);
			ta_cold_release(r, -1, -1);
			continue;
		}
		uint64_t charge = r->charge, live = r->charge;
		if (r->kind == TA_RANGE_CHUNK) {
			int64_t c = ta_arena_retag_chunk(r->owner, to, &live);
			if (c < 0)
				continue; /* became current meanwhile: its pages moved, its charge
					     not */
			/* Its runs' pages, charged when they were cut; never more than the tier
			 * holds, so that no counter can wrap. */
			uint64_t held = atomic_load(&ta_arenas[from].charged);
			charge = (uint64_t)c < held ? (uint64_t)c : held;
		} else {
			atomic_fetch_add(&ta_arenas[from].demotions, 1);
		}
		ta_arena_move_charge(from, to, charge);
		ta_arena_move_live(from, to, live);
		ta_cold_release(r, (int)to, -1);
		moved += charge;
		progress += r->charge;
	}
	return moved;
}
