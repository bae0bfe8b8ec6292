/* SPDX-License-Identifier: MIT */
/*
 * TIERALLOC_* options. One table row per option drives the parser, the "opt.<name>" control
 * names, TIERALLOC_SHOW_CONFIG and the README table. Parsing walks environ once at start-up,
 * copies into fixed buffers and never allocates: it runs inside the first malloc calls.
 * A bad value costs one warning and keeps the default; TIERALLOC_STRICT=1 makes it fatal.
 */
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

#include "internal.h"

struct ta_options ta_opts = {
	.log_level = TA_LOG_WARN,
	.charge_batch = 256 * 1024,
};

const struct ta_opt_desc ta_opt_table[] = {
	{ "DISABLE", TA_OPT_BOOL, "0", "1: pass every call to the C library's allocator" },
	{ "STRICT", TA_OPT_BOOL, "0", "1: a bad TIERALLOC_* value ends the program at start-up" },
	{ "SHOW_CONFIG", TA_OPT_BOOL, "0", "1: print the options and tiers at start-up" },
	{ "LOG_LEVEL", TA_OPT_LEVEL, "warn", "error, warn, info or debug" },
	{ "TIERS", TA_OPT_STRING, "",
	  "tiers fastest first, ';' between tiers, numactl node lists, optional names: "
	  "\"dram=0-1;cxl=2\"; empty: discover" },
	{ "PROCESS_LIMIT", TA_OPT_STRING, "",
	  "per-process byte limit per tier, by index or name: \"0=512M;cxl=2G\"; empty: none" },
	{ "CHARGE_BATCH", TA_OPT_SIZE, "256K",
	  "bytes a thread charges at once for large objects (4K..64M)" },
	{ "SUMMARY", TA_OPT_STRING, "",
	  "at exit, append a per-tier summary to this file, or \"stderr\"; empty: none" },
	{ "SHM_NAME", TA_OPT_STRING, "",
	  "shared segment for the quotas; empty: one per cgroup; \"off\": this process alone" },
	{ "TIER_LIMITS", TA_OPT_STRING, "",
	  "fixed per-tier limits of the container: \"0.max=4G;cxl.high=3G\" (min, low, high, "
	  "max)" },
	{ "SPLIT", TA_OPT_STRING, "",
	  "split the cgroup's limits by these weights, not by capacity: \"0=75;1=25\"" },
	{ "ON_FULL", TA_OPT_ENUM, "lowest",
	  "every tier at its max: \"lowest\" places in the last tier anyway, \"enomem\" fails" },
	{ "ENFORCE", TA_OPT_ENUM, "deferred",
	  "a tier over its share: \"deferred\" demotes and reclaims from a worker thread, "
	  "\"inline\" on the allocating thread, \"off\" never" },
	{ "PROMOTION", TA_OPT_ENUM, "gated",
	  "kernel promotion (NUMA balancing) of lower-tier memory: \"gated\" while the faster "
	  "tier has headroom, \"always\", or \"never\"" },
};
const unsigned ta_opt_count = sizeof(ta_opt_table) / sizeof(ta_opt_table[0]);

static const char *const level_words[] = { "error", "warn", "info", "debug" };

/* The words of each enum option, in the order of its values; NULL-terminated. */
static const char *const on_full_words[] = { "lowest", "enomem", NULL };
static const char *const enforce_words[] = { "deferred", "inline", "off", NULL };
static const char *const promotion_words[] = { "gated", "always", "never", NULL };

static const char *const *enum_words(const char *name)
{
	if (strcmp(name, "ON_FULL") == 0)
		return on_full_words;
	if (strcmp(name, "ENFORCE") == 0)
		return enforce_words;
	return promotion_words;
}

static int enum_value(const struct ta_options *o, const char *name)
{
	if (strcmp(name, "ON_FULL") == 0)
		return o->on_full;
	if (strcmp(name, "ENFORCE") == 0)
		return o->enforce;
	return o->promotion;
}

