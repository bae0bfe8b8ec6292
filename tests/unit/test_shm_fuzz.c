/* SPDX-License-Identifier: MIT */
/*
 * A bounded fuzzer of the shared segment (src/quota/shm.c) against a writer of the same user, who
 * may write anything into the file at any time (docs/security.md). Each case runs in a
 * forked child that attaches with ta_shm_attach and then charges, uncharges, refreshes, takes
 * dead slots back and wakes the others, as the allocator does; the child must exit 0, whatever
 * the segment held. Any crash (SIGSEGV, SIGBUS) fails the test.
 *   attach: 300 segments forged from a valid one (header fields set to edge or random values,
 *           bytes flipped, the file cut or grown, slots filled with odd pids and charges);
 *   live:   40 children attached to a good segment while the parent rewrites header fields,
 *           tier records and slots, and truncates the file and grows it back; the child's own
 *           memory must stay intact;
 *   cut:    the file cut to nothing under an attached child, which then charges: it goes on
 *           with its own accounting, with one warning.
 * A fixed seed per case: a failure names the case to run again. Well under 30 s on a loaded
 * machine (each case is a fork and a few hundred microseconds of work).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forge.h"
#include "quota/shm.h"
#include "test.h"

#define ATTACH_CASES 300
#define LIVE_CASES   40

static uint64_t rnd_state;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static _Alignas(64) unsigned char seg[TA_SHM_SEG_SIZE + 8192];

static void fill_valid(void)
{
	memset(seg, 0, sizeof(seg));
	struct ta_shm_header *h = ta_forge_header(seg, TA_SHM_ABI_MINOR, TA_FORGE_ALL);
	atomic_store(&h->ntiers, ta_ntiers);
	struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
	for (unsigned i = 0; i < ta_ntiers; i++) {
		atomic_store(&t[i].limit[TA_LIMIT_HIGH], 1ull << 30);
		atomic_store(&t[i].limit[TA_LIMIT_MAX], 1ull << 30);
		atomic_store(&t[i].capacity, 1ull << 30);
	}
	atomic_store(&h->state, TA_SHM_READY);
}

static const struct {
	unsigned off, width;
} fields[] = {
	{ offsetof(struct ta_shm_header, magic), 8 },
	{ offsetof(struct ta_shm_header, abi_major), 2 },
	{ offsetof(struct ta_shm_header, abi_minor), 2 },
	{ offsetof(struct ta_shm_header, header_size), 4 },
	{ offsetof(struct ta_shm_header, seg_size), 8 },
	{ offsetof(struct ta_shm_header, max_slots), 4 },
	{ offsetof(struct ta_shm_header, max_tiers), 4 },
	{ offsetof(struct ta_shm_header, slot_size), 4 },
	{ offsetof(struct ta_shm_header, slots_off), 4 },
	{ offsetof(struct ta_shm_header, tier_size), 4 },
	{ offsetof(struct ta_shm_header, tiers_off), 4 },
	{ offsetof(struct ta_shm_header, state), 4 },
	{ offsetof(struct ta_shm_header, ntiers), 4 },
	{ offsetof(struct ta_shm_header, agent_off), 4 },
	{ offsetof(struct ta_shm_header, agent_size), 4 },
	{ offsetof(struct ta_shm_header, limits_read_ns), 8 },
	{ offsetof(struct ta_shm_header, observe_claim_ns), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, charged), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, limit), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, untracked), 8 },
	{ TA_SHM_TIERS_OFF + 192 + offsetof(struct ta_shm_tier, charged), 8 },
	{ TA_SHM_SLOTS_OFF + offsetof(struct ta_shm_slot, pid), 4 },
	{ TA_SHM_SLOTS_OFF + offsetof(struct ta_shm_slot, charged), 8 },
	{ TA_SHM_SLOTS_OFF + 64 + offsetof(struct ta_shm_slot, pid), 4 },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static uint64_t value(void)
{
	static const uint64_t edges[] = { 0,
					  1,
					  7,
					  8,
					  64,
					  192,
					  400,
					  512,
					  4096,
					  0xffff,
					  0x10000,
					  0x7fffffff,
					  0xffffffffull,
					  0xfffffff8ull,
					  TA_SHM_SEG_SIZE,
					  TA_SHM_SEG_SIZE - 64,
					  TA_SHM_SLOTS_OFF,
					  UINT64_MAX,
					  UINT64_MAX - 4095,
					  1ull << 63 };
	uint64_t r = rnd();
	return r % 3 == 0 ? rnd() : edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
}

static void put_field(unsigned char *base, unsigned f, uint64_t v)
{
	memcpy(base + fields[f].off, &v, fields[f].width);
}

/* What the allocator does with a segment, bounded: every access only while it is active. */
static void exercise(unsigned rounds)
{
	for (unsigned k = 0; k < rounds; k++) {
		for (unsigned t = 0; t < ta_ntiers; t++) {
			if (!atomic_load(&ta_shm.active))
				break;
			if (ta_shm_charge(t, 4096 * (k + 1), k % 2 ? TA_LIMIT_MAX : TA_LIMIT_HIGH,
					  k % 3 == 0) &&
			    atomic_load(&ta_shm.active))
				ta_shm_uncharge(t, 4096 * (k + 1));
		}
		if (!atomic_load(&ta_shm.active))
			break;
		ta_shm_refresh_limits(k % 4 == 0);
		if (atomic_load(&ta_shm.active))
			ta_shm_reclaim_dead(&ta_shm);
		ta_shm_wake_others();
		ta_shm_check(true);
	}
}

