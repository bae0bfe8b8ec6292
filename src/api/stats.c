/* SPDX-License-Identifier: MIT */
/*
 * Statistics and the control tree behind tieralloc_ctl_get/_set. Live bytes are exact at the
 * moment of reading: the arenas' folded counters plus every registered thread's own count.
 */
#include <string.h>

#include "api/api.h"

int ta_stats_tier(unsigned t, struct tieralloc_tier_stats *out)
{
	if (out == NULL || out->size < 2 * sizeof(uint32_t))
		return -EINVAL;
	struct tieralloc_tier_stats s;
	memset(&s, 0, sizeof(s));
	s.size = out->size < sizeof(s) ? out->size : (uint32_t)sizeof(s);
	s.version = 1;
	if (atomic_load(&ta_state) == TA_READY) {
		if (t >= ta_ntiers)
			return -EINVAL;
		struct ta_tier_counts counts[TA_MAX_TIERS];
		ta_tcache_sum(counts);
		const struct ta_tier_counts *tt = &counts[t];
		const struct ta_tier_charge *c = &ta_charges[t];
		s.bytes_live = tt->live > 0 ? (uint64_t)tt->live : 0;
		s.bytes_peak = atomic_load(&c->peak);
		s.charged = atomic_load(&c->charged);
		s.limit = atomic_load(&c->limit);
		s.allocs = tt->allocs;
		s.explicit_allocs = tt->explicit_allocs;
		s.steered_in = tt->steered_in;
		s.exhausted = atomic_load(&c->exhausted);
		s.overflowed = atomic_load(&c->overflowed);
		s.backend_failures = atomic_load(&ta_arenas[t].backend_failures);
	} else if (t != 0) {
		return -EINVAL;
	} else {
		s.limit = UINT64_MAX;
	}
	memcpy(out, &s, s.size);
	return 0;
}

static int put(void *out, size_t *len, const void *val, size_t size)
{
	if (out == NULL || len == NULL || *len != size)
		return -EINVAL;
	memcpy(out, val, size);
	return 0;
}

static int put_u64(void *out, size_t *len, uint64_t v)
{
	return put(out, len, &v, sizeof(v));
}

static int put_u32(void *out, size_t *len, uint32_t v)
{
	return put(out, len, &v, sizeof(v));
}

static int put_str(void *out, size_t *len, const char *s)
{
	size_t n = strlen(s) + 1;
	if (out == NULL || len == NULL || *len < n)
		return -EINVAL;
	memcpy(out, s, n);
	*len = n;
	return 0;
}

/* "tier.<t>.<rest>": the tier index, or -1; *rest points past the second dot. */
static int parse_tier_name(const char *name, const char **rest)
{
	if (strncmp(name, "tier.", 5) != 0)
		return -1;
	const char *p = name + 5;
	unsigned t = 0;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9' && t < 1000)
		t = t * 10 + (unsigned)(*p++ - '0');
	if (*p != '.')
		return -1;
	*rest = p + 1;
	return (int)t;
}

/* "cgroup.tier.<t>.<field>": the container's numbers from the shared segment (what
 * tieralloc-stat shows), -ENOENT when this process keeps its own accounting. */
static int cgroup_tier_get(const char *name, void *out, size_t *len)
{
	const char *field;
	int t = parse_tier_name(name + strlen("cgroup."), &field);
	uint64_t v;
	if (t < 0 || ta_quota_tier_field((unsigned)t, field, &v) != 0)
		return -ENOENT;
	return put_u64(out, len, v);
}

