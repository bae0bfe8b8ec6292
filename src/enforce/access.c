/* SPDX-License-Identifier: MIT */
/*
 * Which of this process's memory was written lately, from soft-dirty bits: the access signal a
 * process can read about itself without privileges. Every TIERALLOC_ACCESS_PERIOD, while the
 * worker runs enforcement passes, it reads /proc/self/pagemap over the used pages of every chunk
 * and every large object, counts the present pages written since the last clear (bit 55), folds
 * that fraction into the range's heat, and clears the bits by writing "4" to
 * /proc/self/clear_refs.
 *
 * The cost: a clear write-protects every page of the process, so the first write to each page
 * after it takes a minor fault (one per huge page where THP backs it), and pagemap costs 8 bytes
 * read per 4 KiB page. A sample that takes more than 2% of the period stretches the period to
 * keep the worker within 2% of a CPU. bench/run-access.sh measures both. Nothing of it is on
 * malloc's path.
 *
 * What it cannot see is reads: a range only read looks as cold as one never touched. The ranking
 * breaks ties by age (younger is warmer), so read-mostly data keeps today's order among itself.
 *
 * With TIERALLOC_ACCESS=agent the sample reads the agent's access file (heatfile.h) instead:
 * what tierallocd --access damon saw accessed, reads and writes alike. While that file is fresh
 * the process neither reads pagemap nor clears the bits, so it pays none of soft-dirty's write
 * faults (the point: the agent's source must cost under 2% of a core in all), and a range's
 * bytes are its used length. Without a fresh file (no agent, or stopped) soft-dirty takes over,
 * and access.source says why; its first period only primes the bits (they were not cleared
 * while the agent's file was fresh), so heats keep the agent's values until then.
 *
 * Heat: 0 unknown, otherwise 1 + the written part in per mille, the newest sample weighing 3/4.
 * The agent's file is folded once (the worker looks every period, DAMON rewrites it every
 * aggregation), and its readings raise a heat at once but lower it by half a file: DAMON checks
 * one page per region a sample, so a range only read now and then can read 0 in one aggregation
 * and 8 in the next, while a range never touched never reads accessed. One empty reading leaves
 * a read range cold but well above what was never touched, which stays the first to go.
 * A sample says something only of pages that existed at the clear before it: a fresh page is
 * dirty because it was just faulted in. So a large object born since the last clear, or a chunk
 * a run was cut from since then, stays unknown for that period (and ranks as hottest: it was just
 * written), and the probe's clear primes the first sample.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enforce/enforce.h"
#include "enforce/heatfile.h"

#define PAGEMAP_PRESENT	   (1ull << 63)
#define PAGEMAP_SOFT_DIRTY (1ull << 55)
#define SMALL_PAGE	   4096u

struct ta_access_tier ta_access_tiers[TA_MAX_TIERS];
_Atomic uint64_t ta_access_samples;   /* periods sampled, or agent files folded (not the priming) */
_Atomic uint64_t ta_access_sample_ns; /* time the worker spent in the last sample */
_Atomic uint64_t ta_access_period_ns; /* the period in force */

enum { SOURCE_UNPROBED, SOURCE_READY, SOURCE_NONE };
static int source_state = SOURCE_UNPROBED; /* the worker's alone */
static char source_why[96];
static int pagemap_fd = -1, clear_fd = -1;
static uint64_t last_ns;   /* the last clear */
static uint64_t period_ns; /* until the next: the option's, or longer (ta_access_tick) */

/* The agent's file, read once per sample by the worker alone. What access.source says of it is
 * one of these constants, so that other threads read it without a lock. */
static const char *const agent_fresh_text = "agent (damon)";
static const char *const agent_none_text =
    "soft-dirty (agent: no access file from tierallocd --access damon)";
