/* SPDX-License-Identifier: MIT */
/*
 * Start-up cost of a preload: how long a command takes from spawn to exit with no preload and
 * under each library given, the runs interleaved so that load hits every variant alike.
 *   startup-time [-n RUNS] [--preload NAME=PATH]... -- CMD [ARGS...]
 * Prints per variant the median, the fastest and the slowest run in milliseconds, and the median's
 * difference and ratio against no preload. CMD's output goes to /dev/null.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { MAX_VARIANTS = 8 };

struct variant {
	const char *name;
	const char *preload; /* NULL: none */
	double *ms;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* environ without LD_PRELOAD, plus LD_PRELOAD=preload when there is one. */
static char **env_with(const char *preload, char *entry, size_t entry_size)
{
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 2, sizeof(*env));
	if (env == NULL)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
			env[k++] = environ[i];
	if (preload != NULL) {
		snprintf(entry, entry_size, "LD_PRELOAD=%s", preload);
		env[k++] = entry;
	}
	env[k] = NULL;
	return env;
}

static double run_once(char **argv, char **env)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, env) != 0) {
		perror("startup-time: spawn");
		exit(1);
	}
	int status;
	waitpid(pid, &status, 0);
	double t = now_ms() - t0;
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(status)) {
		fprintf(stderr, "startup-time: %s did not exit normally\n", argv[0]);
		exit(1);
	}
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int runs = 20, nv = 1, i;
	struct variant v[MAX_VARIANTS] = { { "none", NULL, NULL } };
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--preload") == 0 && i + 1 < argc && nv < MAX_VARIANTS) {
			char *eq = strchr(argv[++i], '=');
			if (eq == NULL) {
				fprintf(stderr, "startup-time: --preload NAME=PATH\n");
				return 2;
			}
			*eq = '\0';
			v[nv].name = argv[i];
			v[nv].preload = eq + 1;
			nv++;
		} else {
			fprintf(stderr, "startup-time: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (i + 1 >= argc || runs < 1) {
		fprintf(stderr,
			"usage: startup-time [-n RUNS] [--preload NAME=PATH]... -- CMD [ARGS]\n");
		return 2;
	}
	char **cmd = argv + i + 1;
	static char entries[MAX_VARIANTS][4096];
	char **envs[MAX_VARIANTS];
	for (int k = 0; k < nv; k++) {
		envs[k] = env_with(v[k].preload, entries[k], sizeof(entries[k]));
		v[k].ms = calloc((size_t)runs, sizeof(double));
		if (envs[k] == NULL || v[k].ms == NULL)
			return 1;
		run_once(cmd, envs[k]); /* warm the page cache */
	}
	for (int r = 0; r < runs; r++)
		for (int k = 0; k < nv; k++) {
			int j = (k + r) % nv; /* rotate the order */
			v[j].ms[r] = run_once(cmd, envs[j]);
		}
	double base = 0;
	printf("%-12s %9s %9s %9s %10s %7s   (%d runs of:", "preload", "median", "min", "max",
	       "vs none", "ratio", runs);
	for (char **a = cmd; *a != NULL; a++)
		printf(" %s", *a);
	printf(")\n");
	for (int k = 0; k < nv; k++) {
		qsort(v[k].ms, (size_t)runs, sizeof(double), cmp_double);
		double med =
		    runs % 2 ? v[k].ms[runs / 2] : (v[k].ms[runs / 2 - 1] + v[k].ms[runs / 2]) / 2;
		if (k == 0)
			base = med;
		printf("%-12s %7.2fms %7.2fms %7.2fms %+8.2fms %7.2f\n", v[k].name, med, v[k].ms[0],
		       v[k].ms[runs - 1], med - base, med / base);
	}
	return 0;
}