static int maps_get(const char *field, void *out, size_t *len)
{
	sigset_t old;
	uint64_t v[4];
	ta_maps_lock(&old);
	v[0] = ta_maps.n;
	v[1] = ta_maps.bytes;
	v[2] = ta_maps.refused;
	v[3] = ta_maps.refused_bytes;
	ta_maps_unlock(&old);
	static const char *const names[] = { "ranges", "bytes", "refused", "refused_bytes" };
	for (unsigned i = 0; i < 4; i++)
		if (strcmp(field, names[i]) == 0)
			return put_u64(out, len, v[i]);
	if (strcmp(field, "samples") == 0)
		return put_u64(out, len, atomic_load(&ta_maps_samples));
	if (strcmp(field, "tier") == 0)
		return put_u64(out, len,
			       atomic_load(&ta_maps_placing) ? atomic_load(&ta_maps_place_tier)
							     : UINT64_MAX);
	if (strcmp(field, "rebinds") == 0)
		return put_u64(out, len, atomic_load(&ta_maps_rebinds));
	if (strcmp(field, "moved_down") == 0 || strcmp(field, "moved_up") == 0) {
		/* Pages moved between tiers by demotion, or by exchange and filling. */
		uint64_t sum = 0;
		for (unsigned a = 0; a < TA_MAX_TIERS; a++)
			for (unsigned b = 0; b < TA_MAX_TIERS; b++)
				if (field[6] == 'd' ? b > a : b < a)
					sum += atomic_load(&ta_maps_moved[a][b]);
		return put_u64(out, len, sum);
	}
	if (strcmp(field, "sample_ns") == 0)
		return put_u64(out, len, atomic_load(&ta_maps_sample_ns));
	if (strcmp(field, "sample_ns_total") == 0)
		return put_u64(out, len, atomic_load(&ta_maps_sample_ns_total));
	if (strcmp(field, "sample") == 0) {
		/* Set-like: a get samples now (tests, and tools that want a fresh figure), after
		 * the worker's sample if one is under way. */
		return put_u32(out, len, ta_maps_sample(true) ? 1u : 0u);
	}
	return -ENOENT;
}

