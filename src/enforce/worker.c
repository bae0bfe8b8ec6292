/* SPDX-License-Identifier: MIT */
/*
 * The per-process enforcement thread (TIERALLOC_ENFORCE=deferred, the default): started on first
 * need from an allocation slow path with no allocator lock held, it runs an enforcement pass
 * every period, or at once when kicked: by the program's threads (a tier ran out), by another
 * process of the cgroup (a fresh reading to act on) or by the agent (the kernel promoted into a
 * tier at its share). It sleeps on its slot's word in the segment, a shared futex, so that the
 * others can wake it; on a private word without a segment. It blocks every signal, so that the
 * program's handlers keep running on the program's threads, and allocates nothing.
 *
 * After fork the child has no worker (threads do not survive fork); the next need starts one.
 */
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "enforce/enforce.h"

enum { WORKER_NONE = 0, WORKER_RUNNING = 1, WORKER_FAILED = 2 };
static _Atomic int worker_state;

/* Once an access period, while the program has mappings of its own recorded (api/maps.c), and
 * no more often than keeps the samples within 2% of the worker's time, as the access sampler's
 * budget: a sample that took c waits at least 49 c after it ends. */
static void maps_tick(void)
{
	static uint64_t next;
	uint64_t now = ta_monotonic_ns();
	if (!ta_opts.maps || now < next ||
	    !atomic_load_explicit(&ta_maps_recorded, memory_order_relaxed))
		return;
	uint64_t period = ta_opts.access_period_ms * 1000000ull;
	if (!ta_maps_sample(false))
		return;
	uint64_t took = atomic_load(&ta_maps_sample_ns), end = ta_monotonic_ns();
	next = now + period;
	if (end + 49 * took > next)
		next = end + 49 * took;
}

static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		int flags;
		_Atomic uint32_t *word = ta_shm_wake_word(&flags);
		uint32_t seen = atomic_load(word);
		ta_charge_kick_taken();
		atomic_store(&ta_limits_wanted, false);
		/* A worker started only because the limits went stale (nothing to enforce yet,
		 * TIERALLOC_ENFORCE=inline, or enforcement and the gate both off) keeps the limits
		 * fresh and nothing else: it takes no alarm and acts on no reading. */
		if (ta_enforce_worker_passes()) {
			ta_access_tick(); /* heats first, so that the pass ranks by them */
			ta_enforce_pass();
		} else if (ta_quota_active())
			ta_shm_refresh_limits(false);
		maps_tick();	  /* where the program's own mappings are resident */
		ta_keep_age();	  /* freed large objects kept a second with nothing kept since */
		ta_arena_decay(); /* runs empty for a second */
		uint64_t ns = TA_ENFORCE_PERIOD_NS;
		struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
		syscall(SYS_futex, word, FUTEX_WAIT | flags, seen, &ts, NULL, 0);
	}
	return NULL;
}

void ta_worker_start(void)
{
	int expect = WORKER_NONE;
	if (atomic_load_explicit(&worker_state, memory_order_relaxed) != WORKER_NONE ||
	    !atomic_compare_exchange_strong(&worker_state, &expect, WORKER_RUNNING))
		return;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	sigset_t all, old;
	sigfillset(&all);
	/* Except SIGBUS: the kernel kills the process for a fault whose signal is blocked, and the
	 * worker touches the shared segment, which a truncation turns into SIGBUS (shm.c). */
	sigdelset(&all, SIGBUS);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the new thread */
	pthread_t tid;
	int rc = pthread_create(&tid, &attr, worker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		atomic_store(&worker_state, WORKER_FAILED);
		ta_log(TA_LOG_WARN,
		       "enforcement: cannot start the worker thread (%d); quotas are steered but "
		       "not enforced (TIERALLOC_ENFORCE=inline does without it)",
		       rc);
		return;
	}
	pthread_setname_np(tid, "tieralloc");
}

void ta_worker_fork_child(void)
{
	atomic_store(&worker_state, WORKER_NONE);
	ta_access_fork_child();
}
