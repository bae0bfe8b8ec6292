/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-run: run a program under tieralloc (LD_PRELOAD) and print a per-tier summary of every
 * process it started when it exits, like numactl or memkind's memtier. With no program, runs a
 * short built-in workload (tieralloc-demo) that shows where objects were placed.
 *
 *   tieralloc-run [-t SPEC] [-l SPEC] [-c] [-q] [-v] [-h] [--version] [--] [CMD [ARGS...]]
 *
 * The command runs as a child with LD_PRELOAD prepended and TIERALLOC_SUMMARY naming a temporary
 * file, to which every process that loaded the preload appends one line per tier at exit
 * (src/api/summary.c). The wrapper adds them up per tier on stderr and then ends as the command
 * did: with its exit status, or killed by the same signal.
 *
 * Exit status: the command's; 126 if it cannot be executed, 127 if it is not found (no summary
 * then); 2 for a usage error or when the preload library is not found.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "units.h"

#ifndef TA_LIBDIR
#define TA_LIBDIR "/usr/local/lib"
#endif
#ifndef TA_LIBEXECDIR
#define TA_LIBEXECDIR "/usr/local/libexec"
#endif

#define PRELOAD_NAME "libtieralloc-preload.so"
#define MAX_TIERS    64
#define MAX_NODES    1024

static void usage(FILE *f)
{
	fputs("usage: tieralloc-run [options] [-- CMD [ARGS...]]\n"
	      "  -t, --tiers SPEC     TIERALLOC_TIERS, e.g. \"dram=0;cxl=1\" (default: discover)\n"
	      "  -l, --limit SPEC     TIERALLOC_PROCESS_LIMIT, e.g. \"0=512M\" (default: none)\n"
	      "  -c, --show-config    print the configuration at start (TIERALLOC_SHOW_CONFIG=1)\n"
	      "  -q, --quiet          no summary\n"
	      "  -v, --verbose        list the processes counted in the summary\n"
	      "  -h, --help           this text\n"
	      "      --version        print \"tieralloc-run VERSION\" and exit\n"
	      "Other TIERALLOC_* variables in the environment are passed through (tieralloc(7)).\n",
	      f);
}

struct options {
	bool quiet, verbose;
};

/* A usage error: one line saying what was wrong, then the usage, on stderr; exit status 2. */
static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "tieralloc-run: %s%s\n", what, arg);
	usage(stderr);
	return 2;
}

/* The options into o (setting the TIERALLOC_* variables they stand for): -1 to go on with the
 * command at argv[*first], else the exit status. Options end at the first non-option. */
