/* SPDX-License-Identifier: MIT */
/*
 * Size classes: 16-byte steps up to 128, eight classes per doubling up to 1 KiB, then 32 per
 * doubling up to 64 KiB, of which a young process uses every other one.
 *
 * Rounding against the partly touched page every class in use leaves at the top of its run
 * (about 2 KiB: glibc, mixing sizes in one heap, has one such page in all). For sizes spread
 * evenly (log-uniform) from 16 B to 16 KiB, where glibc's 16-byte rounding and 8-byte header cost
 * 0.7%: sixteen per doubling above 1 KiB round up by 2.3%, 32 by 1.3%, and eight by 4.5% (four,
 * as jemalloc and the first table, 8-12%). But a process holding 4 MiB of such sizes uses about
 * 100 classes at sixteen per doubling, 160 at 32: 120 KiB more in those top pages than the
 * rounding saves. So sizes above 1 KiB take the odd classes of each doubling (sixteen per
 * doubling, at most 6.25% rounding) until the process has TA_FINE_CLASSES_AFTER chunks of small
 * objects (32 MiB), where 1% of the bytes is worth more than the pages; then also every fine class
 * whose runs fit (ta_class_fits: 57 of the 64 from 1 to 16 KiB; the others would leave more
 * unused at their runs' ends than they save). The switch changes only where new objects go: an
 * object's class is its run's.
 *
 * Runs are whole 16 KiB pages holding at least four objects, sized so that the bytes after the
 * last object are at most 1/128 of the run where that takes no more than 16 pages (else the least
 * waste in 16 pages): four 40 KiB objects fill 160 KiB exactly, where whole 64 KiB pages left
 * 32 KiB of every 192 KiB unused. A class's objects sit at run start + k * size, so a class whose
 * size is a multiple of a power of two A <= 16 KiB serves allocations aligned to A.
 */
#include "alloc/alloc.h"

/* Zero (in .bss) until ta_class_set_fine(true): every fine class rounds up to the coarse one. */
uint8_t ta_class_fine_ok[TA_NCLASSES];
static bool fine_on;

/* The classes, in order, each as X(bytes): eight per doubling from 128 B, 32 from 1 KiB. */
#define STEP8(X, b, k)	(X((b) + (k) * ((b) / 8)))
#define STEP32(X, b, k) (X((b) + (k) * ((b) / 32)))
#define DOUBLING8(X, b)                                                                            \
	STEP8(X, b, 1), STEP8(X, b, 2), STEP8(X, b, 3), STEP8(X, b, 4), STEP8(X, b, 5),            \
	    STEP8(X, b, 6), STEP8(X, b, 7), STEP8(X, b, 8)
#define DOUBLING32_8(X, b, k)                                                                      \
	STEP32(X, b, k + 1), STEP32(X, b, k + 2), STEP32(X, b, k + 3), STEP32(X, b, k + 4),        \
	    STEP32(X, b, k + 5), STEP32(X, b, k + 6), STEP32(X, b, k + 7), STEP32(X, b, k + 8)
#define DOUBLING32(X, b)                                                                           \
	DOUBLING32_8(X, b, 0), DOUBLING32_8(X, b, 8), DOUBLING32_8(X, b, 16), DOUBLING32_8(X, b, 24)
#define CLASSES(X)                                                                                 \
	X(16), X(32), X(48), X(64), X(80), X(96), X(112), X(128), DOUBLING8(X, 128),               \
	    DOUBLING8(X, 256), DOUBLING8(X, 512), DOUBLING32(X, 1024), DOUBLING32(X, 2048),        \
	    DOUBLING32(X, 4096), DOUBLING32(X, 8192), DOUBLING32(X, 16384), DOUBLING32(X, 32768)

/* Objects a thread may cache per tier and class: about 128 KiB, 4 to 256 objects. 256 KiB held up
 * to 3.5 MiB per thread in the peer suite's glibc-thread (with refills of half the cap, before
 * they started at 8, tcache.c); 128 objects at most halved the batches in which objects pass
 * between a thread that frees and one that allocates. */
