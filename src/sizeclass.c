/* SPDX-License-Identifier: MIT */
/*
 * Size classes: 16-byte steps up to 128, then eight classes per doubling up to 64 KiB: at most
 * 12.5% internal fragmentation, about 4% for sizes spread evenly. (Four per doubling, as jemalloc,
 * the first table, cost 8-12% of a program's memory for sizes spread evenly, where glibc rounds
 * to 16 bytes.) Runs are whole 16 KiB pages holding at least four objects,
 * sized so that the bytes after the last object are at most 1/128 of the run where that takes no
 * more than 16 pages (else the least waste in 16 pages): four 40 KiB objects fill 160 KiB exactly,
 * where whole 64 KiB pages left 32 KiB of every 192 KiB unused. A class's objects sit at
 * run start + k * size, so a class whose size is a multiple of a power of two A <= 16 KiB serves
 * allocations aligned to A.
 */
#include "internal.h"

const uint32_t ta_class_size[TA_NCLASSES] = {
	16,    32,    48,    64,    80,	   96,	  112,	 128,	144,   160,   176,   192,
	208,   224,   240,   256,   288,   320,	  352,	 384,	416,   448,   480,   512,
	576,   640,   704,   768,   832,   896,	  960,	 1024,	1152,  1280,  1408,  1536,
	1664,  1792,  1920,  2048,  2304,  2560,  2816,	 3072,	3328,  3584,  3840,  4096,
	4608,  5120,  5632,  6144,  6656,  7168,  7680,	 8192,	9216,  10240, 11264, 12288,
	13312, 14336, 15360, 16384, 18432, 20480, 22528, 24576, 26624, 28672, 30720, 32768,
	36864, 40960, 45056, 49152, 53248, 57344, 61440, 65536,
};

/* ta_class_small_lut[(n + 15) >> 4] is the class of n for n <= 1024. */
const uint8_t ta_class_small_lut[(1024 >> 4) + 1] = {
	0,  0,	1,  2,	3,  4,	5,  6,	7,  8,	9,  10, 11, 12, 13, 14, 15, 16, 16, 17, 17, 18,
	18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26,
	26, 27, 27, 27, 27, 28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31,
};

/* Objects a thread may cache per tier and class: about 256 KiB, 4 to 256 objects. */
const uint16_t ta_class_cache_cap[TA_NCLASSES] = {
	256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256,
	256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256,
	227, 204, 186, 170, 157, 146, 136, 128, 113, 102, 93,  85,  78,	 73,  68,  64,
	56,  51,  46,  42,  39,	 36,  34,  32,	28,  25,  23,  21,  19,	 18,  17,  16,
	14,  12,  11,  10,  9,	 9,   8,   8,	7,   6,	  5,   5,   4,	 4,   4,   4,
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
