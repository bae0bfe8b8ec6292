/* SPDX-License-Identifier: MIT */
/*
 * TIERALLOC_* parsing (src/base/env.c), table-driven: every option with good and bad values. The
 * contract under test is the one users see: a bad value costs exactly one warning line on stderr,
 * keeps the option's default and counts one error (what TIERALLOC_STRICT acts on); an unknown
 * TIERALLOC_* name warns once too. ta_env_parse takes an envp array, so no re-exec is needed.
 */
#include "internal.h"
#include "test.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

static const struct ta_options defaults = {
	.log_level = TA_LOG_WARN,
	.charge_batch = 256 * KiB,
	.pack = 8 * MiB,
	.access = TA_ACCESS_SOFT_DIRTY,
	.access_period_ms = 1000,
	.maps = true,
};

struct parsed {
	struct ta_options opts;
	unsigned warnings; /* lines starting "tieralloc: warning:" */
	unsigned lines;
	char err[8192];
};

/* Parse vars (NULL-terminated "NAME=value" strings) amid unrelated variables. */
static void parse(const char *const *vars, struct parsed *r)
{
	char *envp[32];
	unsigned n = 0;
	envp[n++] = (char *)"PATH=/usr/bin:/bin";
	envp[n++] = (char *)"TIERALLOCATE=1";	       /* not our prefix */
	envp[n++] = (char *)"XTIERALLOC_DISABLE=1";    /* not at the start */
	envp[n++] = (char *)"TIERALLOC_NO_EQUAL_SIGN"; /* not NAME=value: ignored */
	for (unsigned i = 0; vars[i] != NULL && n < 31; i++)
		envp[n++] = (char *)vars[i];
	envp[n] = NULL;

	struct test_capture cap;
	memset(r, 0, sizeof(*r));
	r->opts = defaults;
	ta_log_level = TA_LOG_WARN;
	capture_begin(&cap);
	ta_env_parse(envp, &r->opts);
	capture_end(&cap, r->err, sizeof(r->err));
	ta_log_level = TA_LOG_WARN; /* TIERALLOC_LOG_LEVEL sets the logger's level too */
	r->warnings = count_lines(r->err, "tieralloc: warning:");
	r->lines = count_lines(r->err, "");
}

static void parse1(const char *var, struct parsed *r)
{
	const char *vars[] = { var, NULL };
	test_context("%s", var);
	parse(vars, r);
}

/* Every option at its default, and nerrors errors counted. */
#define expect_defaults(o, errors)                                                                 \
	do {                                                                                       \
		expect_eq((o)->disable, defaults.disable);                                         \
		expect_eq((o)->strict, defaults.strict);                                           \
		expect_eq((o)->show_config, defaults.show_config);                                 \
		expect_eq((o)->log_level, defaults.log_level);                                     \
		expect_eq((o)->charge_batch, defaults.charge_batch);                               \
		expect_eq((o)->pack, defaults.pack);                                               \
		expect_str_eq((o)->tiers, defaults.tiers);                                         \
		expect_str_eq((o)->process_limit, defaults.process_limit);                         \
		expect_str_eq((o)->summary, defaults.summary);                                     \
		expect_eq((o)->on_full, defaults.on_full);                                         \
		expect_eq((o)->on_misuse, defaults.on_misuse);                                     \
		expect_eq((o)->enforce, defaults.enforce);                                         \
		expect_eq((o)->promotion, defaults.promotion);                                     \
		expect_eq((o)->access, defaults.access);                                           \
		expect_eq((o)->access_period_ms, defaults.access_period_ms);                       \
		expect_eq((o)->maps, defaults.maps);                                               \
		expect_eq((o)->nerrors, (errors));                                                 \
	} while (0)

static void expect_good(const struct parsed *r)
{
	expect_eq(r->lines, 0);
	expect_eq(r->opts.nerrors, 0);
}

