/* SPDX-License-Identifier: MIT */
/*
 * bench-malloc: cost of one free + malloc pair under a steady churn, for one allocator, one size
 * band and one thread count per run. Each thread keeps a ring of live slots and, at every step,
 * frees a random slot's object, allocates a new one of a random size and writes its first byte
 * (so that no compiler can drop the pair). Slot indices and sizes come from a fixed-seed
 * xorshift generator, computed before timing into a table small enough to stay in cache: the
 * generator's cost is not measured, and every allocator sees the same sequence.
 *
 * One process measures one cell, so that no allocator state (cached memory, glibc's dynamic mmap
 * threshold, jemalloc's arenas) carries over from another cell; bench/run-bench.sh runs the
 * cells, repeats them and takes medians. jemalloc is measured by running this program with
 * LD_PRELOAD=libjemalloc.so.2 and --alloc jemalloc (mimalloc and tcmalloc alike, with
 * libmimalloc.so.2 and libtcmalloc_minimal.so.4): the loop then calls the very same malloc/free
 * as the glibc run, and this program checks which library really serves them. tieralloc and
 * memkind runs must have no preload: tieralloc's large objects and memkind itself would not care,
 * but a pass-through tieralloc would then measure jemalloc.
 *
 * The program's own memory (rings, tables, thread stacks aside) is mmap'd so that the measured
 * allocator starts each cell with only the state of the process's start-up.
 *
 * --smoke instead checks, with few steps, that each allocator hands out usable, distinct memory
 * (exit 0 or 1); it is the only part that runs under `make check`.
 */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <memkind.h>

#include "tieralloc.h"

#define SEQ_LEN	     (1u << 16) /* steps before the sequence repeats: 256 KiB, stays in L2 */
#define SEQ_MASK     (SEQ_LEN - 1)
#define RING_DEFAULT 256
#define RING_MAX     256 /* the slot index is 8 bits of a table entry */
#define MAX_THREADS  64
#define MAX_SEGMENTS 32

enum alloc_id {
	A_GLIBC,
	A_JEMALLOC,
	A_TIERALLOC,
	A_MEMKIND,
	A_MEMKIND_DETECT,
	A_MIMALLOC,
	A_TCMALLOC,
	A_COUNT
};

static const char *const alloc_name[A_COUNT] = { "glibc",   "jemalloc",	      "tieralloc",
						 "memkind", "memkind-detect", "mimalloc",
						 "tcmalloc" };

/* The preloaded peers: their name as it appears in the path of the library serving malloc. */
static bool preloaded(enum alloc_id a)
{
	return a == A_JEMALLOC || a == A_MIMALLOC || a == A_TCMALLOC;
}

struct band {
	const char *name;
	uint32_t lo, hi; /* uniform sizes in [lo, hi] */
	uint64_t ops;	 /* default timed steps per thread */
};

/* Step counts keep every cell in the tens of milliseconds for the fast allocators. */
static const struct band bands[] = {
	{ "small", 16, 512, 2000000 },
	/* Issue 33's second small-object measurement: every small class, packed ones included. */
	{ "mixed", 16, 16384, 1000000 },
	{ "medium", 1024, 65536, 250000 },
	{ "large", 1u << 20, 1u << 20, 50000 },
};
#define NBANDS (sizeof(bands) / sizeof(bands[0]))

struct worker {
	pthread_t thread;
	enum alloc_id alloc;
	unsigned id;
	unsigned ring_size;
	uint64_t warmup;
	unsigned nseg; /* timed segments, each seg_ops steps */
	uint64_t seg_ops;
	uint64_t smoke_ops; /* smoke: steps after filling the ring */
	uint32_t *seq;	    /* size << 8 | slot */
	void **ring;
	uint32_t size[RING_MAX];   /* smoke: the size each slot's object was allocated with */
	uint64_t serial[RING_MAX]; /* smoke: and its allocation's serial number */
	double t0[MAX_SEGMENTS], t1[MAX_SEGMENTS]; /* CLOCK_MONOTONIC ns */
	double cpu;				   /* share of the timed spans spent on a CPU */
	int failed;
} __attribute__((aligned(64)));

