/* SPDX-License-Identifier: MIT */
/*
 * Placement of a program's own mappings (docs/runtimes.md, step 3), under the quota of
 * prog_maps_place.env: two tiers (both on node 0, so the test runs on any machine: it checks the
 * policy and the pick, not where pages land) and a tier-0 high share of 16 MiB. A sample picks
 * the fastest tier within its share: tier 0 at first, and every recorded range prefers it
 * (MPOL_PREFERRED_MANY, or MPOL_PREFERRED before 5.15; a preference, never a bind, so that a full
 * node spills instead of calling the OOM killer); 32 MiB touched puts tier 0 past its share, so
 * the next sample picks tier 1 and re-places; unmapped, tier 0 again. Its own segment, unlinked
 * at the end, so that other tests' charges do not move the pick.
 */
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prog.h"

#define MiB		    (1024ul * 1024)
#define P		    4096ul
#define MODE_PREFERRED	    1 /* MPOL_PREFERRED */
#define MODE_PREFERRED_MANY 5 /* MPOL_PREFERRED_MANY */
#define F_ADDR		    2 /* MPOL_F_ADDR */

static int (*ctl_get)(const char *, void *, size_t *);

static uint64_t ctl(const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof(v);
	REQUIRE(ctl_get(name, &v, &len) == 0, "tieralloc_ctl_get(%s)", name);
	return v;
}

static void sample(void)
{
	uint32_t done = 0;
	size_t len = sizeof(done);
	REQUIRE(ctl_get("maps.sample", &done, &len) == 0 && done == 1, "a sample");
}

static bool prefers(int mode)
{
	return mode == MODE_PREFERRED_MANY || mode == MODE_PREFERRED;
}

static int policy_of(void *addr)
{
	int mode = -1;
	unsigned long mask[4] = { 0 };
	if (syscall(SYS_get_mempolicy, &mode, mask, 64ul * 4, addr, F_ADDR) != 0)
		return -1;
	return mode;
}

int main(void)
{
	prog_expect_preload();
	ctl_get = (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	REQUIRE(ctl_get != NULL, "tieralloc_ctl_get");
	free(malloc(100));
	uint32_t on = 0, tiers = 0;
	size_t len = sizeof(on);
	REQUIRE(ctl_get("shm.active", &on, &len) == 0 && on, "a segment (prog_maps_place.env)");
	len = sizeof(tiers);
	REQUIRE(ctl_get("tiers", &tiers, &len) == 0 && tiers == 2, "two tiers");

	char *a = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED, "mmap");
	CHECK(!prefers(policy_of(a)), "placed before any sample: mode %d", policy_of(a));
	sample();
	uint64_t rebinds = ctl("maps.rebinds");
	CHECK(ctl("maps.tier") == 0, "first pick: tier %lld", (long long)ctl("maps.tier"));
	CHECK(prefers(policy_of(a)), "a recorded range, placed at the first pick: mode %d",
	      policy_of(a));
	char *b =
	    mmap(NULL, 4 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	REQUIRE(b != MAP_FAILED, "reserve");
	CHECK(prefers(policy_of(b)), "a new reservation, placed when mapped: mode %d",
	      policy_of(b));
	sample();
	CHECK(ctl("maps.rebinds") == rebinds, "the same pick re-binds nothing");

	for (size_t i = 0; i < 32 * MiB; i += P)
		a[i] = 1;
	sample();
	CHECK(ctl("maps.tier") == 1, "tier 0 past its share: tier %lld",
	      (long long)ctl("maps.tier"));
	CHECK(ctl("maps.rebinds") == rebinds + 1, "re-bound once: %llu",
	      (unsigned long long)(ctl("maps.rebinds") - rebinds));
	CHECK(prefers(policy_of(a)) && prefers(policy_of(b)), "still placed, never bound: %d %d",
	      policy_of(a), policy_of(b));

	REQUIRE(munmap(a, 64 * MiB) == 0, "munmap");
	sample();
	CHECK(ctl("maps.tier") == 0, "room again: tier %lld", (long long)ctl("maps.tier"));
	munmap(b, 4 * MiB);

	const char *name = getenv("TIERALLOC_SHM_NAME");
	if (name != NULL)
		shm_unlink(name);
	return prog_result("prog_maps_place");
}