/* One bad value: one line that quotes it and names the default, one error, nothing changed. */
static void expect_bad(const struct parsed *r, const char *var)
{
	expect_eq(r->warnings, 1);
	expect_eq(r->lines, 1);
	expect_eq(r->opts.nerrors, 1);
	char quoted[512];
	const char *eq = strchr(var, '=');
	snprintf(quoted, sizeof(quoted), "tieralloc: warning: %.*s=\"%s\": ", (int)(eq - var), var,
		 eq + 1);
	expect_true(strncmp(r->err, quoted, strlen(quoted)) == 0);
	expect_true(strstr(r->err, "; using the default (") != NULL);
	expect_defaults(&r->opts, 1);
}

static bool *bool_field(struct ta_options *o, const char *name)
{
	if (strcmp(name, "DISABLE") == 0)
		return &o->disable;
	if (strcmp(name, "STRICT") == 0)
		return &o->strict;
	return &o->show_config;
}

static void test_bools(void)
{
	static const char *const names[] = { "DISABLE", "STRICT", "SHOW_CONFIG" };
	static const char *const yes[] = { "1", "yes", "on", "true", "YES", "On", "TRUE", "tRuE" };
	static const char *const no[] = {
		"0", "no", "off", "false", "NO", "Off", "FALSE", "fAlSe"
	};
	static const char *const bad[] = { "",	 "2",  "y",	     "n",      "01",   "-1",
					   " 1", "1 ", "yes please", "enable", "truee" };
	char var[128];
	struct parsed r;
	for (unsigned i = 0; i < 3; i++) {
		for (unsigned k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
			snprintf(var, sizeof(var), "TIERALLOC_%s=%s", names[i], yes[k]);
			parse1(var, &r);
			expect_good(&r);
			expect_true(*bool_field(&r.opts, names[i]));
		}
		for (unsigned k = 0; k < sizeof(no) / sizeof(no[0]); k++) {
			snprintf(var, sizeof(var), "TIERALLOC_%s=%s", names[i], no[k]);
			parse1(var, &r);
			expect_good(&r);
			expect_true(!*bool_field(&r.opts, names[i]));
		}
		for (unsigned k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			snprintf(var, sizeof(var), "TIERALLOC_%s=%s", names[i], bad[k]);
			parse1(var, &r);
			expect_bad(&r, var);
		}
	}
}

/* The enum options: each word in any case, and anything else refused with the list. */
static void test_enums(void)
{
	static const struct {
		const char *name;
		const char *words[4];
		size_t offset;
	} opts[] = {
		{ "ON_FULL", { "lowest", "enomem" }, offsetof(struct ta_options, on_full) },
		{ "ON_MISUSE", { "abort", "warn" }, offsetof(struct ta_options, on_misuse) },
		{ "ENFORCE",
		  { "deferred", "inline", "off" },
		  offsetof(struct ta_options, enforce) },
		{ "PROMOTION",
		  { "gated", "always", "never" },
		  offsetof(struct ta_options, promotion) },
	};
	static const char *const bad[] = { "", "1", "deferredx", " off", "on", "gate" };
	char var[128];
	struct parsed r;
	for (unsigned i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		for (unsigned w = 0; w < 4 && opts[i].words[w] != NULL; w++) {
			char upper[32];
			size_t k = 0;
			for (; opts[i].words[w][k] != '\0'; k++)
				upper[k] = (char)(opts[i].words[w][k] - 'a' + 'A');
			upper[k] = '\0';
			for (unsigned c = 0; c < 2; c++) {
				snprintf(var, sizeof(var), "TIERALLOC_%s=%s", opts[i].name,
					 c ? upper : opts[i].words[w]);
				test_context("%s", var);
				parse1(var, &r);
				expect_good(&r);
				expect_eq(*(int *)((char *)&r.opts + opts[i].offset), (int)w);
			}
		}
		for (unsigned b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
			snprintf(var, sizeof(var), "TIERALLOC_%s=%s", opts[i].name, bad[b]);
			test_context("%s", var);
			parse1(var, &r);
			expect_bad(&r, var);
			/* The message lists every word. */
			for (unsigned w = 0; w < 4 && opts[i].words[w] != NULL; w++)
				expect_true(strstr(r.err, opts[i].words[w]) != NULL);
		}
	}
}

