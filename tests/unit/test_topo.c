/* SPDX-License-Identifier: MIT */
/*
 * Tier discovery (src/base/topo.c) against sysfs fixtures built in a temp dir, one tree per case,
 * so that each case's machine is described next to its assertions: nodes with their memory and
 * CPUs, the kernel's memory tiers, and TIERALLOC_TIERS / TIERALLOC_PROCESS_LIMIT strings, good and
 * bad. Also the numactl node-list parser and formatter the rest depends on.
 */
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include "internal.h"
#include "test.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

static char root[512]; /* the fixture tree of the current case */

/* ---- fixture trees ---- */

static void fixture_new(const char *what)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(root, sizeof(root), "%s/ta-topo-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
	if (mkdtemp(root) == NULL)
		test_hard("mkdtemp %s", root);
	test_context("%s", what);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void fixture_done(void)
{
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	test_context("%s", "");
}

/* Write root/rel (creating its directories) with printf-formatted content. */
static __attribute__((format(printf, 2, 3))) void put(const char *rel, const char *fmt, ...)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			test_hard("mkdir %s", path);
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	if (f == NULL)
		test_hard("fopen %s", path);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* The nodes with memory, as the kernel lists them. */
static void nodes_online(const char *list)
{
	put("sys/devices/system/node/online", "%s\n", list);
	put("sys/devices/system/node/has_memory", "%s\n", list);
}

/* One node: MemTotal as the kernel writes it (kB), cpus "" for a CPU-less node. */
static void node(unsigned n, uint64_t bytes, const char *cpus)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "sys/devices/system/node/node%u/meminfo", n);
	put(rel,
	    "Node %u MemTotal:       %llu kB\n"
	    "Node %u MemFree:        %llu kB\n",
	    n, (unsigned long long)(bytes / KiB), n, (unsigned long long)(bytes / KiB / 2));
	snprintf(rel, sizeof(rel), "sys/devices/system/node/node%u/cpulist", n);
	put(rel, "%s\n", cpus);
}

/* /sys/devices/virtual/memory_tiering/memory_tier<id>/nodelist. */
static void kernel_tier(unsigned id, const char *nodelist)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "sys/devices/virtual/memory_tiering/memory_tier%u/nodelist", id);
	put(rel, "%s\n", nodelist);
}

/* ---- running discovery with stderr captured ---- */

struct result {
	int rc;
	struct ta_topology topo;
	struct ta_options opts;
	unsigned warnings; /* lines starting "tieralloc: warning:" */
	unsigned lines;	   /* every line written to stderr */
	char err[4096];
};

static void discover(const char *spec, struct result *r)
{
	struct test_capture cap;
	memset(r, 0, sizeof(*r));
	capture_begin(&cap);
	r->rc = ta_topo_discover(root, spec, &r->topo, &r->opts);
	capture_end(&cap, r->err, sizeof(r->err));
	r->warnings = count_lines(r->err, "tieralloc: warning:");
	r->lines = count_lines(r->err, "");
	if (r->lines != 0)
		printf("  stderr of discover(\"%s\"): %s", spec, r->err);
}

static void expect_clean(const struct result *r)
{
	expect_eq(r->rc, 0);
	expect_eq(r->lines, 0);
	expect_eq(r->opts.nerrors, 0);
}

/* ---- discovery without TIERALLOC_TIERS ---- */

static void test_single_node(void)
{
	struct result r;
	fixture_new("single node");
	nodes_online("0");
	node(0, 8 * GiB, "0-7");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 1);
	expect_str_eq(r.topo.source, "one tier");
	expect_str_eq(r.topo.tier[0].name, "tier0");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[0].capacity, 8 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 1000000);
	expect_eq(r.topo.total_capacity, 8 * GiB);
	expect_eq(r.topo.mem_nodes, 0x1);
	expect_eq(r.topo.cpu_nodes, 0x1);
	fixture_done();

	/* Two nodes with CPUs and no kernel tiers: still one tier. */
	fixture_new("two CPU nodes, one tier");
	nodes_online("0-1");
	node(0, 2 * GiB, "0-3");
	node(1, 2 * GiB, "4-7");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 1);
	expect_eq(r.topo.tier[0].nodes, 0x3);
	expect_eq(r.topo.tier[0].capacity, 4 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 1000000);
	fixture_done();
}