/*
 * Segment starts use a spinning barrier: with a sleeping one (pthread_barrier_wait), a waiter
 * needs a wake-up, and on this VM waking an idle vCPU takes about as long as a whole segment,
 * so the threads would run their segments one after the other instead of together.
 */
struct spin_barrier {
	_Atomic unsigned arrived;
	_Atomic unsigned generation;
	unsigned parties;
};

static struct spin_barrier start_barrier;
static pthread_barrier_t stop_barrier;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

static void spin_barrier_wait(struct spin_barrier *b)
{
	unsigned gen = atomic_load_explicit(&b->generation, memory_order_acquire);
	if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->parties) {
		atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
		return;
	}
	for (unsigned long spins = 0;
	     atomic_load_explicit(&b->generation, memory_order_acquire) == gen; spins++) {
		cpu_relax();
		/* Let a descheduled partner run when the machine has fewer free CPUs than us. */
		if ((spins & 0xffff) == 0xffff)
			sched_yield();
	}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench-malloc: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* Memory for the benchmark itself, kept away from the allocator under test. */
static void *bench_map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap %zu bytes: %s", size, strerror(errno));
	return p;
}

static double clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* The step table: each entry packs the slot to replace and the new object's size. */
static uint32_t *make_seq(const struct band *b, unsigned ring_size, unsigned thread_id)
{
	uint32_t *seq = bench_map(SEQ_LEN * sizeof(uint32_t));
	uint64_t s = 0x9e3779b97f4a7c15ull * (thread_id + 1); /* fixed, different per thread */
	uint32_t span = b->hi - b->lo + 1;
	for (unsigned i = 0; i < SEQ_LEN; i++) {
		uint64_t r = xorshift64(&s);
		uint32_t slot = (uint32_t)(r % ring_size);
		uint32_t size = b->lo + (uint32_t)((r >> 32) % span);
		seq[i] = size << 8 | slot;
	}
	return seq;
}

/*
 * One loop per allocator, stamped out by a macro so that each calls its allocator directly:
 * a function pointer would add an indirect call that the allocators' own callers never pay.
 * Every call still goes through the PLT, as it does in any program linking the library.
 */
