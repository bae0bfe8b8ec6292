/* SPDX-License-Identifier: MIT */
/*
 * The per-process enforcement thread (TIERALLOC_ENFORCE=deferred, the default): started on first
 * need from an allocation slow path with no allocator lock held, it runs an enforcement pass
 * every period, or at once when kicked (a tier ran out). It blocks every signal, so that the
 * program's handlers keep running on the program's threads, and allocates nothing.
 *
 * After fork the child has no worker (threads do not survive fork); the next need starts one.
 */
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

enum { WORKER_NONE = 0, WORKER_RUNNING = 1, WORKER_FAILED = 2 };
static _Atomic int worker_state;
static _Atomic uint32_t kick_seq;
/* Set by a kick, cleared when a pass starts: every thread that finds a tier full kicks, and one
 * wake-up per pass is enough (no futex call on each of their slow paths). */
static _Atomic bool kick_pending;

static void wait_kick(uint32_t seen, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	syscall(SYS_futex, &kick_seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint32_t seen = atomic_load(&kick_seq);
		atomic_store(&kick_pending, false);
		ta_enforce_pass();
		wait_kick(seen, TA_ENFORCE_PERIOD_NS);
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

void ta_worker_kick(void)
{
	if (atomic_load_explicit(&worker_state, memory_order_relaxed) != WORKER_RUNNING ||
	    atomic_load_explicit(&kick_pending, memory_order_relaxed) ||
	    atomic_exchange(&kick_pending, true))
		return;
	atomic_fetch_add(&kick_seq, 1);
	syscall(SYS_futex, &kick_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ta_worker_fork_child(void)
{
	atomic_store(&worker_state, WORKER_NONE);
}
