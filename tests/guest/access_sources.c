/* SPDX-License-Identifier: MIT */
/*
 * Guest probe (issue 12 item 16, issue 14 point 3): which sources of access information does the
 * running kernel offer? Each source is tried through its real interface, not looked up in the
 * kernel's config, and reported as one line
 *
 *   source NAME yes|no DETAIL
 *
 *   numa_balancing  kernel.numa_balancing takes 1 (normal) and 2 (memory tiering), read back
 *                   (the original value is restored)
 *   soft_dirty      a written page loses its soft-dirty bit (pagemap bit 55) when "4" is written
 *                   to /proc/self/clear_refs, and gets it back on the next write
 *   userfaultfd     userfaultfd(2) and the UFFDIO_API handshake, then UFFDIO_REGISTER of a range
 *   kprobe_migrate_pages
 *                   a kprobe event on migrate_pages() is created in tracefs and removed again (the
 *                   agent attaches its BPF kprobe to the same function)
 *   damon           DAMON's sysfs interface (/sys/kernel/mm/damon/admin): one kdamond monitors
 *                   this process's address space (vaddr) while a thread writes 16 MiB over and
 *                   over, until a region with accesses is reported (a "stat" scheme's tried
 *                   regions); then it is stopped and removed
 *   idle_page       idle page tracking: /sys/kernel/mm/page_idle/bitmap can be read
 *
 * The sh side (sources.sh) holds the expected set per kernel. Exit status 0 when every probe
 * could be run, 1 when one could not be judged (a setup error, printed on stderr).
 * Waits are guards against a hang (60 s), not timing checks: a loaded host only makes them take
 * longer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GUARD_S 60

static int setup_errors;

static void report(const char *name, int yes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(const char *name, int yes, const char *fmt, ...)
{
	char detail[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("source %s %s %s\n", name, yes ? "yes" : "no", detail);
	fflush(stdout);
}

/* Write S to PATH; 0 or an errno. */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = write(fd, s, strlen(s));
	int e = n == (ssize_t)strlen(s) ? 0 : n < 0 ? errno : EIO;
	close(fd);
	return e;
}

/* Read PATH into buf (NUL-terminated, trailing newline dropped); 0 or an errno. */
static int get(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = read(fd, buf, size - 1);
	int e = n < 0 ? errno : 0;
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return e;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&t, NULL);
}

/* ---- NUMA balancing ---- */

static void probe_numa_balancing(void)
{
	const char *knob = "/proc/sys/kernel/numa_balancing";
	char orig[32], got[32], modes[64] = "";
	if (get(knob, orig, sizeof(orig)) != 0) {
		report("numa_balancing", 0, "%s: %s", knob, strerror(errno));
		return;
	}
	for (int mode = 1; mode <= 2; mode++) {
		char want[4];
		snprintf(want, sizeof(want), "%d", mode);
		if (put(knob, want) == 0 && get(knob, got, sizeof(got)) == 0 &&
		    strcmp(got, want) == 0)
			snprintf(modes + strlen(modes), sizeof(modes) - strlen(modes), "%s%s",
				 modes[0] ? " and " : "",
				 mode == 1 ? "1 (normal)" : "2 (memory tiering)");
	}
	int restored = put(knob, orig) == 0;
	if (!restored) {
		fprintf(stderr, "access_sources: cannot restore %s to %s\n", knob, orig);
		setup_errors++;
	}
	struct stat st;
	int rate = stat("/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps", &st) == 0;
	report("numa_balancing", strstr(modes, "1 (normal)") != NULL,
	       "kernel.numa_balancing takes %s%s", modes[0] ? modes : "neither 1 nor 2",
	       rate ? "; promotion rate limit sysctl present" : "");
}

/* ---- soft-dirty ---- */

static int soft_dirty_bit(int pagemap, const void *p, int *bit)
{
	uint64_t e;
	if (pread(pagemap, &e, sizeof(e), (off_t)((uintptr_t)p / 4096 * sizeof(e))) != sizeof(e))
		return errno ? errno : EIO;
	*bit = (int)((e >> 55) & 1);
	return 0;
}

static void probe_soft_dirty(void)
{
	volatile char *p =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (p == MAP_FAILED || pm < 0) {
		report("soft_dirty", 0, "/proc/self/pagemap: %s", strerror(errno));
		return;
	}
	int before = -1, cleared = -1, after = -1, e;
	p[0] = 1;
	if ((e = soft_dirty_bit(pm, (const void *)p, &before)) != 0 ||
	    (e = put("/proc/self/clear_refs", "4")) != 0 ||
	    (e = soft_dirty_bit(pm, (const void *)p, &cleared)) != 0) {
		report("soft_dirty", 0, "clear_refs/pagemap: %s", strerror(e));
	} else {
		p[0] = 2;
		soft_dirty_bit(pm, (const void *)p, &after);
		report(
		    "soft_dirty", before == 1 && cleared == 0 && after == 1,
		    "bit 55 of a written page: %d, after clear_refs 4: %d, after a new write: %d",
		    before, cleared, after);
	}
	close(pm);
	munmap((void *)p, 4096);
}