#define DEFINE_CHURN(fn, ALLOC, FREE)                                                              \
	static void fn(void **ring, const uint32_t *seq, uint64_t from, uint64_t n)                \
	{                                                                                          \
		for (uint64_t i = from; i < from + n; i++) {                                       \
			uint32_t e = seq[i & SEQ_MASK];                                            \
			void **slot = &ring[e & 0xff];                                             \
			size_t size = e >> 8;                                                      \
			FREE(*slot);                                                               \
			char *p = ALLOC(size);                                                     \
			if (__builtin_expect(p == NULL, 0))                                        \
				die("%s(%zu) returned NULL", #ALLOC, size);                        \
			*(volatile char *)p = (char)i;                                             \
			*slot = p;                                                                 \
		}                                                                                  \
	}

#define LIBC_ALLOC(n)	  malloc(n)
#define LIBC_FREE(p)	  free(p)
#define TA_ALLOC(n)	  tieralloc_malloc(n)
#define TA_FREE(p)	  tieralloc_free(p)
#define MK_ALLOC(n)	  memkind_malloc(MEMKIND_REGULAR, n)
#define MK_FREE(p)	  memkind_free(MEMKIND_REGULAR, p)
#define MK_FREE_DETECT(p) memkind_free(NULL, p)

DEFINE_CHURN(churn_libc, LIBC_ALLOC, LIBC_FREE)
DEFINE_CHURN(churn_tieralloc, TA_ALLOC, TA_FREE)
DEFINE_CHURN(churn_memkind, MK_ALLOC, MK_FREE)
DEFINE_CHURN(churn_memkind_detect, MK_ALLOC, MK_FREE_DETECT)

static void churn(enum alloc_id a, void **ring, const uint32_t *seq, uint64_t from, uint64_t n)
{
	switch (a) {
	case A_GLIBC:
	case A_JEMALLOC:
	case A_MIMALLOC:
	case A_TCMALLOC:
		churn_libc(ring, seq, from, n);
		break;
	case A_TIERALLOC:
		churn_tieralloc(ring, seq, from, n);
		break;
	case A_MEMKIND:
		churn_memkind(ring, seq, from, n);
		break;
	case A_MEMKIND_DETECT:
		churn_memkind_detect(ring, seq, from, n);
		break;
	default:
		abort();
	}
}

static void *any_alloc(enum alloc_id a, size_t n)
{
	switch (a) {
	case A_TIERALLOC:
		return tieralloc_malloc(n);
	case A_MEMKIND:
	case A_MEMKIND_DETECT:
		return memkind_malloc(MEMKIND_REGULAR, n);
	default:
		return malloc(n);
	}
}

static void any_free(enum alloc_id a, void *p)
{
	switch (a) {
	case A_TIERALLOC:
		tieralloc_free(p);
		break;
	case A_MEMKIND:
		memkind_free(MEMKIND_REGULAR, p);
		break;
	case A_MEMKIND_DETECT:
		memkind_free(NULL, p);
		break;
	default:
		free(p);
	}
}

/* Fill the ring, then churn untimed: caches, arenas and page mappings reach steady state. */
static void warm_up(struct worker *w)
{
	for (unsigned s = 0; s < w->ring_size; s++) {
		w->ring[s] = any_alloc(w->alloc, w->seq[s] >> 8);
		if (w->ring[s] == NULL)
			die("%s: warm-up allocation failed", alloc_name[w->alloc]);
		*(volatile char *)w->ring[s] = 1;
	}
	churn(w->alloc, w->ring, w->seq, 0, w->warmup);
}

static void drain(struct worker *w)
{
	for (unsigned s = 0; s < w->ring_size; s++) {
		any_free(w->alloc, w->ring[s]);
		w->ring[s] = NULL;
	}
}

/* The timed part; with threads, every segment starts when all threads are ready for it. */
static void timed_segments(struct worker *w, bool sync)
{
	double busy = 0, cpu = 0;
	for (unsigned s = 0; s < w->nseg; s++) {
		if (sync)
			spin_barrier_wait(&start_barrier);
		w->t0[s] = now_ns();
		double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		churn(w->alloc, w->ring, w->seq, w->warmup + s * w->seg_ops, w->seg_ops);
		cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		w->t1[s] = now_ns();
		busy += w->t1[s] - w->t0[s];
	}
	/* Time on a CPU over time spent: below 1 when the machine ran something else instead. */
	w->cpu = cpu / busy;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	warm_up(w);
	timed_segments(w, true);
	/* Nobody frees its ring (and maybe flushes caches) while another is still timed. */
	pthread_barrier_wait(&stop_barrier);
	drain(w);
	return NULL;
}

/* The library that serves this process's malloc, as the dynamic linker resolved it. */
static const char *malloc_provider(void)
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "malloc");
	if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
		return "?";
	return info.dli_fname;
}

/* malloc as a program linked with libc gets it (valgrind's preload counts: it only forwards). */
static bool libc_malloc(void)
{
	const char *lib = malloc_provider();
	return strstr(lib, "libc.so") != NULL || strstr(lib, "vgpreload") != NULL;
}

/* Refuse to time something other than what the row's name says. */
static void check_identity(enum alloc_id a)
{
	const char *lib = malloc_provider();
	switch (a) {
	case A_GLIBC:
		if (!libc_malloc())
			die("glibc run, but malloc comes from %s (unset LD_PRELOAD)", lib);
		break;
	case A_JEMALLOC:
	case A_MIMALLOC:
	case A_TCMALLOC:
		if (strstr(lib, alloc_name[a]) == NULL)
			die("%s run, but malloc comes from %s (preload lib%s)", alloc_name[a], lib,
			    a == A_JEMALLOC   ? "jemalloc.so.2"
			    : a == A_MIMALLOC ? "mimalloc.so.2"
					      : "tcmalloc_minimal.so.4");
		break;
	case A_TIERALLOC: {
		uint32_t pass = 1;
		size_t len = sizeof(pass);
		if (!libc_malloc())
			die("tieralloc run, but malloc comes from %s: tieralloc must not share the "
			    "process with another malloc",
			    lib);
		if (tieralloc_ctl_get("passthrough", &pass, &len) != 0 || pass != 0)
			die("tieralloc is in pass-through mode (TIERALLOC_DISABLE? no memkind?)");
		break;
	}
	default:
		if (!libc_malloc())
			die("memkind run, but malloc comes from %s", lib);
		if (memkind_check_available(MEMKIND_REGULAR) != 0)
			die("MEMKIND_REGULAR is not available here");
	}
}

