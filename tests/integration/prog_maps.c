/* SPDX-License-Identifier: MIT */
/*
 * The books of a program's own mappings (src/api/maps.c, docs/runtimes.md), as a runtime makes
 * them: an arena mapped for itself, a PROT_NONE reservation opened with mprotect and with
 * MAP_FIXED (V8, the JVM), partial unmaps, MADV_DONTNEED, mremap growing and moving, a fork whose
 * child unmaps what it inherited, mappings that are not recorded (shared, file), errno as the
 * system call left it, and twenty thousand mappings kept apart, which must not make the books grow
 * past their ceiling. Each step is checked against tieralloc's ctl "maps.*" and, after a sample,
 * "tier.0.mapped" (resident bytes), and what the sample charged against what was touched
 * (test_charged). Under the C library alone (no ctl) it only runs the calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

#define MiB (1024ul * 1024)
#define P   4096ul

static int (*ctl_get)(const char *, void *, size_t *);

static uint64_t ctl(const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof(v);
	if (ctl_get == NULL)
		return 0;
	REQUIRE(ctl_get(name, &v, &len) == 0, "tieralloc_ctl_get(%s)", name);
	return v;
}

/* Resident bytes of the recorded mappings after a fresh sample. */
static uint64_t mapped(void)
{
	uint32_t done = 0;
	size_t len = sizeof(done);
	if (ctl_get == NULL)
		return 0;
	REQUIRE(ctl_get("maps.sample", &done, &len) == 0 && done == 1, "a sample");
	return ctl("tier.0.mapped");
}

static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += P)
		p[i] = (char)i;
}

/* A field of every tier summed: "tier.<t>.<field>" (this process's books), or with cgroup set
 * "cgroup.tier.<t>.<field>" (the segment's; 0 without one). The segment is the cgroup's, which
 * the other tests running meanwhile share: its "mine", this process's slot, is exact. */
static uint64_t all_tiers(int cgroup, const char *field)
{
	uint32_t n = 0;
	size_t len = sizeof(n);
	if (ctl_get == NULL || ctl_get("tiers", &n, &len) != 0)
		return 0;
	uint64_t sum = 0;
	for (uint32_t t = 0; t < n; t++) {
		char name[64];
		snprintf(name, sizeof(name), "%stier.%u.%s", cgroup ? "cgroup." : "", t, field);
		uint64_t v = 0;
		len = sizeof(v);
		if (ctl_get(name, &v, &len) == 0)
			sum += v;
	}
	return sum;
}

static int shm_on(void)
{
	uint32_t on = 0;
	size_t len = sizeof(on);
	return ctl_get != NULL && ctl_get("shm.active", &on, &len) == 0 && on;
}

/* |a - b| within slack. */
static int near(uint64_t a, uint64_t b, uint64_t slack)
{
	return a > b ? a - b <= slack : b - a <= slack;
}

/* Step 2 of docs/runtimes.md: what a sample finds resident is charged, to this process's books
 * and to its slot and tier in the segment; a reservation is not; an unmap gives it back. A forked
 * child charges what it adds, not what it shares with its parent. The slack is the few mallocs
 * of the program itself between two readings. */
