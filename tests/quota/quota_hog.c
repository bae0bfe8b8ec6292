/* SPDX-License-Identifier: MIT */
/*
 * The workload of the quota tests (tests/quota/test_*.sh): a process started under the preload that
 * allocates, holds and frees memory on command, and says in which tier each block landed. The
 * scripts start several of them on one shared segment (TIERALLOC_SHM_NAME) and read the segment
 * with shm_peek between commands. It is not linked with tieralloc: the tier of a block comes from
 * tieralloc_tier_of found with dlsym, and without the preload the program refuses to run.
 *
 * Commands, one per line on stdin; each prints exactly one line on stdout (flushed), so that a
 * script knows when it is done:
 *   alloc BYTES BLOCK THREADS  THREADS new threads each allocate BYTES/THREADS bytes in BLOCK-byte
 *                              blocks with malloc, write every block, then stay alive holding
 *                              their stock until "free"; replies
 *                              "alloc blocks=N tier0=B0 tier1=B1 tier2=B2 failed=F errno=E"
 *                              (Bt: bytes of the blocks in tier t; F: NULL returns; E: errno of
 *                              the first one, or 0)
 *   tier T BYTES               tieralloc_malloc_tier(T, BYTES), kept: "tier want=T got=G errno=E"
 *   free                       let the threads end, free every block: "free blocks=N"
 *   fork [BYTES [free]]        fork a child that keeps the inherited heap (with "free": frees
 *                              it and gives it back with malloc_trim first), allocates BYTES in
 *                              4 KiB blocks, and waits for SIGKILL: "fork pid=P", once the
 *                              child runs (its slot is taken) and has allocated
 *   where                      "where tier0=B0 tier1=B1 tier2=B2 bad=N": the held blocks' bytes
 *                              per tier now (enforcement may have moved them), N blocks whose
 *                              contents changed
 *   spawn IN OUT               fork a child that execs this program again with IN as its stdin
 *                              and OUT as its stdout (a new command-driven hog): "spawn pid=P"
 *   kill PID                   SIGKILL a child of fork or spawn and reap it: "kill pid=P status=S"
 *   pid                        "pid=P"
 *   quit                       exit 0 without freeing (no reply)
 * Sizes take K and M suffixes. The program's own bookkeeping is mmap'd, so that the only malloc
 * calls that reach the allocator are the blocks (and a few from stdio and pthreads at start).
 * A 600 s alarm ends a forgotten process.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/size_arg.h"

#define MAX_THREADS 64
#define MAX_TIERS   3

static int (*tier_of)(const void *);
static void *(*malloc_tier)(int, size_t);
static int (*ctl_get)(const char *, void *, size_t *);

/* What the process held when tieralloc started, charged to tier t (src/quota/startup.c). */
static unsigned long long startup_charge(int t)
{
	char name[32];
	uint64_t v = 0;
	size_t len = sizeof(v);
	snprintf(name, sizeof(name), "tier.%d.startup", t);
	return ctl_get != NULL && ctl_get(name, &v, &len) == 0 ? (unsigned long long)v : 0;
}

struct worker {
	pthread_t thread;
	size_t bytes, block;
	void **blocks; /* mmap'd */
	size_t nblocks, cap;
	uint64_t tier_bytes[MAX_TIERS];
	size_t failed;
	int first_errno;
};

static struct worker *workers; /* mmap'd, MAX_THREADS */
static unsigned nworkers;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned done;
static int released;

/* Explicit blocks of "tier", and their sizes. */
static void **extra;
static size_t *extra_size;
static size_t nextra;

