/* SPDX-License-Identifier: MIT */
/*
 * The LD_PRELOAD library: defines the C library's malloc family (and glibc's __libc_* aliases,
 * which some programs and libraries call directly) on top of the core, and mmap, munmap and
 * mremap, so that the core knows the memory a program maps for itself (api/maps.c), and nothing
 * else. C++ operator new/delete reach these through libstdc++'s calls to malloc and free.
 */
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

#define TA_EXPORT __attribute__((visibility("default")))

TA_EXPORT void *malloc(size_t size)
{
	return ta_malloc(size);
}

TA_EXPORT void free(void *ptr)
{
	ta_free(ptr);
}

TA_EXPORT void cfree(void *ptr);
TA_EXPORT void cfree(void *ptr)
{
	ta_free(ptr);
}

TA_EXPORT void *calloc(size_t nmemb, size_t size)
{
	return ta_calloc(nmemb, size);
}

TA_EXPORT void *realloc(void *ptr, size_t size)
{
	return ta_realloc(ptr, size);
}

TA_EXPORT void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
	return ta_reallocarray(ptr, nmemb, size);
}

TA_EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
	return ta_posix_memalign(memptr, alignment, size);
}

TA_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
	return ta_aligned_alloc(alignment, size);
}

TA_EXPORT void *memalign(size_t alignment, size_t size)
{
	return ta_memalign(alignment, size);
}

TA_EXPORT void *valloc(size_t size)
{
	return ta_valloc(size);
}

TA_EXPORT void *pvalloc(size_t size)
{
	return ta_pvalloc(size);
}

TA_EXPORT size_t malloc_usable_size(void *ptr)
{
	return ta_usable_size(ptr);
}

/* glibc's: programs call it to give memory back after a big free. */
TA_EXPORT int malloc_trim(size_t pad)
{
	return ta_trim(pad);
}

/* glibc's internal names, exported by libc.so.6 and called directly by some code. */
TA_EXPORT void *__libc_malloc(size_t size);
TA_EXPORT void __libc_free(void *ptr);
TA_EXPORT void *__libc_calloc(size_t nmemb, size_t size);
TA_EXPORT void *__libc_realloc(void *ptr, size_t size);
TA_EXPORT void *__libc_memalign(size_t alignment, size_t size);
TA_EXPORT void *__libc_valloc(size_t size);
TA_EXPORT void *__libc_pvalloc(size_t size);

void *__libc_malloc(size_t size)
{
	return ta_malloc(size);
}

void __libc_free(void *ptr)
{
	ta_free(ptr);
}

void *__libc_calloc(size_t nmemb, size_t size)
{
	return ta_calloc(nmemb, size);
}

void *__libc_realloc(void *ptr, size_t size)
{
	return ta_realloc(ptr, size);
}

void *__libc_memalign(size_t alignment, size_t size)
{
	return ta_memalign(alignment, size);
}

void *__libc_valloc(size_t size)
{
	return ta_valloc(size);
}

void *__libc_pvalloc(size_t size)
{
	return ta_pvalloc(size);
}

/* Each passes its caller's address: the core leaves out tieralloc's own mappings. */
TA_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return ta_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

TA_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return ta_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

TA_EXPORT int munmap(void *addr, size_t len)
{
	return ta_munmap(addr, len, __builtin_return_address(0));
}

TA_EXPORT void *mremap(void *old_addr, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	return ta_mremap(old_addr, old_len, new_len, flags, new_addr, __builtin_return_address(0));
}
