/* SPDX-License-Identifier: MIT */
/*
 * The per-process summary written at exit when TIERALLOC_SUMMARY is set: one line per tier,
 * key=value, appended with a single write(2) per line so that concurrent processes (a shell
 * pipeline, make, a fork-based server) do not interleave. tieralloc-run aggregates these lines.
 * The counters are named as tieralloc-stat and the metrics name them: steered_away is the
 * process's tieralloc_tier_stats.exhausted (a thread found the tier at its limit and moved on),
 * the event the segment counts as steered_away.
 * Residency is asked of the kernel (move_pages(2) without moving) for the pages of our small-object
 * chunks: where the memory really is, not where we asked for it.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/api.h"

#define PAGES_PER_CALL 256

/* Bytes of this tier's chunk pages resident on each node. */
/* Bytes of the program's own mappings moved out of tier t into lower ones (down), or into t from
 * lower ones (up: exchange and filling). */
static uint64_t maps_moved(unsigned t, bool down)
{
	uint64_t sum = 0;
	for (unsigned o = t + 1; o < TA_MAX_TIERS && t < TA_MAX_TIERS; o++)
		sum += atomic_load(down ? &ta_maps_moved[t][o] : &ta_maps_moved[o][t]);
	return sum;
}

static void chunk_residency(unsigned t, uint64_t per_node[TA_MAX_NODES])
{
	long psz = sysconf(_SC_PAGESIZE);
	void *pages[PAGES_PER_CALL];
	int status[PAGES_PER_CALL];
	struct ta_arena *a = &ta_arenas[t];
	ta_lock(&a->chunk_lock, TA_RANK_CHUNK);
	for (struct ta_chunk *c = a->chunks; c != NULL; c = c->next) {
		size_t used = (size_t)c->pages_used * TA_PAGE_SIZE;
		unsigned n = 0;
		for (size_t off = 0; off < used; off += (size_t)psz) {
			pages[n++] = (char *)c + off;
			if (n == PAGES_PER_CALL || off + (size_t)psz >= used) {
				if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) == 0) {
					for (unsigned i = 0; i < n; i++)
						if (status[i] >= 0 && status[i] < TA_MAX_NODES)
							per_node[status[i]] += (uint64_t)psz;
				}
				n = 0;
			}
		}
	}
	ta_unlock(&a->chunk_lock, TA_RANK_CHUNK);
}

void ta_summary_write(const char *dest)
{
	int fd = STDERR_FILENO;
	bool close_fd = false;
	if (strcmp(dest, "stderr") != 0) {
		long r = syscall(SYS_openat, AT_FDCWD, dest,
				 O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (r < 0) {
			ta_log(TA_LOG_WARN, "TIERALLOC_SUMMARY=\"%s\": cannot open (errno %d)",
			       dest, errno);
			return;
		}
		fd = (int)r;
		close_fd = true;
	}
	char comm[64] = "?";
	ssize_t n = ta_read_file("/proc/self/comm", comm, sizeof(comm));
	if (n > 0 && comm[n - 1] == '\n')
		comm[n - 1] = '\0';
	for (char *c = comm; *c != '\0'; c++)
		if (*c == ' ' || *c == '=' || *c == '\t')
			*c = '_'; /* keep key=value parseable */
	int tiers = tieralloc_tier_count();
	/* Where the program's own mappings are now (api/maps.c), with the peak of the samples. */
	if (atomic_load(&ta_state) == TA_READY && atomic_load(&ta_maps_recorded))
		ta_maps_sample(false);
	for (int t = 0; t < tiers; t++) {
		struct tieralloc_tier_info info = { .size = sizeof(info) };
		struct tieralloc_tier_stats s = { .size = sizeof(s) };
		if (tieralloc_tier_info(t, &info) != 0 || tieralloc_tier_stats(t, &s) != 0)
			continue;
		char resident[256] = "";
		if (atomic_load(&ta_state) == TA_READY) {
			uint64_t per_node[TA_MAX_NODES] = { 0 };
			chunk_residency((unsigned)t, per_node);
			size_t pos = 0;
			for (unsigned node = 0; node < TA_MAX_NODES; node++)
				if (per_node[node] != 0 && pos + 40 < sizeof(resident))
					pos += ta_format(resident + pos, sizeof(resident) - pos,
							 "%sn%u:%llu", pos ? "," : "", node,
							 (unsigned long long)per_node[node]);
		}
		char line[1024];
		size_t len = ta_format(
		    line, sizeof(line),
		    "tieralloc-summary v=1 pid=%d comm=%s tier=%d name=%s nodes=%s kind=%s "
		    "bound=%u capacity=%llu limit=%llu live=%llu peak=%llu allocs=%llu "
		    "explicit=%llu steered_in=%llu steered_away=%llu overflowed=%llu "
		    "backend_failures=%llu chunk_resident=%s mapped=%llu mapped_peak=%llu "
		    "mapped_down=%llu mapped_up=%llu\n",
		    (int)getpid(), comm, t, info.name, info.nodes[0] ? info.nodes : "-", info.kind,
		    info.bound, (unsigned long long)info.capacity, (unsigned long long)s.limit,
		    (unsigned long long)s.bytes_live, (unsigned long long)s.bytes_peak,
		    (unsigned long long)s.allocs, (unsigned long long)s.explicit_allocs,
		    (unsigned long long)s.steered_in, (unsigned long long)s.exhausted,
		    (unsigned long long)s.overflowed, (unsigned long long)s.backend_failures,
		    resident[0] ? resident : "-",
		    (unsigned long long)(t < TA_MAX_TIERS ? atomic_load(&ta_maps_resident[t]) : 0),
		    (unsigned long long)(t < TA_MAX_TIERS ? atomic_load(&ta_maps_resident_peak[t])
							  : 0),
		    (unsigned long long)maps_moved(t, true),
		    (unsigned long long)maps_moved(t, false));
		ta_write_all(fd, line, len);
	}
	if (close_fd)
		syscall(SYS_close, fd);
}