struct cell_result {
	double best;	/* ns per pair per thread, fastest segment */
	double median;	/* ns per pair per thread, median segment */
	double mean;	/* ns per pair per thread, all segments together */
	double slowest; /* the slowest thread alone, all segments together */
	double cpu;	/* lowest share of its timed spans a thread spent on a CPU */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static struct cell_result run_cell(enum alloc_id a, const struct band *b, unsigned nthreads,
				   unsigned ring, uint64_t warmup, unsigned nseg, uint64_t seg_ops)
{
	struct worker *w = bench_map(nthreads * sizeof(*w));
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].alloc = a;
		w[i].id = i;
		w[i].ring_size = ring;
		w[i].warmup = warmup;
		w[i].nseg = nseg;
		w[i].seg_ops = seg_ops;
		w[i].seq = make_seq(b, ring, i);
		w[i].ring = bench_map(RING_MAX * sizeof(void *));
	}
	if (nthreads == 1) {
		/* In the main thread, with no thread ever created: a single-threaded program's
		 * malloc (glibc skips its atomics until a second thread exists). */
		warm_up(&w[0]);
		timed_segments(&w[0], false);
		drain(&w[0]);
	} else {
		atomic_store(&start_barrier.arrived, 0);
		start_barrier.parties = nthreads;
		pthread_barrier_init(&stop_barrier, NULL, nthreads);
		for (unsigned i = 0; i < nthreads; i++) {
			int err = pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
			if (err != 0)
				die("pthread_create: %s", strerror(err));
		}
		for (unsigned i = 0; i < nthreads; i++)
			pthread_join(w[i].thread, NULL);
		pthread_barrier_destroy(&stop_barrier);
	}
	/*
	 * A segment's wall time runs from the first thread's start to the last one's end, read
	 * from the workers' own clocks: a main thread woken after the segment could wait for a
	 * core and read the clock late.
	 */
	double seg_ns[MAX_SEGMENTS], total = 0, slowest = 0;
	for (unsigned s = 0; s < nseg; s++) {
		double first = w[0].t0[s], last = w[0].t1[s];
		for (unsigned i = 1; i < nthreads; i++) {
			first = w[i].t0[s] < first ? w[i].t0[s] : first;
			last = w[i].t1[s] > last ? w[i].t1[s] : last;
		}
		seg_ns[s] = (last - first) / (double)seg_ops;
		total += last - first;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		double own = 0;
		for (unsigned s = 0; s < nseg; s++)
			own += w[i].t1[s] - w[i].t0[s];
		slowest = own > slowest ? own : slowest;
	}
	struct cell_result r;
	r.cpu = w[0].cpu;
	for (unsigned i = 1; i < nthreads; i++)
		r.cpu = w[i].cpu < r.cpu ? w[i].cpu : r.cpu;
	r.mean = total / (double)(seg_ops * nseg);
	r.slowest = slowest / (double)(seg_ops * nseg);
	qsort(seg_ns, nseg, sizeof(double), cmp_double);
	r.best = seg_ns[0];
	r.median = nseg % 2 ? seg_ns[nseg / 2] : (seg_ns[nseg / 2 - 1] + seg_ns[nseg / 2]) / 2;
	for (unsigned i = 0; i < nthreads; i++) {
		munmap(w[i].seq, SEQ_LEN * sizeof(uint32_t));
		munmap(w[i].ring, RING_MAX * sizeof(void *));
	}
	munmap(w, nthreads * sizeof(*w));
	return r;
}

/* ---- smoke mode: usable, distinct memory from every allocator ---- */

/* A block's contents: unique per allocation (serial), so that two live blocks sharing memory
 * cannot both keep theirs. */
