/* SPDX-License-Identifier: MIT */
/*
 * The agent's access file: checked before anything in it is believed (it comes from another
 * process, through a file any user could have made under that name), and folded into a range's
 * accessed part. See heatfile.h.
 */
#include <string.h>

#include "enforce/heatfile.h"

int ta_heatfile_parse(const void *buf, size_t len, uint32_t pid, uint64_t start_time,
		      uint64_t now_ns, const struct ta_heatfile_header **hdr,
		      const struct ta_heatfile_region **regions, const char **why)
{
	const struct ta_heatfile_header *h = buf;
	if (len < sizeof(*h) || h->magic != TA_HEATFILE_MAGIC) {
		*why = "not an access file";
		return -1;
	}
	if (h->version != TA_HEATFILE_VERSION || h->header_size != sizeof(*h)) {
		*why = "an access file of another version";
		return -1;
	}
	if (h->nregions > TA_HEATFILE_MAX_REGIONS ||
	    len != sizeof(*h) + (size_t)h->nregions * sizeof(struct ta_heatfile_region)) {
		*why = "an access file of the wrong size";
		return -1;
	}
	if (h->pid != pid || h->start_time != start_time) {
		*why = "an access file of another process";
		return -1;
	}
	if (h->max_accesses == 0 || h->max_accesses > 1000000 || h->interval_ns == 0) {
		*why = "an access file without a scale";
		return -1;
	}
	/* Written in the future is as suspect as written long ago. */
	if (h->written_ns > now_ns || now_ns - h->written_ns > 3 * h->interval_ns) {
		*why = "the agent's access file is stale";
		return -1;
	}
	if (h->window_ns == 0 || h->window_ns > h->written_ns) {
		*why = "an access file without the start of its counts";
		return -1;
	}
	const struct ta_heatfile_region *r = (const void *)((const char *)buf + sizeof(*h));
	for (uint32_t i = 0; i < h->nregions; i++) {
		if (r[i].start >= r[i].end || r[i].nr_accesses > h->max_accesses ||
		    (i > 0 && r[i].start < r[i - 1].end)) {
			*why = "an access file with bad regions";
			return -1;
		}
	}
	*hdr = h;
	*regions = r;
	return 0;
}

/* The first region ending after addr. */
static uint32_t first_after(const struct ta_heatfile_region *r, uint32_t n, uint64_t addr)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void ta_heatfile_hold(const struct ta_heatfile_region *r, uint32_t n, uint64_t addr, uint64_t len,
		      uint64_t *held)
{
	if (len == 0 || addr + len < addr)
		return;
	uint64_t end = addr + len;
	for (uint32_t i = first_after(r, n, addr); i < n && r[i].start < end; i++) {
		uint64_t a = r[i].start > addr ? r[i].start : addr;
		uint64_t b = r[i].end < end ? r[i].end : end;
		held[i] += b - a;
	}
}

/* Region i's accessed rate in per mille, over its held part when held is given. */
static uint32_t rate(const struct ta_heatfile_region *r, uint32_t i, uint32_t max_accesses,
		     const uint64_t *held)
{
	uint64_t pm = (uint64_t)r[i].nr_accesses * 1000 / max_accesses;
	if (held != NULL) {
		uint64_t len = r[i].end - r[i].start;
		uint64_t mine = held[i] < len ? held[i] : len;
		if (mine < len / TA_HEATFILE_MAX_SCALE)
			mine = len / TA_HEATFILE_MAX_SCALE;
		if (mine == 0)
			mine = len;
		/* pm <= 1000 and len / mine <= 4 (plus rounding): 128 bits for len * pm. */
		pm = (uint64_t)((unsigned __int128)pm * len / mine);
	}
	return pm > 1000 ? 1000u : (uint32_t)pm;
}

uint32_t ta_heatfile_part(const struct ta_heatfile_region *r, uint32_t n, uint32_t max_accesses,
			  const uint64_t *held, uint64_t addr, uint64_t len)
{
	if (len == 0 || max_accesses == 0 || addr + len < addr)
		return 0;
	uint64_t end = addr + len;
	/* Sums of bytes times per mille: counted in pages for a range of a MiB or more, so that
	 * they cannot overflow. */
	unsigned shift = len >= (1u << 20) ? 12 : 0;
	uint64_t sum = 0;
	for (uint32_t i = first_after(r, n, addr); i < n && r[i].start < end; i++) {
		uint64_t a = r[i].start > addr ? r[i].start : addr;
		uint64_t b = r[i].end < end ? r[i].end : end;
		sum += ((b - a) >> shift) * rate(r, i, max_accesses, held);
	}
	uint64_t units = len >> shift;
	uint64_t part = sum / units;
	return part > 1000 ? 1000u : (uint32_t)part;
}

size_t ta_heatfile_encode(void *buf, const struct ta_heatfile_header *hdr,
			  const struct ta_heatfile_region *regions, uint32_t n)
{
	if (n > TA_HEATFILE_MAX_REGIONS)
		return 0;
	struct ta_heatfile_header h = *hdr;
	h.magic = TA_HEATFILE_MAGIC;
	h.version = TA_HEATFILE_VERSION;
	h.header_size = sizeof(h);
	h.nregions = n;
	memcpy(buf, &h, sizeof(h));
	memcpy((char *)buf + sizeof(h), regions, (size_t)n * sizeof(*regions));
	return sizeof(h) + (size_t)n * sizeof(*regions);
}