static void test_log_level(void)
{
	static const struct {
		const char *value;
		int level;
	} good[] = {
		{ "error", TA_LOG_ERROR }, { "warn", TA_LOG_WARN },   { "warning", TA_LOG_WARN },
		{ "info", TA_LOG_INFO },   { "debug", TA_LOG_DEBUG }, { "ERROR", TA_LOG_ERROR },
		{ "Debug", TA_LOG_DEBUG }, { "0", TA_LOG_ERROR },     { "1", TA_LOG_WARN },
		{ "2", TA_LOG_INFO },	   { "3", TA_LOG_DEBUG },
	};
	static const char *const bad[] = { "", "4", "-1", "00", "10", "verbose", "warn ", "infos" };
	char var[128];
	struct parsed r;
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_LOG_LEVEL=%s", good[i].value);
		parse1(var, &r);
		expect_good(&r);
		expect_eq(r.opts.log_level, good[i].level);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_LOG_LEVEL=%s", bad[i]);
		parse1(var, &r);
		expect_bad(&r, var);
	}

	/* The level is applied before the other options, wherever it sits in the environment:
	 * "error" silences the warning about a bad value, which still counts as an error. */
	const char *quiet[] = { "TIERALLOC_CHARGE_BATCH=1", "TIERALLOC_FOO=1",
				"TIERALLOC_LOG_LEVEL=error", NULL };
	test_context("LOG_LEVEL=error after bad values");
	parse(quiet, &r);
	expect_eq(r.lines, 0);
	expect_eq(r.opts.nerrors, 2);
	expect_eq(r.opts.log_level, TA_LOG_ERROR);
}

static void test_charge_batch(void)
{
	static const struct {
		const char *value;
		uint64_t bytes;
	} good[] = {
		{ "4096", 4096 },      { "4K", 4 * KiB },   { "4k", 4 * KiB },
		{ "4KB", 4 * KiB },    { "4KiB", 4 * KiB }, { "4kib", 4 * KiB },
		{ "256K", 256 * KiB }, { "1M", 1 * MiB },   { "1m", 1 * MiB },
		{ "2MB", 2 * MiB },    { "64M", 64 * MiB }, { "67108864", 64 * MiB },
		{ "65536B", 65536 },   { "65536b", 65536 }, { "0064K", 64 * KiB },
	};
	static const struct {
		const char *value, *why;
	} bad[] = {
		{ "", "bad size" },
		{ "0", "out of range 4K..64M" },
		{ "4095", "out of range 4K..64M" },
		{ "3K", "out of range 4K..64M" },
		{ "65M", "out of range 4K..64M" },
		{ "67108865", "out of range 4K..64M" },
		{ "1G", "out of range 4K..64M" },
		{ "1T", "out of range 4K..64M" },
		{ "99999999999999999999", "size too large" },
		{ "20000000T", "size too large" },
		{ "1.5M", "bad size" },
		{ "-4K", "bad size" },
		{ "4 K", "bad size" },
		{ " 4K", "bad size" },
		{ "4K ", "bad size" },
		{ "K", "bad size" },
		{ "4KK", "bad size" },
		{ "4KiBB", "bad size" },
		{ "0x1000", "bad size" },
		{ "4Q", "bad size" },
		{ "4P", "bad size" },
	};
	char var[128];
	struct parsed r;
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_CHARGE_BATCH=%s", good[i].value);
		parse1(var, &r);
		expect_good(&r);
		expect_eq(r.opts.charge_batch, good[i].bytes);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_CHARGE_BATCH=%s", bad[i].value);
		parse1(var, &r);
		expect_bad(&r, var);
		expect_true(strstr(r.err, bad[i].why) != NULL);
	}
}

