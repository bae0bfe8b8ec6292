/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap memory: serves allocations made before tieralloc is initialised (the dynamic loader,
 * libnuma's constructor, other libraries' constructors) and the ones our own initialisation makes
 * (memkind, dlsym, setenv). Lock-free bump allocation from a static buffer, then from a few mmap'd
 * extensions; nothing is ever reused. free() recognises these pointers by address and ignores them.
 */
#include <string.h>
#include <unistd.h>

#include "alloc/alloc.h"

#define BOOT_STATIC	 (1u << 20)
#define BOOT_EXT_SIZE	 ((size_t)8 << 20)
#define BOOT_MAX_REGIONS 16
#define BOOT_HDR	 16

struct boot_region {
	char *_Atomic base;
	_Atomic size_t used;
	size_t size;
};

static char boot_static[BOOT_STATIC] __attribute__((aligned(4096)));
static struct boot_region regions[BOOT_MAX_REGIONS] = { { boot_static, 0, BOOT_STATIC } };
static _Atomic unsigned nregions = 1;

static void *region_alloc(struct boot_region *r, size_t size, size_t align)
{
	char *base = atomic_load_explicit(&r->base, memory_order_acquire);
	if (base == NULL)
		return NULL;
	size_t old = atomic_load_explicit(&r->used, memory_order_relaxed);
	for (;;) {
		uintptr_t start = (uintptr_t)base + old + BOOT_HDR;
		uintptr_t user = (start + align - 1) & ~(uintptr_t)(align - 1);
		size_t end = (size_t)(user - (uintptr_t)base) + size;
		if (end > r->size || end < size)
			return NULL;
		if (atomic_compare_exchange_weak(&r->used, &old, end)) {
			((size_t *)user)[-1] = size;
			return (void *)user;
		}
	}
}

void *ta_boot_alloc(size_t size, size_t align)
{
	ta_pages_statics_no_huge(); /* boot_static is .bss: the first mallocs come before init */
	if (align < 16)
		align = 16;
	if (size > (SIZE_MAX >> 2) || align > 4096) {
		errno = ENOMEM;
		return NULL;
	}
	size = (size + 15) & ~(size_t)15;
	for (;;) {
		unsigned n = atomic_load(&nregions);
		for (unsigned i = n; i-- > 0;) {
			void *p = region_alloc(&regions[i], size, align);
			if (p != NULL)
				return p;
		}
		if (n == BOOT_MAX_REGIONS) {
			errno = ENOMEM;
			return NULL;
		}
		size_t want = size + align + BOOT_HDR > BOOT_EXT_SIZE
				  ? size + align + BOOT_HDR + 4096
				  : BOOT_EXT_SIZE;
		want = (want + 4095) & ~(size_t)4095;
		void *m = ta_pages_map(want, false);
		if (m == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		unsigned expect = n;
		if (atomic_compare_exchange_strong(&nregions, &expect, n + 1)) {
			regions[n].size = want;
			atomic_store_explicit(&regions[n].used, 0, memory_order_relaxed);
			atomic_store_explicit(&regions[n].base, (char *)m, memory_order_release);
		} else {
			ta_pages_unmap(m, want);
		}
	}
}

bool ta_boot_owns(const void *p)
{
	unsigned n = atomic_load(&nregions);
	for (unsigned i = 0; i < n; i++) {
		char *base = atomic_load_explicit(&regions[i].base, memory_order_acquire);
		if (base != NULL && (const char *)p >= base &&
		    (const char *)p < base + regions[i].size)
			return true;
	}
	return false;
}

size_t ta_boot_usable(const void *p)
{
	return ((const size_t *)p)[-1];
}
