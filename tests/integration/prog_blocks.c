/* SPDX-License-Identifier: MIT */
/*
 * A helper for test_env.sh (not a test by itself): allocate TOTAL bytes in blocks of BLOCK bytes,
 * write and read them back, free every other one, and print a line that depends only on the
 * arguments, so that runs with different TIERALLOC_* settings can be compared.
 *   prog_blocks TOTAL BLOCK [--pid] [--tiers]
 * TOTAL and BLOCK take K and M suffixes. --pid prints "pid N" first. --tiers prints, through
 * tieralloc's API found with dlsym (the program is not linked with it), the tier count and the
 * tiers of the first and the last block, or "tiers: no api" without the preload.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/size_arg.h"

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: prog_blocks TOTAL BLOCK [--pid] [--tiers]\n");
		return 2;
	}
	size_t total = parse_size(argv[1]), block = parse_size(argv[2]);
	if (total == 0 || block == 0) {
		fprintf(stderr, "prog_blocks: bad size\n");
		return 2;
	}
	int want_pid = 0, want_tiers = 0;
	for (int i = 3; i < argc; i++) {
		want_pid |= strcmp(argv[i], "--pid") == 0;
		want_tiers |= strcmp(argv[i], "--tiers") == 0;
	}
	if (want_pid) {
		/* Flushed at once: the TIERALLOC_STRICT test checks that main never ran. */
		printf("pid %d\n", (int)getpid());
		fflush(stdout);
	}
	size_t n = total / block;
	unsigned char **b = malloc(n * sizeof(*b));
	if (b == NULL)
		return 3;
	for (size_t i = 0; i < n; i++) {
		b[i] = malloc(block);
		if (b[i] == NULL) {
			fprintf(stderr, "prog_blocks: malloc(%zu) failed at block %zu\n", block, i);
			return 3;
		}
		memset(b[i], (int)(i & 0xff), block);
	}
	unsigned long long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += b[i][i % block] + b[i][block - 1];
	if (want_tiers) {
		int (*tier_of)(const void *) =
		    (int (*)(const void *))dlsym(RTLD_DEFAULT, "tieralloc_tier_of");
		int (*tier_count)(void) =
		    (int (*)(void))dlsym(RTLD_DEFAULT, "tieralloc_tier_count");
		if (tier_of == NULL || tier_count == NULL)
			printf("tiers: no api\n");
		else
			printf("tiers: count %d first %d last %d\n", tier_count(), tier_of(b[0]),
			       tier_of(b[n - 1]));
	}
	for (size_t i = 0; i < n; i += 2)
		free(b[i]);
	printf("blocks %zu of %zu bytes, sum %llu\n", n, block, sum);
	return 0;
}
