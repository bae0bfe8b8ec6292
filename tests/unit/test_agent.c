/* SPDX-License-Identifier: MIT */
/*
 * The agent's side of the segments (agent/tally.c, agent/segments.c), without BPF: counts summed
 * per tier, the alarm's rule, the agent block's bounds checks, and publishing into forged segments
 * in a private tmpfs directory: only valid segments are written, never through a link, never the
 * processes' own field, and an alarm wakes a worker sleeping on its slot's word through another
 * mapping of the file. Then the allocator's side: a pass that finds a new alarm reads the
 * cgroup's usage although the period is not over, and wakes the cgroup's other workers. The BPF
 * counting itself is tests/bpf and tests/guest/agent.sh.
 * Issue 16: the metrics of the segments kept (Prometheus' text, common/prom.c): the agent's
 * counts, the limits, the live process; label values escaped; a repeated series left out.
 * Issue 12: another user's 1200 valid segments and a few hundred large or sparse junk files
 * exhaust neither the agent's descriptors nor its rescans (counts of files opened and bytes
 * read, not times), and the real container's segment is written from the first rescan on.
 * Issue 15: a lending round (--lend) over two forged segments: no loan before a wish, the idle
 * share less the reserve once the borrower is steered away, an expiry the round renews, a cut
 * loan raising the borrower's alarm, a take-back timed until the borrower is back within its
 * share and loan, an exited borrower's loan returned, and the counters.
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/types.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "forge.h"
#include "internal.h"
#include "prom.h"
#include "quota/shm.h"
#include "test.h"
#include "migrations.h"

#define MiB ((uint64_t)1 << 20)
#define CG  4242ull

static void test_tally(void)
{
	const uint64_t nodes[2] = { 1ull << 0, (1ull << 1) | (1ull << 2) };
	const struct ta_agent_count counts[] = {
		{ CG, 0, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 100 },
		{ CG, 0, TA_BPF_PROMOTE, TA_BPF_NODE_OF_CPU, 10 },
		{ CG, 2, TA_BPF_DEMOTE, TA_BPF_NODE_EXACT, 7 },
		{ CG, 2, TA_BPF_DEMOTE, TA_BPF_NODE_OF_CPU,
		  1000 }, /* kswapd's CPU: not a destination */
		{ CG, 1, TA_BPF_MOVE_PAGES, TA_BPF_NODE_EXACT, 5 },
		{ CG, 1, TA_BPF_MBIND, TA_BPF_NODE_EXACT, 6 },
		{ CG, 1, TA_BPF_MOVE_PAGES, TA_BPF_NODE_OF_CPU, 2000 },
		{ CG, -1, TA_BPF_MBIND, TA_BPF_NODE_EXACT, 3000 },	/* destination unknown */
		{ CG, 0, TA_BPF_OTHER, TA_BPF_NODE_EXACT, 4000 },	/* compaction */
		{ CG, 70, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 5000 },	/* beyond the node masks */
		{ CG, 3, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 6000 },	/* in no tier */
		{ CG + 1, 0, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 7000 }, /* another cgroup */
	};
	uint64_t out[2][TA_AGENT_NKINDS];
	ta_agent_tally(counts, sizeof(counts) / sizeof(counts[0]), CG, nodes, 2, out);
	test_context("tally: promotions by CPU node count, other kinds need exact nodes");
	expect_eq(out[0][TA_AGENT_PROMOTED], 110);
	expect_eq(out[0][TA_AGENT_DEMOTED], 0);
	expect_eq(out[0][TA_AGENT_MOVED], 0);
	expect_eq(out[1][TA_AGENT_PROMOTED], 0);
	expect_eq(out[1][TA_AGENT_DEMOTED], 7);
	expect_eq(out[1][TA_AGENT_MOVED], 11);
	ta_agent_tally(counts, sizeof(counts) / sizeof(counts[0]), 1, nodes, 2, out);
	test_context("tally: a cgroup with no counts");
	expect_eq(out[0][TA_AGENT_PROMOTED] + out[1][TA_AGENT_MOVED], 0);
}

static void test_alarm_rule(void)
{
	uint64_t high = 256 * MiB, close_at = high - ta_shm_gate_margin(high) / 2;
	test_context("alarm: no promotion, no alarm, even gated");
	expect_true(!ta_agent_alarm(0, 300 * MiB, high, true));
	test_context("alarm: promoted into a shut tier");
	expect_true(ta_agent_alarm(4096, 0, high, true));
	test_context("alarm: promoted up to the gate's closing point");
	expect_true(ta_agent_alarm(MiB, close_at - MiB, high, false));
	expect_true(!ta_agent_alarm(MiB, close_at - MiB - 4096, high, false));
	test_context("alarm: a tier without a high share");
	expect_true(!ta_agent_alarm(MiB, 1ull << 40, TA_SHM_UNLIMITED, false));
}

/* ---- forged segments ---- */

static _Alignas(64) unsigned char seg[TA_SHM_SEG_SIZE];

static struct ta_shm_header *forge(uint16_t minor, uint64_t cgroup_id)
{
	memset(seg, 0, sizeof(seg));
	/* The agent block from minor 2; the access and lending blocks are the tests' to add. */
	struct ta_shm_header *h = ta_forge_header(seg, minor, minor >= 2 ? TA_FORGE_AGENT : 0);
	h->cgroup_id = cgroup_id;
	atomic_store(&h->ntiers, 2);
	struct ta_shm_tier *t = (void *)(seg + TA_SHM_TIERS_OFF);
	for (unsigned i = 0; i < 2; i++) {
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			atomic_store(&t[i].limit[k], 256 * MiB);
		atomic_store(&t[i].nodes, 1ull << i);
	}
	struct ta_shm_slot *slot = (void *)(seg + TA_SHM_SLOTS_OFF);
	atomic_store(&slot[3].pid, (uint32_t)getpid());
	atomic_store(&h->state, TA_SHM_READY);
	return h;
}

static void test_block_bounds(void)
{
	struct ta_shm_header *h = forge(2, CG);
	test_context("agent block: a good one");
	expect_true(ta_shm_agent_block(h, TA_SHM_SEG_SIZE) == (void *)(seg + TA_SHM_AGENT_OFF));
	test_context("agent block: past the end of the file");
	expect_true(ta_shm_agent_block(h, TA_SHM_AGENT_OFF + sizeof(struct ta_shm_agent) - 64) ==
		    NULL);
	h->agent_off = TA_SHM_SLOTS_OFF;
	test_context("agent block: over the slots");
	expect_true(ta_shm_agent_block(h, TA_SHM_SEG_SIZE) == NULL);
	h->agent_off = TA_SHM_AGENT_OFF + 8;
	test_context("agent block: misaligned");
	expect_true(ta_shm_agent_block(h, TA_SHM_SEG_SIZE) == NULL);
	h = forge(1, CG);
	test_context("agent block: none before minor 2");
	expect_true(ta_shm_agent_block(h, TA_SHM_SEG_SIZE) == NULL);

	/* The access block (minor 3) is checked the same way. */
	h = forge(3, CG);
	h->access_off = TA_SHM_ACCESS_OFF;
	h->access_size = sizeof(struct ta_shm_access);
	test_context("access block: a good one");
	expect_true(ta_shm_access_block(h, TA_SHM_SEG_SIZE) == (void *)(seg + TA_SHM_ACCESS_OFF));
	test_context("access block: past the end of the file");
	expect_true(ta_shm_access_block(h, TA_SHM_ACCESS_OFF + sizeof(struct ta_shm_access) - 64) ==
		    NULL);
	test_context("access block: misaligned or too small");
	h->access_off = TA_SHM_ACCESS_OFF + 8;
	expect_true(ta_shm_access_block(h, TA_SHM_SEG_SIZE) == NULL);
	h->access_off = TA_SHM_ACCESS_OFF;
	h->access_size = 64;
	expect_true(ta_shm_access_block(h, TA_SHM_SEG_SIZE) == NULL);
	h->access_size = sizeof(struct ta_shm_access);
	h->access_off = TA_SHM_SLOTS_OFF;
	test_context("access block: over the slots");
	expect_true(ta_shm_access_block(h, TA_SHM_SEG_SIZE) == NULL);
	h = forge(2, CG);
	h->access_off = TA_SHM_ACCESS_OFF;
	h->access_size = sizeof(struct ta_shm_access);
	test_context("access block: none before minor 3");
	expect_true(ta_shm_access_block(h, TA_SHM_SEG_SIZE) == NULL);
	test_context("%s", "");
}

