/* SPDX-License-Identifier: MIT */
/*
 * Anonymous memory for the allocator's own metadata (thread caches, large-object records and
 * their table, the bootstrap buffer's extensions, the chunk map). Raw syscalls: callers run before
 * the C library is ready, from signal handlers and inside malloc.
 *
 * No huge pages: under THP "always", any 2 MiB-aligned range of an anonymous mapping becomes one
 * huge page at its first touch, and the kernel merges neighbouring mappings with the same flags,
 * so a few small metadata mappings side by side would turn a few touched bytes into 2 MiB of the
 * container's memory. MADV_NOHUGEPAGE also keeps them from merging with other mappings.
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

void *ta_pages_map(size_t bytes, bool reserve_only)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve_only ? MAP_NORESERVE : 0);
	void *p = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	syscall(SYS_madvise, p, bytes, MADV_NOHUGEPAGE);
	return p;
}

void ta_pages_unmap(void *p, size_t bytes)
{
	syscall(SYS_munmap, p, bytes);
}

bool ta_thp_always(void)
{
	char buf[128]; /* ta_read_file ends it with a NUL */
	if (ta_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) <= 0)
		return false;
	/* A process may have opted out (prctl PR_SET_THP_DISABLE, inherited across exec). */
	return strstr(buf, "[always]") != NULL &&
	       syscall(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0;
}

/* The linker's bounds of this object's .bss, bound here rather than to an executable's. */
extern char __bss_start[] __attribute__((visibility("hidden")));
extern char _end[] __attribute__((visibility("hidden")));
/* In .data: testing it must not be the first touch of a page of the .bss. */
static int statics_pending = 1;

void ta_pages_statics_no_huge(void)
{
	/* A plain load first: the boot allocator calls this on every allocation it serves. */
	if (!__atomic_load_n(&statics_pending, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&statics_pending, 0, __ATOMIC_ACQ_REL))
		return;
	uintptr_t page = 4096, lo = ((uintptr_t)__bss_start + page - 1) & ~(page - 1),
		  hi = ((uintptr_t)_end + page - 1) & ~(page - 1);
	if (hi > lo)
		syscall(SYS_madvise, (void *)lo, hi - lo, MADV_NOHUGEPAGE);
}