static int parse(int argc, char **argv, struct options *o, int *first)
{
	enum { OPT_VERSION = 256 };
	static const struct option longopts[] = {
		{ "tiers", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'l' },
		{ "show-config", no_argument, NULL, 'c' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct options){ false, false };
	opterr = 0;
	/* "+": stop at the command; ":": a missing value returns ':' rather than '?'. */
	for (int c; (c = getopt_long(argc, argv, "+:t:l:cqvh", longopts, NULL)) != -1;) {
		const char *given = argv[optind - 1];
		switch (c) {
		case 't':
			setenv("TIERALLOC_TIERS", optarg, 1);
			break;
		case 'l':
			setenv("TIERALLOC_PROCESS_LIMIT", optarg, 1);
			break;
		case 'c':
			setenv("TIERALLOC_SHOW_CONFIG", "1", 1);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("tieralloc-run %s\n", PACKAGE_VERSION);
			return 0;
		case ':':
			if (strncmp(given, "--", 2) == 0)
				return usage_error(given, " needs a value");
			else {
				char opt[3] = { '-', (char)optopt, '\0' };
				return usage_error(opt, " needs a value");
			}
		default: {
			/* optopt: 0 for an unknown long option, the character of an unknown short
			 * one, the value of a long one given a value it does not take. */
			if (optopt == 0)
				return usage_error("unknown option ", given);
			if (strncmp(given, "--", 2) == 0 && strchr(given, '=') != NULL)
				return usage_error(given, ": this option takes no value");
			char opt[3] = { '-', (char)optopt, '\0' };
			return usage_error("unknown option ", opt);
		}
		}
	}
	*first = optind;
	return -1;
}

/* The directory of this executable, without a trailing libtool ".libs" (where libtool puts the
 * real binary of a program linked with an uninstalled library): "" if /proc is not mounted. */
static void exe_dir(char *dir, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", dir, size - 1);
	dir[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(dir, '/');
	if (slash == NULL) {
		dir[0] = '\0';
		return;
	}
	*slash = '\0';
	size_t len = strlen(dir);
	if (len >= 6 && strcmp(dir + len - 6, "/.libs") == 0)
		dir[len - 6] = '\0';
}

/* The preload library: TIERALLOC_PRELOAD_LIB, else the build tree next to this executable
 * (tools/ beside preload/.libs), else the installed one. An absolute path, or NULL. */
static char *find_preload(const char *dir)
{
	const char *set = getenv("TIERALLOC_PRELOAD_LIB");
	if (set != NULL && set[0] != '\0')
		return strdup(set);
	char cand[PATH_MAX + 64];
	if (dir[0] != '\0') {
		snprintf(cand, sizeof(cand), "%s/../preload/.libs/" PRELOAD_NAME, dir);
		char *real = realpath(cand, NULL);
		if (real != NULL)
			return real;
	}
	snprintf(cand, sizeof(cand), "%s/" PRELOAD_NAME, TA_LIBDIR);
	return access(cand, F_OK) == 0 ? strdup(cand) : NULL;
}

static char *find_demo(const char *dir)
{
	char cand[PATH_MAX + 64];
	if (dir[0] != '\0') {
		snprintf(cand, sizeof(cand), "%s/tieralloc-demo", dir);
		if (access(cand, X_OK) == 0)
			return strdup(cand);
	}
	snprintf(cand, sizeof(cand), "%s/tieralloc/tieralloc-demo", TA_LIBEXECDIR);
	return access(cand, X_OK) == 0 ? strdup(cand) : NULL;
}

/* The file execvp would run for cmd (for the summary's explanation only): into path, or false. */
static bool resolve(const char *cmd, char *path, size_t size)
{
	if (strchr(cmd, '/') != NULL) {
		snprintf(path, size, "%s", cmd);
		return true;
	}
	const char *dirs = getenv("PATH");
	if (dirs == NULL)
		dirs = "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = dirs;; d++) {
		const char *end = strchr(d, ':');
		size_t len = end != NULL ? (size_t)(end - d) : strlen(d);
		struct stat st;
		snprintf(path, size, "%.*s%s%s", (int)len, d, len ? "/" : "", cmd);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return true;
		if (end == NULL)
			return false;
		d = end;
	}
}

/* 1 if path is an ELF executable without a program interpreter (statically linked: LD_PRELOAD
 * means nothing to it), 0 if not, -1 if unknown. */
static int statically_linked(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	union {
		Elf64_Ehdr e64;
		Elf32_Ehdr e32;
	} eh;
	int result = -1;
	if (pread(fd, &eh, sizeof(eh), 0) < (ssize_t)sizeof(eh.e32) ||
	    memcmp(eh.e32.e_ident, ELFMAG, SELFMAG) != 0) {
		close(fd);
		return 0; /* a script: its interpreter is what runs */
	}
	bool is64 = eh.e32.e_ident[EI_CLASS] == ELFCLASS64;
	uint64_t phoff = is64 ? eh.e64.e_phoff : eh.e32.e_phoff;
	unsigned phnum = is64 ? eh.e64.e_phnum : eh.e32.e_phnum;
	size_t phsize = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
	if (phnum > 0 && phnum < 4096) {
		result = 1;
		for (unsigned i = 0; i < phnum; i++) {
			union {
				Elf64_Phdr p64;
				Elf32_Phdr p32;
			} ph;
			if (pread(fd, &ph, phsize, (off_t)(phoff + i * phsize)) !=
			    (ssize_t)phsize) {
				result = -1;
				break;
			}
			if ((is64 ? ph.p64.p_type : ph.p32.p_type) == PT_INTERP) {
				result = 0;
				break;
			}
		}
	}
	close(fd);
	return result;
}

/* What every process's lines add up to, per tier. */
struct tier_sum {
	bool seen, bound;
	char name[64], nodes[64], kind[64];
	double capacity, allocs, steered_in, steered_away, peak, live;
	double resident[MAX_NODES];
};

struct proc {
	long pid;
	char comm[64];
};

struct summary {
	struct tier_sum tiers[MAX_TIERS];
	unsigned ntiers; /* one past the highest tier seen */
	struct proc *procs;
	size_t nprocs, cap;
};

static void copy_field(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src);
}

