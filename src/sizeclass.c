/* SPDX-License-Identifier: MIT */
/*
 * Size classes: 16-byte steps up to 128, then four classes per doubling up to 64 KiB (at most 25%
 * internal fragmentation, as jemalloc). Runs are whole 16 KiB pages holding at least four objects,
 * sized so that the bytes after the last object are at most 1/128 of the run where that takes no
 * more than 16 pages (else the least waste in 16 pages): four 40 KiB objects fill 160 KiB exactly,
 * where whole 64 KiB pages left 32 KiB of every 192 KiB unused. A class's objects sit at
 * run start + k * size, so a class whose size is a multiple of a power of two A <= 16 KiB serves
 * allocations aligned to A.
 */
#include "internal.h"

const uint32_t ta_class_size[TA_NCLASSES] = {
	16,    32,    48,    64,    80,	   96,	  112,	 128,	160,   192,   224,
	256,   320,   384,   448,   512,   640,	  768,	 896,	1024,  1280,  1536,
	1792,  2048,  2560,  3072,  3584,  4096,  5120,	 6144,	7168,  8192,  10240,
	12288, 14336, 16384, 20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536,
};

/* ta_class_small_lut[(n + 15) >> 4] is the class of n for n <= 1024. */
const uint8_t ta_class_small_lut[(1024 >> 4) + 1] = {
	0,  0,	1,  2,	3,  4,	5,  6,	7,  8,	8,  9,	9,  10, 10, 11, 11, 12, 12, 12, 12, 13,
	13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17,
	17, 17, 17, 17, 17, 18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19,
};

/* Objects a thread may cache per tier and class: about 256 KiB, 4 to 256 objects. */
const uint16_t ta_class_cache_cap[TA_NCLASSES] = {
	256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256,
	256, 256, 256, 256, 256, 204, 170, 146, 128, 102, 85,  73,  64,	 51,  42,
	36,  32,  25,  21,  18,	 16,  12,  10,	9,   8,	  6,   5,   4,	 4,
};

unsigned ta_size_class_aligned(size_t size, size_t align)
{
	size_t want = size > align ? size : align;
	if (want > TA_SMALL_MAX || align > TA_PAGE_SIZE)
		return TA_NCLASSES;
	for (unsigned cls = ta_size_class(want); cls < TA_NCLASSES; cls++)
		if (ta_class_size[cls] % align == 0)
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
