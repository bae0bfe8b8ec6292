/* SPDX-License-Identifier: MIT */
/*
 * Placing ranges of memory on a tier's nodes: the only file that calls mbind(2) and
 * move_pages(2). The enforcement pass demotes and binds with it (demote.c, gate.c), and a large
 * object's free gives its range back to its home tier's policy (large.c).
 *
 * memkind binds each kind's memory to its nodes (MPOL_BIND without MPOL_F_NUMA_BALANCING, seen
 * as "bind:N" in /proc/PID/numa_maps), so NUMA balancing never promotes tieralloc's memory until
 * the promotion gate relaxes a range (ta_relax_range).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "alloc/alloc.h"

#define MODE_PREFERRED	    1	      /* MPOL_PREFERRED */
#define MODE_BIND	    2	      /* MPOL_BIND */
#define MODE_PREFERRED_MANY 5	      /* MPOL_PREFERRED_MANY, Linux >= 5.15 */
#define MODE_NUMA_BALANCING (1 << 13) /* MPOL_F_NUMA_BALANCING, Linux >= 5.15 */
#define FLAG_MOVE	    (1 << 1)  /* MPOL_MF_MOVE: this process's pages only */
#define PAGE		    4096ul
#define UNIT		    TA_HUGE_UNIT /* a transparent huge page */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux >= 5.14 */
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux >= 6.1 */
#endif

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
 * Huge moves. Linux before 6.3 migrates a page at a time, and unmapping each page flushes its TLB
 * entry on every other CPU running the process: an interrupt per 4 KiB page, waited for. Where an
 * interrupt is slow to be answered (a virtual CPU the host has descheduled) that is a demotion's
 * time: 148 MiB took 1.3-2 s when the program's other thread was often blocked, 145 s when it
 * kept reading (6.1 guest, tests/vm). A 2 MiB unit moves in three flushes instead: collapsed into
 * a huge page where it is (MADV_COLLAPSE), moved whole, then split again (MADV_COLD on part of a
 * huge page splits it), unless the caller says the unit may stay huge and the collapse filled
 * nothing in: 2.0-2.6 s for the same 148 MiB whatever the reader did. From 6.3 on the kernel
 * unmaps a batch and flushes once, and the collapse's extra copy made the move slower (6.12
 * guest: 3.8-5.5 s against 1.4 s page by page), so only 6.1 and 6.2 take this path.
 *
 * A collapse fills absent pages with zeros. In a chunk (the caller says which) a unit may lack a
 * few, those no run holds (its end past the last run, the header's unwritten part), and the arena
 * gives back those still free after the split; anywhere else, as in a large object whose program
 * has not touched every page, all must be present. The collapse takes its huge page on the unit's
 * node: only where that node has memory to spare (node_has_room), else the unit moves page by
 * page.
 */
static _Atomic int huge_moves = -1; /* 1 on: Linux 6.1 or 6.2; 0 off; -1 not decided yet */
static _Atomic uint64_t huge_units_moved;
/* Collapses refused in a row: EINVAL also says that a unit cannot be collapsed (a page mapped
 * twice after a fork, or read-only), so only a run of them turns huge moves off. */
static _Atomic unsigned refused_in_a_row;
#define HUGE_REFUSALS_OFF 16

static bool huge_moves_on(void)
{
	int on = atomic_load_explicit(&huge_moves, memory_order_relaxed);
	if (on < 0) {
		/* MADV_COLLAPSE came in 6.1, batched flushes in 6.3; a process may have opted out
		 * of huge pages (prctl PR_SET_THP_DISABLE). */
		struct utsname u;
		unsigned major = 0, minor = 0;
		on = uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
		     major == 6 && minor >= 1 && minor < 3 &&
		     syscall(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0;
		atomic_store_explicit(&huge_moves, on, memory_order_relaxed);
	}
	return on == 1;
}

void ta_place_set_huge_moves(int on)
{
	atomic_store(&huge_moves, on);
}

uint64_t ta_place_huge_units_moved(void)
{
	return atomic_load_explicit(&huge_units_moved, memory_order_relaxed);
}

/* A unit with more pages absent is not worth the copy of its zeros. */
#define HUGE_MAX_ABSENT 64

/* Node n's "Node n <field>:  <kB> kB" in bytes, or 0. */
static uint64_t meminfo_field(const char *text, const char *field)
{
	const char *at = strstr(text, field);
	return at != NULL ? strtoull(at + strlen(field), NULL, 10) * 1024 : 0;
}

/*
 * The collapse takes its huge page on the unit's node, reclaiming or compacting there if it must.
 * Where that node is nearly full (the tier being demoted is, often) that would take memory from
 * whoever else is bound to it: a pair of Node.js containers filling node 0 of the runtimes' guest
 * (6.1) saw one OOM-killed. So only while the node has an eighth of its memory free, 64 MiB at
 * least; read at most every 100 ms (the pass runs one at a time, enforce.c).
 */
static bool node_has_room(int node)
{
	static uint64_t read_ns[TA_MAX_NODES];
	static bool room[TA_MAX_NODES];
	if (node < 0 || node >= TA_MAX_NODES)
		return false;
	uint64_t now = ta_monotonic_ns();
	if (read_ns[node] == 0 || now - read_ns[node] > 100000000ull) {
		char path[64], text[2048];
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
		uint64_t total = 0, free = 0;
		if (ta_read_file(path, text, sizeof(text)) > 0) {
			total = meminfo_field(text, "MemTotal:");
			free = meminfo_field(text, "MemFree:");
		}
		uint64_t want = total / 8 > (64ull << 20) ? total / 8 : 64ull << 20;
		room[node] = total != 0 && free >= want;
		read_ns[node] = now;
	}
	return room[node];
}

/* The unit at u to node as one huge page; false where it must move page by page. */
static bool move_unit_huge(uintptr_t u, int node, bool may_stay_huge, struct ta_chunk *chunk)
{
	unsigned char vec[UNIT / PAGE];
	if (syscall(SYS_mincore, u, UNIT, vec) != 0)
		return false;
	unsigned absent = 0;
	for (size_t i = 0; i < UNIT / PAGE; i++)
		absent += !(vec[i] & 1);
	if (absent > (chunk != NULL ? HUGE_MAX_ABSENT : 0))
		return false;
	size_t first = 0;
	while (!(vec[first] & 1))
		first++;
	void *probe = (void *)(u + first * PAGE);
	int where = -1;
	if (syscall(SYS_move_pages, 0, 1ul, &probe, NULL, &where, 0) != 0 || !node_has_room(where))
		return false;
	/* A collapse needs the range open to huge pages; it goes back as it was (the allocator
	 * keeps its ranges MADV_NOHUGEPAGE but where may_stay_huge says otherwise). */
	if (syscall(SYS_madvise, u, UNIT, MADV_HUGEPAGE) != 0)
		return false;
	/* A collapse wants a writable entry, and the soft-dirty access source write-protects every
	 * page at each sample (clear_refs): a unit not written since has none. A write fault on one
	 * present page without a store (MADV_POPULATE_WRITE, 5.14) makes it writable and leaves
	 * its contents alone. */
	syscall(SYS_madvise, u + first * PAGE, PAGE, MADV_POPULATE_WRITE);
	bool moved = false;
	if (syscall(SYS_madvise, u, UNIT, MADV_COLLAPSE) == 0) {
		void *head = (void *)u;
		int status = -1;
		moved = syscall(SYS_move_pages, 0, 1ul, &head, &node, &status, 0) == 0 &&
			status == node;
		atomic_store_explicit(&refused_in_a_row, 0, memory_order_relaxed);
	} else if (errno == EINVAL &&
		   atomic_fetch_add_explicit(&refused_in_a_row, 1, memory_order_relaxed) + 1 >=
		       HUGE_REFUSALS_OFF) {
		atomic_store_explicit(&huge_moves, 0, memory_order_relaxed);
	}
	/* A unit that may stay huge does when the collapse filled nothing in. */
	if (!may_stay_huge || absent != 0) {
		/* Split: MADV_COLD on less than the huge page splits it at the first page still
		 * mapped whatever a concurrent free gave back, and marks the unit's pages cold,
		 * which they are. One call over all but the last page, not one per end page: each
		 * call flushes the TLB on the CPUs running the program once more (6.1 guest with a
		 * reader on the other vCPU: 3 ms a unit, a tenth of its move). */
		syscall(SYS_madvise, u, UNIT - PAGE, MADV_COLD);
		if (!may_stay_huge)
			syscall(SYS_madvise, u, UNIT, MADV_NOHUGEPAGE);
		/* The chunk's free pages the collapse filled with zeros go back. */
		if (absent != 0)
			ta_arena_drop_filled(chunk, u, vec);
	}
	if (moved)
		atomic_fetch_add_explicit(&huge_units_moved, 1, memory_order_relaxed);
	return moved;
}

bool ta_demote_unit(void *unit, unsigned tier)
{
	uintptr_t u = (uintptr_t)unit;
	if ((u & (UNIT - 1)) != 0 || tier >= TA_MAX_TIERS || !huge_moves_on())
		return false;
	static unsigned turn; /* the pass runs one at a time (enforce.c) */
	int tier_nodes[TA_MAX_NODES];
	unsigned ntier_nodes = 0;
	for (unsigned node = 0; node < TA_MAX_NODES; node++)
		if (ta_topo.tier[tier].nodes & (1ull << node))
			tier_nodes[ntier_nodes++] = (int)node;
	/* One policy over the unit first: its parts' VMAs (split where each object was bound
	 * before) merge, and a collapse wants the unit inside one. */
	if (ntier_nodes == 0 ||
	    policy_call(unit, UNIT, MODE_BIND, ta_topo.tier[tier].nodes, 0) != 0)
		return false;
	return move_unit_huge(u, tier_nodes[turn++ % ntier_nodes], false, NULL);
}

/*
 * Bind the range to the tier (policy only: mbind holds the mmap lock for writing, so its own
 * MPOL_MF_MOVE would stall every page fault and mmap of the program for the whole migration),
 * then move its pages with move_pages(2), which takes the lock for reading, a batch at a time;
 * whole units as huge pages where the kernel migrates a page at a time ("Huge moves").
 */
int ta_demote_range(void *addr, size_t len, unsigned tier, size_t huge_from, struct ta_chunk *chunk)
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
	/* The tier's nodes, taken in turn page by page (unit by unit for huge moves). */
	int tier_nodes[TA_MAX_NODES];
	unsigned ntier_nodes = 0;
	for (unsigned node = 0; node < TA_MAX_NODES; node++)
		if (ta_topo.tier[tier].nodes & (1ull << node))
			tier_nodes[ntier_nodes++] = (int)node;
	if (ntier_nodes == 0)
		return -EINVAL;
	int saved = errno;
	unsigned turn = 0;
	uintptr_t end = start + n, stay = (uintptr_t)addr + huge_from;
	for (uintptr_t a = start; a < end;) {
		if ((a & (UNIT - 1)) == 0 && end - a >= UNIT && huge_moves_on() &&
		    move_unit_huge(a, tier_nodes[turn++ % ntier_nodes], a >= stay, chunk)) {
			a += UNIT;
			continue;
		}
		/* Page by page up to the next unit (or the batch's end). */
		unsigned k = 0;
		for (; k < BATCH && a < end; k++, a += PAGE) {
			pages[k] = (void *)a;
			nodes[k] = tier_nodes[turn++ % ntier_nodes];
			if (((a + PAGE) & (UNIT - 1)) == 0) {
				a += PAGE;
				k++;
				break;
			}
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

/*
 * A program's own mapping keeps its preference (ta_prefer_range): only the pages resident on
 * the from nodes move, with move_pages(2) alone, so that the range's later faults still follow
 * the pick. At most max bytes, to the to nodes in turn; the bytes moved.
 */
uint64_t ta_move_resident(uintptr_t addr, size_t len, uint64_t from_nodes, uint64_t to_nodes,
			  uint64_t max)
{
	enum { SPAN = 512, BATCH = 512 };
	unsigned char vec[SPAN];
	void *pages[BATCH];
	int nodes[BATCH], status[BATCH];
	int tier_nodes[TA_MAX_NODES];
	unsigned ntier_nodes = 0, turn = 0;
	for (unsigned node = 0; node < TA_MAX_NODES; node++)
		if (to_nodes & (1ull << node))
			tier_nodes[ntier_nodes++] = (int)node;
	uintptr_t start = addr & ~(PAGE - 1), end = (addr + len + PAGE - 1) & ~(PAGE - 1);
	uint64_t moved = 0;
	int saved = errno;
	for (uintptr_t a = start; ntier_nodes > 0 && a < end && moved < max;
	     a += (uintptr_t)SPAN * PAGE) {
		size_t n = (end - a) / PAGE < SPAN ? (end - a) / PAGE : SPAN;
		if (syscall(SYS_mincore, a, n * PAGE, vec) != 0)
			continue;
		unsigned k = 0;
		for (size_t i = 0; i < n; i++)
			if (vec[i] & 1)
				pages[k++] = (void *)(a + i * PAGE);
		/* Where each is, then those on the from nodes to the tier's, in turn. */
		if (k == 0 ||
		    syscall(SYS_move_pages, 0, (unsigned long)k, pages, NULL, status, 0) < 0)
			continue;
		unsigned m = 0;
		for (unsigned j = 0; j < k && (uint64_t)m * PAGE < max - moved; j++)
			if (status[j] >= 0 && status[j] < TA_MAX_NODES &&
			    (from_nodes & (1ull << status[j]))) {
				pages[m] = pages[j];
				nodes[m++] = tier_nodes[turn++ % ntier_nodes];
			}
		if (m == 0 ||
		    syscall(SYS_move_pages, 0, (unsigned long)m, pages, nodes, status, 0) < 0)
			continue;
		for (unsigned j = 0; j < m; j++)
			if (status[j] >= 0 && status[j] < TA_MAX_NODES &&
			    (to_nodes & (1ull << status[j])))
				moved += PAGE;
	}
	errno = saved;
	return moved;
}

/*
 * A program's own mappings (maps.c) are preferred, not bound: a runtime's heap can be most of a
 * container's memory, and a bind that finds the tier's nodes full reclaims there and, failing
 * that, calls the OOM killer on a machine with free memory elsewhere. A preference falls back to
 * the other nodes; the quota's enforcement then brings what overflowed back in line.
 */
int ta_prefer_range(void *addr, size_t len, unsigned tier)
{
	uint64_t nodes = ta_topo.tier[tier].nodes;
	int rc = policy_call(addr, len, MODE_PREFERRED_MANY, nodes, 0);
	if (rc != -EINVAL || nodes == 0)
		return rc;
	/* Before 5.15: the tier's first node. */
	return policy_call(addr, len, MODE_PREFERRED, nodes & -nodes, 0);
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

/* Resident pages first (mincore, a byte per page), then the node of each (move_pages without
 * moving): a range that is mostly reserved address space costs a mincore walk, not a lookup per
 * page. */
uint64_t ta_resident_nodes(uintptr_t addr, size_t len, uint64_t per_node[TA_MAX_NODES])
{
	enum { SPAN = 4096, BATCH = 512 };
	unsigned char vec[SPAN];
	void *pages[BATCH];
	int status[BATCH];
	uintptr_t start = addr & ~(PAGE - 1), end = (addr + len + PAGE - 1) & ~(PAGE - 1);
	uint64_t found = 0;
	int saved = errno;
	for (uintptr_t a = start; a < end; a += (uintptr_t)SPAN * PAGE) {
		size_t n = (end - a) / PAGE < SPAN ? (end - a) / PAGE : SPAN;
		/* ENOMEM: part of it is no longer mapped (unmapped since the copy was taken). */
		if (syscall(SYS_mincore, a, n * PAGE, vec) != 0)
			continue;
		for (size_t i = 0; i < n;) {
			unsigned k = 0;
			for (; i < n && k < BATCH; i++)
				if (vec[i] & 1)
					pages[k++] = (void *)(a + i * PAGE);
			if (k == 0 || syscall(SYS_move_pages, 0, (unsigned long)k, pages, NULL,
					      status, 0) < 0)
				continue;
			for (unsigned j = 0; j < k; j++) {
				if (status[j] < 0 || status[j] >= TA_MAX_NODES)
					continue;
				per_node[status[j]] += PAGE;
				found++;
			}
		}
	}
	errno = saved;
	return found;
}