/* TIERALLOC_ACCESS_PERIOD: milliseconds, or seconds with an s. */
static void test_access_period(void)
{
	static const struct {
		const char *value;
		uint64_t ms;
	} good[] = { { "100", 100 },	 { "100ms", 100 },	   { "1s", 1000 },
		     { "2500ms", 2500 }, { "3600s", 3600 * 1000 }, { "0250", 250 } };
	static const char *const bad[] = { "",
					   "99",
					   "0",
					   "3601s",
					   "1.5s",
					   "1m",
					   "s",
					   "1 s",
					   "-1s",
					   "1S",
					   "99999999999999999999s" };
	char var[128];
	struct parsed r;
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		test_context("TIERALLOC_ACCESS_PERIOD=%s", good[i].value);
		snprintf(var, sizeof(var), "TIERALLOC_ACCESS_PERIOD=%s", good[i].value);
		parse1(var, &r);
		expect_good(&r);
		expect_eq(r.opts.access_period_ms, good[i].ms);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		test_context("TIERALLOC_ACCESS_PERIOD=%s", bad[i]);
		snprintf(var, sizeof(var), "TIERALLOC_ACCESS_PERIOD=%s", bad[i]);
		parse1(var, &r);
		expect_bad(&r, var);
		expect_true(strstr(r.err, "expected 100ms..3600s") != NULL);
		expect_eq(r.opts.access_period_ms, 1000);
	}
	test_context("TIERALLOC_ACCESS");
	parse1("TIERALLOC_ACCESS=age", &r);
	expect_good(&r);
	expect_eq(r.opts.access, TA_ACCESS_AGE);
	parse1("TIERALLOC_ACCESS=agent", &r);
	expect_good(&r);
	expect_eq(r.opts.access, TA_ACCESS_AGENT);
	parse1("TIERALLOC_ACCESS=dirty", &r);
	expect_bad(&r, "TIERALLOC_ACCESS=dirty");
	expect_true(strstr(r.err, "expected soft-dirty, age or agent") != NULL);
	expect_eq(r.opts.access, TA_ACCESS_SOFT_DIRTY);
	test_context("%s", "");
}

/* A bad value longer than a log line: still one warning line, cut short. */
static void test_long_value(void)
{
	static char var[2100];
	struct parsed r;
	int n = snprintf(var, sizeof(var), "TIERALLOC_CHARGE_BATCH=1");
	memset(var + n, 'x', 2000);
	var[n + 2000] = '\0';
	parse1(var, &r);
	expect_eq(r.warnings, 1);
	expect_eq(r.lines, 1);
	expect_eq(r.opts.nerrors, 1);
	expect_true(r.err[0] != '\0' && r.err[strlen(r.err) - 1] == '\n');
	expect_defaults(&r.opts, 1);
}

/* The size grammar itself, which TIERALLOC_PROCESS_LIMIT shares. */
static void test_parse_size(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "1b", 1 },
		{ "1K", 1024 },
		{ "1G", 1ull << 30 },
		{ "1T", 1ull << 40 },
		{ "3tib", 3ull << 40 },
		{ "16777215T", 16777215ull << 40 }, /* the largest T that fits */
		{ "17179869183G", 17179869183ull << 30 },
		{ "1844674407370955160", 1844674407370955160ull },
	};
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 0;
		test_context("size \"%s\"", good[i].s);
		expect_eq(ta_parse_size(good[i].s, &v), 0);
		expect_eq(v, good[i].v);
	}
	static const struct {
		const char *s;
		int rc;
	} bad[] = {
		{ "", -EINVAL },
		{ "x", -EINVAL },
		{ "1KB2", -EINVAL },
		{ "1 ", -EINVAL },
		{ "1bb", -EINVAL },
		{ "16777216T", -ERANGE },
		{ "17179869184G", -ERANGE },
		{ "99999999999999999999", -ERANGE },
		{ "20000000T", -ERANGE },
		{ "999999999999999999999999999999K", -ERANGE },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 0xdead;
		test_context("size \"%s\"", bad[i].s);
		expect_eq(ta_parse_size(bad[i].s, &v), bad[i].rc);
		expect_eq(v, 0xdead);
	}
}