static void test_cpuless_node(void)
{
	struct result r;
	fixture_new("node 1 CPU-less");
	nodes_online("0-1");
	node(0, 3 * GiB, "0-3");
	node(1, 1 * GiB, "");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_str_eq(r.topo.source, "cpu-less nodes");
	expect_eq(r.topo.cpu_nodes, 0x1);
	expect_eq(r.topo.mem_nodes, 0x3);
	expect_str_eq(r.topo.tier[0].name, "tier0");
	expect_str_eq(r.topo.tier[1].name, "tier1");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x2);
	expect_eq(r.topo.tier[0].capacity, 3 * GiB);
	expect_eq(r.topo.tier[1].capacity, 1 * GiB);
	expect_eq(r.topo.total_capacity, 4 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 750000);
	expect_eq(r.topo.tier[1].share_ppm, 250000);
	fixture_done();

	/* Shares are truncated, never rounded up past the whole. */
	fixture_new("shares 1/3 2/3");
	nodes_online("0-2");
	node(0, 1 * GiB, "0");
	node(1, 1 * GiB, "");
	node(2, 1 * GiB, "");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_eq(r.topo.tier[1].nodes, 0x6);
	expect_eq(r.topo.tier[0].share_ppm, 333333);
	expect_eq(r.topo.tier[1].share_ppm, 666666);
	fixture_done();
}

static void test_missing_files(void)
{
	struct result r;
	/* No has_memory (kernels before 2.6.35 lack it): the online list is used. */
	fixture_new("no has_memory");
	put("sys/devices/system/node/online", "0-1\n");
	node(0, 1 * GiB, "0-1");
	node(1, 1 * GiB, "");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.mem_nodes, 0x3);
	expect_eq(r.topo.ntiers, 2);
	fixture_done();

	/* A listed node whose meminfo is missing or says 0 has no memory to offer. */
	fixture_new("node without meminfo");
	nodes_online("0-2");
	node(0, 1 * GiB, "0");
	put("sys/devices/system/node/node1/cpulist", "\n");
	node(2, 0, "");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.mem_nodes, 0x1);
	expect_eq(r.topo.ntiers, 1);
	expect_eq(r.topo.tier[0].capacity, 1 * GiB);
	fixture_done();

	/* No NUMA sysfs at all (CONFIG_NUMA=n): one node sized from sysconf. */
	fixture_new("no sysfs");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 1);
	expect_eq(r.topo.mem_nodes, 0x1);
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[0].capacity,
		  (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
	expect_eq(r.topo.tier[0].share_ppm, 1000000);
	fixture_done();
}