static char dir[64];

static void write_file(const char *name, size_t size)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, seg, size) != (ssize_t)size)
		test_hard("cannot write %s", path);
	close(fd);
}

static void read_file(const char *name, void *buf, size_t size)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY);
	memset(buf, 0, size);
	if (fd < 0 || read(fd, buf, size) < 0)
		test_hard("cannot read %s", path);
	close(fd);
}

static struct ta_shm_agent *agent_of(unsigned char *buf)
{
	return (struct ta_shm_agent *)(buf + TA_SHM_AGENT_OFF);
}

struct sleeper {
	_Atomic uint32_t *word;
	uint32_t seen;
	_Atomic pid_t tid;
	int rc, err;
	uint64_t slept_ns;
};

/* A guard against a lost wake-up, not a timing check: the wake comes at once. */
#define SLEEPER_GUARD_S 120

static void *sleep_on_word(void *arg)
{
	struct sleeper *s = arg;
	struct timespec t0, t1, limit = { SLEEPER_GUARD_S, 0 };
	atomic_store(&s->tid, (pid_t)syscall(SYS_gettid));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	s->rc = (int)syscall(SYS_futex, s->word, FUTEX_WAIT, s->seen, &limit, NULL, 0);
	s->err = s->rc != 0 ? errno : 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s->slept_ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + t1.tv_nsec - t0.tv_nsec);
	return NULL;
}

/* Wait until the sleeper is blocked in FUTEX_WAIT on its word: /proc/self/task/<tid>/syscall
 * shows the system call a blocked thread is in, with its arguments. A fixed sleep instead (100 ms
 * before) lost the race on a loaded machine: the wake came before the wait, FUTEX_WAIT returned
 * EAGAIN, and nothing told a woken worker from one that never slept. */
