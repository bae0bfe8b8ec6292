/* SPDX-License-Identifier: MIT */
/*
 * Taking back the charges of dead processes' slots (src/quota/shm.c), on a segment built in memory:
 * every dead slot is emptied and its charge leaves the tier, a live one stays, and a slot holding
 * an absurd charge (a process that died between charging a huge request by force and undoing it)
 * no longer leaves the tier charged for ever. The end-to-end part, with real processes killed, is
 * tests/quota/test_quota_reclaim.sh. Also: a slot left marked by a reclaimer is taken back after
 * 2 s, a wrapped tier counter is repaired, and a rewritten header does not move the walk; a
 * dead slot's heat record (the access block) is zeroed with it and the sums count live slots.
 * Two threads of one process walking at once (the worker, and an allocating thread in inline
 * mode) take a slot back once.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forge.h"
#include "quota/shm.h"
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
	struct ta_shm_header *h = ta_forge_header(seg, TA_SHM_ABI_MINOR, TA_FORGE_ALL);
	atomic_store(&h->ntiers, 2);
	struct ta_shm shm = {
		.hdr = h,
		.tiers = (void *)(seg + TA_SHM_TIERS_OFF),
		.slots = (void *)(seg + TA_SHM_SLOTS_OFF),
		.mine = NULL,
		.size = sizeof(seg),
		.nslots = TA_SHM_MAX_SLOTS,
		.slot_size = sizeof(struct ta_shm_slot),
		.ntiers = 2,
		.access = (void *)(seg + TA_SHM_ACCESS_OFF),
	};
	/* Heat records (ABI minor 3) of slots 0 (dead) and 2 (alive). */
	atomic_store(&shm.access->slot[0].hot[0], 7 * MiB);
	atomic_store(&shm.access->slot[0].cold[1], 5 * MiB);
	atomic_store(&shm.access->slot[2].hot[0], 1 * MiB);
	atomic_store(&shm.access->slot[2].cold[1], 2 * MiB);
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
	test_context("reclaim: a dead slot's heat record goes with it");
	expect_eq(atomic_load(&shm.access->slot[0].hot[0]), 0);
	expect_eq(atomic_load(&shm.access->slot[0].cold[1]), 0);
	uint64_t v = 0;
	expect_eq(ta_shm_access_field(&shm, 0, "hot", &v), 0);
	expect_eq(v, 1 * MiB);
	expect_eq(ta_shm_access_field(&shm, 1, "cold", &v), 0);
	expect_eq(v, 2 * MiB);
	atomic_store(&shm.access->promoted[0], 3 * MiB);
	expect_eq(ta_shm_access_field(&shm, 0, "promoted", &v), 0);
	expect_eq(v, 3 * MiB);
	expect_eq(ta_shm_access_field(&shm, 0, "warm", &v), -ENOENT);
	expect_eq(ta_shm_access_field(&shm, TA_SHM_MAX_TIERS, "hot", &v), -ENOENT);
	expect_eq(ta_shm_reclaim_dead(&shm), 0);
	test_context("%s", "");
}

/* A slot left held by the reclaim marker (a reclaimer that died in the middle, or a writer) is
 * taken back once this process has seen it marked for 2 s; a tier counter that no process could
 * hold (wrapped below zero) becomes the sum of the slots' charges. Walks are bounded by the
 * copies made at attach, not by the live header. */
static void test_marker_and_absurd(void)
{
	memset(seg, 0, sizeof(seg));
	struct ta_shm_header *h = (void *)seg;
	struct ta_shm shm = {
		.hdr = h,
		.tiers = (void *)(seg + TA_SHM_TIERS_OFF),
		.slots = (void *)(seg + TA_SHM_SLOTS_OFF),
		.size = sizeof(seg),
		.nslots = TA_SHM_MAX_SLOTS,
		.slot_size = sizeof(struct ta_shm_slot),
		.ntiers = 2,
	};
	/* A writer's header: were these used, the walk would leave the segment. */
	h->max_slots = 65536;
	h->slot_size = 1u << 20;
	atomic_store(&h->ntiers, 3);
	atomic_store(&shm.slots[4].pid, UINT32_MAX);
	atomic_store(&shm.slots[4].charged[0], 2 * MiB);
	atomic_store(&shm.slots[5].pid, (uint32_t)getppid());
	atomic_store(&shm.slots[5].charged[1], 1 * MiB);
	atomic_store(&shm.tiers[0].charged, 2 * MiB);
	atomic_store(&shm.tiers[1].charged, UINT64_MAX - 4095); /* wrapped */
	atomic_store(&shm.tiers[1].peak, UINT64_MAX - 4095);

	test_context("absurd: the wrapped counter is the live slot's charge again");
	expect_eq(ta_shm_reclaim_dead(&shm), 0);
	expect_eq(atomic_load(&shm.tiers[1].charged), 1 * MiB);
	expect_eq(atomic_load(&shm.tiers[1].peak), 1 * MiB);
	test_context("marker: seen once, left alone (a reclaimer may be at work)");
	expect_eq(atomic_load(&shm.slots[4].pid), UINT32_MAX);
	expect_eq(atomic_load(&shm.tiers[0].charged), 2 * MiB);

	/* 2 s is the minimum: sleeping longer on a loaded machine changes nothing. */
	struct timespec ts = { 2, 100 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	test_context("marker: still marked 2 s later, taken back");
	expect_eq(ta_shm_reclaim_dead(&shm), 1);
	expect_eq(atomic_load(&shm.slots[4].pid), 0);
	expect_eq(atomic_load(&shm.slots[4].charged[0]), 0);
	expect_eq(atomic_load(&shm.tiers[0].charged), 0);
	expect_eq(atomic_load(&shm.tiers[0].reclaimed), 2 * MiB);
	expect_eq(atomic_load(&shm.slots[5].pid), (uint32_t)getppid());
	expect_eq(atomic_load(&shm.tiers[1].charged), 1 * MiB);
}

/* Two threads of one process look for dead slots at the same moment: the slot left marked long
 * ago is taken back once, not once per thread (under TSan, also: no race on the walker's own
 * records). */
static struct ta_shm *walk_shm;
static pthread_barrier_t walk_start;
static _Atomic unsigned walk_taken;

static void *walk_slots(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&walk_start);
	atomic_fetch_add(&walk_taken, ta_shm_reclaim_dead(walk_shm));
	return NULL;
}