static const char *const agent_stale_text = "soft-dirty (agent: its access file is stale)";
static const char *const agent_bad_text = "soft-dirty (agent: its access file was refused)";
static const char *agent_text; /* atomic: one of the above, NULL until the first sample */
static uint64_t agent_buf[TA_HEATFILE_MAX_BYTES / sizeof(uint64_t) + 1];
static const struct ta_heatfile_region *agent_regions; /* NULL: no fresh file */
static uint32_t agent_nregions, agent_max;
static uint64_t agent_window_ns;		     /* when the fresh file's counts began */
static uint64_t agent_written_ns, agent_folded_ns;   /* the fresh file's, the last one folded */
static uint64_t agent_held[TA_HEATFILE_MAX_REGIONS]; /* bytes of ours in each (heatfile.h) */
static uint64_t self_start_time;		     /* /proc/self/stat field 22, 0: not read yet */

void ta_access_count(const uint64_t *entries, size_t n, uint64_t *present, uint64_t *written)
{
	for (size_t i = 0; i < n; i++) {
		if (!(entries[i] & PAGEMAP_PRESENT))
			continue;
		(*present)++;
		if (entries[i] & PAGEMAP_SOFT_DIRTY)
			(*written)++;
	}
}

uint32_t ta_access_heat(uint32_t prev, uint64_t present, uint64_t written)
{
	uint64_t part = present == 0 ? 0 : written * 1000 / present;
	return ta_access_heat_part(prev, part > 1000 ? 1000 : (uint32_t)part);
}

uint32_t ta_access_heat_agent(uint32_t prev, uint32_t part)
{
	if (part > 1000)
		part = 1000;
	if (!ta_heat_known(prev))
		return part + 1;
	uint32_t faded = (prev - 1 + part) / 2;
	return (part > faded ? part : faded) + 1;
}

uint32_t ta_access_heat_part(uint32_t prev, uint32_t part)
{
	if (part > 1000)
		part = 1000;
	if (!ta_heat_known(prev))
		return (uint32_t)part + 1;
	return (uint32_t)(((uint64_t)(prev - 1) + 3 * part) / 4) + 1;
}

bool ta_access_is_hot(uint32_t heat)
{
	return ta_heat_known(heat) && heat > TA_HEAT_HOT;
}

const char *ta_access_source(void)
{
	if (ta_opts.access == TA_ACCESS_AGE)
		return "age";
	int s = __atomic_load_n(&source_state, __ATOMIC_ACQUIRE);
	if (s == SOURCE_READY && ta_opts.access == TA_ACCESS_AGENT) {
		const char *t = __atomic_load_n(&agent_text, __ATOMIC_ACQUIRE);
		return t != NULL ? t : "agent (not sampled yet)";
	}
	if (s == SOURCE_READY)
		return "soft-dirty";
	if (s == SOURCE_NONE)
		return source_why;
	return "soft-dirty (not sampled yet)";
}

bool ta_access_active(void)
{
	return ta_opts.access != TA_ACCESS_AGE &&
	       __atomic_load_n(&source_state, __ATOMIC_ACQUIRE) == SOURCE_READY &&
	       atomic_load(&ta_access_samples) > 0;
}

static int read_entry(const void *addr, uint64_t *e)
{
	off_t off = (off_t)((uintptr_t)addr / SMALL_PAGE * sizeof(uint64_t));
	return pread(pagemap_fd, e, sizeof(*e), off) == (ssize_t)sizeof(*e) ? 0 : -1;
}

static int clear_bits(void)
{
	return write(clear_fd, "4", 1) == 1 ? 0 : -1;
}

/* Whether the kernel keeps soft-dirty bits, tried on a page of our own: written it has the bit,
 * cleared it loses it, written again it has it back. The clear is the first, priming one. */
static const char *probe(void)
{
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0)
		return "age (soft-dirty: /proc/self/pagemap cannot be read)";
	clear_fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (clear_fd < 0)
		return "age (soft-dirty: /proc/self/clear_refs cannot be written)";
	volatile unsigned char *page =
	    mmap(NULL, SMALL_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return "age (soft-dirty: no page to probe with)";
	const char *why = NULL;
	uint64_t e = 0;
	page[0] = 1;
	if (read_entry((const void *)page, &e) != 0 || !(e & PAGEMAP_PRESENT))
		why = "age (soft-dirty: pagemap shows no present page)";
	else if (!(e & PAGEMAP_SOFT_DIRTY))
		why = "age (the kernel keeps no soft-dirty bits: CONFIG_MEM_SOFT_DIRTY)";
	else if (clear_bits() != 0)
		why = "age (soft-dirty: clear_refs refused \"4\")";
	else if (read_entry((const void *)page, &e) != 0 || (e & PAGEMAP_SOFT_DIRTY))
		why = "age (soft-dirty: clear_refs left the bit set)";
	else {
		page[0] = 2;
		if (read_entry((const void *)page, &e) != 0 || !(e & PAGEMAP_SOFT_DIRTY))
			why = "age (soft-dirty: a write after a clear sets no bit)";
	}
	munmap((void *)page, SMALL_PAGE);
	return why;
}