static uint64_t tag_of(uint64_t serial)
{
	uint64_t x = serial + 0x9e3779b97f4a7c15ull; /* splitmix64's finaliser */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Fill small and medium blocks whole; large ones over their first 4 KiB, then one word every
 * 64 KiB and at the end (enough to see a block that overlaps another or is not writable). */
static void stamp(unsigned char *p, size_t size, uint64_t serial, bool check, const char *who,
		  int *failed)
{
	uint64_t tag = tag_of(serial);
	unsigned char byte = (unsigned char)(tag >> 56) | 1;
	size_t whole = size <= 65536 ? size : 4096;
	for (size_t i = 0; i < whole; i++) {
		if (check && p[i] != byte) {
			fprintf(stderr, "smoke: %s: block %p (%zu B) byte %zu changed\n", who,
				(void *)p, size, i);
			*failed = 1;
			return;
		}
		p[i] = byte;
	}
	for (size_t off = whole; off + 8 <= size; off += 65536) {
		uint64_t v;
		memcpy(&v, p + off, 8);
		if (check && v != tag) {
			fprintf(stderr, "smoke: %s: block %p (%zu B) word at %zu changed\n", who,
				(void *)p, size, off);
			*failed = 1;
			return;
		}
		memcpy(p + off, &tag, 8);
	}
	uint64_t last;
	memcpy(&last, p + size - 8, 8);
	if (size > whole && check && last != tag) {
		fprintf(stderr, "smoke: %s: block %p (%zu B) tail changed\n", who, (void *)p, size);
		*failed = 1;
		return;
	}
	if (size > whole)
		memcpy(p + size - 8, &tag, 8);
}

static int check_block(enum alloc_id a, void *p, size_t size)
{
	if (p == NULL) {
		fprintf(stderr, "smoke: %s: allocation of %zu B failed\n", alloc_name[a], size);
		return 1;
	}
	if (((uintptr_t)p & 15) != 0) {
		fprintf(stderr, "smoke: %s: %p is not 16-byte aligned\n", alloc_name[a], p);
		return 1;
	}
	if (a == A_TIERALLOC && tieralloc_tier_of(p) != 0) {
		fprintf(stderr, "smoke: tieralloc: tier_of(%p) = %d, want 0\n", p,
			tieralloc_tier_of(p));
		return 1;
	}
	return 0;
}

static void *smoke_worker(void *arg)
{
	struct worker *w = arg;
	const char *who = alloc_name[w->alloc];
	for (unsigned s = 0; s < w->ring_size && !w->failed; s++) {
		size_t size = w->seq[s] >> 8;
		void *p = any_alloc(w->alloc, size);
		w->failed = check_block(w->alloc, p, size);
		if (!w->failed)
			stamp(p, size, s, false, who, &w->failed);
		w->ring[s] = p;
		w->size[s] = (uint32_t)size;
		w->serial[s] = s;
	}
	for (uint64_t i = 0; i < w->smoke_ops && !w->failed; i++) {
		uint32_t e = w->seq[(w->ring_size + i) & SEQ_MASK];
		unsigned s = e & 0xff;
		stamp(w->ring[s], w->size[s], w->serial[s], true, who, &w->failed);
		any_free(w->alloc, w->ring[s]);
		w->ring[s] = NULL;
		size_t size = e >> 8;
		void *p = any_alloc(w->alloc, size);
		if (w->failed || check_block(w->alloc, p, size) != 0) {
			w->failed = 1;
			break;
		}
		stamp(p, size, w->ring_size + i, false, who, &w->failed);
		w->ring[s] = p;
		w->size[s] = (uint32_t)size;
		w->serial[s] = w->ring_size + i;
	}
	for (unsigned s = 0; s < w->ring_size; s++) {
		if (w->ring[s] == NULL)
			continue;
		if (!w->failed)
			stamp(w->ring[s], w->size[s], w->serial[s], true, who, &w->failed);
		any_free(w->alloc, w->ring[s]);
	}
	return NULL;
}

static int smoke(enum alloc_id a)
{
	const unsigned ring = 64;
	int failed = 0;
	if (preloaded(a) && strstr(malloc_provider(), alloc_name[a]) == NULL) {
		fprintf(stderr, "smoke: %s: malloc comes from %s\n", alloc_name[a],
			malloc_provider());
		return 1;
	}
	if (a == A_MEMKIND || a == A_MEMKIND_DETECT) {
		if (memkind_check_available(MEMKIND_REGULAR) != 0) {
			fprintf(stderr, "smoke: MEMKIND_REGULAR unavailable\n");
			return 1;
		}
	}
	for (unsigned b = 0; b < NBANDS && !failed; b++) {
		for (unsigned nthreads = 1; nthreads <= 2 && !failed; nthreads++) {
			struct worker w[2];
			memset(w, 0, sizeof(w));
			for (unsigned i = 0; i < nthreads; i++) {
				w[i].alloc = a;
				w[i].ring_size = ring;
				w[i].smoke_ops = 200;
				w[i].seq = make_seq(&bands[b], ring, i);
				w[i].ring = bench_map(RING_MAX * sizeof(void *));
				if (pthread_create(&w[i].thread, NULL, smoke_worker, &w[i]) != 0)
					die("pthread_create failed");
			}
			for (unsigned i = 0; i < nthreads; i++) {
				pthread_join(w[i].thread, NULL);
				failed |= w[i].failed;
				munmap(w[i].seq, SEQ_LEN * sizeof(uint32_t));
				munmap(w[i].ring, RING_MAX * sizeof(void *));
			}
			printf("smoke: %-14s %-6s threads=%u %s\n", alloc_name[a], bands[b].name,
			       nthreads, failed ? "FAIL" : "ok");
		}
	}
	return failed;
}

/* ---- command line ---- */

static void info(void)
{
	const char *jv = "-";
	int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	size_t len = sizeof(jv);
	if (mallctl == NULL || mallctl("version", &jv, &len, NULL, 0) != 0)
		jv = "-";
	/* The other peers, when preloaded: mi_version() is 209 for 2.0.9, tc_version a string. */
	char mv[32] = "-";
	int (*mi_version)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "mi_version");
	if (mi_version != NULL) {
		int v = mi_version();
		snprintf(mv, sizeof(mv), "%d.%d.%d", v / 100, v / 10 % 10, v % 10);
	}
	const char *tv = "-";
	const char *(*tc_version)(int *, int *, const char **) =
	    (const char *(*)(int *, int *, const char **))dlsym(RTLD_DEFAULT, "tc_version");
	if (tc_version != NULL) {
		int major, minor;
		const char *patch;
		tv = tc_version(&major, &minor, &patch);
		const char *sp = tv != NULL ? strrchr(tv, ' ') : NULL; /* "gperftools 2.10" */
		tv = sp != NULL ? sp + 1 : tv != NULL ? tv : "?";
	}
	int mk = memkind_get_version();
	printf("malloc=%s glibc=%s jemalloc=%s mimalloc=%s tcmalloc=%s memkind=%d.%d.%d "
	       "tieralloc=%s sanitizer=%s\n",
	       malloc_provider(), gnu_get_libc_version(), jv, mv, tv, mk / 1000000,
	       mk / 1000 % 1000, mk % 1000, tieralloc_version(),
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	       "yes"
#else
	       "no"
#endif
	);
}