static void wait_until_sleeping(struct sleeper *s)
{
	char path[64], line[256] = "", want[64];
	snprintf(want, sizeof(want), "%d 0x%lx ", (int)SYS_futex,
		 (unsigned long)(uintptr_t)s->word);
	for (unsigned i = 0; i < SLEEPER_GUARD_S * 1000u; i++) {
		pid_t tid = atomic_load(&s->tid);
		if (tid != 0) {
			snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
			FILE *f = fopen(path, "r");
			if (f == NULL)
				test_hard("no %s: cannot tell when the thread sleeps", path);
			char *got = fgets(line, sizeof(line), f);
			fclose(f);
			if (got != NULL && strncmp(line, want, strlen(want)) == 0)
				return;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	test_hard("the thread never slept on its word (%s)", line);
}

static void test_publish(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/ta-unit-agent-XXXXXX");
	if (mkdtemp(dir) == NULL)
		test_skip("no tmpfs at /dev/shm");
	forge(2, CG);
	atomic_store(&agent_of(seg)->alarm_taken, 77);
	write_file("tieralloc-good", TA_SHM_SEG_SIZE);
	forge(2, 0);
	write_file("tieralloc-v1host", TA_SHM_SEG_SIZE);
	forge(1, CG);
	write_file("tieralloc-minor1", TA_SHM_AGENT_OFF);
	forge(2, CG);
	((struct ta_shm_header *)seg)->magic ^= 1;
	write_file("tieralloc-badmagic", TA_SHM_SEG_SIZE);
	forge(2, CG);
	write_file("other-name", TA_SHM_SEG_SIZE);
	char target[128], link[128];
	snprintf(target, sizeof(target), "%s/other-name", dir);
	snprintf(link, sizeof(link), "%s/tieralloc-link", dir);
	if (symlink(target, link) != 0)
		test_hard("symlink");
	char fifo[128];
	snprintf(fifo, sizeof(fifo), "%s/tieralloc-fifo", dir);
	if (mkfifo(fifo, 0600) != 0)
		test_hard("mkfifo");

	const char *dirs[] = { dir, NULL };
	struct ta_agent_segments *set = ta_agent_segments_new(dirs, false);
	ta_agent_segments_rescan(set, false);
	struct ta_agent_count counts[] = {
		{ CG, 0, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 10 },
		{ CG, 1, TA_BPF_MOVE_PAGES, TA_BPF_NODE_EXACT, 20 },
	};
	test_context("publish: the two valid minor-2 segments, nothing else (not a link or FIFO)");
	expect_eq(ta_agent_segments_publish(set, counts, 2, NULL, 0, TA_SHM_AGENT_EXACT_NODES, 250,
					    false),
		  2);

	static _Alignas(64) unsigned char buf[TA_SHM_SEG_SIZE];
	read_file("tieralloc-good", buf, sizeof(buf));
	struct ta_shm_agent *a = agent_of(buf);
	test_context("publish: the counts per destination tier");
	expect_ne(atomic_load(&a->written_ns), 0);
	expect_eq(atomic_load(&a->tier[0].promoted), 10);
	expect_eq(atomic_load(&a->tier[1].moved), 20);
	expect_eq(atomic_load(&a->flags), TA_SHM_AGENT_EXACT_NODES);
	expect_eq(atomic_load(&a->interval_ms), 250);
	expect_eq(atomic_load(&a->pid), (uint32_t)getpid());
	test_context("publish: the first write raises no alarm, and leaves alarm_taken alone");
	expect_eq(atomic_load(&a->alarm), 0);
	expect_eq(atomic_load(&a->alarm_taken), 77);

	read_file("tieralloc-v1host", buf, sizeof(buf));
	test_context("publish: a segment without a cgroup id says so, with no counts");
	expect_eq(atomic_load(&a->flags), TA_SHM_AGENT_EXACT_NODES | TA_SHM_AGENT_NO_CGROUP_ID);
	expect_eq(atomic_load(&a->tier[0].promoted), 0);
	expect_ne(atomic_load(&a->written_ns), 0);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f == NULL)
		test_hard("open_memstream");
	test_context("metrics: the segments kept, as Prometheus' text");
	expect_eq(ta_agent_segments_metrics(set, f), 0);
	fclose(f);
	expect_true(strstr(text, "# TYPE tieralloc_tier_kernel_promoted_pages_total counter\n") !=
		    NULL);
	expect_true(strstr(text, "\ntieralloc_tier_kernel_promoted_pages_total{cgroup=\"\","
				 "segment=\"/tieralloc-good\",tier=\"0\",tier_name=\"\","
				 "nodes=\"0\"} 10\n") != NULL);
	expect_true(strstr(text,
			   "\ntieralloc_tier_max_bytes{cgroup=\"\",segment=\"/tieralloc-good\","
			   "tier=\"1\",tier_name=\"\",nodes=\"1\"} 268435456\n") != NULL);
	expect_true(strstr(text, "\ntieralloc_processes{cgroup=\"\",segment=\"/tieralloc-good\"} "
				 "1\n") != NULL);
	test_context("metrics: no kernel counts for a segment without a cgroup id");
	expect_true(strstr(text, "kernel_promoted_pages_total{cgroup=\"\",segment=\"/tieralloc-"
				 "v1host\"") == NULL);
	expect_true(strstr(text, "tier_max_bytes{cgroup=\"\",segment=\"/tieralloc-v1host\"") !=
		    NULL);
	expect_true(strstr(text, "\ntieralloc_agent_segments 2\n") != NULL);
	free(text);

	test_context("publish: never into a bad, old, misnamed or linked file");
	read_file("tieralloc-badmagic", buf, sizeof(buf));
	expect_eq(atomic_load(&a->written_ns), 0);
	read_file("other-name", buf, sizeof(buf));
	expect_eq(atomic_load(&a->written_ns), 0);
	read_file("tieralloc-minor1", buf, TA_SHM_AGENT_OFF);
	expect_eq(((struct ta_shm_header *)buf)->seg_size, TA_SHM_AGENT_OFF);

	/* A worker sleeping on its slot's word, through its own mapping of the file. */
	char path[128];
	snprintf(path, sizeof(path), "%s/tieralloc-good", dir);
	int fd = open(path, O_RDWR);
	unsigned char *map = mmap(NULL, TA_SHM_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || map == MAP_FAILED)
		test_hard("cannot map %s", path);
	close(fd);
	struct ta_shm_slot *slot =
	    (void *)(map + TA_SHM_SLOTS_OFF + 3 * sizeof(struct ta_shm_slot));
	struct ta_shm_tier *tier0 = (void *)(map + TA_SHM_TIERS_OFF);
	struct sleeper sleeper = { .word = &slot->wake, .seen = atomic_load(&slot->wake) };
	pthread_t thread;
	pthread_create(&thread, NULL, sleep_on_word, &sleeper);
	wait_until_sleeping(&sleeper);

	test_context("publish: promotions into a tier with room raise no alarm");
	counts[0].pages = 20;
	atomic_store(&tier0->observed, 100 * MiB);
	ta_agent_segments_publish(set, counts, 2, NULL, 0, 0, 250, false);
	expect_eq(atomic_load(&agent_of(map)->alarm), 0);
	expect_eq(atomic_load(&agent_of(map)->tier[0].promoted), 20);
	expect_ne(atomic_load(&agent_of(map)->tier[0].promoted_rate), 0);

	test_context("publish: promotions into a tier at its share: alarm, and the worker wakes");
	counts[0].pages = 30;
	atomic_store(&tier0->observed, 250 * MiB);
	ta_agent_segments_publish(set, counts, 2, NULL, 0, 0, 250, false);
	expect_eq(atomic_load(&agent_of(map)->alarm), 1);
	pthread_join(thread, NULL);
	/* 0: woken (a timeout at the guard is -1 ETIMEDOUT, a wake before the wait -1 EAGAIN). */
	expect_eq(sleeper.rc, 0);
	expect_eq(sleeper.err, 0);
	printf("# the worker slept %.1f ms before the publish woke it\n",
	       (double)sleeper.slept_ns / 1e6);
	expect_eq(atomic_load(&slot->wake), sleeper.seen + 1);
	expect_eq(atomic_load(&agent_of(map)->alarm_taken), 77);

	test_context("publish: no new promotion, no new alarm");
	ta_agent_segments_publish(set, counts, 2, NULL, 0, 0, 250, false);
	expect_eq(atomic_load(&agent_of(map)->alarm), 1);
	uint64_t rate = atomic_load(&agent_of(map)->tier[0].promoted_rate);

	test_context("alert: only the alerted cgroup's segments, the rates left alone");
	const uint64_t only[] = { CG };
	counts[0].pages = 35;
	expect_eq(ta_agent_segments_publish(set, counts, 2, only, 1, 0, 250, false), 1);
	expect_eq(atomic_load(&agent_of(map)->alarm), 2);
	expect_eq(atomic_load(&agent_of(map)->tier[0].promoted), 35);
	expect_eq(atomic_load(&agent_of(map)->tier[0].promoted_rate), rate);
	expect_true(ta_agent_segments_has(set, CG));
	expect_true(!ta_agent_segments_has(set, 0));
	munmap(map, TA_SHM_SEG_SIZE);

	test_context("publish: a segment truncated under the agent does not kill it");
	if (truncate(path, 100) != 0)
		test_hard("truncate");
	counts[0].pages = 40;
	ta_agent_segments_publish(set, counts, 2, NULL, 0, 0, 250, false);

	test_context("rescan: removed segments are dropped");
	unlink(path);
	ta_agent_segments_rescan(set, false);
	expect_eq(ta_agent_segments_publish(set, counts, 2, NULL, 0, 0, 250, false), 1);
	ta_agent_segments_free(set);

	const char *names[] = { "tieralloc-v1host", "tieralloc-minor1", "tieralloc-badmagic",
				"other-name",	    "tieralloc-link",	"tieralloc-fifo" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* ---- issue 12: another user's files cannot exhaust the agent ---- */

#define NOBODY	   65534
#define N_FORGED   1200
#define N_JUNK	   300
#define N_HUGE	   20
#define CG_REAL	   777ull
#define CG_LIVE	   778ull
#define CG_FORGED0 10000ull

static char many[64];

static unsigned open_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		test_hard("/proc/self/fd");
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

/* Write seg (or a sparse file of size bytes) as many/NAME, owned by uid. */
static void write_owned(const char *name, size_t size, uid_t uid, bool sparse)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", many, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	bool ok = fd >= 0;
	if (ok && sparse)
		ok = ftruncate(fd, (off_t)size) == 0;
	else if (ok)
		ok = write(fd, seg, size) == (ssize_t)size;
	if (!ok || fchown(fd, uid, uid) != 0)
		test_hard("cannot write %s", path);
	close(fd);
}

static bool written_by_agent(const char *name)
{
	static _Alignas(64) unsigned char buf[TA_SHM_SEG_SIZE];
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", many, name);
	int fd = open(path, O_RDONLY);
	memset(buf, 0, sizeof(buf));
	if (fd < 0 || pread(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		test_hard("cannot read %s", path);
	close(fd);
	return atomic_load(&agent_of(buf)->written_ns) != 0;
}

/* The formatter alone: escaping, +Inf, a repeated series, what a segment does not have. */
/* ---- lending rounds ---- */

static char lend_dir[64], node_dir[64];

static void poke(const char *name, uint64_t off, const void *val, size_t len)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", lend_dir, name);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || pwrite(fd, val, len, (off_t)off) != (ssize_t)len)
		test_hard("cannot write %s", path);
	close(fd);
}

static void poke64(const char *name, uint64_t off, uint64_t v)
{
	poke(name, off, &v, sizeof(v));
}

static uint64_t tier_off(unsigned t, size_t field)
{
	return TA_SHM_TIERS_OFF + t * sizeof(struct ta_shm_tier) + field;
}

static struct ta_shm_lend *lend_of(const char *name)
{
	static unsigned char buf[TA_SHM_SEG_SIZE];
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", lend_dir, name);
	int fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		test_hard("cannot read %s", path);
	close(fd);
	static struct ta_shm_lend l;
	memcpy(&l, buf + TA_SHM_LEND_OFF, sizeof(l));
	return &l;
}

static uint64_t alarm_of(const char *name)
{
	uint64_t a = 0;
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", lend_dir, name);
	int fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, &a, sizeof(a),
			    TA_SHM_AGENT_OFF + offsetof(struct ta_shm_agent, alarm)) != sizeof(a))
		test_hard("cannot read %s", path);
	close(fd);
	return a;
}

/* ---- a stand-in /proc and cgroup2 mount (issue 31) ----
 * The agent acts only on the cgroup the kernel puts a segment's live, attached processes in: a
 * cgroup is a directory of fx_cg (its inode is the cgroup id), and a process is a directory of
 * fx_proc with its stat (start time FX_START, owned by us), cgroup ("0::/path") and maps (the
 * segment files it maps). */
#define FX_START 4242ull
static char fx_proc[64], fx_cg[64];

static void fx_make(void)
{
	snprintf(fx_proc, sizeof(fx_proc), "/tmp/ta-unit-proc-XXXXXX");
	snprintf(fx_cg, sizeof(fx_cg), "/tmp/ta-unit-cg-XXXXXX");
	if (mkdtemp(fx_proc) == NULL || mkdtemp(fx_cg) == NULL)
		test_hard("cannot make the fixtures' directories");
}

static void fx_remove(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", fx_proc, fx_cg);
	if (system(cmd) != 0)
		test_hard("cannot remove the fixtures");
}

/* The cgroup at fx_cg/rel (made with its parents): its id (the directory's inode). */
static uint64_t fx_cgroup(const char *rel)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", fx_cg, rel);
	for (char *p = path + strlen(fx_cg) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	mkdir(path, 0755);
	struct stat st;
	if (stat(path, &st) != 0)
		test_hard("cannot make %s", path);
	return (uint64_t)st.st_ino;
}

static void fx_write(uint32_t pid, const char *file, const char *text)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%u", fx_proc, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/%s", fx_proc, pid, file);
	FILE *f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
		test_hard("cannot write %s", path);
}