/* Read the agent's file for this sample: agent_regions set when it is there, this process's,
 * fresh and sound. Another user could have made a file of that name first: only root's (the
 * agent's) or our own user's is read. */
static void agent_load(uint64_t now)
{
	const char *text = agent_none_text, *why = NULL;
	agent_regions = NULL;
	if (self_start_time == 0)
		self_start_time = ta_proc_start_time(getpid());
	char path[64];
	ta_format(path, sizeof(path), "/dev/shm/" TA_HEATFILE_PREFIX "%u", (unsigned)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd >= 0) {
		text = agent_bad_text;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_uid == 0 || st.st_uid == geteuid()) &&
		    (uint64_t)st.st_size <= TA_HEATFILE_MAX_BYTES) {
			ssize_t got = pread(fd, agent_buf, (size_t)st.st_size, 0);
			const struct ta_heatfile_header *h;
			const struct ta_heatfile_region *r;
			if (got == st.st_size &&
			    ta_heatfile_parse(agent_buf, (size_t)got, (uint32_t)getpid(),
					      self_start_time, now, &h, &r, &why) == 0) {
				agent_regions = r;
				agent_nregions = h->nregions;
				agent_max = h->max_accesses;
				agent_window_ns = h->window_ns;
				agent_written_ns = h->written_ns;
				text = agent_fresh_text;
			} else if (why != NULL &&
				   strcmp(why, "the agent's access file is stale") == 0) {
				text = agent_stale_text;
			}
		}
		close(fd);
	}
	const char *was = __atomic_exchange_n(&agent_text, text, __ATOMIC_ACQ_REL);
	if (was != text)
		ta_log(TA_LOG_INFO, "access: %s%s%s", text, why != NULL ? ": " : "",
		       why != NULL ? why : "");
}

/* The part of a range a sample says was used: written (soft-dirty), or accessed (the agent's
 * file), whichever is larger. */
static uint32_t sample_part(const void *addr, size_t len, uint64_t present, uint64_t written)
{
	if (agent_regions != NULL)
		return ta_heatfile_part(agent_regions, agent_nregions, agent_max, agent_held,
					(uint64_t)(uintptr_t)addr, len);
	uint64_t part = present == 0 ? 0 : written * 1000 / present;
	return part > 1000 ? 1000u : (uint32_t)part;
}

/* Present and written small pages of [addr, addr + len), from pagemap; under a fresh agent
 * file, the whole range as present and no pagemap read. */
static void sample_range(const void *addr, size_t len, uint64_t *present, uint64_t *written)
{
	if (agent_regions != NULL) {
		*present += (len + SMALL_PAGE - 1) / SMALL_PAGE;
		return;
	}
	static uint64_t entries[512]; /* 2 MiB of address a read: the worker is alone here */
	uintptr_t first = (uintptr_t)addr / SMALL_PAGE;
	uintptr_t end = ((uintptr_t)addr + len + SMALL_PAGE - 1) / SMALL_PAGE;
	for (uintptr_t p = first; p < end;) {
		size_t n = end - p < 512 ? end - p : 512;
		ssize_t got =
		    pread(pagemap_fd, entries, n * sizeof(uint64_t), (off_t)(p * sizeof(uint64_t)));
		if (got <= 0)
			return;
		n = (size_t)got / sizeof(uint64_t);
		ta_access_count(entries, n, present, written);
		p += n;
	}
}

#define MAX_CHUNKS 4096
#define MAX_LARGE  1024

/* Pages that existed when the sample's counting began (since: the last clear, or the agent's
 * window) tell something; fresh ones do not, their making was their access. */