static void test_charged(void)
{
	if (ctl_get == NULL)
		return;
	int shm = shm_on();
	mapped();
	uint64_t own0 = all_tiers(0, "charged"), cg0 = all_tiers(1, "mine");
	char *m = mmap(NULL, 48 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(m != MAP_FAILED, "mmap 48 MiB");
	touch(m, 40 * MiB);
	mapped();
	uint64_t own1 = all_tiers(0, "charged"), cg1 = all_tiers(1, "mine");
	CHECK(near(own1 - own0, 40 * MiB, MiB), "40 MiB touched, %llu KiB charged",
	      (unsigned long long)((own1 - own0) >> 10));
	CHECK(!shm || near(cg1 - cg0, 40 * MiB, MiB), "40 MiB touched, the cgroup charged %llu KiB",
	      (unsigned long long)((cg1 - cg0) >> 10));
	CHECK(near(all_tiers(0, "mapped_charged"), all_tiers(0, "mapped"), 0),
	      "mapped_charged %llu, mapped %llu",
	      (unsigned long long)all_tiers(0, "mapped_charged"),
	      (unsigned long long)all_tiers(0, "mapped"));

	/* A 1 GiB reservation costs nothing; a sample that finds nothing new charges nothing. */
	char *big =
	    mmap(NULL, 1024 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(big != MAP_FAILED, "reserve 1 GiB");
	mapped();
	mapped();
	uint64_t own2 = all_tiers(0, "charged");
	CHECK(near(own2, own1, MiB), "a 1 GiB reservation charged %lld KiB",
	      (long long)(own2 - own1) / 1024);

	/* fork: the child's first sample finds its parent's pages, already charged in the
	 * parent's slot; what it touches of its own it charges; what it unmaps of the shared
	 * pages leaves the segment as it was. */
	if (shm) {
		uint64_t before_fork = all_tiers(1, "mine");
		uint64_t reclaimed0 = all_tiers(1, "reclaimed");
		fflush(stdout);
		pid_t pid = fork();
		REQUIRE(pid >= 0, "fork");
		if (pid == 0) {
			uint64_t c0 = all_tiers(1, "mine");
			mapped();
			uint64_t c1 = all_tiers(1, "mine");
			touch(m + 40 * MiB, 8 * MiB);
			mapped();
			uint64_t c2 = all_tiers(1, "mine");
			REQUIRE(munmap(m, 40 * MiB) == 0, "child munmap");
			mapped();
			uint64_t c3 = all_tiers(1, "mine");
			int bad = 0;
			if (!near(c1, c0, MiB))
				bad |= 1; /* the inherited pages charged twice */
			if (!near(c2 - c1, 8 * MiB, MiB))
				bad |= 2; /* its own pages not charged */
			if (!near(c3, c2, MiB))
				bad |= 4; /* the parent's charge taken off */
			if (bad)
				fprintf(stderr, "prog_maps child: %llu %llu %llu %llu KiB\n",
					(unsigned long long)c0 >> 10, (unsigned long long)c1 >> 10,
					(unsigned long long)c2 >> 10, (unsigned long long)c3 >> 10);
			_exit(bad);
		}
		int status;
		REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the child's charges (status %d: 1 double, 2 own missing, 4 parent's taken)",
		      status);
		/* The child left its slot holding what it touched: the worker takes a dead slot
		 * back when it re-reads the limits (a guard, not a deadline; other processes' dead
		 * slots count in "reclaimed" too, so this says only that it happens). */
		uint64_t now = 0;
		for (unsigned i = 0; i < 6000; i++) {
			now = all_tiers(1, "reclaimed");
			if (now >= reclaimed0 + 8 * MiB)
				break;
			char *volatile q =
			    malloc(200000); /* a slow path: the worker starts there */
			REQUIRE(q != NULL, "malloc");
			q[0] = 1;
			free(q);
			usleep(10000);
		}
		CHECK(now >= reclaimed0 + 8 * MiB, "the dead child's slot: %llu KiB reclaimed",
		      (unsigned long long)(now - reclaimed0) >> 10);
		CHECK(near(all_tiers(1, "mine"), before_fork, MiB),
		      "the parent's slot: %llu KiB, was %llu KiB",
		      (unsigned long long)all_tiers(1, "mine") >> 10,
		      (unsigned long long)before_fork >> 10);
	}

	/* munmap, then DONTNEED: given back at the next sample. */
	REQUIRE(munmap(m, 24 * MiB) == 0, "munmap 24 MiB");
	REQUIRE(madvise(m + 24 * MiB, 16 * MiB, MADV_DONTNEED) == 0, "DONTNEED 16 MiB");
	mapped();
	uint64_t own3 = all_tiers(0, "charged"), cg3 = all_tiers(1, "mine");
	CHECK(near(own3, own0, MiB), "unmapped: charged %llu KiB, was %llu KiB",
	      (unsigned long long)own3 >> 10, (unsigned long long)own0 >> 10);
	CHECK(!shm || near(cg3, cg0, MiB), "unmapped: the cgroup charged %llu KiB, was %llu KiB",
	      (unsigned long long)cg3 >> 10, (unsigned long long)cg0 >> 10);
	munmap(m + 24 * MiB, 24 * MiB);
	munmap(big, 1024 * MiB);
}

#define EXPECT_BYTES(want)                                                                         \
	CHECK(ctl_get == NULL || ctl("maps.bytes") == (want), "maps.bytes %llu, expected %llu",    \
	      (unsigned long long)ctl("maps.bytes"), (unsigned long long)(want))