static void test_two_walkers(void)
{
	static struct ta_shm shm;
	unsigned twice = 0, rounds = 200;
	for (unsigned round = 0; round < rounds; round++) {
		memset(seg, 0, sizeof(seg));
		memset(&shm, 0, sizeof(shm));
		shm.hdr = (void *)seg;
		shm.tiers = (void *)(seg + TA_SHM_TIERS_OFF);
		shm.slots = (void *)(seg + TA_SHM_SLOTS_OFF);
		shm.size = sizeof(seg);
		shm.nslots = TA_SHM_MAX_SLOTS;
		shm.slot_size = sizeof(struct ta_shm_slot);
		shm.ntiers = 2;
		atomic_store(&shm.slots[3].pid, UINT32_MAX);
		atomic_store(&shm.slots[3].charged[0], 4 * MiB);
		atomic_store(&shm.tiers[0].charged, 4 * MiB);
		shm.marked_since[3] = 1; /* seen marked at boot: long stale */
		walk_shm = &shm;
		atomic_store(&walk_taken, 0);
		pthread_t a, b;
		if (pthread_barrier_init(&walk_start, NULL, 2) != 0 ||
		    pthread_create(&a, NULL, walk_slots, NULL) != 0)
			test_hard("cannot start a walker");
		if (pthread_create(&b, NULL, walk_slots, NULL) != 0)
			test_hard("cannot start a walker");
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		pthread_barrier_destroy(&walk_start);
		if (atomic_load(&walk_taken) != 1 || atomic_load(&shm.slots[3].pid) != 0 ||
		    atomic_load(&shm.tiers[0].charged) != 0)
			twice++;
	}
	test_context("two walkers: the stale marked slot is taken back once, in every round");
	printf("# %u of %u rounds took it back other than once\n", twice, rounds);
	expect_eq(twice, 0);
	test_context("two walkers: the flag is down after them");
	expect_eq(ta_shm_reclaim_dead(&shm), 0);
	expect_eq(atomic_load(&shm.reclaiming), false);
	test_context("%s", "");
}

/* /proc/<pid>/stat as the library, the agent and tieralloc-stat read it (ta_proc_stat_parse). */
static void test_proc_stat(void)
{
	char state = 0;
	uint64_t start = 0;
	test_context("a command with spaces and parentheses");
	expect_true(
	    ta_proc_stat_parse("42 (a) b (c)) S 1 42 42 0 -1 4194560 99 0 0 0 0 0 0 0 20 0 1 "
			       "0 123456 4096 100",
			       &state, &start));
	expect_eq(state, 'S');
	expect_eq(start, 123456);
	test_context("cut before the start time, no ')', nothing after it");
	expect_true(!ta_proc_stat_parse("42 (a) S 1 42 42", &state, &start));
	expect_true(!ta_proc_stat_parse("42 a S 1", &state, &start));
	expect_true(!ta_proc_stat_parse("42 (a)", &state, &start));
	test_context("this process, as the kernel writes it");
	char text[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	expect_true(f != NULL && fgets(text, sizeof(text), f) != NULL);
	if (f != NULL)
		fclose(f);
	expect_true(ta_proc_stat_parse(text, &state, &start));
	expect_eq(state, 'R');
	expect_eq(start, ta_proc_start_time(getpid()));
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", NULL };
	test_reexec_with_env(argv, env);
	test_proc_stat();
	test_reclaim_dead();
	test_marker_and_absurd();
	test_two_walkers();
	return test_done();
}