static void usage(FILE *f)
{
	fputs(
	    "usage: bench-malloc --alloc A --band B [--threads N] [--ops N] [--segments N]\n"
	    "                    [--warmup N] [--ring N]\n"
	    "       bench-malloc --smoke [--alloc A]...\n"
	    "       bench-malloc --info\n"
	    "A: glibc jemalloc mimalloc tcmalloc tieralloc memkind memkind-detect\n"
	    "   (jemalloc, mimalloc, tcmalloc: run with LD_PRELOAD=libjemalloc.so.2,\n"
	    "   libmimalloc.so.2, libtcmalloc_minimal.so.4; the others without a preload)\n"
	    "B: small (16-512 B), mixed (16 B-16 KiB), medium (1-64 KiB), large (1 MiB)\n"
	    "--ops: timed steps per thread, cut into --segments (default 20) timed separately.\n"
	    "Prints one line; ns= is the fastest segment's wall time per step per thread,\n"
	    "ns_median= the median segment's, ns_mean= all segments', slowest_thread= the slowest\n"
	    "thread's own time per step, oncpu= the lowest share of its timed spans a thread\n"
	    "actually ran (1.00 on an idle machine).\n",
	    f);
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		die("bad %s: \"%s\"", what, s);
	return v;
}

static int parse_alloc(const char *s)
{
	for (int a = 0; a < A_COUNT; a++)
		if (strcmp(s, alloc_name[a]) == 0)
			return a;
	die("unknown allocator \"%s\"", s);
}

