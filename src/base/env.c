/* SPDX-License-Identifier: MIT */
/*
 * TIERALLOC_* options. One table row per option drives the parser, the "opt.<name>" control
 * names, TIERALLOC_SHOW_CONFIG and man/tieralloc.7's ENVIRONMENT (tests/man checks it). Parsing
 * walks environ once at start-up, copies into fixed buffers and never allocates: it runs inside
 * the first malloc calls.
 * A bad value costs one warning and keeps the default; TIERALLOC_STRICT=1 makes it fatal.
 */
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

#include "base/base.h"

struct ta_options ta_opts; /* every field set from the table's defaults by ta_env_parse */

static const char *const level_words[] = { "error", "warn", "info", "debug", NULL };
static const char *const on_full_words[] = { "lowest", "enomem", NULL };
static const char *const enforce_words[] = { "deferred", "inline", "off", NULL };
static const char *const promotion_words[] = { "gated", "always", "never", NULL };
static const char *const access_words[] = { "soft-dirty", "age", "agent", NULL };
static const char *const misuse_words[] = { "abort", "warn", NULL };

static const char *bad_shm_name(const char *v);
static const char *bad_priority(const char *v);

#define FIELD(f) offsetof(struct ta_options, f), sizeof(((struct ta_options *)0)->f)

const struct ta_opt_desc ta_opt_table[] = {
	{ "DISABLE", TA_OPT_BOOL, FIELD(disable), "0",
	  .help = "1: pass every call to the C library's allocator" },
	{ "STRICT", TA_OPT_BOOL, FIELD(strict), "0",
	  .help = "1: a bad TIERALLOC_* value ends the program at start-up" },
	{ "SHOW_CONFIG", TA_OPT_BOOL, FIELD(show_config), "0",
	  .help = "1: print the options and tiers at start-up" },
	{ "LOG_LEVEL", TA_OPT_LEVEL, FIELD(log_level), "warn", .words = level_words,
	  .help = "error, warn, info or debug" },
	{ "TIERS", TA_OPT_STRING, FIELD(tiers), "",
	  .help = "tiers fastest first, ';' between tiers, numactl node lists, optional names: "
		  "\"dram=0-1;cxl=2\"; empty: discover" },
	{ "PROCESS_LIMIT", TA_OPT_STRING, FIELD(process_limit), "",
	  .help = "per-process byte limit per tier, by index or name: \"0=512M;cxl=2G\"; empty: "
		  "none" },
	{ "CHARGE_BATCH", TA_OPT_SIZE, FIELD(charge_batch), "256K", .min = 4096, .max = 64u << 20,
	  .help = "bytes a thread charges at once for large objects" },
	{ "PACK", TA_OPT_SIZE, FIELD(pack), "8M", .min = 0, .max = 64u << 20,
	  .help =
	      "bytes of a process's first objects of 129 B to 16 KiB packed together, glibc-like "
	      "(never given back to the kernel); 0: none" },
	{ "SUMMARY", TA_OPT_STRING, FIELD(summary), "",
	  .help = "at exit, append a per-tier summary to this file, or \"stderr\"; empty: none" },
	{ "SHM_NAME", TA_OPT_STRING, FIELD(shm_name), "", .check = bad_shm_name,
	  .shown_default = "one per cgroup",
	  .help = "shared segment for the quotas; empty: one per cgroup; \"off\": this process "
		  "alone" },
	{ "TIER_LIMITS", TA_OPT_STRING, FIELD(tier_limits), "",
	  .help = "fixed per-tier limits of the container: \"0.max=4G;cxl.high=3G\" (min, low, "
		  "high, max)" },
	{ "SPLIT", TA_OPT_STRING, FIELD(split), "",
	  .help = "split the cgroup's limits by these weights, not by capacity: \"0=75;1=25\"" },
	{ "PRIORITY", TA_OPT_STRING, FIELD(priority), "", .check = bad_priority,
	  .shown_default = "0",
	  .help = "the container's priority for idle fast-tier shares (tierallocd --lend): 0 to "
		  "1000, higher borrows first and is revoked last; empty: 0" },
	{ "ON_FULL", TA_OPT_ENUM, FIELD(on_full), "lowest", .words = on_full_words,
	  .help = "every tier at its max: \"lowest\" places in the last tier anyway, \"enomem\" "
		  "fails" },
	{ "ON_MISUSE", TA_OPT_ENUM, FIELD(on_misuse), "abort", .words = misuse_words,
	  .help = "a heap misuse seen (double free, a pointer that starts no object, an object's "
		  "header or free-list link overwritten): \"abort\" after one line on stderr, or "
		  "\"warn\" and leak the object" },
	{ "ENFORCE", TA_OPT_ENUM, FIELD(enforce), "deferred", .words = enforce_words,
	  .help = "a tier over its share: \"deferred\" demotes and reclaims from a worker thread, "
		  "\"inline\" on the allocating thread, \"off\" never" },
	{ "PROMOTION", TA_OPT_ENUM, FIELD(promotion), "gated", .words = promotion_words,
	  .help = "kernel promotion (NUMA balancing) of lower-tier memory: \"gated\" while the "
		  "faster tier has headroom, \"always\", or \"never\"" },
	{ "ACCESS", TA_OPT_ENUM, FIELD(access), "soft-dirty", .words = access_words,
	  .help =
	      "what ranks memory for demotion and promotion: \"soft-dirty\" (pages written "
	      "lately, then age; age alone where the kernel lacks soft-dirty bits), \"age\", or "
	      "\"agent\" (soft-dirty plus what tierallocd --access damon saw accessed, reads "
	      "included)" },
	{ "ACCESS_PERIOD", TA_OPT_MS, FIELD(access_period_ms), "1s", .min = 100, .max = 3600 * 1000,
	  .help = "how often written pages are sampled under a quota (ms or s suffix)" },
	{ "MAPS", TA_OPT_BOOL, FIELD(maps), "1",
	  .help = "1: record the program's own anonymous mappings (mmap) and sample on which "
		  "tier they are resident; 0: pass mmap, munmap and mremap through" },
};
const unsigned ta_opt_count = sizeof(ta_opt_table) / sizeof(ta_opt_table[0]);