/* Process pid, in cgroup /rel (of fx_cg), mapping the segment files seg_paths (NULL-ended). */
static void fx_process(uint32_t pid, const char *rel, const char *const *seg_paths)
{
	char text[1024];
	snprintf(text, sizeof(text), "%u (work) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n",
		 pid, (unsigned long long)FX_START);
	fx_write(pid, "stat", text);
	snprintf(text, sizeof(text), "1:name=systemd:/elsewhere\n0::%s\n", rel);
	fx_write(pid, "cgroup", text);
	size_t o = (size_t)snprintf(text, sizeof(text),
				    "55d0c0000000-55d0c0001000 r-xp 00000000 08:01 1234 "
				    "/usr/bin/work\n");
	for (unsigned i = 0; seg_paths != NULL && seg_paths[i] != NULL; i++) {
		struct stat st;
		if (stat(seg_paths[i], &st) != 0)
			test_hard("no %s", seg_paths[i]);
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "7f%04x000000-7f%04x100000 rw-s 00000000 %02x:%02x %llu %s\n",
				      i, i, major(st.st_dev), minor(st.st_dev),
				      (unsigned long long)st.st_ino, seg_paths[i]);
	}
	fx_write(pid, "maps", text);
}

/* A lender's segment of cgroup fx_cg/rel (its id from the directory), its process pid in slot
 * 3; path: the header's cgroup path (NULL: the canonical one). */
static void forge_lender_at(uint16_t minor, const char *rel, const char *path, uint32_t pid,
			    uint64_t charged0, uint64_t charged1)
{
	char dflt[200];
	snprintf(dflt, sizeof(dflt), "%s/%s", fx_cg, rel);
	struct ta_shm_header *h = forge(minor, fx_cgroup(rel));
	h->lend_off = TA_SHM_LEND_OFF;
	h->lend_size = sizeof(struct ta_shm_lend);
	snprintf(h->cgroup_path, sizeof(h->cgroup_path), "%s", path != NULL ? path : dflt);
	struct ta_shm_tier *t = (void *)(seg + TA_SHM_TIERS_OFF);
	atomic_store(&t[0].limit[TA_LIMIT_HIGH], 300 * MiB);
	atomic_store(&t[0].limit[TA_LIMIT_MAX], 300 * MiB);
	atomic_store(&t[1].limit[TA_LIMIT_HIGH], 600 * MiB);
	atomic_store(&t[0].charged, charged0);
	atomic_store(&t[1].charged, charged1);
	struct ta_shm_slot *slot = (void *)(seg + TA_SHM_SLOTS_OFF);
	atomic_store(&slot[3].pid, pid);
	atomic_store(&slot[3].start_time, FX_START);
}

/* A directory of segments and one of nodes' meminfo (node 0: 2 GiB free), for lending rounds. */
static void lend_dirs_make(void)
{
	snprintf(lend_dir, sizeof(lend_dir), "/dev/shm/ta-unit-lend-XXXXXX");
	snprintf(node_dir, sizeof(node_dir), "/tmp/ta-unit-nodes-XXXXXX");
	if (mkdtemp(lend_dir) == NULL || mkdtemp(node_dir) == NULL)
		test_skip("no tmpfs at /dev/shm");
	char path[160];
	snprintf(path, sizeof(path), "%s/node0", node_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/node0/meminfo", node_dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		test_hard("cannot write %s", path);
	fprintf(f, "Node 0 MemTotal:        4194304 kB\nNode 0 MemFree:         2097152 kB\n");
	fclose(f);
}

static void lend_dirs_remove(const char *const *names, unsigned n)
{
	char path[160];
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", lend_dir, names[i]);
		unlink(path);
	}
	rmdir(lend_dir);
	snprintf(path, sizeof(path), "%s/node0/meminfo", node_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/node0", node_dir);
	rmdir(path);
	rmdir(node_dir);
}

/* Slot 3's start time, which forge_lender_at sets to its process's: 1 makes it a dead one. */
static void slot3_start(const char *name, uint64_t start_time)
{
	poke64(name,
	       TA_SHM_SLOTS_OFF + 3 * sizeof(struct ta_shm_slot) +
		   offsetof(struct ta_shm_slot, start_time),
	       start_time);
}

/* The agent's metrics of the set, as text (free it), or NULL. */
static char *metrics_of(struct ta_agent_segments *set)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (m == NULL)
		return NULL;
	expect_eq(ta_agent_segments_metrics(set, m), 0);
	fclose(m);
	return text;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A segment's path in lend_dir (a static buffer per call site's slot). */
static const char *lend_path(const char *name)
{
	static char paths[8][160];
	static unsigned next;
	char *p = paths[next++ % 8];
	snprintf(p, 160, "%s/%s", lend_dir, name);
	return p;
}

