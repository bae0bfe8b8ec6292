/* SPDX-License-Identifier: MIT */
/*
 * Per-container quota configuration on top of the cgroup's limits:
 *   TIERALLOC_TIER_LIMITS="0.max=4G;cxl.high=3G"  fixed per-tier values (min, low, high, max);
 *   TIERALLOC_SPLIT="0=75;1=25"                     split the cgroup's limits by these weights
 *                                                   instead of the tiers' capacity shares.
 * (TIERALLOC_ON_FULL is read where it acts, ta_opts.on_full in alloc.c.) Parsed once at start; a
 * bad value gives one warning and leaves the default in force.
 * And the joining of the cgroup's segment at start (ta_quota_attach), with these in force.
 */
#include <string.h>

#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"
#include "quota/shm.h"

static const char *const limit_names[TA_NLIMITS] = { "min", "low", "high", "max" };
static uint64_t override_value[TA_MAX_TIERS][TA_NLIMITS];
static bool override_set[TA_MAX_TIERS][TA_NLIMITS];
static uint32_t split_ppm[TA_MAX_TIERS];
static bool split_set;
static const struct ta_topology *quota_topo;

static int parse_limits(const struct ta_topology *topo, const char *spec, const char **why)
{
	uint64_t value[TA_MAX_TIERS][TA_NLIMITS];
	bool set[TA_MAX_TIERS][TA_NLIMITS];
	memset(set, 0, sizeof(set));
	for (const char *p = spec; *p != '\0';) {
		size_t len = strcspn(p, ";");
		const char *dot = memchr(p, '.', len), *eq = memchr(p, '=', len);
		if (dot == NULL || eq == NULL || eq < dot) {
			*why = "expected TIER.KIND=SIZE entries (KIND: min, low, high, max)";
			return -EINVAL;
		}
		int t = ta_topo_tier_by_name(topo, p, (size_t)(dot - p));
		if (t < 0) {
			*why = "unknown tier (an index or a name from TIERALLOC_TIERS)";
			return -EINVAL;
		}
		int k = -1;
		for (int i = 0; i < TA_NLIMITS; i++)
			if ((size_t)(eq - dot - 1) == strlen(limit_names[i]) &&
			    memcmp(dot + 1, limit_names[i], strlen(limit_names[i])) == 0)
				k = i;
		if (k < 0) {
			*why = "unknown limit (min, low, high or max)";
			return -EINVAL;
		}
		char num[32];
		size_t nlen = len - (size_t)(eq + 1 - p);
		if (nlen == 0 || nlen >= sizeof(num)) {
			*why = "bad size";
			return -EINVAL;
		}
		memcpy(num, eq + 1, nlen);
		num[nlen] = '\0';
		if (set[t][k]) {
			*why = "limit given twice";
			return -EINVAL;
		}
		if (ta_parse_size(num, &value[t][k]) != 0) {
			*why = "bad size (e.g. 512M, 4G)";
			return -EINVAL;
		}
		set[t][k] = true;
		p += len;
		if (*p == ';')
			p++;
	}
	memcpy(override_value, value, sizeof(value));
	memcpy(override_set, set, sizeof(set));
	return 0;
}

static int parse_split(const struct ta_topology *topo, const char *spec, const char **why)
{
	uint64_t weight[TA_MAX_TIERS] = { 0 }, total = 0;
	bool seen[TA_MAX_TIERS] = { false };
	for (const char *p = spec; *p != '\0';) {
		size_t len = strcspn(p, ";");
		const char *eq = memchr(p, '=', len);
		if (eq == NULL) {
			*why = "expected TIER=WEIGHT entries";
			return -EINVAL;
		}
		int t = ta_topo_tier_by_name(topo, p, (size_t)(eq - p));
		if (t < 0 || seen[t]) {
			*why = t < 0 ? "unknown tier" : "tier given twice";
			return -EINVAL;
		}
		uint64_t w = 0;
		const char *q = eq + 1;
		if (q == p + len) {
			*why = "missing weight";
			return -EINVAL;
		}
		for (; q < p + len; q++) {
			if (*q < '0' || *q > '9') {
				*why = "weights are whole numbers up to 1000000";
				return -EINVAL;
			}
			w = w * 10 + (uint64_t)(*q - '0');
			if (w > 1000000) {
				*why = "weights are whole numbers up to 1000000";
				return -EINVAL;
			}
		}
		weight[t] = w;
		seen[t] = true;
		total += w;
		p += len;
		if (*p == ';')
			p++;
	}
	for (unsigned t = 0; t < topo->ntiers; t++) {
		if (!seen[t]) {
			*why = "every tier needs a weight";
			return -EINVAL;
		}
	}
	if (total == 0) {
		*why = "weights add up to 0";
		return -EINVAL;
	}
	for (unsigned t = 0; t < topo->ntiers; t++)
		split_ppm[t] = (uint32_t)(weight[t] * 1000000 / total);
	split_set = true;
	return 0;
}

int ta_quota_init(const struct ta_topology *topo, struct ta_options *opts)
{
	const char *why = NULL;
	quota_topo = topo;
	if (opts->tier_limits[0] != '\0' && parse_limits(topo, opts->tier_limits, &why) != 0) {
		ta_config_log(TA_LOG_WARN,
			      "TIERALLOC_TIER_LIMITS=\"%s\": %s; using the cgroup's limits",
			      opts->tier_limits, why);
		ta_config_error(opts);
	}
	if (opts->split[0] != '\0' && parse_split(topo, opts->split, &why) != 0) {
		ta_config_log(TA_LOG_WARN, "TIERALLOC_SPLIT=\"%s\": %s; splitting by capacity",
			      opts->split, why);
		ta_config_error(opts);
	}
	return 0;
}

bool ta_quota_override(unsigned t, unsigned k, uint64_t *out)
{
	if (t >= TA_MAX_TIERS || k >= TA_NLIMITS || !override_set[t][k])
		return false;
	*out = override_value[t][k];
	return true;
}

bool ta_quota_customised(void)
{
	if (split_set)
		return true;
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			if (override_set[t][k])
				return true;
	return false;
}

uint32_t ta_quota_share(unsigned t)
{
	if (split_set)
		return split_ppm[t];
	return quota_topo != NULL ? quota_topo->tier[t].share_ppm : 1000000;
}

/* Join the cgroup's shared segment, unless TIERALLOC_SHM_NAME=off. */
void ta_quota_attach(void)
{
	ta_quota_init(&ta_topo, &ta_opts);
	if (strcmp(ta_opts.shm_name, "off") == 0)
		return;
	struct ta_cgroup cg;
	if (ta_cgroup_self("", &cg) != 0) {
		memset(&cg, 0, sizeof(cg));
		ta_format(cg.key, sizeof(cg.key), "machine");
	}
	char name[128];
	ta_shm_name(&cg, &ta_topo, ta_opts.shm_name, name, sizeof(name));
	/* The segment holds the cgroup's limits as a process of it read them within the period:
	 * read them again only when they are older, or when this process's options change them.
	 * Saves a process start two to four cgroup files per level of the hierarchy. */
	if (ta_shm_attach(name, &cg, &ta_topo) == 0)
		ta_shm_refresh_limits(ta_quota_customised());
}