static char outbuf[4096];

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("quota_hog: mmap");
		exit(99);
	}
	return p;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	for (size_t got = 0; got + w->block <= w->bytes; got += w->block) {
		errno = 0;
		unsigned char *p = malloc(w->block);
		if (p == NULL) {
			if (w->failed++ == 0)
				w->first_errno = errno;
			continue;
		}
		memset(p, 0x5a, w->block); /* touched: the pages exist, in the tier's nodes */
		int t = tier_of(p);
		if (t >= 0 && t < MAX_TIERS)
			w->tier_bytes[t] += w->block;
		w->blocks[w->nblocks++] = p;
	}
	pthread_mutex_lock(&lock);
	done++;
	pthread_cond_broadcast(&cond);
	/* Stay alive: a thread's stock is held until it exits, and the tests want it held. */
	while (!released)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void cmd_alloc(size_t bytes, size_t block, unsigned threads)
{
	if (block == 0 || threads == 0 || nworkers + threads > MAX_THREADS) {
		printf("alloc error=bad-arguments\n");
		return;
	}
	unsigned first = nworkers;
	pthread_mutex_lock(&lock);
	done = 0;
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < threads; i++) {
		struct worker *w = &workers[first + i];
		memset(w, 0, sizeof(*w));
		w->bytes = bytes / threads;
		w->block = block;
		w->cap = w->bytes / block + 1;
		w->blocks = map(w->cap * sizeof(void *));
		nworkers++;
	}
	for (unsigned i = 0; i < threads; i++) {
		int rc =
		    pthread_create(&workers[first + i].thread, NULL, work, &workers[first + i]);
		if (rc != 0) {
			fprintf(stderr, "quota_hog: pthread_create: %s\n", strerror(rc));
			exit(99);
		}
	}
	pthread_mutex_lock(&lock);
	while (done < threads)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	uint64_t tb[MAX_TIERS] = { 0 };
	size_t n = 0, failed = 0;
	int err = 0;
	for (unsigned i = first; i < nworkers; i++) {
		for (unsigned t = 0; t < MAX_TIERS; t++)
			tb[t] += workers[i].tier_bytes[t];
		n += workers[i].nblocks;
		if (workers[i].failed != 0 && failed == 0)
			err = workers[i].first_errno;
		failed += workers[i].failed;
	}
	printf("alloc blocks=%zu tier0=%llu tier1=%llu tier2=%llu failed=%zu errno=%d "
	       "startup0=%llu\n",
	       n, (unsigned long long)tb[0], (unsigned long long)tb[1], (unsigned long long)tb[2],
	       failed, err, startup_charge(0));
}

static void cmd_free(void)
{
	pthread_mutex_lock(&lock);
	released = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	size_t n = 0;
	for (unsigned i = 0; i < nworkers; i++) {
		pthread_join(workers[i].thread, NULL);
		for (size_t k = 0; k < workers[i].nblocks; k++)
			free(workers[i].blocks[k]);
		n += workers[i].nblocks;
		munmap(workers[i].blocks, workers[i].cap * sizeof(void *));
	}
	for (size_t k = 0; k < nextra; k++)
		free(extra[k]);
	n += nextra;
	nextra = 0;
	nworkers = 0;
	released = 0;
	printf("free blocks=%zu\n", n);
}

static void cmd_tier(int tier, size_t bytes)
{
	errno = 0;
	void *p = malloc_tier(tier, bytes);
	int err = p == NULL ? errno : 0;
	if (p != NULL) {
		memset(p, 0x3c, bytes);
		if (nextra < 4096) {
			extra_size[nextra] = bytes;
			extra[nextra++] = p;
		}
	}
	printf("tier want=%d got=%d errno=%d\n", tier, p != NULL ? tier_of(p) : -1, err);
}

/* Where every held block is now (enforcement may have moved it), and whether its bytes are
 * still what was written. */
static bool intact(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void cmd_where(void)
{
	uint64_t bytes[MAX_TIERS] = { 0 };
	size_t bad = 0;
	for (unsigned i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];
		for (size_t k = 0; k < w->nblocks; k++) {
			int t = tier_of(w->blocks[k]);
			if (t >= 0 && t < MAX_TIERS)
				bytes[t] += w->block;
			bad += !intact(w->blocks[k], w->block, 0x5a);
		}
	}
	for (size_t k = 0; k < nextra; k++) {
		int t = tier_of(extra[k]);
		if (t >= 0 && t < MAX_TIERS)
			bytes[t] += extra_size[k];
		bad += !intact(extra[k], extra_size[k], 0x3c);
	}
	printf("where tier0=%" PRIu64 " tier1=%" PRIu64 " tier2=%" PRIu64 " bad=%zu\n", bytes[0],
	       bytes[1], bytes[2], bad);
}

/* In a forked child (the workers' threads are gone, their blocks are not): free every block. */
static void free_inherited(void)
{
	for (unsigned i = 0; i < nworkers; i++)
		for (size_t k = 0; k < workers[i].nblocks; k++)
			free(workers[i].blocks[k]);
	for (size_t k = 0; k < nextra; k++)
		free(extra[k]);
}