static void test_strings(void)
{
	struct parsed r;
	const char *good[] = { "TIERALLOC_TIERS=dram=0;cxl=1", "TIERALLOC_PROCESS_LIMIT=0=64M",
			       "TIERALLOC_SUMMARY=/tmp/x.summary", NULL };
	test_context("string options");
	parse(good, &r);
	expect_good(&r);
	/* Kept raw: they are checked against the topology later (see test_topo). */
	expect_str_eq(r.opts.tiers, "dram=0;cxl=1");
	expect_str_eq(r.opts.process_limit, "0=64M");
	expect_str_eq(r.opts.summary, "/tmp/x.summary");

	parse1("TIERALLOC_SUMMARY=stderr", &r);
	expect_good(&r);
	expect_str_eq(r.opts.summary, "stderr");
	parse1("TIERALLOC_TIERS=", &r);
	expect_good(&r);
	expect_str_eq(r.opts.tiers, "");

	/* 255 characters fit the 256-byte buffers; 256 do not: one warning, default kept. */
	static const char *const names[] = { "TIERS", "PROCESS_LIMIT", "SUMMARY" };
	for (unsigned i = 0; i < 3; i++) {
		char var[400];
		int n = snprintf(var, sizeof(var), "TIERALLOC_%s=", names[i]);
		memset(var + n, 'a', 255);
		var[n + 255] = '\0';
		parse1(var, &r);
		expect_good(&r);
		const char *field = i == 0   ? r.opts.tiers
				    : i == 1 ? r.opts.process_limit
					     : r.opts.summary;
		expect_eq(strlen(field), 255);
		var[n + 255] = 'a';
		var[n + 256] = '\0';
		parse1(var, &r);
		expect_eq(r.warnings, 1);
		expect_eq(r.lines, 1);
		expect_eq(r.opts.nerrors, 1);
		expect_true(strstr(r.err, "value too long") != NULL);
		expect_defaults(&r.opts, 1);
	}
}

static void test_unknown(void)
{
	static const char *const unknown[] = {
		"TIERALLOC_FOO=1", "TIERALLOC_disable=1", /* names are exact, upper case */
		"TIERALLOC_=1",	   "TIERALLOC_DISABLED=1", "TIERALLOC_TIER=0;1", "TIERALLOC_FOO=",
	};
	struct parsed r;
	for (unsigned i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		parse1(unknown[i], &r);
		expect_eq(r.warnings, 1);
		expect_eq(r.lines, 1);
		expect_eq(r.opts.nerrors, 1);
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)(strchr(unknown[i], '=') - unknown[i]),
			 unknown[i]);
		expect_true(strstr(r.err, name) != NULL);
		expect_defaults(&r.opts, 1);
	}

	/* A very long unknown name: one line all the same, shortened. */
	char var[300] = "TIERALLOC_";
	memset(var + 10, 'X', 200);
	strcpy(var + 210, "=1");
	parse1(var, &r);
	expect_eq(r.warnings, 1);
	expect_eq(r.lines, 1);
	expect_eq(r.opts.nerrors, 1);
}

/* TIERALLOC_SHM_NAME names a file in /dev/shm and nothing else. */
static void test_shm_name(void)
{
	static const char *const good[] = { "",	   "off",    "tieralloc-x", "/tieralloc-x",
					    "a.b", "a-b_c.1" };
	static const char *const bad[] = { "../../tmp/x", "a/b", "/a/b", "..", ".",
					   "x..y",	  "/",	 "//x",	 "/.." };
	struct parsed r;
	char var[128];
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_SHM_NAME=%s", good[i]);
		parse1(var, &r);
		expect_good(&r);
		expect_str_eq(r.opts.shm_name, good[i]);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(var, sizeof(var), "TIERALLOC_SHM_NAME=%s", bad[i]);
		parse1(var, &r);
		expect_bad(&r, var);
		expect_str_eq(r.opts.shm_name, "");
		expect_true(strstr(r.err, "using the default (one per cgroup)") != NULL);
	}
	parse1("TIERALLOC_SHM_NAME=a\tb", &r);
	expect_eq(r.warnings, 1);
	expect_eq(r.opts.nerrors, 1);
	expect_str_eq(r.opts.shm_name, "");
}