static void test_lend_round(void)
{
	lend_dirs_make();
	fx_make();
	const char *a = "tieralloc-a", *b = "tieralloc-b";
	char saved_dir[64];
	memcpy(saved_dir, dir, sizeof(dir));
	memcpy(dir, lend_dir, sizeof(dir));
	forge_lender_at(5, "ta-a", NULL, 5001, 50 * MiB, 0);
	write_file(a, TA_SHM_SEG_SIZE);
	forge_lender_at(5, "ta-b", NULL, 5002, 300 * MiB, 400 * MiB);
	write_file(b, TA_SHM_SEG_SIZE);
	memcpy(dir, saved_dir, sizeof(dir));
	fx_process(5001, "/ta-a", (const char *[]){ lend_path(a), NULL });
	fx_process(5002, "/ta-b", (const char *[]){ lend_path(b), NULL });
	uint64_t ida = fx_cgroup("ta-a"), idb = fx_cgroup("ta-b");

	const char *dirs[] = { lend_dir, NULL };
	struct ta_agent_segments *set = ta_agent_segments_new(dirs, false);
	ta_agent_segments_set_node_dir(set, node_dir);
	ta_agent_segments_set_proc(set, fx_proc, fx_cg);
	ta_agent_segments_rescan(set, false);
	struct ta_agent_lend_config cfg = { .reserve = 64 * MiB,
					    .expiry_ns = 60ull * 1000000000u,
					    .hold_ns = 200 * 1000000ull,
					    .flags = TA_LEND_IDLE };
	struct ta_agent_lend_stats st;

	test_context("lend round 1: B never steered away: no loan, but an expiry written");
	uint64_t t0 = mono_ns();
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);
	expect_gt(atomic_load(&lend_of(b)->expires_ns), t0);
	expect_eq(atomic_load(&lend_of(b)->agent_pid), (uint64_t)getpid());

	test_context("reclaim for priority: the segments' cgroups, priorities and fast-tier "
		     "steering");
	poke64(b, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 5);
	uint32_t seven = 7;
	poke(b, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, priority), &seven, sizeof(seven));
	struct ta_agent_cgroup cgs[4];
	expect_eq(ta_agent_segments_cgroups(set, cgs, 4), 2);
	expect_eq(ta_agent_segments_cgroups(set, cgs, 1), 1);
	expect_eq(ta_agent_segments_cgroups(set, cgs, 4), 2);
	for (unsigned i = 0; i < 2; i++) {
		bool is_b = cgs[i].cgroup_id == idb;
		char want[128];
		snprintf(want, sizeof(want), "%s/%s", fx_cg, is_b ? "ta-b" : "ta-a");
		expect_str_eq(cgs[i].path, want);
		expect_true(cgs[i].have_priority);
		expect_true(cgs[i].cgroup_id == ida || cgs[i].cgroup_id == idb);
		expect_eq(cgs[i].steered, is_b ? 5 : 0);
		expect_eq(cgs[i].priority, is_b ? 7 : 0);
	}
	seven = 0;
	poke(b, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, priority), &seven, sizeof(seven));

	test_context("lend round 2: B steered away: A's idle share less the reserve");
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 186 * MiB);
	expect_eq(atomic_load(&lend_of(a)->tier[0].lent), 186 * MiB);
	expect_eq(atomic_load(&lend_of(a)->tier[0].loan), 0);
	expect_eq(atomic_load(&lend_of(b)->tier[1].loan), 0);

	test_context("lend round 3: B uses its loan, A grows by less than an eighth of the "
		     "reserve: B keeps the rest of the loan");
	poke64(b, tier_off(0, offsetof(struct ta_shm_tier, charged)), 486 * MiB);
	poke64(b, tier_off(1, offsetof(struct ta_shm_tier, charged)), 214 * MiB);
	poke64(a, tier_off(0, offsetof(struct ta_shm_tier, charged)), 56 * MiB);
	uint64_t alarm = alarm_of(b), alarm_a = alarm_of(a);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 180 * MiB);
	expect_eq(alarm_of(b), alarm + 1);
	alarm = alarm_of(b);

	test_context("lend round 3: A grows by more: it asks for its whole share back at once, "
		     "B's loan is cut to nothing and its alarm raised");
	poke64(a, tier_off(0, offsetof(struct ta_shm_tier, charged)), 60 * MiB);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);
	expect_eq(atomic_load(&lend_of(a)->tier[0].lent), 0);
	expect_eq(alarm_of(b), alarm + 1);
	expect_eq(alarm_of(a), alarm_a);
	ta_agent_segments_lend_stats(set, &st);
	expect_eq(st.granted, 186 * MiB);
	expect_eq(st.taken_back, 186 * MiB);
	expect_eq(st.take_backs, 0);
	test_context("lend round 3: while A holds its share, a steered B borrows nothing of it");
	poke64(b, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 6);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);

	test_context("lend round 4: A grew to 200M, B demoted its excess: the take-back is done "
		     "and timed");
	poke64(a, tier_off(0, offsetof(struct ta_shm_tier, charged)), 200 * MiB);
	poke64(b, tier_off(0, offsetof(struct ta_shm_tier, charged)), 300 * MiB);
	poke64(b, tier_off(1, offsetof(struct ta_shm_tier, charged)), 400 * MiB);
	ta_agent_segments_lend(set, &cfg, false);
	ta_agent_segments_lend_stats(set, &st);
	expect_eq(st.take_backs, 1);
	expect_eq(atomic_load(&lend_of(a)->tier[0].take_backs), 1);
	expect_eq(st.take_back_ns_max, st.take_back_ns_sum);
	expect_eq(atomic_load(&lend_of(a)->tier[0].take_back_ns), st.take_back_ns_last);

	test_context("lend: the operator's --priority outranks the container's own: a lender of "
		     "higher priority lends B nothing");
	char a_path[128];
	snprintf(a_path, sizeof(a_path), "%s/ta-a", fx_cg);
	struct ta_agent_priority prio = { a_path, 5 };
	cfg.priorities = (struct ta_agent_priorities){ .list = &prio, .n = 1 };
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);
	test_context("lend: without it, once A's usage stayed still for the hold, a steered B "
		     "borrows A's idle part again");
	cfg.priorities.n = 0;
	nanosleep(&(struct timespec){ .tv_nsec = 250 * 1000000 }, NULL);
	poke64(b, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 7);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 36 * MiB);

	test_context("lend round 5: B exits: its loan returns at once");
	slot3_start(b, 1);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);
	expect_eq(atomic_load(&lend_of(a)->tier[0].lent), 0);

	test_context("lend: a new agent does not believe a forged loan larger than the tier");
	slot3_start(b, FX_START);
	poke64(b, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, tier[0].loan), UINT64_MAX / 2);
	poke64(b, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, expires_ns),
	       mono_ns() + 60ull * 1000000000u);
	struct ta_agent_segments *set2 = ta_agent_segments_new(dirs, false);
	ta_agent_segments_set_node_dir(set2, node_dir);
	ta_agent_segments_set_proc(set2, fx_proc, fx_cg);
	ta_agent_segments_rescan(set2, false);
	ta_agent_segments_lend(set2, &cfg, false);
	struct ta_agent_lend_stats st2;
	ta_agent_segments_lend_stats(set2, &st2);
	expect_eq(st2.taken_back, 0);
	expect_eq(atomic_load(&lend_of(b)->tier[0].loan), 0);
	ta_agent_segments_free(set2);

	test_context("lend: the metrics count what was lent and taken back");
	char *text = metrics_of(set);
	char want[128];
	snprintf(want, sizeof(want), "tieralloc_agent_lend_granted_bytes_total %llu\n",
		 (unsigned long long)(186 * MiB + 36 * MiB));
	expect_true(text != NULL && strstr(text, want) != NULL);
	snprintf(want, sizeof(want), "tieralloc_agent_lend_taken_back_bytes_total %llu\n",
		 (unsigned long long)(186 * MiB + 36 * MiB));
	expect_true(text != NULL && strstr(text, want) != NULL);
	expect_true(text != NULL && strstr(text, "tieralloc_agent_take_back_seconds_count 1\n"));
	free(text);
	ta_agent_segments_free(set);
	lend_dirs_remove((const char *[]){ a, b }, 2);
	fx_remove();
	test_context("%s", "");
}

/* Issue 17: yields through the segments. H (priority 10) is steered away with 100 MiB below;
 * L (priority 0) holds its whole 300M share; O is like L but made by a tieralloc before ABI
 * minor 6, whose processes would not honour a yield. */
static void test_yield_round(void)
{
	lend_dirs_make();
	fx_make();
	const char *h = "tieralloc-h", *l = "tieralloc-l", *o = "tieralloc-o";
	char saved_dir[64];
	memcpy(saved_dir, dir, sizeof(dir));
	memcpy(dir, lend_dir, sizeof(dir));
	forge_lender_at(6, "ta-h", NULL, 5011, 300 * MiB, 100 * MiB);
	write_file(h, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "ta-l", NULL, 5012, 300 * MiB, 0);
	write_file(l, TA_SHM_SEG_SIZE);
	forge_lender_at(5, "ta-o", NULL, 5013, 300 * MiB, 0);
	write_file(o, TA_SHM_SEG_SIZE);
	memcpy(dir, saved_dir, sizeof(dir));
	fx_process(5011, "/ta-h", (const char *[]){ lend_path(h), NULL });
	fx_process(5012, "/ta-l", (const char *[]){ lend_path(l), NULL });
	fx_process(5013, "/ta-o", (const char *[]){ lend_path(o), NULL });
	uint32_t ten = 10;
	poke(h, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, priority), &ten, sizeof(ten));

	const char *dirs[] = { lend_dir, NULL };
	struct ta_agent_segments *set = ta_agent_segments_new(dirs, false);
	ta_agent_segments_set_node_dir(set, node_dir);
	ta_agent_segments_set_proc(set, fx_proc, fx_cg);
	ta_agent_segments_rescan(set, false);
	/* The operator lets containers declare priorities (--priority-ceiling 1000). */
	struct ta_agent_lend_config cfg = { .reserve = 64 * MiB,
					    .expiry_ns = 60ull * 1000000000u,
					    .hold_ns = 200 * 1000000ull,
					    .priorities = { .ceiling = 1000 },
					    .flags = TA_LEND_IDLE | TA_LEND_YIELD };
	test_context("yield round 1: nobody steered yet: no yield");
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 0);
	uint64_t alarm = alarm_of(l);

	test_context("yield round 2: H steered away, wanting 100M: L (minor 6) yields down to its "
		     "low share (256M of 300M), H borrows it, L's alarm is raised; O (minor 5) is "
		     "not asked");
	poke64(h, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 3);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 44 * MiB);
	expect_eq(atomic_load(&lend_of(o)->tier[0].yielded), 0);
	expect_eq(atomic_load(&lend_of(h)->tier[0].loan), 44 * MiB);
	expect_eq(atomic_load(&lend_of(h)->tier[0].yielded), 0);
	expect_eq(alarm_of(l), alarm + 1);
	struct ta_agent_lend_stats st;
	ta_agent_segments_lend_stats(set, &st);
	expect_eq(st.yielded_now, 44 * MiB);
	expect_eq(st.yields, 44 * MiB);

	test_context("yield round 3: the same again: the yield holds, no new alarm");
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 44 * MiB);
	expect_eq(alarm_of(l), alarm + 1);

	test_context("yield: the metrics show it");
	char *text = metrics_of(set);
	char want[128];
	snprintf(want, sizeof(want), "tieralloc_agent_yielded_bytes %llu\n",
		 (unsigned long long)(44 * MiB));
	expect_true(text != NULL && strstr(text, want) != NULL);
	expect_true(text != NULL && strstr(text, "tieralloc_tier_yielded_bytes{") != NULL);
	free(text);

	test_context("yield round 4: H exits: L's yield ends");
	slot3_start(h, 1);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 0);
	expect_eq(atomic_load(&lend_of(h)->tier[0].loan), 0);

	test_context("yield: --lend alone asks no yield");
	slot3_start(h, FX_START);
	poke64(h, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 9);
	cfg.flags = TA_LEND_IDLE;
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 0);
	expect_eq(atomic_load(&lend_of(h)->tier[0].loan), 0);

	test_context("yield: with the default ceiling (0), H's declared 10 ranks it above nobody: "
		     "no yield");
	cfg.flags = TA_LEND_IDLE | TA_LEND_YIELD;
	cfg.priorities.ceiling = TA_AGENT_PRIORITY_CEILING_DEFAULT;
	poke64(h, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 10);
	ta_agent_segments_lend(set, &cfg, false);
	poke64(h, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 11);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 0);
	test_context("yield: a ceiling of 5: H's 10 counts as 5, still above L's 0: L yields");
	cfg.priorities.ceiling = 5;
	poke64(h, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 12);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(l)->tier[0].yielded), 44 * MiB);
	ta_agent_segments_free(set);
	lend_dirs_remove((const char *[]){ h, l, o }, 3);
	fx_remove();
	test_context("%s", "");
}