/* ---- userfaultfd ---- */

static void probe_userfaultfd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		report("userfaultfd", 0, "userfaultfd(2): %s", strerror(errno));
		return;
	}
	struct uffdio_api api = { .api = UFFD_API, .features = 0 };
	if (ioctl(fd, UFFDIO_API, &api) != 0) {
		report("userfaultfd", 0, "UFFDIO_API: %s", strerror(errno));
		close(fd);
		return;
	}
	void *p = mmap(NULL, 4096 * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_register reg = { .range = { (uintptr_t)p, 4096 * 4 },
				       .mode = UFFDIO_REGISTER_MODE_MISSING };
	int ok = p != MAP_FAILED && ioctl(fd, UFFDIO_REGISTER, &reg) == 0;
	int e = errno;
	/* Bit 11 (UFFD_FEATURE_PAGEFAULT_FLAG_WP, 5.7) and bit 15 (WP_ASYNC, 6.7: write tracking
	 * without a handler, with pagemap's PAGEMAP_SCAN) tell the write-protect modes apart. */
	report("userfaultfd", ok, "API features 0x%llx%s%s%s", (unsigned long long)api.features,
	       api.features & (1ull << 15) ? " (with async write-protect)" : "",
	       ok ? "; a range registered" : "; UFFDIO_REGISTER failed: ", ok ? "" : strerror(e));
	if (p != MAP_FAILED)
		munmap(p, 4096 * 4);
	close(fd);
}

/* ---- kprobe on migrate_pages ---- */

static void probe_kprobe(void)
{
	const char *events = "/sys/kernel/tracing/kprobe_events";
	const char *ev = "/sys/kernel/tracing/events/tieralloc_sources/migrate_pages";
	int fd = open(events, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		report("kprobe_migrate_pages", 0, "%s: %s", events, strerror(errno));
		return;
	}
	const char *add = "p:tieralloc_sources/migrate_pages migrate_pages\n";
	int e = write(fd, add, strlen(add)) == (ssize_t)strlen(add) ? 0 : errno;
	struct stat st;
	int there = e == 0 && stat(ev, &st) == 0;
	if (e == 0) {
		const char *del = "-:tieralloc_sources/migrate_pages\n";
		if (write(fd, del, strlen(del)) != (ssize_t)strlen(del)) {
			fprintf(stderr, "access_sources: cannot remove the kprobe event: %s\n",
				strerror(errno));
			setup_errors++;
		}
	}
	close(fd);
	if (there)
		report("kprobe_migrate_pages", 1,
		       "a kprobe event on migrate_pages() was created and removed");
	else
		report("kprobe_migrate_pages", 0, "cannot place a kprobe on migrate_pages(): %s",
		       strerror(e ? e : ENOENT));
}

/* ---- DAMON ---- */

#define DAMON	 "/sys/kernel/mm/damon/admin"
#define KDAMOND	 DAMON "/kdamonds/0"
#define CONTEXT	 KDAMOND "/contexts/0"
#define SCHEME	 CONTEXT "/schemes/0"
#define REGIONS	 SCHEME "/tried_regions"
#define BUF_SIZE (16u << 20)

static atomic_bool writer_stop;

static void *writer(void *arg)
{
	volatile char *buf = arg;
	while (!atomic_load(&writer_stop))
		for (size_t i = 0; i < BUF_SIZE; i += 4096)
			buf[i]++;
	return NULL;
}

/* The tried regions of the scheme: how many, and the most accesses of any. */
static int read_regions(unsigned *n, unsigned long *max_acc)
{
	*n = 0;
	*max_acc = 0;
	for (unsigned i = 0;; i++) {
		char path[160], v[32];
		snprintf(path, sizeof(path), REGIONS "/%u/nr_accesses", i);
		if (get(path, v, sizeof(v)) != 0)
			break;
		unsigned long a = strtoul(v, NULL, 10);
		if (a > *max_acc)
			*max_acc = a;
		(*n)++;
	}
	return 0;
}

