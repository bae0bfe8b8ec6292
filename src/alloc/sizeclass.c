/* SPDX-License-Identifier: MIT */
/*
 * Size classes: 16-byte steps up to 128, eight classes per doubling up to 1 KiB, then sixteen per
 * doubling up to 64 KiB: at most 12.5% internal fragmentation below 1 KiB and 6.25% above, about
 * 2.4% for sizes spread evenly (log-uniform) from 16 B to 16 KiB, where glibc's 16-byte rounding
 * and 8-byte header cost 0.7%. Eight per doubling throughout cost 4.5% (the 200 MiB mixed program
 * of bench/run-footprint.sh was 4.9% above glibc); four, as jemalloc and the first table, 8-12%.
 * Runs are whole 16 KiB pages holding at least four objects,
 * sized so that the bytes after the last object are at most 1/128 of the run where that takes no
 * more than 16 pages (else the least waste in 16 pages): four 40 KiB objects fill 160 KiB exactly,
 * where whole 64 KiB pages left 32 KiB of every 192 KiB unused. A class's objects sit at
 * run start + k * size, so a class whose size is a multiple of a power of two A <= 16 KiB serves
 * allocations aligned to A.
 */
#include "alloc/alloc.h"

const uint32_t ta_class_size[TA_NCLASSES] = {
	16,    32,    48,    64,    80,	   96,	  112,	 128,	144,   160,   176,   192,   208,
	224,   240,   256,   288,   320,   352,	  384,	 416,	448,   480,   512,   576,   640,
	704,   768,   832,   896,   960,   1024,  1088,	 1152,	1216,  1280,  1344,  1408,  1472,
	1536,  1600,  1664,  1728,  1792,  1856,  1920,	 1984,	2048,  2176,  2304,  2432,  2560,
	2688,  2816,  2944,  3072,  3200,  3328,  3456,	 3584,	3712,  3840,  3968,  4096,  4352,
	4608,  4864,  5120,  5376,  5632,  5888,  6144,	 6400,	6656,  6912,  7168,  7424,  7680,
	7936,  8192,  8704,  9216,  9728,  10240, 10752, 11264, 11776, 12288, 12800, 13312, 13824,
	14336, 14848, 15360, 15872, 16384, 17408, 18432, 19456, 20480, 21504, 22528, 23552, 24576,
	25600, 26624, 27648, 28672, 29696, 30720, 31744, 32768, 34816, 36864, 38912, 40960, 43008,
	45056, 47104, 49152, 51200, 53248, 55296, 57344, 59392, 61440, 63488, 65536,
};

/* ta_class_small_lut[(n + 15) >> 4] is the class of n for n <= 1024. */
const uint8_t ta_class_small_lut[(1024 >> 4) + 1] = {
	0,  0,	1,  2,	3,  4,	5,  6,	7,  8,	9,  10, 11, 12, 13, 14, 15, 16, 16, 17, 17, 18,
	18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26,
	26, 27, 27, 27, 27, 28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30, 31, 31, 31, 31,
};

/* Objects a thread may cache per tier and class: about 128 KiB, 4 to 256 objects. 256 KiB held up
 * to 3.5 MiB per thread in the peer suite's glibc-thread (with refills of half the cap, before
 * they started at 8, tcache.c); 128 objects at most halved the batches in which objects pass
 * between a thread that frees and one that allocates. */
const uint16_t ta_class_cache_cap[TA_NCLASSES] = {
	256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256,
	256, 256, 256, 256, 256, 256, 256, 256, 227, 204, 186, 170, 157, 146, 136, 128,
	120, 113, 107, 102, 97,	 93,  89,  85,	81,  78,  75,  73,  70,	 68,  66,  64,
	60,  56,  53,  51,  48,	 46,  44,  42,	40,  39,  37,  36,  35,	 34,  33,  32,
	30,  28,  26,  25,  24,	 23,  22,  21,	20,  19,  18,  18,  17,	 17,  16,  16,
	15,  14,  13,  12,  12,	 11,  11,  10,	10,  9,	  9,   9,   8,	 8,   8,   8,
	7,   7,	  6,   6,   6,	 5,   5,   5,	5,   4,	  4,   4,   4,	 4,   4,   4,
	4,   4,	  4,   4,   4,	 4,   4,   4,	4,   4,	  4,   4,   4,	 4,   4,   4,
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