/* Issue 31: what the policies act on is the cgroup the kernel puts a segment's live, attached
 * processes in. Process 5101 runs in par/att and writes segments naming par//att (its own, in
 * another spelling), par//vic and system.slice (others', with their real inodes); process 5102
 * is in par/att too but does not map the segment that names it; a segment names batch/ (a
 * trailing slash) that the operator ranks 0, beside a neighbour that declares 10; and a
 * container in a cgroup namespace of its own names its cgroup as it sees it. */
static void test_forged_cgroups(void)
{
	lend_dirs_make();
	fx_make();
	char par_att[200], par_vic[200], sys_slice[200], batch[200], nb[200];
	snprintf(par_att, sizeof(par_att), "%s/par//att", fx_cg);
	snprintf(par_vic, sizeof(par_vic), "%s/par//vic", fx_cg);
	snprintf(sys_slice, sizeof(sys_slice), "%s/system.slice", fx_cg);
	snprintf(batch, sizeof(batch), "%s/batch/", fx_cg);
	snprintf(nb, sizeof(nb), "%s/nb", fx_cg);
	const char *fa = "tieralloc-fa", *fv = "tieralloc-fv", *fs = "tieralloc-fs",
		   *fn = "tieralloc-fn", *fb = "tieralloc-fb", *fnb = "tieralloc-fnb",
		   *fns = "tieralloc-fns", *f0 = "tieralloc-f0";
	char saved_dir[64];
	memcpy(saved_dir, dir, sizeof(dir));
	memcpy(dir, lend_dir, sizeof(dir));
	forge_lender_at(6, "par/att", par_att, 5101, 300 * MiB, 0);
	write_file(fa, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "par/vic", par_vic, 5101, 300 * MiB, 0);
	write_file(fv, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "system.slice", sys_slice, 5101, 300 * MiB, 0);
	write_file(fs, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "par/att", NULL, 5102, 300 * MiB, 0);
	write_file(fn, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "batch", batch, 5103, 300 * MiB, 100 * MiB);
	write_file(fb, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "nb", nb, 5104, 300 * MiB, 0);
	write_file(fnb, TA_SHM_SEG_SIZE);
	forge_lender_at(6, "ns/inner", "/sys/fs/cgroup", 5105, 300 * MiB, 0);
	write_file(fns, TA_SHM_SEG_SIZE);
	/* One that names no cgroup (as on cgroup v1), its process in par/att. */
	struct ta_shm_header *h0 = (void *)seg;
	forge_lender_at(6, "par/att", "", 5106, 300 * MiB, 0);
	h0->cgroup_id = 0;
	write_file(f0, TA_SHM_SEG_SIZE);
	memcpy(dir, saved_dir, sizeof(dir));
	uint64_t att = fx_cgroup("par/att"), vic = fx_cgroup("par/vic");
	uint64_t sys = fx_cgroup("system.slice"), inner = fx_cgroup("ns/inner");
	fx_process(5101, "/par/att",
		   (const char *[]){ lend_path(fa), lend_path(fv), lend_path(fs), NULL });
	fx_process(5102, "/par/att", NULL);
	fx_process(5103, "/batch", (const char *[]){ lend_path(fb), NULL });
	fx_process(5104, "/nb", (const char *[]){ lend_path(fnb), NULL });
	fx_process(5105, "/ns/inner", (const char *[]){ lend_path(fns), NULL });
	fx_process(5106, "/par/att", (const char *[]){ lend_path(f0), NULL });
	uint32_t p1000 = 1000, p10 = 10;
	for (const char *const *n = (const char *const[]){ fa, fv, fs, fb, NULL }; *n != NULL; n++)
		poke(*n, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, priority), &p1000,
		     sizeof(p1000));
	poke(fnb, TA_SHM_LEND_OFF + offsetof(struct ta_shm_lend, priority), &p10, sizeof(p10));

	const char *dirs[] = { lend_dir, NULL };
	struct ta_agent_segments *set = ta_agent_segments_new(dirs, false);
	ta_agent_segments_set_node_dir(set, node_dir);
	ta_agent_segments_set_proc(set, fx_proc, fx_cg);
	ta_agent_segments_rescan(set, false);

	test_context(
	    "forged: the policies see par/att (canonical, once), batch (canonical), nb and "
	    "the namespaced container; never par/vic nor system.slice");
	struct ta_agent_cgroup cgs[16];
	unsigned n = ta_agent_segments_cgroups(set, cgs, 16);
	unsigned seen_att = 0, seen_batch = 0, seen_nb = 0, seen_inner = 0, seen_other = 0;
	char want_att[200], want_batch[200], want_inner[200];
	snprintf(want_att, sizeof(want_att), "%s/par/att", fx_cg);
	snprintf(want_batch, sizeof(want_batch), "%s/batch", fx_cg);
	snprintf(want_inner, sizeof(want_inner), "%s/ns/inner", fx_cg);
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(cgs[i].path, want_att) == 0 && cgs[i].cgroup_id == att)
			seen_att++;
		else if (strcmp(cgs[i].path, want_batch) == 0)
			seen_batch++;
		else if (strcmp(cgs[i].path, nb) == 0)
			seen_nb++;
		else if (strcmp(cgs[i].path, want_inner) == 0 && cgs[i].cgroup_id == inner)
			seen_inner++;
		else
			seen_other++;
		expect_true(cgs[i].cgroup_id != vic && cgs[i].cgroup_id != sys);
	}
	expect_eq(n, 4);
	expect_eq(seen_att, 1);
	expect_eq(seen_batch, 1);
	expect_eq(seen_nb, 1);
	expect_eq(seen_inner, 1);
	expect_eq(seen_other, 0);

	test_context("forged: the operator's --priority finds a cgroup by path in any spelling, or "
		     "by inode through another path to it");
	char link[200], via_link[220], other[200];
	snprintf(link, sizeof(link), "%s/link", fx_proc);
	snprintf(other, sizeof(other), "%s/par/vic", fx_cg);
	if (symlink(fx_cg, link) != 0)
		test_hard("symlink");
	snprintf(via_link, sizeof(via_link), "%s/par/att", link);
	struct ta_agent_priority ops[] = { { other, 1 }, { via_link, 2 } };
	expect_eq(ta_agent_priority_find(ops, 2, want_att, att, cgs[0].dev), 1);
	expect_eq(ta_agent_priority_find(ops, 1, want_att, att, cgs[0].dev), -1);
	ops[0].cgroup = par_att; /* a spelling of its own: the same path once canonical */
	expect_eq(ta_agent_priority_find(ops, 1, want_att, 0, 0), 0);

	test_context("forged: --priority batch=0 holds for a segment naming batch/ (declaring "
		     "1000): its steered neighbour of priority 10 yields it nothing");
	struct ta_agent_priority batch_zero = { want_batch, 0 };
	struct ta_agent_lend_config cfg = {
		.reserve = 64 * MiB,
		.expiry_ns = 60ull * 1000000000u,
		.hold_ns = 200 * 1000000ull,
		.priorities = { .list = &batch_zero, .n = 1, .ceiling = 1000 },
		.flags = TA_LEND_IDLE | TA_LEND_YIELD
	};
	ta_agent_segments_lend(set, &cfg, false);
	poke64(fb, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 3);
	ta_agent_segments_lend(set, &cfg, false);
	poke64(fb, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 4);
	ta_agent_segments_lend(set, &cfg, false);
	expect_eq(atomic_load(&lend_of(fnb)->tier[0].yielded), 0);
	expect_eq(atomic_load(&lend_of(fb)->tier[0].loan), 0);
	test_context(
	    "forged: the segments naming par//vic and system.slice, the one whose process "
	    "does not map it and the one naming no cgroup (on a cgroup v2 machine) get no "
	    "loan, no yield, no expiry: the agent writes nothing into their lending block");
	for (const char *const *f = (const char *const[]){ fv, fs, fn, f0, NULL }; *f != NULL;
	     f++) {
		expect_eq(atomic_load(&lend_of(*f)->expires_ns), 0);
		expect_eq(atomic_load(&lend_of(*f)->agent_pid), 0);
	}
	test_context("forged: without the operator's word, batch's 1000 (within a ceiling of 1000) "
		     "makes the neighbour yield: the test's own control");
	cfg.priorities.n = 0;
	poke64(fb, tier_off(0, offsetof(struct ta_shm_tier, steered_away)), 5);
	ta_agent_segments_lend(set, &cfg, false);
	expect_gt(atomic_load(&lend_of(fnb)->tier[0].yielded), 0);

	test_context("forged: the process moved to par/vic: the segment naming par//vic is taken, "
		     "the ones naming par//att are not, at the next rescan");
	fx_process(5101, "/par/vic",
		   (const char *[]){ lend_path(fa), lend_path(fv), lend_path(fs), NULL });
	ta_agent_segments_rescan(set, false);
	n = ta_agent_segments_cgroups(set, cgs, 16);
	seen_att = 0;
	unsigned seen_vic = 0;
	for (unsigned i = 0; i < n; i++) {
		seen_att += cgs[i].cgroup_id == att;
		seen_vic += cgs[i].cgroup_id == vic;
	}
	expect_eq(seen_att, 0);
	expect_eq(seen_vic, 1);
	ta_agent_segments_free(set);
	unlink(link);
	lend_dirs_remove((const char *[]){ fa, fv, fs, fn, fb, fnb, fns, f0 }, 8);
	fx_remove();
	test_context("%s", "");
}