static void test_kernel_tiers(void)
{
	struct result r;
	/* Both nodes have CPUs, so only the kernel's tiers can split them; order is by tier number
	 * (4 before 22), not by name ("memory_tier22" sorts first as a string). */
	fixture_new("memory_tiering, 2 tiers");
	nodes_online("0-1");
	node(0, 3 * GiB, "0-3");
	node(1, 1 * GiB, "4-7");
	kernel_tier(4, "0");
	kernel_tier(22, "1");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_str_eq(r.topo.source, "memory_tiering");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x2);
	expect_str_eq(r.topo.tier[1].name, "tier1");
	expect_eq(r.topo.tier[0].share_ppm, 750000);
	expect_eq(r.topo.tier[1].share_ppm, 250000);
	fixture_done();

	/* The same with the nodes swapped: the tier number decides, not the node number. */
	fixture_new("memory_tiering, swapped");
	nodes_online("0-1");
	node(0, 3 * GiB, "0-3");
	node(1, 1 * GiB, "4-7");
	kernel_tier(4, "1");
	kernel_tier(22, "0");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_eq(r.topo.tier[0].nodes, 0x2);
	expect_eq(r.topo.tier[1].nodes, 0x1);
	expect_eq(r.topo.tier[0].capacity, 1 * GiB);
	fixture_done();

	/* One kernel tier says nothing: the CPU-less rule applies. */
	fixture_new("memory_tiering, 1 tier");
	nodes_online("0-1");
	node(0, 3 * GiB, "0-3");
	node(1, 1 * GiB, "");
	kernel_tier(4, "0-1");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_str_eq(r.topo.source, "cpu-less nodes");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x2);
	fixture_done();

	/* Kernel tiers are restricted to nodes with memory; a tier left empty disappears. */
	fixture_new("memory_tiering, memoryless node");
	put("sys/devices/system/node/online", "0-2\n");
	put("sys/devices/system/node/has_memory", "0-1\n");
	node(0, 1 * GiB, "0-3");
	node(1, 1 * GiB, "4-7");
	kernel_tier(4, "0-1");
	kernel_tier(22, "2");
	discover("", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 1);
	expect_eq(r.topo.tier[0].nodes, 0x3);
	fixture_done();

	/* Five kernel tiers: the slowest are merged into the third, with one info line. */
	fixture_new("memory_tiering, 5 tiers");
	nodes_online("0-4");
	node(0, 4 * GiB, "0-3");
	node(1, 2 * GiB, "");
	node(2, 1 * GiB, "");
	node(3, 512 * MiB, "");
	node(4, 512 * MiB, "");
	kernel_tier(100, "4");
	kernel_tier(4, "0");
	kernel_tier(30, "3");
	kernel_tier(10, "1");
	kernel_tier(22, "2");
	int saved_level = ta_log_level;
	ta_log_level = TA_LOG_INFO;
	discover("", &r);
	ta_log_level = saved_level;
	expect_eq(r.rc, 0);
	expect_eq(r.warnings, 0);
	expect_eq(count_lines(r.err, "tieralloc: info:"), 1);
	expect_eq(r.opts.nerrors, 0);
	expect_eq(r.topo.ntiers, 3);
	expect_str_eq(r.topo.source, "memory_tiering");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x2);
	expect_eq(r.topo.tier[2].nodes, 0x1c);
	expect_eq(r.topo.tier[2].capacity, 2 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 500000);
	expect_eq(r.topo.tier[1].share_ppm, 250000);
	expect_eq(r.topo.tier[2].share_ppm, 250000);
	expect_str_eq(r.topo.tier[2].name, "tier2");
	fixture_done();
}

/* ---- TIERALLOC_TIERS ---- */

/* Nodes 0 (CPUs, 4 GiB), 1 and 2 (CPU-less, 2 GiB each): discovery gives {0} and {1,2}. */
static void three_node_machine(const char *what)
{
	fixture_new(what);
	nodes_online("0-2");
	node(0, 4 * GiB, "0-3");
	node(1, 2 * GiB, "");
	node(2, 2 * GiB, "");
}