static void add_line(struct summary *s, char *line)
{
	char *save = NULL, *tok = strtok_r(line, " \n", &save);
	const char *f_pid = NULL, *f_comm = NULL, *f_tier = NULL, *f_name = "", *f_nodes = "",
		   *f_kind = "", *f_bound = "", *f_res = "-";
	double cap = 0, allocs = 0, steered_in = 0, steered_away = 0, peak = 0, live = 0;
	for (tok = strtok_r(NULL, " \n", &save); tok != NULL; tok = strtok_r(NULL, " \n", &save)) {
		char *eq = strchr(tok, '=');
		if (eq == NULL)
			continue;
		*eq = '\0';
		const char *k = tok, *v = eq + 1;
		if (strcmp(k, "pid") == 0)
			f_pid = v;
		else if (strcmp(k, "comm") == 0)
			f_comm = v;
		else if (strcmp(k, "tier") == 0)
			f_tier = v;
		else if (strcmp(k, "name") == 0)
			f_name = v;
		else if (strcmp(k, "nodes") == 0)
			f_nodes = v;
		else if (strcmp(k, "kind") == 0)
			f_kind = v;
		else if (strcmp(k, "bound") == 0)
			f_bound = v;
		else if (strcmp(k, "chunk_resident") == 0)
			f_res = v;
		else if (strcmp(k, "capacity") == 0)
			cap = strtod(v, NULL);
		else if (strcmp(k, "allocs") == 0)
			allocs = strtod(v, NULL);
		else if (strcmp(k, "steered_in") == 0)
			steered_in = strtod(v, NULL);
		/* "exhausted": its name in a library before the tools shared one vocabulary. */
		else if (strcmp(k, "steered_away") == 0 || strcmp(k, "exhausted") == 0)
			steered_away = strtod(v, NULL);
		else if (strcmp(k, "peak") == 0)
			peak = strtod(v, NULL);
		else if (strcmp(k, "live") == 0)
			live = strtod(v, NULL);
	}
	if (f_tier == NULL || f_pid == NULL)
		return;
	long t = strtol(f_tier, NULL, 10);
	if (t < 0 || t >= MAX_TIERS)
		return;
	long pid = strtol(f_pid, NULL, 10);
	bool known = false;
	for (size_t i = 0; i < s->nprocs && !known; i++)
		known = s->procs[i].pid == pid;
	if (!known) {
		if (s->nprocs == s->cap) {
			size_t cap2 = s->cap ? s->cap * 2 : 16;
			struct proc *p = realloc(s->procs, cap2 * sizeof(*p));
			if (p == NULL)
				return;
			s->procs = p;
			s->cap = cap2;
		}
		struct proc *p = &s->procs[s->nprocs++];
		p->pid = pid;
		copy_field(p->comm, sizeof(p->comm), f_comm != NULL ? f_comm : "");
	}
	struct tier_sum *ts = &s->tiers[t];
	ts->seen = true;
	if ((unsigned)t + 1 > s->ntiers)
		s->ntiers = (unsigned)t + 1;
	copy_field(ts->name, sizeof(ts->name), f_name);
	copy_field(ts->nodes, sizeof(ts->nodes), f_nodes);
	copy_field(ts->kind, sizeof(ts->kind), f_kind);
	ts->bound = strcmp(f_bound, "1") == 0;
	ts->capacity = cap;
	ts->allocs += allocs;
	ts->steered_in += steered_in;
	ts->steered_away += steered_away;
	ts->live += live;
	if (peak > ts->peak)
		ts->peak = peak;
	/* "n0:4096,n1:8192" or "-" */
	char *rsave = NULL;
	char res[512];
	copy_field(res, sizeof(res), f_res);
	for (char *part = strtok_r(res, ",", &rsave); part != NULL;
	     part = strtok_r(NULL, ",", &rsave)) {
		char *colon = strchr(part, ':');
		if (part[0] != 'n' || colon == NULL)
			continue;
		long node = strtol(part + 1, NULL, 10);
		if (node >= 0 && node < MAX_NODES)
			ts->resident[node] += strtod(colon + 1, NULL);
	}
}