static void test_prom_format(void)
{
	static struct ta_prom_segment segs[2];
	memset(segs, 0, sizeof(segs));
	snprintf(segs[0].segment, sizeof(segs[0].segment), "/seg");
	snprintf(segs[0].cgroup, sizeof(segs[0].cgroup),
		 "/a\"b\\c\nd\xff\x01"
		 "e\xc3\xa9");
	segs[0].ntiers = 1;
	segs[0].processes = 3;
	for (unsigned k = 0; k < TA_NLIMITS; k++)
		segs[0].tier[0].limit[k] = TA_SHM_UNLIMITED;
	segs[0].tier[0].nodes = 0xb; /* 0-1,3 */
	segs[0].tier[0].share_ppm = 250000;
	snprintf(segs[0].tier[0].name, sizeof(segs[0].tier[0].name), "dram");
	segs[1] = segs[0];
	segs[1].processes = 4;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f == NULL)
		test_hard("open_memstream");
	expect_eq(ta_prom_write(f, segs, 2), 0);
	fclose(f);
	const char *labels = "{cgroup=\"/a\\\"b\\\\c\\nd\xef\xbf\xbd\xef\xbf\xbd"
			     "e\xc3\xa9\",segment=\"/seg\"";
	char want[512];
	test_context("prom: label values escaped, invalid UTF-8 and controls replaced");
	snprintf(want, sizeof(want), "\ntieralloc_processes%s} 3\n", labels);
	expect_true(strstr(text, want) != NULL);
	test_context("prom: a repeated series is left out");
	expect_true(strstr(text, "} 4\n") == NULL);
	test_context("prom: no limit is +Inf; the nodes a list; the share a ratio");
	snprintf(want, sizeof(want),
		 "\ntieralloc_tier_max_bytes%s,tier=\"0\",tier_name=\"dram\","
		 "nodes=\"0-1,3\"} +Inf\n",
		 labels);
	expect_true(strstr(text, want) != NULL);
	expect_true(strstr(text, "nodes=\"0-1,3\"} 0.250000\n") != NULL);
	test_context("prom: what the segment does not have is left out, its family kept");
	expect_true(strstr(text, "# TYPE tieralloc_tier_observed_bytes gauge\n") != NULL);
	expect_true(strstr(text, "\ntieralloc_tier_observed_bytes{") == NULL);
	expect_true(strstr(text, "\ntieralloc_tier_demoted_bytes_total{") == NULL);
	test_context("%s", "");
	free(text);
}

/* The slot 3 of the forged segment: this pid, with its start time, or none. */
static void forge_slot(pid_t pid)
{
	struct ta_shm_slot *slot = (void *)(seg + TA_SHM_SLOTS_OFF);
	atomic_store(&slot[3].pid, (uint32_t)pid);
	atomic_store(&slot[3].start_time, pid != 0 ? ta_proc_start_time((int)pid) : 0);
}

static void test_exhaustion(void)
{
	if (geteuid() != 0) {
		printf("skipped: files of another user need root\n");
		return;
	}
	snprintf(many, sizeof(many), "/dev/shm/ta-unit-agent-many-XXXXXX");
	if (mkdtemp(many) == NULL)
		test_skip("no tmpfs at /dev/shm");
	/* Few descriptors, like the agent under a unit without LimitNOFILE: one per segment
	 * would run out before the real container's segment was found. */
	struct rlimit saved, low = { 256, 256 };
	getrlimit(RLIMIT_NOFILE, &saved);
	low.rlim_max = saved.rlim_max;
	setrlimit(RLIMIT_NOFILE, &low);

	/* nobody's: valid segments without a live process, and junk of the maximum size (sparse:
	 * whole reads would cost 300 MiB a rescan) and far beyond it. */
	for (unsigned i = 0; i < N_FORGED; i++) {
		char name[64];
		forge(2, CG_FORGED0 + i);
		forge_slot(0);
		snprintf(name, sizeof(name), "tieralloc-nobody-%04u", i);
		write_owned(name, TA_SHM_SEG_SIZE, NOBODY, false);
		if (i == N_FORGED / 2) {
			/* The container's, root's, among them. */
			forge(2, CG_REAL);
			forge_slot(getpid());
			write_owned("tieralloc-real", TA_SHM_SEG_SIZE, 0, false);
		}
	}
	for (unsigned i = 0; i < N_JUNK + N_HUGE; i++) {
		char name[64];
		snprintf(name, sizeof(name), "tieralloc-junk-%03u", i);
		write_owned(name, i < N_JUNK ? 1u << 20 : 64u << 20, NOBODY, true);
	}
	const unsigned nfiles = N_FORGED + 1 + N_JUNK + N_HUGE;
	const struct ta_agent_limits *lim = &ta_agent_default_limits;
	struct ta_agent_limits limits = *lim;
	limits.retry_rescans = 100000; /* each refused file is opened once in this test */
	unsigned fds0 = open_fds();
	const char *dirs[] = { many, NULL };
	struct ta_agent_segments *set = ta_agent_segments_new(dirs, false);
	ta_agent_segments_set_limits(set, &limits);
	struct ta_agent_count counts[] = { { CG_REAL, 0, TA_BPF_PROMOTE, TA_BPF_NODE_EXACT, 10 } };

	test_context("exhaustion: the first rescan");
	ta_agent_segments_rescan(set, false);
	struct ta_agent_scan_stats st;
	ta_agent_segments_stats(set, &st);
	expect_eq(st.entries, nfiles);
	expect_le(st.opened, 1 + lim->opens_per_uid);
	expect_le(st.bytes_read, (uint64_t)st.opened * TA_AGENT_READ_MAX);
	expect_gt(st.deferred, 0);
	expect_ge(ta_agent_segments_publish(set, counts, 1, NULL, 0, 0, 250, false), 1);
	expect_true(written_by_agent("tieralloc-real"));

	test_context("exhaustion: every file looked at, each opened once, within the budgets");
	unsigned total_opened = st.opened, max_opened = 0, rounds = 1, bad_bytes = 0;
	uint64_t total_read = st.bytes_read;
	do {
		ta_agent_segments_rescan(set, false);
		ta_agent_segments_stats(set, &st);
		total_opened += st.opened;
		total_read += st.bytes_read;
		max_opened = st.opened > max_opened ? st.opened : max_opened;
		bad_bytes += st.bytes_read > (uint64_t)st.opened * TA_AGENT_READ_MAX;
	} while ((st.deferred > 0 || st.opened > 0) && ++rounds < 1000);
	expect_le(max_opened, lim->opens_per_uid);
	expect_eq(bad_bytes, 0);
	/* The huge files are refused on their size, without an open. */
	expect_le(total_opened, nfiles - N_HUGE);
	expect_le(total_read, (uint64_t)total_opened * TA_AGENT_READ_MAX);
	expect_lt(rounds, 1000);
	expect_eq(st.opened, 0);
	expect_eq(st.entries, nfiles);
	test_context("exhaustion: nobody's segments kept within its cap, one descriptor each");
	expect_eq(st.kept, 1 + lim->max_per_uid);
	expect_le(open_fds(), fds0 + 1 + lim->max_per_uid);
	counts[0].pages = 20;
	expect_eq(ta_agent_segments_publish(set, counts, 1, NULL, 0, 0, 250, false),
		  1 + lim->max_per_uid);
	expect_true(written_by_agent("tieralloc-real"));

	test_context("exhaustion: a segment of nobody's with a live process replaces one without");
	int ready[2];
	if (pipe(ready) != 0)
		test_hard("pipe");
	pid_t child = fork();
	if (child == 0) {
		char c = 0;
		if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0 ||
		    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
			_exit(1);
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	if (child < 0 || read(ready[0], &c, 1) != 1)
		test_hard("cannot start a process of nobody's");
	close(ready[0]);
	close(ready[1]);
	forge(2, CG_LIVE);
	forge_slot(child);
	write_owned("tieralloc-nobody-live", TA_SHM_SEG_SIZE, NOBODY, false);
	ta_agent_segments_rescan(set, false);
	ta_agent_segments_stats(set, &st);
	expect_eq(st.opened, 1);
	expect_eq(st.evicted, 1);
	expect_eq(st.kept, 1 + lim->max_per_uid);
	expect_eq(ta_agent_segments_publish(set, counts, 1, NULL, 0, 0, 250, false),
		  1 + lim->max_per_uid);
	expect_true(written_by_agent("tieralloc-nobody-live"));
	expect_true(written_by_agent("tieralloc-real"));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);

	ta_agent_segments_free(set);
	expect_eq(open_fds(), fds0);
	setrlimit(RLIMIT_NOFILE, &saved);
	DIR *d = opendir(many);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.') {
			char path[400];
			snprintf(path, sizeof(path), "%s/%s", many, e->d_name);
			unlink(path);
		}
	if (d != NULL)
		closedir(d);
	rmdir(many);
	test_context("%s", "");
}