static uint32_t heat_after(uint32_t prev, uint64_t made_ns, uint64_t since, uint32_t part)
{
	if (made_ns >= since || prev == TA_HEAT_MOVED)
		return 0;
	return agent_regions != NULL ? ta_access_heat_agent(prev, part)
				     : ta_access_heat_part(prev, part);
}

static void count(uint32_t heat, uint64_t bytes, uint64_t sums[3])
{
	sums[!ta_heat_known(heat) ? 2 : ta_access_is_hot(heat) ? 0 : 1] += bytes;
}

static struct ta_chunk_info info[MAX_CHUNKS]; /* the worker's: one tier at a time */
static struct ta_cold_range large[MAX_LARGE];

static void hold(const void *addr, size_t len)
{
	ta_heatfile_hold(agent_regions, agent_nregions, (uint64_t)(uintptr_t)addr, len, agent_held);
}

/* How much of each of the agent's regions holds memory of ours: every tier's used chunk pages,
 * large objects and mapped windows, before any range's part is taken (a region may span tiers).
 */
static void hold_all(uint64_t now)
{
	memset(agent_held, 0, sizeof(agent_held[0]) * agent_nregions);
	for (unsigned t = 0; t < ta_ntiers; t++) {
		unsigned nc = ta_arena_chunks(t, info, MAX_CHUNKS, false);
		for (unsigned i = 0; i < nc; i++)
			hold(info[i].chunk, (size_t)info[i].pages_used * TA_PAGE_SIZE);
		unsigned nl = ta_large_take(t, large, MAX_LARGE, now);
		for (unsigned i = 0; i < nl; i++) {
			hold(large[i].addr, large[i].len);
			ta_cold_release(&large[i], -1, -1);
		}
	}
	struct ta_maps_window *w;
	unsigned n;
	if (ta_maps_windows_take(&w, &n)) {
		for (unsigned i = 0; i < n; i++)
			hold((const void *)w[i].start, w[i].len);
		ta_maps_windows_give();
	}
}

static void sample_tier(unsigned t, uint64_t now, uint64_t since, uint64_t sums[3])
{
	unsigned nc = ta_arena_chunks(t, info, MAX_CHUNKS, false);
	for (unsigned i = 0; i < nc; i++) {
		uint64_t present = 0, written = 0;
		struct ta_chunk *c = info[i].chunk;
		size_t len = (size_t)info[i].pages_used * TA_PAGE_SIZE;
		sample_range(c, len, &present, &written);
		c->heat = heat_after(info[i].heat, info[i].carved_ns, since,
				     sample_part(c, len, present, written));
		count(c->heat, present * SMALL_PAGE, sums);
	}
	unsigned nl = ta_large_take(t, large, MAX_LARGE, now);
	for (unsigned i = 0; i < nl; i++) {
		uint64_t present = 0, written = 0;
		struct ta_large *l = large[i].owner;
		sample_range(large[i].addr, large[i].len, &present, &written);
		uint32_t heat =
		    heat_after(large[i].heat, now - large[i].age_ns, since,
			       sample_part(large[i].addr, large[i].len, present, written));
		ta_large_set_heat(l, heat);
		count(heat, present * SMALL_PAGE, sums);
		ta_cold_release(&large[i], -1, -1);
	}
}

/* The program's own mappings, a window at a time (alloc/maps.c): a window first seen since the
 * counting began was (mostly) just faulted in and tells nothing yet, like a fresh chunk. Not in
 * the tiers' hot and cold figures, which stay malloc's. Skipped while a sample holds them. */
static void sample_windows(uint64_t since)
{
	struct ta_maps_window *w;
	unsigned n;
	if (!ta_maps_windows_take(&w, &n))
		return;
	for (unsigned i = 0; i < n; i++) {
		uint64_t present = 0, written = 0;
		void *addr = (void *)w[i].start;
		sample_range(addr, w[i].len, &present, &written);
		w[i].heat = heat_after(w[i].heat, w[i].seen_ns, since,
				       sample_part(addr, w[i].len, present, written));
	}
	ta_maps_windows_give();
}