static struct ta_cgroup cg0;

static void child_quiet(void)
{
	int null = open("/dev/null", O_WRONLY);
	if (null >= 0)
		dup2(null, STDERR_FILENO);
}

/* Run fn in a child; its exit status, or 128 + the signal that ended it. */
static int in_child(void (*fn)(void *), void *arg)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		test_hard("fork");
	if (pid == 0) {
		child_quiet();
		memset(&ta_shm, 0, sizeof(ta_shm));
		fn(arg);
		_exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		test_hard("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char name[96], path[128];

static void attach_child(void *arg)
{
	(void)arg;
	if (ta_shm_attach(name, &cg0, &ta_topo) == 0) {
		if (ta_shm.nslots > TA_SHM_MAX_SLOTS || ta_shm.mine == NULL)
			_exit(3);
		exercise(6);
		_exit(10); /* attached */
	}
	_exit(11); /* refused */
}

static void test_attach(void)
{
	unsigned attached = 0, refused = 0;
	for (unsigned i = 0; i < ATTACH_CASES; i++) {
		rnd_state = 0x9e3779b97f4a7c15ull * (i + 1);
		fill_valid();
		size_t size = TA_SHM_SEG_SIZE;
		unsigned nmut = (unsigned)(rnd() % 4);
		for (unsigned m = 0; m < nmut; m++) {
			uint64_t r = rnd() % 10;
			if (r < 5) {
				put_field(seg, (unsigned)(rnd() % NFIELDS), value());
			} else if (r < 7) {
				unsigned at = (unsigned)(rnd() % (TA_SHM_SLOTS_OFF + 256));
				seg[at] ^= (unsigned char)(1u << (rnd() % 8));
			} else if (r < 8) {
				size = (size_t)(rnd() % (TA_SHM_SEG_SIZE + 8192));
			} else {
				/* Odd slots: the marker, our own pid, dead pids, absurd charges. */
				struct ta_shm_slot *s =
				    (struct ta_shm_slot *)(seg + TA_SHM_SLOTS_OFF +
							   (rnd() % TA_SHM_MAX_SLOTS) * 64);
				static const uint32_t pids[] = { UINT32_MAX, 1, 0x7ffffff0u, 2 };
				atomic_store(&s->pid, pids[rnd() % 4]);
				atomic_store(&s->charged[rnd() % 3], value());
			}
		}
		snprintf(name, sizeof(name), "/tieralloc-test-fuzz-%d-%u", (int)getpid(), i);
		snprintf(path, sizeof(path), "/dev/shm%s", name);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd < 0)
			test_hard("create %s", path);
		size_t n = size < sizeof(seg) ? size : sizeof(seg);
		if (write(fd, seg, n) != (ssize_t)n || ftruncate(fd, (off_t)size) != 0)
			test_hard("write %s", path);
		close(fd);
		int rc = in_child(attach_child, NULL);
		test_context("attach case %u (%u mutations, size %zu)", i, nmut, size);
		expect_true(rc == 10 || rc == 11);
		attached += rc == 10;
		refused += rc == 11;
		unlink(path);
	}
	printf("attach: %u cases, %u attached, %u refused\n", ATTACH_CASES, attached, refused);
	test_context("attach: some forged segments are usable, some refused");
	expect_gt(attached, ATTACH_CASES / 10);
	expect_gt(refused, ATTACH_CASES / 10);
}

static int stop_fd, ready_fd;

static void live_child(void *arg)
{
	(void)arg;
	/* Memory of the process's own, which nothing done to the segment may touch. */
	static unsigned char mine[1 << 16];
	for (size_t i = 0; i < sizeof(mine); i++)
		mine[i] = (unsigned char)(i * 31 + 7);
	int rc = ta_shm_attach(name, &cg0, &ta_topo);
	if (write(ready_fd, "r", 1) != 1 || rc != 0)
		_exit(4);
	fcntl(stop_fd, F_SETFL, O_NONBLOCK);
	char c;
	while (read(stop_fd, &c, 1) != 1)
		exercise(1);
	for (size_t i = 0; i < sizeof(mine); i++)
		if (mine[i] != (unsigned char)(i * 31 + 7))
			_exit(5);
	_exit(0);
}

static void test_live(void)
{
	for (unsigned i = 0; i < LIVE_CASES; i++) {
		snprintf(name, sizeof(name), "/tieralloc-test-fuzzlive-%d-%u", (int)getpid(), i);
		snprintf(path, sizeof(path), "/dev/shm%s", name);
		int stop[2], ready[2];
		if (pipe(stop) != 0 || pipe(ready) != 0)
			test_hard("pipe");
		stop_fd = stop[0];
		ready_fd = ready[1];
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			test_hard("fork");
		if (pid == 0) {
			child_quiet();
			memset(&ta_shm, 0, sizeof(ta_shm));
			live_child(NULL);
		}
		char c;
		if (read(ready[0], &c, 1) != 1)
			test_hard("live child did not start");
		int fd = open(path, O_RDWR);
		if (fd < 0)
			test_hard("open %s", path);
		rnd_state = 0xd1b54a32d192ed03ull * (i + 1);
		for (unsigned k = 0; k < 150; k++) {
			uint64_t r = rnd() % 8;
			if (r == 0) {
				static const off_t cuts[] = { 0, 100, 4096, TA_SHM_SEG_SIZE / 2 };
				if (ftruncate(fd, cuts[rnd() % 4]) != 0)
					test_hard("ftruncate");
				struct timespec ts = { 0, 300000 };
				nanosleep(&ts, NULL);
				if (ftruncate(fd, TA_SHM_SEG_SIZE) != 0)
					test_hard("ftruncate");
			} else {
				unsigned f = (unsigned)(rnd() % NFIELDS);
				uint64_t v = value();
				if (pwrite(fd, &v, fields[f].width, fields[f].off) !=
				    (ssize_t)fields[f].width)
					test_hard("pwrite");
			}
			struct timespec ts = { 0, 100000 };
			nanosleep(&ts, NULL);
		}
		close(fd);
		if (write(stop[1], "s", 1) != 1)
			test_hard("stop");
		int status;
		if (waitpid(pid, &status, 0) != pid)
			test_hard("waitpid");
		test_context("live case %u", i);
		expect_true(WIFEXITED(status));
		expect_eq(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), 0);
		close(stop[0]);
		close(stop[1]);
		close(ready[0]);
		close(ready[1]);
		unlink(path);
	}
}

/* The file cut to nothing under an attached process, which then touches the segment: the
 * SIGBUS is taken for it, and it goes on with its own accounting. */
static void cut_child(void *arg)
{
	(void)arg;
	if (ta_shm_attach(name, &cg0, &ta_topo) != 0)
		_exit(6);
	if (truncate(path, 0) != 0)
		_exit(7);
	/* No check in between: the charge itself touches the truncated pages. */
	ta_shm_charge(0, 4096, TA_LIMIT_MAX, true);
	if (atomic_load(&ta_shm.active))
		_exit(8);
	exercise(3);
	_exit(0);
}

static void test_cut(void)
{
	snprintf(name, sizeof(name), "/tieralloc-test-fuzzcut-%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	test_context("cut: the segment truncated under an attached process");
	expect_eq(in_child(cut_child, NULL), 0);
	unlink(path);
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "TIERALLOC_SHM_NAME=off", "TIERALLOC_TIERS=0;0", NULL };
	test_reexec_with_env(argv, env);
	memset(&cg0, 0, sizeof(cg0));
	snprintf(cg0.key, sizeof(cg0.key), "machine");
	test_cut();
	test_attach();
	test_live();
	return test_done();
}