static void test_tiers_spec_good(void)
{
	struct result r;
	three_node_machine("TIERALLOC_TIERS=0;1");
	discover("0;1", &r);
	expect_clean(&r);
	expect_str_eq(r.topo.source, "TIERALLOC_TIERS");
	expect_eq(r.topo.ntiers, 2);
	expect_str_eq(r.topo.tier[0].name, "tier0");
	expect_str_eq(r.topo.tier[1].name, "tier1");
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x2);
	/* Shares are of the tiers' capacity, not the machine's: node 2 is in no tier. */
	expect_eq(r.topo.total_capacity, 6 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 666666);
	expect_eq(r.topo.tier[1].share_ppm, 333333);
	fixture_done();

	three_node_machine("TIERALLOC_TIERS=dram=0;cxl=1");
	discover("dram=0;cxl=1", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_str_eq(r.topo.tier[0].name, "dram");
	expect_str_eq(r.topo.tier[1].name, "cxl");
	expect_eq(r.topo.tier[1].nodes, 0x2);
	fixture_done();

	three_node_machine("TIERALLOC_TIERS=0-1;2");
	discover("0-1;2", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_eq(r.topo.tier[0].nodes, 0x3);
	expect_eq(r.topo.tier[1].nodes, 0x4);
	expect_eq(r.topo.tier[0].capacity, 6 * GiB);
	expect_eq(r.topo.tier[0].share_ppm, 750000);
	fixture_done();

	/* Three tiers, names mixed with defaults, a comma list. */
	three_node_machine("TIERALLOC_TIERS=fast=0;1;slow_2-x=2,1");
	discover("fast=0;1;slow_2-x=2,1", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 3);
	expect_str_eq(r.topo.tier[0].name, "fast");
	expect_str_eq(r.topo.tier[1].name, "tier1");
	expect_str_eq(r.topo.tier[2].name, "slow_2-x");
	expect_eq(r.topo.tier[2].nodes, 0x6);
	fixture_done();

	/* The same node in two tiers is allowed: how tests get two tiers on a one-node host. */
	three_node_machine("TIERALLOC_TIERS=0;0");
	discover("0;0", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 2);
	expect_eq(r.topo.tier[0].nodes, 0x1);
	expect_eq(r.topo.tier[1].nodes, 0x1);
	expect_eq(r.topo.tier[0].share_ppm, 500000);
	fixture_done();

	/* Longest accepted name: 31 characters. */
	three_node_machine("TIERALLOC_TIERS, 31-character name");
	discover("abcdefghijklmnopqrstuvwxyz01234=0", &r);
	expect_clean(&r);
	expect_eq(r.topo.ntiers, 1);
	expect_str_eq(r.topo.tier[0].name, "abcdefghijklmnopqrstuvwxyz01234");
	fixture_done();
}

static void test_tiers_spec_bad(void)
{
	static const struct {
		const char *spec, *why;
	} bad[] = {
		{ "0;9", "names a node that does not exist" },
		{ "0;3", "names a node that does not exist" },
		{ "a b=0", "bad tier name" },
		{ "=0", "bad tier name" },
		{ "1=0", "bad tier name" },
		{ "abcdefghijklmnopqrstuvwxyz012345=0", "bad tier name" },
		{ "0;;1", "bad node list" },
		{ "0;", "bad node list" },
		{ ";0", "bad node list" },
		{ "dram=", "bad node list" },
		{ "0-", "bad node list" },
		{ "x", "bad node list" },
		{ "0;1;2;0", "more than 3 tiers" },
		{ "x=0;x=1", "duplicate tier name" },
		{ "tier1=0;1", "duplicate tier name" },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct result r;
		char what[128];
		snprintf(what, sizeof(what), "TIERALLOC_TIERS=\"%s\"", bad[i].spec);
		three_node_machine(what);
		discover(bad[i].spec, &r);
		expect_eq(r.rc, 0);
		expect_eq(r.warnings, 1);
		expect_eq(r.lines, 1);
		expect_eq(r.opts.nerrors, 1);
		/* The warning quotes the value, says why and what happens instead. */
		char quoted[128];
		snprintf(quoted, sizeof(quoted), "TIERALLOC_TIERS=\"%s\"", bad[i].spec);
		expect_true(strstr(r.err, quoted) != NULL);
		expect_true(strstr(r.err, bad[i].why) != NULL);
		expect_true(strstr(r.err, "discovering tiers instead") != NULL);
		/* ...and discovery runs as if the variable were unset. */
		expect_str_eq(r.topo.source, "cpu-less nodes");
		expect_eq(r.topo.ntiers, 2);
		expect_eq(r.topo.tier[0].nodes, 0x1);
		expect_eq(r.topo.tier[1].nodes, 0x6);
		expect_str_eq(r.topo.tier[0].name, "tier0");
		expect_str_eq(r.topo.tier[1].name, "tier1");
		expect_eq(r.topo.tier[0].share_ppm, 500000);
		fixture_done();
	}
}

/* A value longer than a log line still gives one line, cut short, newline-terminated. */
static void test_tiers_spec_long(void)
{
	char spec[256];
	struct result r;
	memset(spec, 'a', 250);
	strcpy(spec + 250, "=0;1");
	three_node_machine("TIERALLOC_TIERS, 254 characters");
	discover(spec, &r);
	expect_eq(r.warnings, 1);
	expect_eq(r.lines, 1);
	expect_eq(r.opts.nerrors, 1);
	expect_true(r.err[0] != '\0' && r.err[strlen(r.err) - 1] == '\n');
	expect_str_eq(r.topo.source, "cpu-less nodes");
	fixture_done();
}

/* ---- node lists ---- */

static void test_nodelist(void)
{
	static const struct {
		const char *text;
		uint64_t mask;
	} good
	    [] = {
		    { "0", 0x1 },	    { "0\n", 0x1 },	 { "1,3", 0xa },
		    { "0-3", 0xf },	    { "0-1,3", 0xb },	 { "2-2", 0x4 },
		    { "00", 0x1 },	    { "0,2-3,5", 0x2d }, { "63", 1ull << 63 },
		    { "0-63", UINT64_MAX }, { "3,1", 0xa }, /* order is not checked, as the kernel's
							       bitmap_parselist */
	    };
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t m = 0;
		test_context("nodelist \"%s\"", good[i].text);
		expect_eq(ta_nodelist_parse(good[i].text, strlen(good[i].text), &m), 0);
		expect_eq(m, good[i].mask);
	}
	/* sysfs writes an empty set as an empty line (a CPU-less node's cpulist): the empty set,
	 * not an error. Callers that need a node (TIERALLOC_TIERS) reject an empty mask. */
	uint64_t m = 0xdead;
	test_context("nodelist \"\"");
	expect_eq(ta_nodelist_parse("", 0, &m), 0);
	expect_eq(m, 0);
	m = 0xdead;
	expect_eq(ta_nodelist_parse("\n", 1, &m), 0);
	expect_eq(m, 0);
	/* Only len bytes are read. */
	test_context("nodelist with len");
	expect_eq(ta_nodelist_parse("0,1junk", 3, &m), 0);
	expect_eq(m, 0x3);

	static const char *const bad[] = {
		"1-",	"3-1", "a",   "0,,1", "64",	 "0,",	  ",0",	 "-1",
		"0-64", " 0",  "0 1", "0;1",  "1000000", "0-1-2", "0x1",
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = 0xdead;
		test_context("nodelist \"%s\"", bad[i]);
		expect_eq(ta_nodelist_parse(bad[i], strlen(bad[i]), &m), -EINVAL);
		expect_eq(m, 0xdead); /* untouched on error */
	}

	static const struct {
		uint64_t mask;
		const char *text;
	} fmt[] = {
		{ 0, "" },
		{ 0x1, "0" },
		{ 0x5, "0,2" },
		{ 0xf, "0-3" },
		{ 0xb, "0-1,3" },
		{ 0x2d, "0,2-3,5" },
		{ 1ull << 63, "63" },
		{ UINT64_MAX, "0-63" },
		{ 0x8000000000000001ull, "0,63" },
	};
	for (unsigned i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
		char buf[256];
		test_context("format 0x%" PRIx64, fmt[i].mask);
		size_t n = ta_nodelist_format(fmt[i].mask, buf, sizeof(buf));
		expect_str_eq(buf, fmt[i].text);
		expect_eq(n, strlen(fmt[i].text));
	}

	/* Round trip over many masks, including the worst case for length (every other node). */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (unsigned i = 0; i < 2000; i++) {
		uint64_t mask = i == 0 ? 0x5555555555555555ull : i == 1 ? 0xaaaaaaaaaaaaaaaaull : x;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		char buf[256];
		test_context("round trip 0x%" PRIx64, mask);
		size_t n = ta_nodelist_format(mask, buf, sizeof(buf));
		uint64_t back = 0;
		expect_eq(ta_nodelist_parse(buf, n, &back), 0);
		expect_eq(back, mask);
	}

	/* A short buffer truncates, NUL-terminated, without writing past its end. */
	test_context("format truncation");
	char small[8];
	size_t n = ta_nodelist_format(0x5555555555555555ull, small, sizeof(small));
	expect_lt(n, sizeof(small));
	expect_eq(strlen(small), n);
	test_context("%s", "");
}