static bool clear_refused(void)
{
	ta_format(source_why, sizeof(source_why), "age (soft-dirty: clear_refs refused)");
	__atomic_store_n(&source_state, SOURCE_NONE, __ATOMIC_RELEASE);
	ta_log(TA_LOG_INFO, "access: %s", source_why);
	return false;
}

bool ta_access_tick(void)
{
	if (ta_opts.access == TA_ACCESS_AGE || source_state == SOURCE_NONE)
		return false;
	uint64_t now = ta_monotonic_ns();
	if (last_ns != 0 && now - last_ns < period_ns)
		return false;
	uint64_t since = last_ns;
	last_ns = now;
	if (source_state == SOURCE_UNPROBED) {
		const char *why = probe();
		if (why != NULL) {
			ta_format(source_why, sizeof(source_why), "%s", why);
			__atomic_store_n(&source_state, SOURCE_NONE, __ATOMIC_RELEASE);
			ta_log(TA_LOG_INFO, "access: %s", why);
			return false;
		}
		__atomic_store_n(&source_state, SOURCE_READY, __ATOMIC_RELEASE);
		period_ns = ta_opts.access_period_ms * 1000000ull;
		atomic_store(&ta_access_period_ns, period_ns);
		return false;
	}
	if (ta_opts.access == TA_ACCESS_AGENT) {
		bool had_agent = agent_regions != NULL;
		agent_load(now);
		if (had_agent && agent_regions == NULL) {
			/* Back to soft-dirty: its bits were last cleared before the agent's file
			 * came, so every page reads written. Prime them and judge next period. */
			if (clear_bits() != 0)
				return clear_refused();
			return false;
		}
	}
	if (agent_regions != NULL) {
		/* The heats hold this file already: folding it again would weigh one
		 * aggregation's counts as many. */
		if (agent_written_ns == agent_folded_ns)
			return false;
		agent_folded_ns = agent_written_ns;
		/* DAMON counted over its aggregation, which may have begun before our last
		 * sample: what was made in it reads accessed (a heap just filled, all hot). */
		since = agent_window_ns;
		hold_all(now);
	}
	uint64_t hot[TA_MAX_TIERS] = { 0 }, cold[TA_MAX_TIERS] = { 0 };
	for (unsigned t = 0; t < ta_ntiers; t++) {
		uint64_t sums[3] = { 0, 0, 0 }; /* hot, cold, unknown */
		sample_tier(t, now, since, sums);
		atomic_store(&ta_access_tiers[t].hot, sums[0]);
		atomic_store(&ta_access_tiers[t].cold, sums[1]);
		atomic_store(&ta_access_tiers[t].unknown, sums[2]);
		hot[t] = sums[0];
		cold[t] = sums[1];
	}
	sample_windows(since);
	ta_quota_publish_heat(hot, cold);
	/* Cleared after the reading: what is written from here on shows in the next one. A
	 * refused clear leaves every bit set, which reads as all hot: stop instead. The agent's
	 * file needs no clear. */
	if (agent_regions == NULL && clear_bits() != 0)
		return clear_refused();
	/* The worker's share of a CPU stays within 2%: a sample that took longer than a fiftieth
	 * of the period stretches the period (a large heap, a slow machine). */
	uint64_t took = ta_monotonic_ns() - now;
	period_ns = ta_opts.access_period_ms * 1000000ull;
	if (took > period_ns / 50)
		period_ns = took * 50;
	atomic_store(&ta_access_sample_ns, took);
	atomic_store(&ta_access_period_ns, period_ns);
	atomic_fetch_add(&ta_access_samples, 1);
	return true;
}

/* The files are the parent's (/proc/self was resolved when they were opened): the child probes
 * again on its own. Its heats are the parent's, which is what its memory was. */
void ta_access_fork_child(void)
{
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	if (clear_fd >= 0)
		close(clear_fd);
	pagemap_fd = clear_fd = -1;
	source_state = SOURCE_UNPROBED;
	last_ns = 0;
	self_start_time = 0;
	agent_regions = NULL;
	agent_folded_ns = 0;
	__atomic_store_n(&agent_text, NULL, __ATOMIC_RELEASE);
	atomic_store(&ta_access_samples, 0);
}