/* As tieralloc-stat prints bytes (units.c). */
static const char *human(double b, char *buf, size_t size)
{
	ta_iec_bytes(b > 0 ? (uint64_t)b : 0, buf, size);
	return buf;
}

/* Why a run may have no summary line at all. */
static void explain_none(const char *cmd, int wstatus)
{
	char path[PATH_MAX];
	int st = resolve(cmd, path, sizeof(path)) ? statically_linked(path) : -1;
	if (st == 1) {
		fprintf(stderr,
			"  no process reported: %s is statically linked, and LD_PRELOAD "
			"cannot load tieralloc into it\n",
			path);
		return;
	}
	fputs("  no process reported. A process writes its lines when it exits normally, if the "
	      "preload was\n",
	      stderr);
	if (WIFSIGNALED(wstatus))
		fprintf(stderr,
			"  loaded into it; this one was killed by signal %d, before that.\n",
			WTERMSIG(wstatus));
	else
		fputs(
		    "  loaded into it. Not so when: it is statically linked or setuid/setgid (the "
		    "loader\n"
		    "  ignores LD_PRELOAD), it cleared LD_PRELOAD or TIERALLOC_SUMMARY (env -i, "
		    "sudo), it ended\n"
		    "  by _exit() or a signal, or tieralloc was turned off "
		    "(TIERALLOC_DISABLE=1).\n",
		    stderr);
}

static void print_summary(FILE *in, char **cmdv, int wstatus, bool verbose)
{
	struct summary *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return;
	char line[4096];
	while (fgets(line, sizeof(line), in) != NULL)
		if (strncmp(line, "tieralloc-summary v=1 ", 22) == 0)
			add_line(s, line);
	fputs("\ntieralloc summary:", stderr);
	for (char **a = cmdv; *a != NULL; a++)
		fprintf(stderr, " %s", *a);
	if (WIFSIGNALED(wstatus))
		fprintf(stderr, " (killed by signal %d, %s)", WTERMSIG(wstatus),
			strsignal(WTERMSIG(wstatus)));
	else
		fprintf(stderr, " (exit %d)", WEXITSTATUS(wstatus));
	fprintf(stderr, ", %zu process(es)\n", s->nprocs);
	if (verbose)
		for (size_t i = 0; i < s->nprocs; i++)
			fprintf(stderr, "  process %ld%s%s\n", s->procs[i].pid,
				s->procs[i].comm[0] ? " " : "", s->procs[i].comm);
	if (s->nprocs == 0) {
		explain_none(cmdv[0], wstatus);
		free(s);
		return;
	}
	fprintf(stderr, "%-4s %-8s %-6s %-21s %10s %11s %10s %12s %11s %10s  %s\n", "tier", "name",
		"nodes", "kind", "capacity", "allocs", "steered_in", "steered_away", "peak(max)",
		"live@exit", "resident (small objects)");
	bool unbound = false;
	for (unsigned t = 0; t < s->ntiers; t++) {
		struct tier_sum *ts = &s->tiers[t];
		char kind[80], cap[32], peak[32], live[32], res[1024] = "";
		size_t pos = 0;
		for (unsigned nd = 0; nd < MAX_NODES; nd++)
			if (ts->resident[nd] != 0 && pos + 48 < sizeof(res)) {
				char h[32];
				pos += (size_t)snprintf(res + pos, sizeof(res) - pos, "%sn%u=%s",
							pos ? " " : "", nd,
							human(ts->resident[nd], h, sizeof(h)));
			}
		snprintf(kind, sizeof(kind), "%s%s", ts->kind, ts->bound ? "" : "*");
		unbound |= !ts->bound;
		fprintf(stderr, "%-4u %-8s %-6s %-21s %10s %11lld %10lld %12lld %11s %10s  %s\n", t,
			ts->name, ts->nodes, kind, human(ts->capacity, cap, sizeof(cap)),
			(long long)ts->allocs, (long long)ts->steered_in,
			(long long)ts->steered_away, human(ts->peak, peak, sizeof(peak)),
			human(ts->live, live, sizeof(live)), res[0] ? res : "-");
	}
	if (unbound)
		fputs("* not bound to its nodes: memkind could not express this tier\n", stderr);
	free(s->procs);
	free(s);
}