/* The option's field in opts. */
static void *field_of(struct ta_options *opts, const struct ta_opt_desc *d)
{
	return (char *)opts + d->offset;
}

static const void *cfield_of(const struct ta_options *opts, const struct ta_opt_desc *d)
{
	return (const char *)opts + d->offset;
}

void ta_config_error(struct ta_options *opts)
{
	opts->nerrors++;
}

int ta_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "on", "true" };
	static const char *const no[] = { "0", "no", "off", "false" };
	for (unsigned i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* "123", "64K", "2M", "1G", "1T" (binary multiples, optional trailing B or iB). */
/* The decimal digits at *p (at least one) into *v, *p moved past them: 0, -EINVAL or -ERANGE. */
static int parse_digits(const char **p, uint64_t *v)
{
	const char *q = *p;
	if (*q < '0' || *q > '9')
		return -EINVAL;
	for (*v = 0; *q >= '0' && *q <= '9'; q++) {
		if (*v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		*v = *v * 10 + (uint64_t)(*q - '0');
	}
	*p = q;
	return 0;
}

int ta_parse_size(const char *s, uint64_t *out)
{
	uint64_t v;
	const char *p = s;
	int rc = parse_digits(&p, &v);
	if (rc != 0)
		return rc;
	unsigned shift = 0;
	switch (*p) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		if (strcasecmp(p, "b") == 0)
			p++;
		else
			return -EINVAL;
	}
	if (shift != 0) {
		p++;
		if (strcasecmp(p, "b") == 0 || strcasecmp(p, "ib") == 0)
			p += strlen(p);
		if (v > (UINT64_MAX >> shift))
			return -ERANGE;
		v <<= shift;
	}
	if (*p != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_level(const char *s, int *out)
{
	for (int i = 0; level_words[i] != NULL; i++) {
		if (strcasecmp(s, level_words[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) {
			*out = i;
			return 0;
		}
	}
	if (strcasecmp(s, "warning") == 0) {
		*out = TA_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

static void bad_value(struct ta_options *opts, const struct ta_opt_desc *d, const char *value,
		      const char *why)
{
	const char *def = d->shown_default != NULL ? d->shown_default
			  : d->def[0] != '\0'	   ? d->def
						   : "none";
	ta_config_log(TA_LOG_WARN, "TIERALLOC_%s=\"%s\": %s; using the default (%s)", d->name,
		      value, why, def);
	ta_config_error(opts);
}

/* TIERALLOC_SHM_NAME names a file directly in /dev/shm: one optional leading '/', then no '/',
 * no "..", no control bytes ("../../tmp/x" would otherwise create /tmp/x). NULL if good. */
static const char *bad_shm_name(const char *v)
{
	if (v[0] == '\0' || strcmp(v, "off") == 0)
		return NULL;
	const char *name = v[0] == '/' ? v + 1 : v;
	if (name[0] == '\0')
		return "no name after '/'";
	if (strchr(name, '/') != NULL)
		return "a name in /dev/shm, without '/'";
	if (strstr(name, "..") != NULL || strcmp(name, ".") == 0)
		return "a name in /dev/shm, without \"..\"";
	for (const char *p = name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "control characters in the name";
	return NULL;
}

uint32_t ta_priority_value(const char *v)
{
	uint32_t p = 0;
	for (; *v >= '0' && *v <= '9' && p <= TA_PRIORITY_MAX; v++)
		p = p * 10 + (uint32_t)(*v - '0');
	return p <= TA_PRIORITY_MAX ? p : 0;
}

static const char *bad_priority(const char *v)
{
	size_t n = strlen(v);
	if (n == 0)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (v[i] < '0' || v[i] > '9')
			return "a whole number from 0 to 1000";
	if (n > 4 || (n > 1 && v[0] == '0') || ta_priority_value(v) > TA_PRIORITY_MAX ||
	    (n == 4 && strcmp(v, "1000") != 0))
		return "a whole number from 0 to 1000";
	return NULL;
}

/* A size as it is written: in the largest unit that divides it ("4K", "64M"). */
static void size_words(uint64_t v, char *buf, size_t n)
{
	static const char units[] = "KMGT";
	unsigned u = 0;
	while (u < 4 && v != 0 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		ta_format(buf, n, "%llu", (unsigned long long)v);
	else
		ta_format(buf, n, "%llu%c", (unsigned long long)v, units[u - 1]);
}

int ta_parse_ms(const char *s, uint64_t *out)
{
	uint64_t v;
	const char *p = s;
	int rc = parse_digits(&p, &v);
	if (rc != 0)
		return rc;
	if (strcmp(p, "s") == 0) {
		if (v > UINT64_MAX / 1000)
			return -ERANGE;
		v *= 1000;
	} else if (*p != '\0' && strcmp(p, "ms") != 0) {
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* Set d's field from value: 0, or -1 (nothing changed) with one warning. */
static int apply(struct ta_options *opts, const struct ta_opt_desc *d, const char *value)
{
	void *f = field_of(opts, d);
	switch (d->type) {
	case TA_OPT_BOOL:
		if (ta_parse_bool(value, (bool *)f) != 0) {
			bad_value(opts, d, value, "expected 0/1, yes/no, on/off");
			return -1;
		}
		return 0;
	case TA_OPT_LEVEL:
		if (parse_level(value, (int *)f) != 0) {
			bad_value(opts, d, value, "expected error, warn, info or debug");
			return -1;
		}
		return 0;
	case TA_OPT_SIZE: {
		uint64_t sz;
		int rc = ta_parse_size(value, &sz);
		if (rc != 0) {
			bad_value(opts, d, value,
				  rc == -ERANGE ? "size too large" : "bad size (e.g. 64K, 2M, 1G)");
			return -1;
		}
		if (sz < d->min || sz > d->max) {
			char why[64], lo[24], hi[24];
			size_words(d->min, lo, sizeof(lo));
			size_words(d->max, hi, sizeof(hi));
			ta_format(why, sizeof(why), "out of range %s..%s", lo, hi);
			bad_value(opts, d, value, why);
			return -1;
		}
		*(uint64_t *)f = sz;
		return 0;
	}
	case TA_OPT_MS: {
		uint64_t ms;
		int rc = ta_parse_ms(value, &ms);
		if (rc != 0 || ms < d->min || ms > d->max) {
			char why[80];
			ta_format(why, sizeof(why), "expected %llums..%llus (ms or s suffix)",
				  (unsigned long long)d->min, (unsigned long long)(d->max / 1000));
			bad_value(opts, d, value, why);
			return -1;
		}
		*(uint64_t *)f = ms;
		return 0;
	}
	case TA_OPT_STRING: {
		const char *why = d->check != NULL ? d->check(value) : NULL;
		if (why != NULL) {
			bad_value(opts, d, value, why);
			return -1;
		}
		size_t len = strlen(value);
		if (len >= d->size) {
			bad_value(opts, d, "...", "value too long");
			return -1;
		}
		memcpy(f, value, len + 1);
		return 0;
	}
	case TA_OPT_ENUM: {
		char expect[96];
		size_t pos = ta_format(expect, sizeof(expect), "expected");
		for (int i = 0; d->words[i] != NULL; i++) {
			if (strcasecmp(value, d->words[i]) == 0) {
				*(int *)f = i;
				return 0;
			}
			pos += ta_format(expect + pos, sizeof(expect) - pos, "%s%s",
					 i == 0			   ? " "
					 : d->words[i + 1] == NULL ? " or "
								   : ", ",
					 d->words[i]);
		}
		bad_value(opts, d, value, expect);
		return -1;
	}
	}
	return -1;
}

static const struct ta_opt_desc *find_opt(const char *name, size_t len)
{
	for (unsigned i = 0; i < ta_opt_count; i++) {
		if (strlen(ta_opt_table[i].name) == len &&
		    memcmp(ta_opt_table[i].name, name, len) == 0)
			return &ta_opt_table[i];
	}
	return NULL;
}

/* One pass over envp for the options whose name satisfies want(). */
static void parse_pass(char **envp, struct ta_options *opts, bool first_pass, bool secure)
{
	static const char prefix[] = "TIERALLOC_";
	for (char **e = envp; e != NULL && *e != NULL; e++) {
		if (strncmp(*e, prefix, sizeof(prefix) - 1) != 0)
			continue;
		const char *name = *e + sizeof(prefix) - 1;
		const char *eq = strchr(name, '=');
		if (eq == NULL)
			continue;
		size_t len = (size_t)(eq - name);
		const struct ta_opt_desc *d = find_opt(name, len);
		/* Level and strictness first, so that they govern the other options' warnings. */
		bool early =
		    d != NULL && (d->type == TA_OPT_LEVEL || strcmp(d->name, "STRICT") == 0);
		if (early != first_pass)
			continue;
		if (d == NULL) {
			char shown[64];
			size_t n = len < sizeof(shown) - 1 ? len : sizeof(shown) - 1;
			memcpy(shown, name, n);
			shown[n] = '\0';
			ta_config_log(TA_LOG_WARN, "unknown variable TIERALLOC_%s ignored", shown);
			ta_config_error(opts);
			continue;
		}
		/* A setuid program must not be steered by its caller's environment. */
		if (secure && strcmp(d->name, "DISABLE") != 0)
			continue;
		apply(opts, d, eq + 1);
		if (d->type == TA_OPT_LEVEL)
			ta_log_level = opts->log_level;
	}
}

void ta_env_parse(char **envp, struct ta_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	for (unsigned i = 0; i < ta_opt_count; i++)
		apply(opts, &ta_opt_table[i], ta_opt_table[i].def);
	bool secure = getauxval(AT_SECURE) != 0;
	parse_pass(envp, opts, true, secure);
	parse_pass(envp, opts, false, secure);
}

size_t ta_opt_render(const struct ta_opt_desc *d, const struct ta_options *o, char *buf, size_t n)
{
	const void *f = cfield_of(o, d);
	switch (d->type) {
	case TA_OPT_BOOL:
		return ta_format(buf, n, "%d", *(const bool *)f);
	case TA_OPT_SIZE:
		return ta_format(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f);
	case TA_OPT_MS:
		return ta_format(buf, n, "%llums", (unsigned long long)*(const uint64_t *)f);
	case TA_OPT_STRING:
		return ta_format(buf, n, "%s", (const char *)f);
	case TA_OPT_LEVEL:
	case TA_OPT_ENUM:
		return ta_format(buf, n, "%s", d->words[*(const int *)f]);
	}
	return ta_format(buf, n, "?");
}