static int *enum_field(struct ta_options *o, const char *name)
{
	if (strcmp(name, "ON_FULL") == 0)
		return &o->on_full;
	if (strcmp(name, "ENFORCE") == 0)
		return &o->enforce;
	return &o->promotion;
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
int ta_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
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
	for (int i = 0; i < 4; i++) {
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

static void bad_value(struct ta_options *opts, const char *name, const char *value, const char *why,
		      const char *def)
{
	ta_log(TA_LOG_WARN, "TIERALLOC_%s=\"%s\": %s; using the default (%s)", name, value, why,
	       def[0] ? def : "none");
	ta_config_error(opts);
}

static void copy_string(struct ta_options *opts, const struct ta_opt_desc *d, const char *value,
			char *dst, size_t size)
{
	size_t len = strlen(value);
	if (len >= size) {
		bad_value(opts, d->name, "...", "value too long", d->def);
		return;
	}
	memcpy(dst, value, len + 1);
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

static void apply(struct ta_options *opts, const struct ta_opt_desc *d, const char *value)
{
	bool b;
	uint64_t sz;
	int rc;
	switch (d->type) {
	case TA_OPT_BOOL:
		if (ta_parse_bool(value, &b) != 0) {
			bad_value(opts, d->name, value, "expected 0/1, yes/no, on/off", d->def);
			return;
		}
		if (strcmp(d->name, "DISABLE") == 0)
			opts->disable = b;
		else if (strcmp(d->name, "STRICT") == 0)
			opts->strict = b;
		else if (strcmp(d->name, "SHOW_CONFIG") == 0)
			opts->show_config = b;
		return;
	case TA_OPT_LEVEL:
		if (parse_level(value, &opts->log_level) != 0)
			bad_value(opts, d->name, value, "expected error, warn, info or debug",
				  d->def);
		return;
	case TA_OPT_SIZE:
		rc = ta_parse_size(value, &sz);
		if (rc != 0) {
			bad_value(opts, d->name, value,
				  rc == -ERANGE ? "size too large" : "bad size (e.g. 64K, 2M, 1G)",
				  d->def);
			return;
		}
		if (sz < 4096 || sz > (64u << 20)) {
			bad_value(opts, d->name, value, "out of range 4K..64M", d->def);
			return;
		}
		opts->charge_batch = sz;
		return;
	case TA_OPT_STRING:
		if (strcmp(d->name, "TIERS") == 0)
			copy_string(opts, d, value, opts->tiers, sizeof(opts->tiers));
		else if (strcmp(d->name, "PROCESS_LIMIT") == 0)
			copy_string(opts, d, value, opts->process_limit,
				    sizeof(opts->process_limit));
		else if (strcmp(d->name, "SUMMARY") == 0)
			copy_string(opts, d, value, opts->summary, sizeof(opts->summary));
		else if (strcmp(d->name, "SHM_NAME") == 0) {
			const char *why = bad_shm_name(value);
			if (why != NULL)
				bad_value(opts, d->name, value, why, "one per cgroup");
			else
				copy_string(opts, d, value, opts->shm_name, sizeof(opts->shm_name));
		} else if (strcmp(d->name, "TIER_LIMITS") == 0)
			copy_string(opts, d, value, opts->tier_limits, sizeof(opts->tier_limits));
		else if (strcmp(d->name, "SPLIT") == 0)
			copy_string(opts, d, value, opts->split, sizeof(opts->split));
		return;
	case TA_OPT_ENUM: {
		const char *const *words = enum_words(d->name);
		char expect[96];
		size_t pos = ta_format(expect, sizeof(expect), "expected");
		for (int i = 0; words[i] != NULL; i++) {
			if (strcasecmp(value, words[i]) == 0) {
				*enum_field(opts, d->name) = i;
				return;
			}
			pos += ta_format(expect + pos, sizeof(expect) - pos, "%s%s",
					 i == 0			? " "
					 : words[i + 1] == NULL ? " or "
								: ", ",
					 words[i]);
		}
		bad_value(opts, d->name, value, expect, d->def);
		return;
	}
	}
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
			ta_log(TA_LOG_WARN, "unknown variable TIERALLOC_%s ignored", shown);
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
	bool secure = getauxval(AT_SECURE) != 0;
	parse_pass(envp, opts, true, secure);
	parse_pass(envp, opts, false, secure);
}

size_t ta_opt_render(const struct ta_opt_desc *d, const struct ta_options *o, char *buf, size_t n)
{
	if (strcmp(d->name, "DISABLE") == 0)
		return ta_format(buf, n, "%d", o->disable);
	if (strcmp(d->name, "STRICT") == 0)
		return ta_format(buf, n, "%d", o->strict);
	if (strcmp(d->name, "SHOW_CONFIG") == 0)
		return ta_format(buf, n, "%d", o->show_config);
	if (strcmp(d->name, "LOG_LEVEL") == 0)
		return ta_format(buf, n, "%s", level_words[o->log_level]);
	if (strcmp(d->name, "TIERS") == 0)
		return ta_format(buf, n, "%s", o->tiers);
	if (strcmp(d->name, "PROCESS_LIMIT") == 0)
		return ta_format(buf, n, "%s", o->process_limit);
	if (strcmp(d->name, "CHARGE_BATCH") == 0)
		return ta_format(buf, n, "%llu", (unsigned long long)o->charge_batch);
	if (strcmp(d->name, "SUMMARY") == 0)
		return ta_format(buf, n, "%s", o->summary);
	if (strcmp(d->name, "SHM_NAME") == 0)
		return ta_format(buf, n, "%s", o->shm_name);
	if (strcmp(d->name, "TIER_LIMITS") == 0)
		return ta_format(buf, n, "%s", o->tier_limits);
	if (strcmp(d->name, "SPLIT") == 0)
		return ta_format(buf, n, "%s", o->split);
	if (d->type == TA_OPT_ENUM) {
		return ta_format(buf, n, "%s", enum_words(d->name)[enum_value(o, d->name)]);
	}
	return ta_format(buf, n, "?");
}