int main(int argc, char **argv)
{
	int alloc = -1, smoke_mode = 0;
	int smoke_allocs[A_COUNT], nsmoke = 0;
	const struct band *band = NULL;
	unsigned nthreads = 1, ring = RING_DEFAULT;
	uint64_t ops = 0, warmup = UINT64_MAX, nseg = 20;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(arg, "--smoke") == 0) {
			smoke_mode = 1;
			continue;
		}
		if (strcmp(arg, "--info") == 0) {
			info();
			return 0;
		}
		if (strcmp(arg, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (val == NULL) {
			usage(stderr);
			return 2;
		}
		i++;
		if (strcmp(arg, "--alloc") == 0) {
			alloc = parse_alloc(val);
			if (nsmoke < A_COUNT)
				smoke_allocs[nsmoke++] = alloc;
		} else if (strcmp(arg, "--band") == 0) {
			for (unsigned b = 0; b < NBANDS; b++)
				if (strcmp(val, bands[b].name) == 0)
					band = &bands[b];
			if (band == NULL)
				die("unknown band \"%s\"", val);
		} else if (strcmp(arg, "--threads") == 0) {
			nthreads = (unsigned)parse_u64(val, "thread count");
		} else if (strcmp(arg, "--ops") == 0) {
			ops = parse_u64(val, "step count");
		} else if (strcmp(arg, "--segments") == 0) {
			nseg = parse_u64(val, "segment count");
		} else if (strcmp(arg, "--warmup") == 0) {
			warmup = parse_u64(val, "warm-up step count");
		} else if (strcmp(arg, "--ring") == 0) {
			ring = (unsigned)parse_u64(val, "ring size");
		} else {
			usage(stderr);
			return 2;
		}
	}

	if (smoke_mode) {
		if (nsmoke == 0) {
			/* Everything this process can serve without a preload. */
			smoke_allocs[nsmoke++] = A_GLIBC;
			smoke_allocs[nsmoke++] = A_TIERALLOC;
			smoke_allocs[nsmoke++] = A_MEMKIND;
			smoke_allocs[nsmoke++] = A_MEMKIND_DETECT;
		}
		int failed = 0;
		for (int i = 0; i < nsmoke; i++)
			failed |= smoke((enum alloc_id)smoke_allocs[i]);
		return failed ? 1 : 0;
	}

	if (alloc < 0 || band == NULL) {
		usage(stderr);
		return 2;
	}
	if (nthreads < 1 || nthreads > MAX_THREADS)
		die("threads must be 1..%d", MAX_THREADS);
	if (ring < 1 || ring > RING_MAX)
		die("ring must be 1..%d", RING_MAX);
	if (nseg < 1 || nseg > MAX_SEGMENTS)
		die("segments must be 1..%d", MAX_SEGMENTS);
	if (ops == 0)
		ops = band->ops;
	if (ops < nseg)
		ops = nseg;
	if (warmup == UINT64_MAX)
		warmup = ops / 4 > 4u * ring ? ops / 4 : 4u * ring;
	check_identity((enum alloc_id)alloc);

	struct cell_result r = run_cell((enum alloc_id)alloc, band, nthreads, ring, warmup,
					(unsigned)nseg, ops / nseg);
	printf("alloc=%s band=%s threads=%u ops=%" PRIu64 " segments=%u ns=%.2f ns_median=%.2f "
	       "ns_mean=%.2f slowest_thread=%.2f oncpu=%.2f\n",
	       alloc_name[alloc], band->name, nthreads, ops / nseg * nseg, (unsigned)nseg, r.best,
	       r.median, r.mean, r.slowest, r.cpu);
	return 0;
}
