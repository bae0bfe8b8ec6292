/* SPDX-License-Identifier: MIT */
/*
 * fork() from a multithreaded process while the other threads allocate and free: the allocator's
 * locks may be held by any of them at the moment of the fork, and the child has only the forking
 * thread. 50 rounds; in each the child checks the memory inherited from its parent, frees it,
 * allocates, starts and joins a thread of its own, and ends with exit() (destructors run),
 * _exit() or exec() of this program (a fresh preloaded process), in turn. A deadlock in the child
 * shows up as a hang (make check's timeout), corruption as a failed check.
 * With PROG_FORK_TIER0 set, every fourth block of the workers is asked of tier 0 explicitly
 * (tieralloc_malloc_tier, found with dlsym), whatever its limits: a test with a small tier-0 share
 * (test_quota_fork_stress.sh) gets enforcement demoting while threads fork.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

#define NWORKERS 3
#define NSLOTS	 64
#define ROUNDS	 50
#define NKEEP	 16

struct slot {
	void *p;
	size_t n;
	uint32_t seed;
};

static atomic_bool stop;
static void *(*malloc_tier0)(int tier, size_t n); /* PROG_FORK_TIER0: tieralloc_malloc_tier */

/* Allocate, check and free until told to stop. */
static void *worker(void *arg)
{
	uint32_t rng = (uint32_t)(uintptr_t)arg * 7919u + 1;
	struct slot slots[NSLOTS] = { { 0 } };
	unsigned long ops = 0;
	while (!atomic_load(&stop) || ops < 1000) {
		struct slot *s = &slots[prog_rand(&rng) % NSLOTS];
		if (s->p != NULL) {
			size_t bad = prog_verify_ends(s->p, s->n, s->seed);
			CHECK(bad == s->n, "worker block of %zu bytes corrupt at %zu", s->n, bad);
			free(s->p);
			s->p = NULL;
		} else {
			s->n = prog_size(&rng, 128 * 1024);
			s->seed = prog_rand(&rng);
			s->p = malloc_tier0 != NULL && ops % 4 == 0 ? malloc_tier0(0, s->n)
								    : malloc(s->n);
			REQUIRE(s->p != NULL, "malloc(%zu)", s->n);
			prog_fill_ends(s->p, s->n, s->seed);
		}
		ops++;
	}
	for (unsigned i = 0; i < NSLOTS; i++)
		free(slots[i].p);
	return NULL;
}

static void *child_thread(void *arg)
{
	uint32_t rng = (uint32_t)(uintptr_t)arg;
	for (int i = 0; i < 2000; i++) {
		size_t n = prog_size(&rng, 100000);
		char *p = malloc(n);
		REQUIRE(p != NULL, "malloc(%zu) in the child's thread", n);
		p[0] = p[n - 1] = 1;
		free(p);
	}
	return NULL;
}

/* The exec'd child: a fresh process under the preload allocates and exits. */
static int exec_child(void)
{
	uint32_t rng = 99;
	void *keep[64];
	for (int i = 0; i < 64; i++) {
		size_t n = prog_size(&rng, 256 * 1024);
		keep[i] = malloc(n);
		REQUIRE(keep[i] != NULL, "malloc(%zu) in the exec'd child", n);
		prog_fill(keep[i], n, (uint32_t)i);
	}
	for (int i = 0; i < 64; i += 2)
		free(keep[i]);
	return prog_result("prog_fork (exec'd child)");
}

static void run_child(int round, struct slot *inherited)
{
	/* The parent's blocks arrived intact, and this process may free them. */
	for (int i = 0; i < NKEEP; i++) {
		size_t bad = prog_verify(inherited[i].p, inherited[i].n, inherited[i].seed);
		CHECK(bad == inherited[i].n, "inherited block %d corrupt at %zu", i, bad);
		free(inherited[i].p);
	}
	uint32_t rng = (uint32_t)round * 31u + 5;
	void *mine[64];
	for (int i = 0; i < 64; i++) {
		size_t n = prog_size(&rng, 256 * 1024);
		mine[i] = malloc(n);
		REQUIRE(mine[i] != NULL, "malloc(%zu) in the child", n);
		prog_fill(mine[i], n, (uint32_t)i);
	}
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)(round + 1)) == 0,
		"pthread_create in the child");
	pthread_join(t, NULL);
	for (int i = 0; i < 64; i++)
		free(mine[i]);
	switch (round % 3) {
	case 0:
		exit(prog_result("prog_fork (child)"));
	case 1:
		_exit(prog_result("prog_fork (child)"));
	default:
		if (prog_result("prog_fork (child)") != 0)
			_exit(1);
		execl("/proc/self/exe", "prog_fork", "exec-child", (char *)NULL);
		fprintf(stderr, "prog_fork: exec failed: %s\n", strerror(errno));
		_exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
		return exec_child();
	prog_expect_preload();
	if (getenv("PROG_FORK_TIER0") != NULL)
		malloc_tier0 = (void *(*)(int, size_t))dlsym(RTLD_DEFAULT, "tieralloc_malloc_tier");

	pthread_t workers[NWORKERS];
	for (uintptr_t i = 0; i < NWORKERS; i++)
		REQUIRE(pthread_create(&workers[i], NULL, worker, (void *)(i + 1)) == 0,
			"pthread_create");

	uint32_t rng = 1234;
	for (int round = 0; round < ROUNDS; round++) {
		struct slot keep[NKEEP];
		for (int i = 0; i < NKEEP; i++) {
			keep[i].n = prog_size(&rng, 256 * 1024);
			keep[i].seed = prog_rand(&rng);
			keep[i].p = malloc(keep[i].n);
			REQUIRE(keep[i].p != NULL, "malloc(%zu)", keep[i].n);
			prog_fill(keep[i].p, keep[i].n, keep[i].seed);
		}
		fflush(NULL); /* nothing buffered may be written twice */
		pid_t pid = fork();
		REQUIRE(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			run_child(round, keep);
		int status;
		REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "round %d: child ended with status 0x%x", round, status);
		for (int i = 0; i < NKEEP; i++) {
			size_t bad = prog_verify(keep[i].p, keep[i].n, keep[i].seed);
			CHECK(bad == keep[i].n, "parent block %d corrupt after fork at %zu", i,
			      bad);
			free(keep[i].p);
		}
	}
	/* posix_spawn (system) skips the fork handlers; the shell it starts is preloaded too. */
	CHECK(system("exit 3") == 3 << 8, "system() with allocating threads around");

	atomic_store(&stop, true);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(workers[i], NULL);
	printf("prog_fork: %d rounds\n", ROUNDS);
	return prog_result("prog_fork");
}