static void probe_damon(void)
{
	struct stat st;
	char v[256], pid[32], ops[256] = "";
	if (stat(DAMON, &st) != 0) {
		report("damon", 0, "%s: %s", DAMON, strerror(errno));
		return;
	}
	if (get(DAMON "/kdamonds/nr_kdamonds", v, sizeof(v)) != 0 || strcmp(v, "0") != 0) {
		fprintf(stderr,
			"access_sources: DAMON is in use here (nr_kdamonds %s): not touched\n", v);
		setup_errors++;
		return;
	}
	char *buf =
	    mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		fprintf(stderr, "access_sources: mmap: %s\n", strerror(errno));
		setup_errors++;
		return;
	}
	memset(buf, 1, BUF_SIZE);
	pthread_t thread;
	atomic_store(&writer_stop, false);
	pthread_create(&thread, NULL, writer, buf);

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	const char *step = NULL;
	int e = 0;
#define STEP(what, call)                                                                           \
	do {                                                                                       \
		if (e == 0 && (e = (call)) != 0)                                                   \
			step = (what);                                                             \
	} while (0)
	STEP("nr_kdamonds", put(DAMON "/kdamonds/nr_kdamonds", "1"));
	STEP("nr_contexts", put(KDAMOND "/contexts/nr_contexts", "1"));
	STEP("avail_operations", get(CONTEXT "/avail_operations", ops, sizeof(ops)));
	for (char *c = ops; *c; c++)
		if (*c == '\n')
			*c = ' ';
	STEP("operations", put(CONTEXT "/operations", "vaddr"));
	STEP("nr_targets", put(CONTEXT "/targets/nr_targets", "1"));
	STEP("pid_target", put(CONTEXT "/targets/0/pid_target", pid));
	STEP("nr_schemes", put(CONTEXT "/schemes/nr_schemes", "1"));
	STEP("action", put(SCHEME "/action", "stat"));
	/* A new scheme's access pattern ranges are all [0, 0]: widen them to every region. */
	STEP("sz/max", put(SCHEME "/access_pattern/sz/max", "18446744073709551615"));
	STEP("nr_accesses/max", put(SCHEME "/access_pattern/nr_accesses/max", "4294967295"));
	STEP("age/max", put(SCHEME "/access_pattern/age/max", "4294967295"));
	STEP("state on", put(KDAMOND "/state", "on"));
	unsigned n = 0;
	unsigned long max_acc = 0;
	double t0 = now_s(), waited = 0;
	char kpid[32] = "";
	if (e == 0) {
		get(KDAMOND "/pid", kpid, sizeof(kpid));
		/* Until a region of this process shows accesses; the regions are updated on
		 * request, from what the last aggregation interval (100 ms) saw. */
		while (max_acc == 0 && now_s() - t0 < GUARD_S) {
			nap_ms(300);
			if (put(KDAMOND "/state", "update_schemes_tried_regions") == 0)
				read_regions(&n, &max_acc);
		}
		waited = now_s() - t0;
		if (put(KDAMOND "/state", "off") != 0) {
			fprintf(stderr, "access_sources: cannot stop the kdamond\n");
			setup_errors++;
		}
	}
	atomic_store(&writer_stop, true);
	pthread_join(thread, NULL);
	/* Leave DAMON as it was: no kdamond. */
	put(DAMON "/kdamonds/nr_kdamonds", "0");
	munmap(buf, BUF_SIZE);
	if (e != 0)
		report("damon", 0, "sysfs interface present, but %s failed: %s", step, strerror(e));
	else
		report("damon", max_acc > 0,
		       "sysfs (operations: %s): kdamond %s monitored this process (vaddr): %u "
		       "regions, at most %lu accesses per aggregation, after %.1f s",
		       ops, kpid, n, max_acc, waited);
#undef STEP
}

/* ---- idle page tracking ---- */

static void probe_idle_page(void)
{
	const char *bitmap = "/sys/kernel/mm/page_idle/bitmap";
	int fd = open(bitmap, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		report("idle_page", 0, "%s: %s", bitmap, strerror(errno));
		return;
	}
	uint64_t word;
	ssize_t n = pread(fd, &word, sizeof(word), 0);
	int e = errno;
	close(fd);
	if (n == sizeof(word))
		report("idle_page", 1, "%s can be read", bitmap);
	else
		report("idle_page", 0, "%s: %s", bitmap, strerror(e));
}

int main(void)
{
	/* It writes sysctls and starts a kdamond: the guest's, not a host's. */
	if (getenv("TA_VM_IN_GUEST") == NULL) {
		fprintf(stderr,
			"access_sources: runs in the test guest only (tests/vm/guest-run.sh)\n");
		return 2;
	}
	probe_numa_balancing();
	probe_soft_dirty();
	probe_userfaultfd();
	probe_kprobe();
	probe_damon();
	probe_idle_page();
	return setup_errors ? 1 : 0;
}
