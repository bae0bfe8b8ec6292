/* SPDX-License-Identifier: MIT */
/*
 * Taking back the charges of dead processes' slots (src/shm.c), on a segment built in memory:
 * every dead slot is emptied and its charge leaves the tier, a live one stays, and a slot holding
 * an absurd charge (a process that died between charging a huge request by force and undoing it)
 * no longer leaves the tier charged for ever. The end-to-end part, with real processes killed, is
 * tests/quota/test_quota_reclaim.sh.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "test.h"

#define MiB ((uint64_t)1 << 20)

static _Alignas(64) unsigned char seg[TA_SHM_SEG_SIZE];

static uint32_t dead_pid(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, NULL, 0) != pid)
		test_hard("cannot make a dead process");
	return (uint32_t)pid;
}

static void test_reclaim_dead(void)
{
	struct ta_shm_header *h = (void *)seg;
	h->max_slots = TA_SHM_MAX_SLOTS;
	h->slot_size = sizeof(struct ta_shm_slot);
	h->slots_off = TA_SHM_SLOTS_OFF;
	h->tier_size = sizeof(struct ta_shm_tier);
	h->tiers_off = TA_SHM_TIERS_OFF;
	atomic_store(&h->ntiers, 2);
	struct ta_shm shm = {
		.hdr = h,
		.tiers = (void *)(seg + TA_SHM_TIERS_OFF),
		.slots = (void *)(seg + TA_SHM_SLOTS_OFF),
		.mine = NULL,
		.size = sizeof(seg),
	};
	const uint64_t absurd = (uint64_t)1 << 63;
	/* Slot 0 dead with 3 MiB, slot 1 dead with an absurd charge in tier 0 and 2 MiB in tier 1,
	 * slot 2 alive (our parent) with 1 MiB. */
	atomic_store(&shm.slots[0].pid, dead_pid());
	atomic_store(&shm.slots[0].charged[0], 3 * MiB);
	atomic_store(&shm.slots[1].pid, dead_pid());
	atomic_store(&shm.slots[1].charged[0], absurd);
	atomic_store(&shm.slots[1].charged[1], 2 * MiB);
	atomic_store(&shm.slots[2].pid, (uint32_t)getppid());
	atomic_store(&shm.slots[2].charged[0], 1 * MiB);
	atomic_store(&shm.tiers[0].charged, 3 * MiB + absurd + 1 * MiB);
	atomic_store(&shm.tiers[1].charged, 2 * MiB);

	test_context("reclaim: the two dead slots are taken back");
	expect_eq(ta_shm_reclaim_dead(&shm), 2);
	expect_eq(atomic_load(&shm.slots[0].pid), 0);
	expect_eq(atomic_load(&shm.slots[1].pid), 0);
	expect_eq(atomic_load(&shm.slots[0].charged[0]), 0);
	expect_eq(atomic_load(&shm.slots[1].charged[0]), 0);
	test_context("reclaim: the tiers keep the live slot's charge only, absurd or not");
	expect_eq(atomic_load(&shm.tiers[0].charged), 1 * MiB);
	expect_eq(atomic_load(&shm.tiers[1].charged), 0);
	test_context("reclaim: only plausible amounts count as reclaimed");
	expect_eq(atomic_load(&shm.tiers[0].reclaimed), 3 * MiB);
	expect_eq(atomic_load(&shm.tiers[1].reclaimed), 2 * MiB);
	test_context("reclaim: the live slot stays");
	expect_eq(atomic_load(&shm.slots[2].pid), (uint32_t)getppid());
	expect_eq(atomic_load(&shm.slots[2].charged[0]), 1 * MiB);
	expect_eq(ta_shm_reclaim_dead(&shm), 0);
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	test_reclaim_dead();
	return test_done();
}
