/* SPDX-License-Identifier: MIT */
/*
 * "64K", "3M", "4096": a size on the command line of the test workloads (prog_blocks,
 * quota_hog, enforce_work); 0 for anything else, which their callers refuse.
 */
#ifndef TA_TEST_SIZE_ARG_H
#define TA_TEST_SIZE_ARG_H

#include <stddef.h>
#include <stdlib.h>

static inline size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end == 'K')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	else if (*end != '\0')
		v = 0;
	return (size_t)v;
}

#endif /* TA_TEST_SIZE_ARG_H */