/* ---- the allocator's side ---- */

static void test_worker_alarm(void)
{
	void *p = tieralloc_malloc(64); /* starts the allocator, which attaches the segment */
	tieralloc_free(p);
	if (!atomic_load(&ta_shm.active) || ta_shm.agent == NULL)
		test_skip("no shared segment with an agent block");
	/* Another live process of the cgroup: our parent, in a free slot. */
	struct ta_shm_slot *other = NULL;
	for (unsigned i = 0; i < TA_SHM_MAX_SLOTS && other == NULL; i++) {
		uint32_t expect = 0;
		if (atomic_compare_exchange_strong(&ta_shm.slots[i].pid, &expect,
						   (uint32_t)getppid()))
			other = &ta_shm.slots[i];
	}
	if (other == NULL)
		test_hard("no free slot");
	struct ta_shm_agent *agent = ta_shm.agent;
	/* The checks below are about what happens within one period (200 ms) of a reading. On a
	 * loaded machine the thread can be descheduled for longer than that between two passes,
	 * and then a new reading is right: such a round is done again (up to 50 rounds), and the
	 * checks are made on the first round that ran within the period. */
	uint64_t gen = 0, gen_quiet = 0, gen_alarm = 0, gen_once = 0;
	uint32_t wake = 0, wake_alarm = 0;
	uint64_t alarms0 = 0, alarms_quiet = 0, alarms_alarm = 0, alarms_once = 0, taken = 0,
		 raised = 0;
	unsigned round;
	for (round = 0; round < 50; round++) {
		/* The period is over: the next pass reads. */
		atomic_store(&ta_shm.hdr->observe_claim_ns, 0);
		uint64_t t0 = ta_monotonic_ns();
		ta_enforce_pass();
		gen = atomic_load(&ta_shm.hdr->observe_gen);
		wake = atomic_load(&other->wake);
		alarms0 = atomic_load(&ta_agent_alarms);
		ta_enforce_pass();
		gen_quiet = atomic_load(&ta_shm.hdr->observe_gen);
		alarms_quiet = atomic_load(&ta_agent_alarms);
		atomic_fetch_add(&agent->alarm, 1);
		ta_enforce_pass();
		gen_alarm = atomic_load(&ta_shm.hdr->observe_gen);
		wake_alarm = atomic_load(&other->wake);
		alarms_alarm = atomic_load(&ta_agent_alarms);
		taken = atomic_load(&agent->alarm_taken);
		raised = atomic_load(&agent->alarm);
		ta_enforce_pass();
		gen_once = atomic_load(&ta_shm.hdr->observe_gen);
		alarms_once = atomic_load(&ta_agent_alarms);
		if (ta_monotonic_ns() - t0 < TA_ENFORCE_PERIOD_NS)
			break;
	}
	printf("# alarm checks: round %u ran within the period\n", round);
	test_context("alarm: without one, no second reading within the period (round %u)", round);
	expect_eq(gen_quiet, gen);
	expect_eq(alarms_quiet, alarms0);

	test_context("alarm: taken, read at once, the other worker woken (round %u)", round);
	expect_eq(taken, raised);
	expect_eq(alarms_alarm, alarms0 + 1);
	expect_eq(gen_alarm, gen + 1);
	expect_eq(wake_alarm, wake + 1);
	uint64_t alarms = 0;
	size_t len = sizeof(alarms);
	expect_eq(tieralloc_ctl_get("agent.alarms", &alarms, &len), 0);
	expect_eq(alarms, atomic_load(&ta_agent_alarms));
	expect_ne(alarms, 0);

	test_context("alarm: taken once (round %u)", round);
	expect_eq(alarms_once, alarms_alarm);
	expect_eq(gen_once, gen + 1);

	test_context("ctl: the agent's counts, once it wrote");
	uint64_t v = 0;
	len = sizeof(v);
	expect_true(tieralloc_ctl_get("cgroup.tier.0.agent.promoted", &v, &len) == -ENOENT);
	atomic_store(&agent->tier[0].promoted, 123);
	atomic_store(&agent->written_ns, 1);
	len = sizeof(v);
	expect_eq(tieralloc_ctl_get("cgroup.tier.0.agent.promoted", &v, &len), 0);
	expect_eq(v, 123);
	atomic_store(&other->pid, 0);
}

static char shm_name_var[96];

int main(int argc, char **argv)
{
	(void)argc;
	/* Not "tieralloc-...": a real tierallocd running meanwhile (tests/bpf/test_agent.sh, in the
	 * same make check -j) writes into every segment so named, and test_worker_alarm needs a
	 * segment no agent ever wrote. */
	snprintf(shm_name_var, sizeof(shm_name_var), "TIERALLOC_SHM_NAME=/ta-unit-agent-%d",
		 (int)getpid());
	const char *const env[] = { shm_name_var, "TIERALLOC_ENFORCE=off",
				    "TIERALLOC_PROMOTION=never", NULL };
	test_reexec_with_env(argv, env);
	test_tally();
	test_alarm_rule();
	test_block_bounds();
	test_publish();
	test_lend_round();
	test_yield_round();
	test_forged_cgroups();
	test_prom_format();
	test_exhaustion();
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm%s", strchr(shm_name_var, '=') + 1);
	test_worker_alarm();
	unlink(path);
	return test_done();
}
