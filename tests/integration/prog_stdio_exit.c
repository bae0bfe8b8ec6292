/* SPDX-License-Identifier: MIT */
/*
 * Output still buffered in stdio when the program ends must arrive. The C library flushes stdout
 * after every destructor has run; its buffer came from malloc, so the allocator's memory must
 * outlive its own destructor and memkind's (memkind's destructor once destroyed our arenas and
 * the last lines came out as zeros). The parent re-executes this program with stdout on a pipe
 * (fully buffered), in several ways of ending, and compares what arrives with what was printed.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prog.h"

#define NLINES 5000

static const char *const modes[] = { "return", "exit-thread", "big-buffer", "threads-alive" };
#define NMODES (sizeof(modes) / sizeof(modes[0]))

static int child_mode = -1;

static unsigned line_sum(unsigned i)
{
	return i * 2654435761u ^ 0x5bd1e995u;
}

/* Print lines with allocation in between, and free everything: the arenas may be empty when
 * the process ends, which is when an allocator might be tempted to give them back. */
static void print_lines(unsigned from, unsigned to)
{
	for (unsigned i = from; i < to; i++) {
		size_t n = 64 + (i * 7919u) % 300000;
		char *p = malloc(n);
		if (p == NULL)
			exit(2);
		p[0] = p[n - 1] = 1;
		printf("line %u %u\n", i, line_sum(i));
		free(p);
	}
}

__attribute__((destructor)) static void late_output(void)
{
	if (child_mode < 0)
		return;
	/* No fflush: this line too waits in the buffer until after the destructors. */
	printf("destructor %u\n", line_sum(NLINES));
}

static void *exit_thread(void *arg)
{
	print_lines(NLINES / 2, NLINES);
	exit(0); /* from a thread other than main, main still blocked in join */
	return arg;
}

static void *spin_thread(void *arg)
{
	for (unsigned i = 0;; i++) {
		char *p = malloc(16 + i % 100000);
		if (p != NULL)
			p[0] = 1;
		free(p);
	}
	return arg;
}

static int run_child(const char *mode)
{
	for (unsigned m = 0; m < NMODES; m++)
		if (strcmp(mode, modes[m]) == 0)
			child_mode = (int)m;
	if (child_mode < 0)
		return 2;
	if (strcmp(mode, "big-buffer") == 0) {
		/* Our own 1 MiB buffer (never freed, as setvbuf requires): all the output waits in
		 * it until exit. glibc would ignore the size of a buffer it allocates itself. */
		char *buf = malloc(1u << 20);
		if (buf == NULL || setvbuf(stdout, buf, _IOFBF, 1u << 20) != 0)
			return 2;
	}
	if (strcmp(mode, "exit-thread") == 0) {
		print_lines(0, NLINES / 2);
		pthread_t t;
		if (pthread_create(&t, NULL, exit_thread, NULL) != 0)
			return 2;
		pthread_join(t, NULL);
		return 3; /* not reached */
	}
	if (strcmp(mode, "threads-alive") == 0) {
		/* Threads still allocating while main returns and exit() runs. */
		for (int i = 0; i < 3; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, spin_thread, NULL) != 0)
				return 2;
			pthread_detach(t);
		}
	}
	print_lines(0, NLINES);
	return 0;
}

/* Everything the child prints, in order. */
static char *expected_output(size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	REQUIRE(f != NULL, "open_memstream");
	for (unsigned i = 0; i < NLINES; i++)
		fprintf(f, "line %u %u\n", i, line_sum(i));
	fprintf(f, "destructor %u\n", line_sum(NLINES));
	fclose(f);
	return buf;
}

static void run_parent(const char *mode, const char *expected, size_t expected_len)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[1]);
		execl("/proc/self/exe", "prog_stdio_exit", mode, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t cap = expected_len + 65536, len = 0;
	char *got = malloc(cap);
	REQUIRE(got != NULL, "malloc");
	for (;;) {
		ssize_t n = read(fds[0], got + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		REQUIRE(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		REQUIRE(len < cap, "%s: more output than expected", mode);
	}
	close(fds[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status 0x%x", mode, status);
	size_t same = 0;
	while (same < len && same < expected_len && got[same] == expected[same])
		same++;
	CHECK(len == expected_len && same == len,
	      "%s: got %zu bytes, expected %zu; first difference at byte %zu", mode, len,
	      expected_len, same);
	free(got);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return run_child(argv[1]);
	prog_expect_preload();
	size_t expected_len;
	char *expected = expected_output(&expected_len);
	for (int round = 0; round < 3; round++)
		for (unsigned m = 0; m < NMODES; m++)
			run_parent(modes[m], expected, expected_len);
	free(expected);
	printf("prog_stdio_exit: %u endings checked\n", (unsigned)NMODES);
	return prog_result("prog_stdio_exit");
}