#define CACHE_BYTES (128 * 1024)
#define CACHE_CAP(size)                                                                            \
	(CACHE_BYTES / (size) > 256 ? 256 : CACHE_BYTES / (size) < 4 ? 4 : CACHE_BYTES / (size))
#define SIZE_OF(size) (size)
#define DIV_OF(size)  (UINT64_MAX / (size) + 1)

/* Unsized: a count other than TA_NCLASSES conflicts with the declaration in alloc.h. */
const uint32_t ta_class_size[] = { CLASSES(SIZE_OF) };
const uint16_t ta_class_cache_cap[] = { CLASSES(CACHE_CAP) };
const uint64_t ta_class_div[] = { CLASSES(DIV_OF) };

/* ta_class_small_lut[(n + 15) >> 4] is the class of n for n <= 1024. */
const uint8_t ta_class_small_lut[(1024 >> 4) + 1] = {
	0,  0,	1,  2,	3,  4,	5,  6,	7,  8,	9,  10, 11, 12, 13, 14, 15, 16, 16, 17, 17, 18,
	18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26,
	26, 27, 27, 27, 27, 28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31,
};

unsigned ta_size_class_aligned(size_t size, size_t align)
{
	size_t want = size > align ? size : align;
	if (want > TA_SMALL_MAX || align > TA_PAGE_SIZE)
		return TA_NCLASSES;
	for (unsigned cls = ta_size_class(want); cls < TA_NCLASSES; cls++)
		if (ta_class_size[cls] % align == 0 &&
		    (ta_class_is_coarse(cls) ||
		     __atomic_load_n(&ta_class_fine_ok[cls], __ATOMIC_RELAXED)))
			return cls;
	return TA_NCLASSES;
}

/* Bytes of a run of pages that no object of size can use. */
static size_t run_waste(size_t size, unsigned pages)
{
	return ((size_t)pages * TA_PAGE_SIZE) % size;
}

unsigned ta_class_run_pages(unsigned cls)
{
	size_t size = ta_class_size[cls];
	unsigned first = (unsigned)((size * 4 + TA_PAGE_SIZE - 1) / TA_PAGE_SIZE);
	unsigned last = first > TA_RUN_MAX_PAGES ? first : TA_RUN_MAX_PAGES;
	unsigned best = first;
	for (unsigned pages = first; pages <= last; pages++) {
		if (run_waste(size, pages) * 128 <= (size_t)pages * TA_PAGE_SIZE)
			return pages;
		if (run_waste(size, pages) * best < run_waste(size, best) * pages)
			best = pages;
	}
	return best;
}

unsigned ta_class_run_fit(unsigned cls, unsigned room)
{
	size_t size = ta_class_size[cls];
	unsigned pages = ta_class_run_pages(cls);
	if (room >= pages)
		return pages;
	size_t objects = (size_t)room * TA_PAGE_SIZE / size;
	return (unsigned)((objects * size + TA_PAGE_SIZE - 1) / TA_PAGE_SIZE);
}

bool ta_class_fits(unsigned cls)
{
	unsigned pages = ta_class_run_pages(cls);
	return run_waste(ta_class_size[cls], pages) * 128 <= (size_t)pages * TA_PAGE_SIZE;
}

/* Readers may see the table half switched: either class holds the size. fine_on stays set once
 * set: fine classes' bins may hold objects from then on, and decay must look at them. */
void ta_class_set_fine(bool fine)
{
	if (fine)
		__atomic_store_n(&fine_on, true, __ATOMIC_RELAXED);
	for (unsigned cls = 32; cls < TA_NCLASSES; cls += 2)
		__atomic_store_n(&ta_class_fine_ok[cls], fine && ta_class_fits(cls),
				 __ATOMIC_RELAXED);
}

bool ta_class_fine(void)
{
	return __atomic_load_n(&fine_on, __ATOMIC_RELAXED);
}
