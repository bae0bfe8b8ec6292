/* SPDX-License-Identifier: MIT */
/*
 * The allocator's lock order (alloc/alloc.h, enum ta_lock_rank): debug builds (--enable-debug)
 * stop a thread that takes a lock while it holds one of the same or a later rank; release builds
 * take the mutexes and check nothing. The whole test suite also runs in a debug build
 * (tests/run-all.sh), so every path the tests take is checked against the order.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "test.h"

static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER, inner = PTHREAD_MUTEX_INITIALIZER;

/* In a child: take inner (rank b) while holding outer (rank a); its wait status. */
static int nested_in_child(enum ta_lock_rank a, enum ta_lock_rank b)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(STDERR_FILENO); /* the assertion's line is expected */
		ta_lock(&outer, a);
		ta_lock(&inner, b);
		ta_unlock(&inner, b);
		ta_unlock(&outer, a);
		_exit(0);
	}
	int status = -1;
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		test_hard("fork/waitpid");
	return status;
}

int main(void)
{
	test_context("in order");
	int st = nested_in_child(TA_RANK_BIN, TA_RANK_CHUNK);
	expect_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = nested_in_child(TA_RANK_BIN, TA_RANK_BIN_HIGH);
	expect_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = nested_in_child(TA_RANK_SHARD, TA_RANK_HEAP);
	expect_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#ifdef TA_DEBUG
	test_context("out of order: stopped");
	st = nested_in_child(TA_RANK_HEAP, TA_RANK_SHARD);
	expect_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	st = nested_in_child(TA_RANK_CHUNK, TA_RANK_BIN);
	expect_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	st = nested_in_child(TA_RANK_BIN, TA_RANK_BIN);
	expect_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
#else
	printf("release build: the order is checked in debug builds (--enable-debug) only\n");
	test_context("out of order: not checked");
	st = nested_in_child(TA_RANK_HEAP, TA_RANK_SHARD);
	expect_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
	test_context("%s", "");
	return test_done();
}