/* Every byte of a warning is printable ASCII, and the line ends once: a value's control bytes
 * (newline, ESC, DEL) and bytes above ASCII (an 8-bit CSI, 0x9b) are written as \xNN. */
static void expect_one_clean_line(const struct parsed *r)
{
	expect_eq(r->lines, 1);
	size_t len = strlen(r->err);
	expect_true(len > 0 && r->err[len - 1] == '\n');
	size_t raw = 0;
	for (size_t i = 0; i + 1 < len; i++)
		if ((unsigned char)r->err[i] < 0x20 || (unsigned char)r->err[i] >= 0x7f)
			raw++;
	expect_eq(raw, 0);
}

static void test_escapes(void)
{
	struct parsed r;
	parse1("TIERALLOC_LOG_LEVEL=warn\ntieralloc: error: forged", &r);
	expect_eq(r.warnings, 1);
	expect_eq(r.opts.nerrors, 1);
	expect_one_clean_line(&r);
	expect_true(strstr(r.err, "\"warn\\x0atieralloc: error: forged\"") != NULL);

	parse1("TIERALLOC_ON_FULL=\x1b[2J\x1b]0;title\x07\x7f\x9b"
	       "31m",
	       &r);
	expect_eq(r.warnings, 1);
	expect_one_clean_line(&r);
	expect_true(strstr(r.err, "\"\\x1b[2J\\x1b]0;title\\x07\\x7f\\x9b31m\"") != NULL);

	/* An unknown name is echoed too. */
	parse1("TIERALLOC_X\r\nY=1", &r);
	expect_eq(r.warnings, 1);
	expect_one_clean_line(&r);
	expect_true(strstr(r.err, "TIERALLOC_X\\x0d\\x0aY ignored") != NULL);

	/* Printable values are shown as they are. */
	parse1("TIERALLOC_ON_FULL=a b\\c\"d", &r);
	expect_one_clean_line(&r);
	expect_true(strstr(r.err, "\"a b\\c\"d\"") != NULL);
}

/* Several options at once: each bad one warns once, the good ones apply. */
static void test_mixed(void)
{
	struct parsed r;
	const char *all_good[] = { "TIERALLOC_DISABLE=yes",
				   "TIERALLOC_STRICT=on",
				   "TIERALLOC_SHOW_CONFIG=true",
				   "TIERALLOC_LOG_LEVEL=info",
				   "TIERALLOC_TIERS=0;1",
				   "TIERALLOC_PROCESS_LIMIT=0=1M",
				   "TIERALLOC_CHARGE_BATCH=64K",
				   "TIERALLOC_SUMMARY=stderr",
				   NULL };
	test_context("every option, good");
	parse(all_good, &r);
	expect_good(&r);
	expect_true(r.opts.disable && r.opts.strict && r.opts.show_config);
	expect_eq(r.opts.log_level, TA_LOG_INFO);
	expect_eq(r.opts.charge_batch, 64 * KiB);

	const char *mixed[] = { "TIERALLOC_DISABLE=maybe",  "TIERALLOC_CHARGE_BATCH=1K",
				"TIERALLOC_SHOW_CONFIG=1",  "TIERALLOC_NOPE=1",
				"TIERALLOC_LOG_LEVEL=loud", NULL };
	test_context("three bad values, one unknown, one good");
	parse(mixed, &r);
	expect_eq(r.warnings, 4);
	expect_eq(r.lines, 4);
	expect_eq(r.opts.nerrors, 4);
	expect_true(r.opts.show_config);
	expect_true(!r.opts.disable);
	expect_eq(r.opts.charge_batch, defaults.charge_batch);
	expect_eq(r.opts.log_level, TA_LOG_WARN);
}

