/* SPDX-License-Identifier: MIT */
/*
 * Writes a quota segment file the way the tests want it broken (tests/quota/test_quota_bad.sh,
 * test_quota_owner.sh): the library must survive each with one warning and local accounting,
 * and leave the file as it was. Independent of src/: the layout comes from the ABI header alone.
 *
 *   shm_forge PATH KIND [NTIERS]   create PATH (it must not exist), mode 0600
 * KIND: valid      a finished segment for NTIERS tiers (default 2), as the library makes it
 *       major2     valid, but ABI major version 2
 *       state0     valid, but its creator never set state = READY
 *       sizes      valid, but seg_size says 4 KiB more than the file
 *       records    valid, but the slots lie past the end of the file
 *       garbage    pseudo-random bytes (a fixed seed), the size of a segment
 *       garbage1   the same with the state word READY, so that the magic is what refuses it
 * Truncated, oversized, other owners and modes are made from "valid" by the script.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tieralloc/shm_abi.h"

static unsigned char seg[TA_SHM_SEG_SIZE];

static void fill_valid(unsigned ntiers)
{
	struct ta_shm_header *h = (struct ta_shm_header *)seg;
	h->magic = TA_SHM_MAGIC;
	h->abi_major = TA_SHM_ABI_MAJOR;
	h->abi_minor = TA_SHM_ABI_MINOR;
	h->header_size = sizeof(*h);
	h->seg_size = TA_SHM_SEG_SIZE;
	h->max_slots = TA_SHM_MAX_SLOTS;
	h->max_tiers = TA_SHM_MAX_TIERS;
	h->slot_size = sizeof(struct ta_shm_slot);
	h->slots_off = TA_SHM_SLOTS_OFF;
	h->tier_size = sizeof(struct ta_shm_tier);
	h->tiers_off = TA_SHM_TIERS_OFF;
	h->creator_pid = 1;
	h->cgroup_version = 0;
	atomic_store(&h->ntiers, ntiers);
	struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
	for (unsigned i = 0; i < ntiers; i++) {
		/* A forged limit of 1 byte: were the segment used, nothing would fit in it. */
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			atomic_store(&t[i].limit[k], 1);
		atomic_store(&t[i].capacity, 1ull << 30);
		atomic_store(&t[i].share_ppm, 1000000 / ntiers);
		snprintf(t[i].name, sizeof(t[i].name), "forged%u", i);
	}
	atomic_store(&h->state, TA_SHM_READY);
}

static void fill_garbage(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(seg); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		seg[i] = (unsigned char)x;
	}
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: shm_forge PATH KIND [NTIERS]\n");
		return 2;
	}
	const char *kind = argv[2];
	unsigned ntiers = argc == 4 ? (unsigned)atoi(argv[3]) : 2;
	struct ta_shm_header *h = (struct ta_shm_header *)seg;
	if (strcmp(kind, "garbage") == 0 || strcmp(kind, "garbage1") == 0) {
		fill_garbage();
		/* garbage: make sure the state word is not READY by chance. */
		atomic_store(&h->state, strcmp(kind, "garbage1") == 0 ? TA_SHM_READY : 0xa5a5a5a5u);
	} else {
		fill_valid(ntiers);
		if (strcmp(kind, "major2") == 0)
			h->abi_major = 2;
		else if (strcmp(kind, "state0") == 0)
			atomic_store(&h->state, TA_SHM_INIT);
		else if (strcmp(kind, "sizes") == 0)
			h->seg_size = TA_SHM_SEG_SIZE + 4096;
		else if (strcmp(kind, "records") == 0)
			h->slots_off = TA_SHM_SEG_SIZE - 64;
		else if (strcmp(kind, "valid") != 0) {
			fprintf(stderr, "shm_forge: unknown kind %s\n", kind);
			return 2;
		}
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	if (write(fd, seg, sizeof(seg)) != (ssize_t)sizeof(seg) || close(fd) != 0) {
		perror("write");
		return 1;
	}
	return 0;
}