int ta_ctl_get(const char *name, void *out, size_t *len)
{
	if (name == NULL)
		return -EINVAL;
	if (strcmp(name, "version") == 0) {
		const char *v = tieralloc_version();
		return put(out, len, &v, sizeof(v));
	}
	if (strcmp(name, "tiers") == 0)
		return put_u32(out, len, (uint32_t)tieralloc_tier_count());
	if (strcmp(name, "passthrough") == 0)
		return put_u32(out, len, atomic_load(&ta_state) != TA_READY);
	if (strncmp(name, "cgroup.", 7) == 0)
		return cgroup_tier_get(name, out, len);
	if (strcmp(name, "shm.active") == 0)
		return put_u32(out, len, ta_quota_active());
	if (strcmp(name, "agent.alarms") == 0)
		return put_u64(out, len, atomic_load(&ta_agent_alarms));
	/* Where heat comes from, and how often and how long it was sampled (access.c). */
	if (strcmp(name, "access.source") == 0)
		return put_str(out, len, ta_access_source());
	if (strcmp(name, "access.samples") == 0)
		return put_u64(out, len, atomic_load(&ta_access_samples));
	if (strcmp(name, "access.sample_ns") == 0)
		return put_u64(out, len, atomic_load(&ta_access_sample_ns));
	if (strcmp(name, "access.period_ns") == 0)
		return put_u64(out, len, atomic_load(&ta_access_period_ns));
	/* The program's own mappings (api/maps.c): recorded, refused, sampled. */
	if (strncmp(name, "maps.", 5) == 0)
		return maps_get(name + 5, out, len);
	if (strncmp(name, "opt.", 4) == 0) {
		for (unsigned i = 0; i < ta_opt_count; i++) {
			if (strcmp(ta_opt_table[i].name, name + 4) != 0)
				continue;
			char val[300];
			ta_opt_render(&ta_opt_table[i], &ta_opts, val, sizeof(val));
			return put_str(out, len, val);
		}
		return -ENOENT;
	}
	const char *field;
	int t = parse_tier_name(name, &field);
	if (t < 0)
		return -ENOENT;
	struct tieralloc_tier_stats s = { .size = sizeof(s) };
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "bytes_live", offsetof(struct tieralloc_tier_stats, bytes_live) },
		{ "bytes_peak", offsetof(struct tieralloc_tier_stats, bytes_peak) },
		{ "charged", offsetof(struct tieralloc_tier_stats, charged) },
		{ "limit", offsetof(struct tieralloc_tier_stats, limit) },
		{ "allocs", offsetof(struct tieralloc_tier_stats, allocs) },
		{ "explicit_allocs", offsetof(struct tieralloc_tier_stats, explicit_allocs) },
		{ "steered_in", offsetof(struct tieralloc_tier_stats, steered_in) },
		{ "exhausted", offsetof(struct tieralloc_tier_stats, exhausted) },
		{ "overflowed", offsetof(struct tieralloc_tier_stats, overflowed) },
		{ "backend_failures", offsetof(struct tieralloc_tier_stats, backend_failures) },
	};
	/* What this process's enforcement did in the tier. */
	if (t < (int)ta_ntiers && atomic_load(&ta_state) == TA_READY) {
		struct ta_arena *a = &ta_arenas[t];
		if (strcmp(field, "demoted") == 0)
			return put_u64(out, len, atomic_load(&a->demoted));
		if (strcmp(field, "demotions") == 0)
			return put_u64(out, len, atomic_load(&a->demotions));
		if (strcmp(field, "reclaim_asked") == 0)
			return put_u64(out, len, atomic_load(&a->reclaim_asked));
		/* Memory held without being used, and what went back to the kernel. */
		if (strcmp(field, "purged") == 0)
			return put_u64(out, len, atomic_load(&a->purged));
		if (strcmp(field, "kept") == 0)
			return put_u64(out, len, ta_keep_bytes((unsigned)t));
		if (strcmp(field, "kept_released") == 0)
			return put_u64(out, len, ta_keep_released((unsigned)t));
		if (strcmp(field, "startup") == 0)
			return put_u64(out, len, ta_startup_bytes((unsigned)t));
		/* Hot and cold by the access source, and what the exchange moved. */
		struct ta_access_tier *at = &ta_access_tiers[t];
		if (strcmp(field, "hot") == 0)
			return put_u64(out, len, atomic_load(&at->hot));
		if (strcmp(field, "cold") == 0)
			return put_u64(out, len, atomic_load(&at->cold));
		if (strcmp(field, "unknown") == 0)
			return put_u64(out, len, atomic_load(&at->unknown));
		if (strcmp(field, "promoted") == 0)
			return put_u64(out, len, atomic_load(&at->promoted));
		if (strcmp(field, "exchanged_down") == 0)
			return put_u64(out, len, atomic_load(&at->exchanged_down));
		if (strcmp(field, "mapped") == 0)
			return put_u64(out, len, atomic_load(&ta_maps_resident[t]));
		if (strcmp(field, "mapped_peak") == 0)
			return put_u64(out, len, atomic_load(&ta_maps_resident_peak[t]));
		if (strcmp(field, "mapped_charged") == 0)
			return put_u64(out, len, ta_charge_mapped_now((unsigned)t));
	}
	if (strcmp(field, "capacity") == 0) {
		struct tieralloc_tier_info info = { .size = sizeof(info) };
		if (tieralloc_tier_info(t, &info) != 0)
			return -ENOENT;
		return put_u64(out, len, info.capacity);
	}
	for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (strcmp(fields[i].name, field) != 0)
			continue;
		if (ta_stats_tier((unsigned)t, &s) != 0)
			return -ENOENT;
		uint64_t v;
		memcpy(&v, (const char *)&s + fields[i].off, sizeof(v));
		return put_u64(out, len, v);
	}
	return -ENOENT;
}

int ta_ctl_set(const char *name, const void *in, size_t len)
{
	if (name == NULL)
		return -EINVAL;
	if (strcmp(name, "purge") == 0) {
		/* Everything held and unused goes back to the kernel now. */
		ta_tcache_flush_all_mine();
		ta_purge_all();
		return 0;
	}
	if (strcmp(name, "thread.flush") == 0) {
		ta_tcache_flush_all_mine();
		return 0;
	}
	const char *field;
	int t = parse_tier_name(name, &field);
	if (t >= 0 && strcmp(field, "limit") == 0) {
		if (atomic_load(&ta_state) != TA_READY || (unsigned)t >= ta_ntiers)
			return -ENOENT;
		if (in == NULL || len != sizeof(uint64_t))
			return -EINVAL;
		uint64_t v;
		memcpy(&v, in, sizeof(v));
		atomic_store(&ta_charges[t].limit, v);
		return 0;
	}
	/* Every other known name is read-only. */
	size_t dummy_len = 0;
	int rc = ta_ctl_get(name, NULL, &dummy_len);
	return rc == -ENOENT ? -ENOENT : -EPERM;
}
