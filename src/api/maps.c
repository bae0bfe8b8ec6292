/* SPDX-License-Identifier: MIT */
/*
 * The preload's mmap, munmap and mremap (preload/preload.c): the system call itself, and a record
 * of the anonymous private mappings the program makes for itself (alloc/maps.c;
 * docs/runtimes.md), where tieralloc's worker then samples on which nodes they are resident.
 *
 * Not recorded: shared and file mappings, MAP_HUGETLB, calls made before tieralloc is ready or
 * with TIERALLOC_MAPS=0, and calls from tieralloc's own object (memkind's jemalloc maps chunks and
 * large objects through the same symbol: that memory is charged as what it is). glibc's internal
 * mappings (thread stacks, its own allocator) never reach the symbol.
 *
 * Calls that free or replace address space (munmap, mremap, mmap with MAP_FIXED) hold the
 * registry's lock across the system call: otherwise a range the kernel hands to another thread
 * between our call and our record could be erased by that late record. Other mmaps take the lock
 * only after the call. No errno but the system call's is left behind.
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/api.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#define PAGE 4096ul

/* The linker's bounds of this object's code (the library the core is linked into). */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));

static bool from_ourselves(const void *caller)
{
	return (const char *)caller >= __ehdr_start && (const char *)caller < __etext;
}

static bool recording(void)
{
	return atomic_load_explicit(&ta_state, memory_order_acquire) == TA_READY && ta_opts.maps;
}

static uintptr_t page_end(const void *addr, size_t len)
{
	return ((uintptr_t)addr + len + PAGE - 1) & ~(PAGE - 1);
}

static bool anonymous_private(int flags)
{
	return (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE &&
	       !(flags & MAP_HUGETLB);
}

void *ta_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *caller)
{
	bool replaces = (flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE);
	bool record = anonymous_private(flags) && !from_ourselves(caller) && recording();
	bool erase = replaces && atomic_load_explicit(&ta_maps_recorded, memory_order_relaxed);
	if (!record && !erase)
		return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	sigset_t old;
	void *p;
	if (replaces) {
		ta_maps_lock(&old);
		p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	} else {
		p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
		if (p == MAP_FAILED)
			return p;
		ta_maps_lock(&old);
	}
	int saved = errno;
	if (p != MAP_FAILED) {
		if (replaces)
			ta_maps_erase(&ta_maps, (uintptr_t)p, page_end(p, len));
		if (record && ta_maps.r != NULL) {
			ta_maps_insert(&ta_maps, (uintptr_t)p, page_end(p, len));
			ta_maps_place_locked((uintptr_t)p, page_end(p, len));
			atomic_store_explicit(&ta_maps_recorded, true, memory_order_relaxed);
		}
	}
	ta_maps_unlock(&old);
	errno = saved;
	return p;
}

int ta_munmap(void *addr, size_t len, const void *caller)
{
	if (from_ourselves(caller) ||
	    !atomic_load_explicit(&ta_maps_recorded, memory_order_relaxed))
		return (int)syscall(SYS_munmap, addr, len);
	sigset_t old;
	ta_maps_lock(&old);
	int rc = (int)syscall(SYS_munmap, addr, len);
	int saved = errno;
	if (rc == 0)
		ta_maps_erase(&ta_maps, (uintptr_t)addr, page_end(addr, len));
	ta_maps_unlock(&old);
	errno = saved;
	return rc;
}

void *ta_mremap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
		const void *caller)
{
	if (from_ourselves(caller) ||
	    !atomic_load_explicit(&ta_maps_recorded, memory_order_relaxed))
		return (void *)syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr);
	sigset_t old;
	ta_maps_lock(&old);
	void *p = (void *)syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr);
	int saved = errno;
	if (p != MAP_FAILED) {
		uintptr_t from = (uintptr_t)old_addr, to = page_end(old_addr, old_len);
		bool was_recorded = ta_maps_overlaps(&ta_maps, from, to);
		/* The old range goes (DONTUNMAP leaves it mapped, empty); a fixed destination
		 * replaced whatever was there; the new range is recorded if the old one was. */
		if (!(flags & MREMAP_DONTUNMAP))
			ta_maps_erase(&ta_maps, from, to);
		ta_maps_erase(&ta_maps, (uintptr_t)p, page_end(p, new_len));
		if (was_recorded)
			ta_maps_insert(&ta_maps, (uintptr_t)p, page_end(p, new_len));
	}
	ta_maps_unlock(&old);
	errno = saved;
	return p;
}