int main(void)
{
	prog_expect_preload();
	ctl_get = (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	free(malloc(100)); /* tieralloc is ready: mappings from here on are recorded */
	test_charged();
	uint64_t base = ctl("maps.bytes"), base_res = mapped();

	/* An arena: recorded whole, charged by what is touched. */
	char *a = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED, "mmap");
	EXPECT_BYTES(base + 8 * MiB);
	touch(a, 4 * MiB);
	uint64_t res = mapped();
	CHECK(ctl_get == NULL || res >= base_res + 4 * MiB, "resident %llu after 4 MiB touched",
	      (unsigned long long)res);

	/* A reservation costs nothing resident; opened and touched it does. */
	char *r =
	    mmap(NULL, 64 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(r != MAP_FAILED, "reserve");
	EXPECT_BYTES(base + 72 * MiB);
	CHECK(ctl_get == NULL || mapped() < res + MiB, "a reservation is not resident");
	REQUIRE(mprotect(r, 2 * MiB, PROT_READ | PROT_WRITE) == 0, "mprotect");
	touch(r, 2 * MiB);
	char *c = mmap(r + 8 * MiB, 2 * MiB, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	REQUIRE(c == r + 8 * MiB, "commit with MAP_FIXED");
	touch(c, 2 * MiB);
	EXPECT_BYTES(base + 72 * MiB); /* replaced in place: the same address space */
	uint64_t opened = mapped();
	CHECK(ctl_get == NULL || opened >= res + 4 * MiB, "opened: resident %llu",
	      (unsigned long long)opened);

	/* With a quota (a segment), 32 MiB or more of mappings get the worker sampling them on its
	 * own, once an access period: wait for a sample nobody asked for (a guard, not a deadline).
	 */
	uint32_t shm_active = 0;
	size_t shm_len = sizeof(shm_active);
	if (ctl_get != NULL && ctl_get("shm.active", &shm_active, &shm_len) == 0 && shm_active) {
		uint64_t asked = ctl("maps.samples");
		for (unsigned i = 0; i < 6000 && ctl("maps.samples") == asked; i++) {
			for (unsigned k = 0; k < 64; k++) {
				/* A slow path (the worker starts there), kept by the compiler. */
				char *volatile q = malloc(200000);
				REQUIRE(q != NULL, "malloc");
				q[0] = 1;
				free(q);
			}
			usleep(10000);
		}
		CHECK(ctl("maps.samples") > asked, "no sample by the worker in 60 s");
	}

	/* A file mapping over part of the reservation takes that part out of the books. */
	int zfd = open("/dev/zero", O_RDONLY);
	REQUIRE(zfd >= 0, "open /dev/zero");
	char *z = mmap(r + 16 * MiB, MiB, PROT_READ, MAP_PRIVATE | MAP_FIXED, zfd, 0);
	REQUIRE(z == r + 16 * MiB, "file mapping with MAP_FIXED");
	close(zfd);
	EXPECT_BYTES(base + 71 * MiB);

	/* Not recorded: shared anonymous memory. */
	char *s = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(s != MAP_FAILED, "shared");
	uint64_t before_shared = ctl("maps.bytes");
	touch(s, 4 * MiB);
	REQUIRE(munmap(s, 4 * MiB) == 0, "munmap shared");
	CHECK(ctl_get == NULL || ctl("maps.bytes") == before_shared, "shared memory is left alone");

	/* A hole in the middle, then what DONTNEED gives back. */
	REQUIRE(munmap(a + 2 * MiB, MiB) == 0, "munmap middle");
	EXPECT_BYTES(before_shared - MiB);
	uint64_t pre = mapped();
	REQUIRE(madvise(a, 2 * MiB, MADV_DONTNEED) == 0, "madvise");
	CHECK(ctl_get == NULL || mapped() + 2 * MiB <= pre, "DONTNEED gave back 2 MiB");

	/* mremap: grown in place or moved, the books follow. */
	char *g = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(g != MAP_FAILED, "mmap g");
	uint64_t with_g = ctl("maps.bytes");
	touch(g, MiB);
	char *g2 = mremap(g, MiB, 16 * MiB, MREMAP_MAYMOVE);
	REQUIRE(g2 != MAP_FAILED, "mremap");
	CHECK(g2[P] == (char)P, "contents moved with the mapping");
	EXPECT_BYTES(with_g + 15 * MiB);
	REQUIRE(munmap(g2, 16 * MiB) == 0, "munmap g2");
	EXPECT_BYTES(with_g - MiB);

	/* errno: the system call's. */
	errno = 0;
	CHECK(munmap((void *)1, P) == -1 && errno == EINVAL, "munmap of a bad address: %d", errno);
	errno = 0;
	CHECK(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED &&
		  errno == EINVAL,
	      "mmap of nothing: %d", errno);

	/* fork: the child's books are a copy; what it unmaps is its own. */
	uint64_t parent_bytes = ctl("maps.bytes");
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		int bad = ctl_get != NULL && ctl("maps.bytes") != parent_bytes;
		bad |= munmap(r, 64 * MiB) != 0;
		bad |= ctl_get != NULL && ctl("maps.bytes") != parent_bytes - 63 * MiB;
		_exit(bad);
	}
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's books (status %d)",
	      status);
	EXPECT_BYTES(parent_bytes);

	/* Twenty thousand mappings kept apart by guard pages: the books stop at their ceiling. */
	enum { MANY = 20000 };
	char *area =
	    mmap(NULL, 2 * MANY * P, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(area != MAP_FAILED, "area");
	REQUIRE(munmap(area, 2 * MANY * P) == 0, "area freed");
	uint64_t before_many = ctl("maps.bytes");
	unsigned made = 0;
	for (unsigned i = 0; i < MANY; i++) {
		char *m = mmap(area + 2 * i * P, P, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (m == area + 2 * i * P)
			made++;
	}
	CHECK(made > MANY / 2, "only %u small mappings", made);
	CHECK(ctl_get == NULL || ctl("maps.ranges") <= 4096, "%llu ranges",
	      (unsigned long long)ctl("maps.ranges"));
	CHECK(ctl_get == NULL || ctl("maps.refused") > 0, "nothing refused past the ceiling");
	for (unsigned i = 0; i < MANY; i++)
		munmap(area + 2 * i * P, P);
	EXPECT_BYTES(before_many);

	munmap(a, 8 * MiB);
	munmap(r, 64 * MiB);
	EXPECT_BYTES(base);
	return prog_result("prog_maps");
}
