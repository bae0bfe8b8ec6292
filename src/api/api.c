/* SPDX-License-Identifier: MIT */
/*
 * The public tieralloc_* symbols: thin wrappers over the core, kept apart so that the core's
 * functions stay hidden and inlinable, and the preload library can define malloc & co. on them.
 */
#include <string.h>

#include "api/api.h"

const char *tieralloc_version(void)
{
	return PACKAGE_VERSION;
}

void *tieralloc_malloc(size_t size)
{
	return ta_malloc(size);
}

void tieralloc_free(void *ptr)
{
	ta_free(ptr);
}

void *tieralloc_calloc(size_t nmemb, size_t size)
{
	return ta_calloc(nmemb, size);
}

void *tieralloc_realloc(void *ptr, size_t size)
{
	return ta_realloc(ptr, size);
}

void *tieralloc_reallocarray(void *ptr, size_t nmemb, size_t size)
{
	return ta_reallocarray(ptr, nmemb, size);
}

int tieralloc_posix_memalign(void **memptr, size_t alignment, size_t size)
{
	return ta_posix_memalign(memptr, alignment, size);
}

void *tieralloc_aligned_alloc(size_t alignment, size_t size)
{
	return ta_aligned_alloc(alignment, size);
}

void *tieralloc_memalign(size_t alignment, size_t size)
{
	return ta_memalign(alignment, size);
}

void *tieralloc_valloc(size_t size)
{
	return ta_valloc(size);
}

void *tieralloc_pvalloc(size_t size)
{
	return ta_pvalloc(size);
}

size_t tieralloc_malloc_usable_size(void *ptr)
{
	return ta_usable_size(ptr);
}

void *tieralloc_malloc_tier(int tier, size_t size)
{
	return ta_malloc_tier(tier, size, false);
}

void *tieralloc_calloc_tier(int tier, size_t nmemb, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return ta_malloc_tier(tier, total, true);
}

int tieralloc_tier_of(const void *ptr)
{
	return ta_tier_of(ptr);
}

int tieralloc_tier_count(void)
{
	return atomic_load(&ta_state) == TA_READY ? (int)ta_ntiers : 1;
}

int tieralloc_tier_info(int tier, struct tieralloc_tier_info *out)
{
	if (out == NULL || out->size < 2 * sizeof(uint32_t) || tier < 0 ||
	    tier >= tieralloc_tier_count())
		return -EINVAL;
	struct tieralloc_tier_info info;
	memset(&info, 0, sizeof(info));
	info.size = out->size < sizeof(info) ? out->size : (uint32_t)sizeof(info);
	info.version = 1;
	if (atomic_load(&ta_state) == TA_READY) {
		const struct ta_tier_desc *d = &ta_topo.tier[tier];
		ta_format(info.name, sizeof(info.name), "%s", d->name);
		ta_nodelist_format(d->nodes, info.nodes, sizeof(info.nodes));
		ta_format(info.kind, sizeof(info.kind), "%s", ta_backend[tier].kind_name);
		info.capacity = d->capacity;
		info.share_ppm = d->share_ppm;
		info.bound = ta_backend[tier].bound;
	} else {
		ta_format(info.name, sizeof(info.name), "passthrough");
		ta_format(info.kind, sizeof(info.kind), "libc");
		info.share_ppm = 1000000;
	}
	memcpy(out, &info, info.size);
	return 0;
}

int tieralloc_tier_stats(int tier, struct tieralloc_tier_stats *out)
{
	if (tier < 0)
		return -EINVAL;
	return ta_stats_tier((unsigned)tier, out);
}

int tieralloc_ctl_get(const char *name, void *out, size_t *len)
{
	return ta_ctl_get(name, out, len);
}

int tieralloc_ctl_set(const char *name, const void *in, size_t len)
{
	return ta_ctl_set(name, in, len);
}