static void cmd_fork(size_t child_bytes, int free_first)
{
	int ready[2];
	if (pipe(ready) != 0) {
		printf("fork error=%d\n", errno);
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		printf("fork error=%d\n", errno);
		return;
	}
	if (pid == 0) {
		/* fork() has returned: the fork handlers (the child's slot) are done. The child
		 * allocates what it was asked to before it says so. */
		close(ready[0]);
		if (free_first) {
			free_inherited();
			malloc_trim(0);
		}
		for (size_t got = 0; got + 4096 <= child_bytes; got += 4096)
			memset(malloc(4096), 1, 4096);
		if (write(ready[1], "r", 1) != 1)
			_exit(97);
		close(ready[1]);
		/* The inherited heap stays live until SIGKILL. */
		alarm(600);
		for (;;)
			pause();
	}
	close(ready[1]);
	char c;
	ssize_t r;
	do
		r = read(ready[0], &c, 1);
	while (r < 0 && errno == EINTR);
	close(ready[0]);
	printf("fork pid=%d\n", (int)pid);
}

static void cmd_spawn(const char *in, const char *out)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		printf("spawn error=%d\n", errno);
		return;
	}
	if (pid == 0) {
		int i = open(in, O_RDONLY), o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (i < 0 || o < 0 || dup2(i, 0) < 0 || dup2(o, 1) < 0)
			_exit(97);
		char *argv[] = { "quota_hog", NULL };
		execv("/proc/self/exe", argv);
		_exit(98);
	}
	printf("spawn pid=%d\n", (int)pid);
}

static void cmd_kill(pid_t pid)
{
	int status = -1;
	if (kill(pid, SIGKILL) == 0)
		waitpid(pid, &status, 0);
	printf("kill pid=%d status=%d\n", (int)pid, status);
}

/* One line from fd 0 without stdio (no buffer of stdin's to allocate); false at EOF. */
static int read_line(char *buf, size_t n)
{
	size_t len = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return len > 0 ? (buf[len] = '\0', 1) : 0;
		if (c == '\n') {
			buf[len] = '\0';
			return 1;
		}
		if (len + 1 < n)
			buf[len++] = c;
	}
}

int main(void)
{
	alarm(600);
	setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
	tier_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tieralloc_tier_of");
	malloc_tier = (void *(*)(int, size_t))dlsym(RTLD_DEFAULT, "tieralloc_malloc_tier");
	ctl_get = (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	if (tier_of == NULL || malloc_tier == NULL) {
		fprintf(stderr, "quota_hog: tieralloc's API not found: run me under the preload\n");
		return 99;
	}
	workers = map(MAX_THREADS * sizeof(*workers));
	extra = map(4096 * sizeof(void *));
	extra_size = map(4096 * sizeof(size_t));
	char line[512], a[200], b[200];
	unsigned long long x, y, z;
	while (read_line(line, sizeof(line))) {
		if (sscanf(line, "alloc %199s %199s %llu", a, b, &z) == 3)
			cmd_alloc(parse_size(a), parse_size(b), (unsigned)z);
		else if (sscanf(line, "tier %llu %199s", &x, a) == 2)
			cmd_tier((int)x, parse_size(a));
		else if (strcmp(line, "free") == 0)
			cmd_free();
		else if (strcmp(line, "fork") == 0)
			cmd_fork(0, 0);
		else if (sscanf(line, "fork %199s %199s", a, b) == 2 && strcmp(b, "free") == 0)
			cmd_fork(parse_size(a), 1);
		else if (sscanf(line, "fork %199s", a) == 1)
			cmd_fork(parse_size(a), 0);
		else if (strcmp(line, "where") == 0)
			cmd_where();
		else if (sscanf(line, "spawn %199s %199s", a, b) == 2)
			cmd_spawn(a, b);
		else if (sscanf(line, "kill %llu", &y) == 1)
			cmd_kill((pid_t)y);
		else if (strcmp(line, "pid") == 0)
			printf("pid=%d\n", (int)getpid());
		else if (strcmp(line, "quit") == 0)
			return 0;
		else
			printf("error=unknown-command\n");
	}
	return 0;
}