/* TIERALLOC_PRIORITY (lending): a whole number from 0 to 1000, or empty. */
static void test_priority(void)
{
	static const char *const good[] = { "0", "7", "999", "1000" };
	static const char *const bad[] = { "-1", "1001", "01", "x", "10000", "5 ", "1e3" };
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char var[64];
		snprintf(var, sizeof(var), "TIERALLOC_PRIORITY=%s", good[i]);
		const char *vars[] = { var, NULL };
		struct parsed r;
		test_context("TIERALLOC_PRIORITY=%s", good[i]);
		parse(vars, &r);
		expect_eq(r.warnings, 0);
		expect_str_eq(r.opts.priority, good[i]);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char var[64];
		snprintf(var, sizeof(var), "TIERALLOC_PRIORITY=%s", bad[i]);
		const char *vars[] = { var, NULL };
		struct parsed r;
		test_context("TIERALLOC_PRIORITY=%s", bad[i]);
		parse(vars, &r);
		expect_eq(r.warnings, 1);
		expect_str_eq(r.opts.priority, "");
	}
	test_context("%s", "");
}

/* The option table: unique names, defaults that parse to the built-in defaults and render back
 * (ta_opt_render is what "opt.<name>" and TIERALLOC_SHOW_CONFIG print). */
static void test_table(void)
{
	static const char *const rendered[] = {
		"0", "0", "0", "warn",	 "",	  "",	      "262144", "8388608",    "",	"",
		"",  "",  "",  "lowest", "abort", "deferred", "gated",	"soft-dirty", "1000ms", "1"
	};
	expect_eq(ta_opt_count, 20);
	for (unsigned i = 0; i < ta_opt_count && i < 20; i++) {
		const struct ta_opt_desc *d = &ta_opt_table[i];
		test_context("table row %s", d->name);
		for (unsigned k = 0; k < i; k++)
			expect_true(strcmp(ta_opt_table[k].name, d->name) != 0);
		expect_true(d->help != NULL && d->help[0] != '\0');
		char var[128];
		snprintf(var, sizeof(var), "TIERALLOC_%s=%s", d->name, d->def);
		struct parsed r;
		const char *vars[] = { var, NULL };
		parse(vars, &r);
		expect_defaults(&r.opts, 0);
		expect_eq(r.lines, 0);
		char buf[300];
		size_t n = ta_opt_render(d, &defaults, buf, sizeof(buf));
		expect_str_eq(buf, rendered[i]);
		expect_eq(n, strlen(rendered[i]));
	}
}

/* The table is the one source of the defaults: parsing nothing gives them, every row names a
 * field of its own, of the size its type writes. */
static void test_table_fields(void)
{
	test_context("no variables");
	const char *none[] = { NULL };
	struct parsed r;
	parse(none, &r);
	expect_defaults(&r.opts, 0);
	expect_eq(r.lines, 0);
	for (unsigned i = 0; i < ta_opt_count; i++) {
		const struct ta_opt_desc *d = &ta_opt_table[i];
		test_context("table row %s: its field", d->name);
		expect_le(d->offset + d->size, sizeof(struct ta_options));
		for (unsigned k = 0; k < i; k++)
			expect_ne(ta_opt_table[k].offset, d->offset);
		switch (d->type) {
		case TA_OPT_BOOL:
			expect_eq(d->size, sizeof(bool));
			break;
		case TA_OPT_LEVEL:
		case TA_OPT_ENUM:
			expect_eq(d->size, sizeof(int));
			expect_true(d->words != NULL && d->words[0] != NULL);
			break;
		case TA_OPT_SIZE:
		case TA_OPT_MS:
			expect_eq(d->size, sizeof(uint64_t));
			expect_true(d->min <= d->max && d->max > 0);
			break;
		case TA_OPT_STRING:
			expect_ge(d->size, 2);
			break;
		}
	}
	test_context("%s", "");
}

int main(int argc, char **argv)
{
	test_reexec_with_env(argv, NULL);
	test_bools();
	test_enums();
	test_log_level();
	test_charge_batch();
	test_access_period();
	test_long_value();
	test_parse_size();
	test_strings();
	test_unknown();
	test_escapes();
	test_shm_name();
	test_mixed();
	test_table();
	test_priority();
	test_table_fields();
	return test_done();
}
