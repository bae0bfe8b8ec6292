/* SPDX-License-Identifier: MIT */
/*
 * The workload of the enforcement tests (tests/guest/enforce.sh), run under the preload in a
 * cgroup whose limits the script changes while it runs.
 *
 *   enforce_work TOTAL BLOCK HOT_PERCENT
 *
 * Allocates TOTAL bytes in BLOCK-byte blocks with malloc, fills every word but the first with a
 * value derived from its block and position, and prints "ready blocks=N". The blocks are the
 * nodes of a pointer chase: the first word of each points to the next block of its set, in a
 * random order. HOT_PERCENT of the blocks, picked by a hash of their index (so hot and cold
 * blocks are interleaved in memory), form the hot set, whose cycle a thread follows over and
 * over, reading one word of every page of each block on its way. The main thread allocates and
 * frees a little every 20 ms, like a program that keeps running.
 *
 * Two variables change that for the hotness tests (tests/guest/hotness.sh):
 *   ENFORCE_WORK_LAYOUT=hot-first|cold-first  the hot set is the first (or the last) HOT_PERCENT
 *                                             of the blocks allocated, not interleaved
 *   ENFORCE_WORK_ACCESS=write                 the hot thread writes the word back (same value)
 *                                             instead of only reading it, pausing 10 ms a round
 *   ENFORCE_WORK_ACCESS=read (or unset)        it only reads: soft-dirty cannot see it, the
 *                                             agent's DAMON source can (access_agent.sh)
 *
 * Commands on stdin, one reply line each:
 *   where   "where hot_n0=P hot_n1=P cold_n0=P cold_n1=P other=P": pages of the hot and cold
 *           blocks on each node (move_pages(2) without moving; "other": absent or elsewhere)
 *   verify  "verify blocks=N bad=B": every word re-checked against its value
 *   demoted "demoted bytes=B": what this process demoted from tier 0 (tieralloc_ctl_get
 *           "tier.0.demoted", found with dlsym: the program is not linked with tieralloc)
 *   access  "access samples=N hot0=B cold0=B unknown0=B hot1=B cold1=B promoted0=B down0=B
 *           sample_ms=T period_ms=T rounds=N round_ms=T source=S": the access sampler's counts
 *           (ctl access.*, tier.<t>.hot/cold/unknown/promoted/exchanged_down), and the hot
 *           thread's rounds of its cycle with the last one's time
 *   grow SIZE PAUSE_MS  "grown blocks=N failed=F": SIZE more bytes in blocks of BLOCK, filled
 *           (cold), PAUSE_MS between blocks, like a program that grows while it runs
 *   quit    exit 0
 * Sizes take K and M suffixes. A 900 s alarm ends a forgotten process.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../lib/size_arg.h"

static uint64_t **blocks;
static size_t nblocks, block_size;
static unsigned char *is_hot;
static volatile int stop;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void *hot_head;
static int hot_writes;
static size_t hot_blocks;

/* Rounds of the hot cycle completed, and how long the last one took (the 10 ms pause left out):
 * a round slower than the access period means the sampler sees part of the set written. */