/* ---- TIERALLOC_PROCESS_LIMIT ---- */

static void test_limits(void)
{
	struct result r;
	three_node_machine("limits");
	discover("dram=0;cxl=1-2", &r);
	expect_clean(&r);
	fixture_done();
	const struct ta_topology *topo = &r.topo;

	static const struct {
		const char *spec;
		uint64_t l0, l1, l2;
	} good[] = {
		{ "", UINT64_MAX, UINT64_MAX, UINT64_MAX },
		{ "0=64M", 64 * MiB, UINT64_MAX, UINT64_MAX },
		{ "0=1M;1=2G", 1 * MiB, 2 * GiB, UINT64_MAX },
		{ "dram=512K;cxl=1T", 512 * KiB, 1024 * GiB, UINT64_MAX },
		{ "cxl=4096", UINT64_MAX, 4096, UINT64_MAX },
		{ "0=0", 0, UINT64_MAX, UINT64_MAX },
	};
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t lim[TA_MAX_TIERS] = { 1, 1, 1 };
		struct ta_options opts = { 0 };
		struct test_capture cap;
		char err[1024];
		test_context("TIERALLOC_PROCESS_LIMIT=\"%s\"", good[i].spec);
		capture_begin(&cap);
		int rc = ta_topo_parse_limits(topo, good[i].spec, lim, &opts);
		capture_end(&cap, err, sizeof(err));
		expect_eq(rc, 0);
		expect_eq(count_lines(err, ""), 0);
		expect_eq(opts.nerrors, 0);
		expect_eq(lim[0], good[i].l0);
		expect_eq(lim[1], good[i].l1);
		expect_eq(lim[2], good[i].l2);
	}

	static const char *const bad[] = {
		"2=1M",			  /* no tier 2 */
		"x=1M",			  /* no such name */
		"tier0=1M",		  /* default names do not apply to named tiers */
		"dra=1M",		  /* a prefix is not a name */
		"0",			  /* no '=' */
		"0=",			  /* no size */
		"=1M",			  /* no tier */
		"0=1Q",			  /* bad suffix */
		"0=-1",			  /* negative */
		"0=1M;",		  /* trailing separator */
		"0=1M;;1=1M",		  /* empty entry */
		"0=99999999999999999999", /* overflow */
		"0=20000000T",		  /* overflow through the suffix */
		"0=1M;1=junk",		  /* a good entry does not survive a bad one */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t lim[TA_MAX_TIERS] = { 1, 1, 1 };
		struct ta_options opts = { 0 };
		struct test_capture cap;
		char err[1024];
		test_context("TIERALLOC_PROCESS_LIMIT=\"%s\"", bad[i]);
		capture_begin(&cap);
		int rc = ta_topo_parse_limits(topo, bad[i], lim, &opts);
		capture_end(&cap, err, sizeof(err));
		expect_eq(rc, -EINVAL);
		expect_eq(count_lines(err, "tieralloc: warning: TIERALLOC_PROCESS_LIMIT="), 1);
		expect_eq(count_lines(err, ""), 1);
		expect_eq(opts.nerrors, 1);
		expect_eq(lim[0], UINT64_MAX);
		expect_eq(lim[1], UINT64_MAX);
		expect_eq(lim[2], UINT64_MAX);
	}

	/* Tier lookup by index and by name. */
	test_context("tier_by_name");
	expect_eq(ta_topo_tier_by_name(topo, "0", 1), 0);
	expect_eq(ta_topo_tier_by_name(topo, "1", 1), 1);
	expect_eq(ta_topo_tier_by_name(topo, "2", 1), -1);
	expect_eq(ta_topo_tier_by_name(topo, "dram", 4), 0);
	expect_eq(ta_topo_tier_by_name(topo, "cxl", 3), 1);
	expect_eq(ta_topo_tier_by_name(topo, "cxl=", 3), 1); /* only len bytes */
	expect_eq(ta_topo_tier_by_name(topo, "", 0), -1);
	expect_eq(ta_topo_tier_by_name(topo, "99999999999", 11), -1);
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	test_reexec_with_env(argv, NULL);
	ta_log_level = TA_LOG_WARN;
	test_single_node();
	test_cpuless_node();
	test_missing_files();
	test_kernel_tiers();
	test_tiers_spec_good();
	test_tiers_spec_bad();
	test_tiers_spec_long();
	test_nodelist();
	test_limits();
	return test_done();
}