/* The child's pid, for forwarding SIGTERM and SIGHUP (0 until it runs). */
static volatile pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	struct options o;
	int first = 0;
	int rc = parse(argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	char dir[PATH_MAX];
	exe_dir(dir, sizeof(dir));
	char *lib = find_preload(dir);
	if (lib == NULL) {
		fprintf(stderr, "tieralloc-run: cannot find " PRELOAD_NAME
				" (build it, or set TIERALLOC_PRELOAD_LIB)\n");
		return 2;
	}
	char *demo_argv[2] = { NULL, NULL };
	char **cmdv = argv + first;
	if (first >= argc) {
		demo_argv[0] = find_demo(dir);
		if (demo_argv[0] == NULL) {
			fprintf(stderr, "tieralloc-run: no command given and tieralloc-demo not "
					"found\n");
			return 2;
		}
		cmdv = demo_argv;
	}

	const char *tmp = getenv("TMPDIR");
	char summary[PATH_MAX];
	snprintf(summary, sizeof(summary), "%s/tieralloc-summary.XXXXXX",
		 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	int sfd = mkstemp(summary);
	if (sfd < 0) {
		fprintf(stderr, "tieralloc-run: cannot create %s: %s\n", summary, strerror(errno));
		return 2;
	}
	const char *old = getenv("LD_PRELOAD");
	size_t plen = strlen(lib) + (old != NULL ? strlen(old) + 1 : 0) + 1;
	char *preload = malloc(plen);
	if (preload == NULL)
		return 2;
	snprintf(preload, plen, "%s%s%s", lib, old != NULL && old[0] ? ":" : "",
		 old != NULL ? old : "");

	/* Like system(): the terminal's ^C and ^\ go to the command, and the wrapper, ignoring
	 * them, stays to print the summary and then die by them as the command did. SIGTERM and
	 * SIGHUP sent to the wrapper alone are passed on. */
	struct sigaction ign = { .sa_handler = SIG_IGN }, fwd = { .sa_handler = forward };
	struct sigaction old_int, old_quit;
	sigemptyset(&ign.sa_mask);
	sigemptyset(&fwd.sa_mask);
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	sigaction(SIGTERM, &fwd, NULL);
	sigaction(SIGHUP, &fwd, NULL);

	/* The child reports a failed exec's errno through this pipe (closed by a good exec). */
	int report[2];
	if (pipe2(report, O_CLOEXEC) != 0) {
		fprintf(stderr, "tieralloc-run: pipe: %s\n", strerror(errno));
		return 2;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "tieralloc-run: fork: %s\n", strerror(errno));
		unlink(summary);
		return 2;
	}
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		close(report[0]);
		close(sfd);
		setenv("LD_PRELOAD", preload, 1);
		setenv("TIERALLOC_SUMMARY", summary, 1);
		execvp(cmdv[0], cmdv);
		int err = errno;
		ssize_t w = write(report[1], &err, sizeof(err));
		(void)w;
		_exit(127);
	}
	child = pid;
	close(report[1]);
	int err = 0;
	ssize_t got;
	do
		got = read(report[0], &err, sizeof(err));
	while (got < 0 && errno == EINTR);
	close(report[0]);
	int wstatus = 0;
	while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
		;
	child = 0;
	if (got == (ssize_t)sizeof(err)) {
		unlink(summary);
		if (err == ENOENT) {
			fprintf(stderr, "tieralloc-run: %s: not found\n", cmdv[0]);
			return 127;
		}
		fprintf(stderr, "tieralloc-run: %s: %s\n", cmdv[0],
			err == EACCES ? "permission denied" : strerror(err));
		return 126;
	}

	if (!o.quiet) {
		FILE *in = fdopen(sfd, "r");
		if (in != NULL) {
			print_summary(in, cmdv, wstatus, o.verbose);
			fclose(in);
		}
	} else
		close(sfd);
	unlink(summary);
	fflush(NULL);

	if (WIFSIGNALED(wstatus)) {
		int sig = WTERMSIG(wstatus);
		/* Die by the same signal, so that whoever started us (a shell, make, a test) sees
		 * what the command did. The command has dumped its core already if it was to: no
		 * second one, of the wrapper, on top of it. */
		struct rlimit none = { 0, 0 };
		setrlimit(RLIMIT_CORE, &none);
		signal(sig, SIG_DFL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		return 128 + sig; /* a signal whose default is not to terminate */
	}
	return WEXITSTATUS(wstatus);
}