static _Atomic uint64_t hot_rounds, hot_round_us;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * The hot thread's TLB, emptied every TLB_FLUSH_US as a real one would be by other work. Access
 * bits (what DAMON, the agent's source, samples) are set by the page walk on a TLB miss, and the
 * kernel clears them without a flush. A real CPU holds a few thousand translations, far fewer
 * than the hot set's pages, so each round walks them again. QEMU's emulated TLB grows to millions
 * of entries and keeps the whole set while this thread runs alone on its vCPU: its accessed bits,
 * once cleared, stayed clear, and DAMON saw the set read only after something else happened to
 * flush (0-55 MiB of the 200 MiB set ranked hot over 75 s, 6.12 guest). Changing the protection
 * of more pages than the kernel flushes one by one (33 on x86) flushes the whole TLB.
 */
#define TLB_FLUSH_PAGES 64
#define TLB_FLUSH_US	10000u
static char *tlb_scratch;

static void tlb_scratch_init(void)
{
	size_t len = TLB_FLUSH_PAGES * 4096u;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	memset(p, 1, len); /* present pages: a protection change flushes only what is mapped */
	tlb_scratch = p;
}

static void tlb_flush(void)
{
	size_t len = TLB_FLUSH_PAGES * 4096u;
	if (tlb_scratch == NULL)
		return;
	mprotect(tlb_scratch, len, PROT_READ);
	mprotect(tlb_scratch, len, PROT_READ | PROT_WRITE);
}

static void *hot_reader(void *arg)
{
	(void)arg;
	uint64_t sum = 0;
	volatile uint64_t *w = hot_head;
	size_t step = 0;
	uint64_t round_start = now_us(), flushed = round_start;
	while (!stop) {
		for (size_t off = 512; off < block_size / 8; off += 512) {
			sum += w[off];
			if (hot_writes)
				w[off] = w[off];
		}
		w = (volatile uint64_t *)(uintptr_t)w[0];
		if (now_us() - flushed >= TLB_FLUSH_US) {
			tlb_flush();
			flushed = now_us();
		}
		/* A writer pauses once a round of the cycle, so that it leaves the worker a CPU. */
		if (++step == hot_blocks) {
			step = 0;
			atomic_store(&hot_round_us, now_us() - round_start);
			atomic_fetch_add(&hot_rounds, 1);
			if (hot_writes)
				usleep(10000);
			round_start = now_us();
		}
	}
	return (void *)(uintptr_t)sum;
}

/* Link the blocks of one set (hot or not) into a cycle, in a shuffled order. */
static void *link_cycle(unsigned char hot, size_t *order)
{
	size_t n = 0;
	for (size_t i = 0; i < nblocks; i++)
		if (is_hot[i] == hot)
			order[n++] = i;
	if (n == 0)
		return NULL;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)(mix(i ^ 0x5eed) % (i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		blocks[order[i]][0] = (uint64_t)(uintptr_t)blocks[order[(i + 1) % n]];
	return blocks[order[0]];
}

/* Pages of block i on node 0, node 1, elsewhere or absent. */
static void count_pages(size_t i, unsigned long counts[3])
{
	enum { BATCH = 512 };
	void *pages[BATCH];
	int status[BATCH];
	uintptr_t start = ((uintptr_t)blocks[i] + 4095) & ~(uintptr_t)4095;
	uintptr_t end = ((uintptr_t)blocks[i] + block_size) & ~(uintptr_t)4095;
	if (end <= start) {
		/* A block smaller than a page: ask for the page holding its start. */
		start = (uintptr_t)blocks[i] & ~(uintptr_t)4095;
		end = start + 4096;
	}
	while (start < end) {
		unsigned n = 0;
		for (; n < BATCH && start < end; n++, start += 4096)
			pages[n] = (void *)start;
		if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) != 0) {
			counts[2] += n;
			continue;
		}
		for (unsigned k = 0; k < n; k++)
			counts[status[k] == 0 ? 0 : status[k] == 1 ? 1 : 2]++;
	}
}

static void where(void)
{
	unsigned long hot[3] = { 0 }, cold[3] = { 0 };
	/* Small blocks share pages: count each page once, with the block that starts on it. */
	uintptr_t last_page = 0;
	for (size_t i = 0; i < nblocks; i++) {
		uintptr_t page = (uintptr_t)blocks[i] & ~(uintptr_t)4095;
		if (block_size < 4096 && page == last_page)
			continue;
		last_page = page;
		count_pages(i, is_hot[i] ? hot : cold);
	}
	printf("where hot_n0=%lu hot_n1=%lu cold_n0=%lu cold_n1=%lu other=%lu\n", hot[0], hot[1],
	       cold[0], cold[1], hot[2] + cold[2]);
}

static void demoted(void)
{
	int (*ctl_get)(const char *, void *, size_t *) =
	    (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	uint64_t v = 0;
	size_t len = sizeof(v);
	if (ctl_get == NULL || ctl_get("tier.0.demoted", &v, &len) != 0)
		printf("demoted error\n");
	else
		printf("demoted bytes=%llu\n", (unsigned long long)v);
}

static uint64_t ctl_u64(int (*ctl_get)(const char *, void *, size_t *), const char *name)
{
	uint64_t v = 0;
	size_t len = sizeof(v);
	return ctl_get(name, &v, &len) == 0 ? v : UINT64_MAX;
}

static void access_counts(void)
{
	int (*ctl_get)(const char *, void *, size_t *) =
	    (int (*)(const char *, void *, size_t *))dlsym(RTLD_DEFAULT, "tieralloc_ctl_get");
	char source[128] = "";
	size_t len = sizeof(source);
	if (ctl_get == NULL || ctl_get("access.source", source, &len) != 0) {
		printf("access error\n");
		return;
	}
	for (char *c = source; *c != '\0'; c++)
		if (*c == ' ')
			*c = '_';
	printf("access samples=%llu hot0=%llu cold0=%llu unknown0=%llu hot1=%llu cold1=%llu "
	       "promoted0=%llu down0=%llu sample_ms=%llu period_ms=%llu rounds=%llu round_ms=%llu "
	       "source=%s\n",
	       (unsigned long long)ctl_u64(ctl_get, "access.samples"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.0.hot"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.0.cold"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.0.unknown"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.1.hot"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.1.cold"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.0.promoted"),
	       (unsigned long long)ctl_u64(ctl_get, "tier.0.exchanged_down"),
	       (unsigned long long)ctl_u64(ctl_get, "access.sample_ns") / 1000000u,
	       (unsigned long long)ctl_u64(ctl_get, "access.period_ns") / 1000000u,
	       (unsigned long long)atomic_load(&hot_rounds),
	       (unsigned long long)atomic_load(&hot_round_us) / 1000u, source);
}

static void verify(void)
{
	size_t bad = 0;
	for (size_t i = 0; i < nblocks; i++) {
		for (size_t w = 1; w < block_size / 8; w++)
			if (blocks[i][w] != mix(((uint64_t)i << 32) ^ w)) {
				bad++;
				break;
			}
	}
	printf("verify blocks=%zu bad=%zu\n", nblocks, bad);
}

static void grow(const char *args)
{
	char size[32];
	unsigned pause_ms = 0;
	if (sscanf(args, "%31s %u", size, &pause_ms) < 1 || parse_size(size) < block_size) {
		printf("grow error\n");
		return;
	}
	size_t more = parse_size(size) / block_size, failed = 0;
	uint64_t **nb = realloc(blocks, (nblocks + more) * sizeof(*blocks));
	unsigned char *nh = nb != NULL ? realloc(is_hot, nblocks + more) : NULL;
	if (nb != NULL)
		blocks = nb;
	if (nh == NULL) {
		printf("grow error\n");
		return;
	}
	is_hot = nh;
	for (size_t k = 0; k < more; k++) {
		size_t i = nblocks;
		blocks[i] = malloc(block_size);
		if (blocks[i] == NULL) {
			failed++;
			continue;
		}
		blocks[i][0] = 0;
		for (size_t w = 1; w < block_size / 8; w++)
			blocks[i][w] = mix(((uint64_t)i << 32) ^ w);
		is_hot[i] = 0;
		nblocks++;
		if (pause_ms != 0)
			usleep(pause_ms * 1000u);
	}
	printf("grown blocks=%zu failed=%zu\n", nblocks, failed);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TOTAL BLOCK HOT_PERCENT\n", argv[0]);
		return 2;
	}
	alarm(900);
	size_t total = parse_size(argv[1]);
	block_size = parse_size(argv[2]) & ~(size_t)7;
	unsigned hot_pct = (unsigned)atoi(argv[3]);
	if (block_size < 16 || total < block_size) {
		fprintf(stderr, "enforce_work: bad sizes\n");
		return 2;
	}
	nblocks = total / block_size;
	const char *layout = getenv("ENFORCE_WORK_LAYOUT");
	const char *access = getenv("ENFORCE_WORK_ACCESS");
	int first = layout != NULL && strcmp(layout, "hot-first") == 0;
	int last = layout != NULL && strcmp(layout, "cold-first") == 0;
	hot_writes = access != NULL && strcmp(access, "write") == 0;
	if (access != NULL && !hot_writes && strcmp(access, "read") != 0) {
		fprintf(stderr, "enforce_work: ENFORCE_WORK_ACCESS is read or write\n");
		return 2;
	}
	size_t nhot = nblocks * hot_pct / 100;
	blocks = calloc(nblocks, sizeof(*blocks));
	is_hot = calloc(nblocks, 1);
	if (blocks == NULL || is_hot == NULL)
		return 1;
	for (size_t i = 0; i < nblocks; i++) {
		blocks[i] = malloc(block_size);
		if (blocks[i] == NULL) {
			printf("failed block=%zu errno=%d\n", i, errno);
			return 1;
		}
		for (size_t w = 1; w < block_size / 8; w++)
			blocks[i][w] = mix(((uint64_t)i << 32) ^ w);
		if (first)
			is_hot[i] = i < nhot;
		else if (last)
			is_hot[i] = i >= nblocks - nhot;
		else
			is_hot[i] = mix(i * 7919u) % 100 < hot_pct;
		hot_blocks += is_hot[i];
	}
	size_t *order = calloc(nblocks, sizeof(*order));
	if (order == NULL)
		return 1;
	hot_head = link_cycle(1, order);
	link_cycle(0, order);
	free(order);
	pthread_t reader;
	tlb_scratch_init();
	if (hot_head != NULL && pthread_create(&reader, NULL, hot_reader, NULL) != 0)
		return 1;
	printf("ready blocks=%zu\n", nblocks);
	fflush(stdout);
	char line[64];
	for (;;) {
		struct pollfd pfd = { 0, POLLIN, 0 };
		if (poll(&pfd, 1, 20) == 0) {
			free(malloc(1000 + (size_t)(mix((uint64_t)rand()) % 60000)));
			continue;
		}
		if (fgets(line, sizeof(line), stdin) == NULL)
			break;
		if (strncmp(line, "where", 5) == 0)
			where();
		else if (strncmp(line, "verify", 6) == 0)
			verify();
		else if (strncmp(line, "demoted", 7) == 0)
			demoted();
		else if (strncmp(line, "access", 6) == 0)
			access_counts();
		else if (strncmp(line, "grow ", 5) == 0)
			grow(line + 5);
		else if (strncmp(line, "quit", 4) == 0)
			break;
		else
			printf("unknown command\n");
		fflush(stdout);
	}
	stop = 1;
	if (hot_head != NULL)
		pthread_join(reader, NULL);
	return 0;
}
