/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat: the per-cgroup, per-tier quotas as every tieralloc process of a container
 * charges them. Lists the shared segments in /dev/shm and, per tier: the limits (min, low, high,
 * max), the charge, the kernel's usage on the tier's nodes (memory.numa_stat, cgroup v2), the
 * headroom and the event counts; and, when the agent (tierallocd) writes them, the pages the
 * kernel promoted, demoted and moved into each tier, with their rates. A plain table, JSON
 * (--json), or a table refreshed every N seconds (--watch N). Read-only: it maps segments without
 * write access and never creates one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "shm.h"

struct seg {
	char name[300];
	const struct ta_shm_header *hdr;
	size_t size;
	const char *error; /* why it could not be read, or NULL */
};

static const char *shm_dir = "/dev/shm";

static void human(uint64_t v, char *buf, size_t n)
{
	static const char *const units[] = { "B", "K", "M", "G", "T" };
	if (v == TA_SHM_UNLIMITED) {
		snprintf(buf, n, "max");
		return;
	}
	double d = (double)v;
	unsigned u = 0;
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	snprintf(buf, n, u == 0 ? "%.0f%s" : "%.1f%s", d, units[u]);
}

static int open_seg(const char *file, struct seg *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "/%s", file);
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", shm_dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		s->error = strerror(errno);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(struct ta_shm_header) ||
	    st.st_size > (1 << 24)) {
		s->error = "not a segment (size)";
		close(fd);
		return -1;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		s->error = strerror(errno);
		return -1;
	}
	s->hdr = m;
	s->size = (size_t)st.st_size;
	if (atomic_load(&((struct ta_shm_header *)m)->state) != TA_SHM_READY) {
		s->error = "not ready (its creator has not finished it)";
		return -1;
	}
	if (ta_shm_validate(m, s->size, &s->error) != 0)
		return -1;
	return 0;
}

static const struct ta_shm_tier *tier_rec(const struct seg *s, unsigned t)
{
	return (const struct ta_shm_tier *)((const char *)s->hdr + s->hdr->tiers_off +
					    (size_t)t * s->hdr->tier_size);
}

static const struct ta_shm_slot *slot_rec(const struct seg *s, unsigned i)
{
	return (const struct ta_shm_slot *)((const char *)s->hdr + s->hdr->slots_off +
					    (size_t)i * s->hdr->slot_size);
}

static unsigned ntiers(const struct seg *s)
{
	unsigned n = atomic_load(&((struct ta_shm_header *)s->hdr)->ntiers);
	return n < TA_SHM_MAX_TIERS ? n : TA_SHM_MAX_TIERS;
}

/* Processes attached and alive; dead ones still holding a slot are counted apart. */
static void count_processes(const struct seg *s, unsigned *alive, unsigned *dead)
{
	*alive = *dead = 0;
	unsigned n = s->hdr->max_slots < TA_SHM_MAX_SLOTS ? s->hdr->max_slots : TA_SHM_MAX_SLOTS;
	for (unsigned i = 0; i < n; i++) {
		uint32_t pid = atomic_load(&((struct ta_shm_slot *)slot_rec(s, i))->pid);
		if (pid == 0 || pid == UINT32_MAX)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
			(*alive)++;
		else
			(*dead)++;
	}
}

/* The kernel's usage of the cgroup on each tier's nodes: a node in several tiers counts in each. */
static bool observed(const struct seg *s, uint64_t out[TA_SHM_MAX_TIERS])
{
	if (s->hdr->cgroup_version != 2 || s->hdr->cgroup_path[0] != '/')
		return false;
	struct ta_cgroup cg;
	memset(&cg, 0, sizeof(cg));
	cg.version = 2;
	snprintf(cg.path, sizeof(cg.path), "%.*s", (int)sizeof(cg.path) - 1, s->hdr->cgroup_path);
	uint64_t per_node[TA_CGROUP_NODES];
	if (ta_cgroup_numa_stat("", &cg, per_node) != 0)
		return false;
	for (unsigned t = 0; t < ntiers(s); t++) {
		uint64_t nodes = atomic_load(&((struct ta_shm_tier *)tier_rec(s, t))->nodes);
		out[t] = 0;
		for (unsigned n = 0; n < TA_CGROUP_NODES; n++)
			if (nodes & (1ull << n))
				out[t] += per_node[n];
	}
	return true;
}

static uint64_t ld(const _Atomic uint64_t *p)
{
	return atomic_load((_Atomic uint64_t *)p);
}

/* Segments of ABI minor 0 end their tier record before the enforcement counters. */
static bool has_enforcement(const struct seg *s)
{
	return s->hdr->abi_minor >= 1 && s->hdr->tier_size >= sizeof(struct ta_shm_tier);
}

/* False once a process of the cgroup found memory.reclaim missing (ABI minor 1). */
static bool reclaim_available(const struct seg *s)
{
	if (s->hdr->abi_minor < 1 || s->hdr->header_size < sizeof(struct ta_shm_header))
		return true;
	return !(ld(&((struct ta_shm_header *)s->hdr)->notices) & TA_SHM_NOTICE_NO_RECLAIM);
}

/* The agent's block, when an agent wrote it recently and could attribute migrations to the
 * segment's cgroup; otherwise NULL and why. */
static const struct ta_shm_agent *agent_counts(const struct seg *s, const char **why,
					       uint64_t *age_ms)
{
	const struct ta_shm_agent *a = ta_shm_agent_block(s->hdr, s->size);
	*age_ms = 0;
	if (a == NULL) {
		*why = "segment made before the agent's block (tieralloc < ABI 1.2)";
		return NULL;
	}
	uint64_t written = ld(&a->written_ns);
	if (written == 0) {
		*why = "no agent: tierallocd has not written here";
		return NULL;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	*age_ms = now > written ? (now - written) / 1000000 : 0;
	/* Stale after three of its intervals, and never before 2 s. */
	uint64_t interval = atomic_load(&((struct ta_shm_agent *)a)->interval_ms);
	uint64_t stale_ms = interval * 3 > 2000 ? interval * 3 : 2000;
	if (*age_ms > stale_ms) {
		*why = "no agent: tierallocd stopped writing here";
		return NULL;
	}
	if (atomic_load(&((struct ta_shm_agent *)a)->flags) & TA_SHM_AGENT_NO_CGROUP_ID) {
		*why = "the agent runs, but cannot tell this cgroup's migrations (no cgroup v2 id)";
		return NULL;
	}
	*why = NULL;
	return a;
}

static void print_migrations(const struct seg *s)
{
	const char *why;
	uint64_t age_ms;
	const struct ta_shm_agent *a = agent_counts(s, &why, &age_ms);
	if (a == NULL) {
		printf("kernel migrations: n/a (%s)\n", why);
		return;
	}
	printf("kernel migrations into each tier, in pages (tierallocd, %llu ms ago; destinations "
	       "%s; %llu alarms):\n",
	       (unsigned long long)age_ms,
	       atomic_load(&((struct ta_shm_agent *)a)->flags) & TA_SHM_AGENT_EXACT_NODES
		   ? "exact"
		   : "of promotions only",
	       (unsigned long long)ld(&a->alarm));
	printf("%-4s %10s %9s %10s %9s %10s %9s\n", "tier", "promoted", "/s", "demoted", "/s",
	       "moved", "/s");
	for (unsigned t = 0; t < ntiers(s); t++) {
		const struct ta_shm_agent_tier *m = &a->tier[t];
		printf(
		    "%-4u %10llu %9llu %10llu %9llu %10llu %9llu\n", t,
		    (unsigned long long)ld(&m->promoted), (unsigned long long)ld(&m->promoted_rate),
		    (unsigned long long)ld(&m->demoted), (unsigned long long)ld(&m->demoted_rate),
		    (unsigned long long)ld(&m->moved), (unsigned long long)ld(&m->moved_rate));
	}
}

static void print_table(struct seg *segs, unsigned nsegs)
{
	if (nsegs == 0) {
		printf("no tieralloc segments in %s\n", shm_dir);
		return;
	}
	for (unsigned i = 0; i < nsegs; i++) {
		struct seg *s = &segs[i];
		if (s->error != NULL) {
			printf("%s: unreadable: %s\n\n", s->name, s->error);
			continue;
		}
		unsigned alive, dead;
		count_processes(s, &alive, &dead);
		char id[32] = "";
		if (s->hdr->cgroup_version == 2)
			snprintf(id, sizeof(id), ", id %llu",
				 (unsigned long long)s->hdr->cgroup_id);
		printf("%s  cgroup %s (v%u%s)  %u process(es)%s\n", s->name,
		       s->hdr->cgroup_path[0] ? s->hdr->cgroup_path : "(none)",
		       s->hdr->cgroup_version, id, alive,
		       dead ? " + dead ones not yet reclaimed" : "");
		if (!reclaim_available(s))
			printf(
			    "memory.reclaim: not available to this cgroup (cgroup v1, or Linux < "
			    "5.19): an excess no lower tier can take stays\n");
		uint64_t obs[TA_SHM_MAX_TIERS];
		bool have_obs = observed(s, obs);
		printf("%-4s %-8s %-6s %6s %7s %7s %7s %8s %8s %8s %8s %9s %9s %9s %8s %8s %5s\n",
		       "tier", "name", "nodes", "share", "min", "low", "high", "max", "charged",
		       "observed", "headroom", "steered", "overflow", "exhausted", "demoted",
		       "reclaim", "gated");
		for (unsigned t = 0; t < ntiers(s); t++) {
			const struct ta_shm_tier *r = tier_rec(s, t);
			char nodes[64], v[10][16];
			ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
			for (unsigned k = 0; k < TA_NLIMITS; k++)
				human(ld(&r->limit[k]), v[k], sizeof(v[k]));
			uint64_t charged = ld(&r->charged), high = ld(&r->limit[TA_LIMIT_HIGH]);
			human(charged, v[4], sizeof(v[4]));
			if (have_obs)
				human(obs[t], v[5], sizeof(v[5]));
			else
				snprintf(v[5], sizeof(v[5]), "n/a");
			human(high > charged ? high - charged : 0, v[6], sizeof(v[6]));
			const char *gated = "n/a";
			if (has_enforcement(s)) {
				human(ld(&r->demoted), v[7], sizeof(v[7]));
				human(ld(&r->reclaim_asked), v[8], sizeof(v[8]));
				gated = ld(&r->gated) ? "yes" : "no";
			} else {
				snprintf(v[7], sizeof(v[7]), "n/a");
				snprintf(v[8], sizeof(v[8]), "n/a");
			}
			printf("%-4u %-8.8s %-6s %5.1f%% %7s %7s %7s %8s %8s %8s %8s %9llu %9llu "
			       "%9llu %8s %8s %5s\n",
			       t, r->name, nodes,
			       atomic_load(&((struct ta_shm_tier *)r)->share_ppm) / 10000.0, v[0],
			       v[1], v[2], v[3], v[4], v[5], v[6],
			       (unsigned long long)ld(&r->steered_away),
			       (unsigned long long)ld(&r->overflowed),
			       (unsigned long long)ld(&r->exhausted), v[7], v[8], gated);
		}
		print_migrations(s);
		printf("\n");
	}
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_json(struct seg *segs, unsigned nsegs)
{
	static const char *const limit_names[TA_NLIMITS] = { "min", "low", "high", "max" };
	printf("{\"version\":1,\"segments\":[");
	for (unsigned i = 0; i < nsegs; i++) {
		struct seg *s = &segs[i];
		printf("%s{\"name\":", i ? "," : "");
		json_string(s->name);
		if (s->error != NULL) {
			printf(",\"error\":");
			json_string(s->error);
			printf("}");
			continue;
		}
		unsigned alive, dead;
		count_processes(s, &alive, &dead);
		printf(",\"cgroup\":{\"path\":");
		json_string(s->hdr->cgroup_path);
		printf(",\"id\":%llu,\"version\":%u},\"processes\":%u,\"dead_slots\":%u,"
		       "\"generation\":%llu,\"reclaim_available\":%s,\"tiers\":[",
		       (unsigned long long)s->hdr->cgroup_id, s->hdr->cgroup_version, alive, dead,
		       (unsigned long long)ld(&((struct ta_shm_header *)s->hdr)->generation),
		       reclaim_available(s) ? "true" : "false");
		uint64_t obs[TA_SHM_MAX_TIERS];
		bool have_obs = observed(s, obs);
		const char *agent_why;
		uint64_t agent_age;
		const struct ta_shm_agent *agent = agent_counts(s, &agent_why, &agent_age);
		for (unsigned t = 0; t < ntiers(s); t++) {
			const struct ta_shm_tier *r = tier_rec(s, t);
			char nodes[64];
			ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
			printf("%s{\"tier\":%u,\"name\":", t ? "," : "", t);
			json_string(r->name);
			printf(",\"nodes\":");
			json_string(nodes);
			printf(",\"capacity\":%llu,\"share_ppm\":%u",
			       (unsigned long long)ld(&r->capacity),
			       atomic_load(&((struct ta_shm_tier *)r)->share_ppm));
			for (unsigned k = 0; k < TA_NLIMITS; k++)
				printf(",\"%s\":%llu", limit_names[k],
				       (unsigned long long)ld(&r->limit[k]));
			uint64_t charged = ld(&r->charged), high = ld(&r->limit[TA_LIMIT_HIGH]);
			printf(",\"charged\":%llu,\"peak\":%llu,\"observed\":",
			       (unsigned long long)charged, (unsigned long long)ld(&r->peak));
			if (have_obs)
				printf("%llu", (unsigned long long)obs[t]);
			else
				printf("null");
			printf(",\"headroom\":%llu,\"steered_away\":%llu,\"overflowed\":%llu,"
			       "\"exhausted\":%llu,\"reclaimed\":%llu",
			       (unsigned long long)(high > charged ? high - charged : 0),
			       (unsigned long long)ld(&r->steered_away),
			       (unsigned long long)ld(&r->overflowed),
			       (unsigned long long)ld(&r->exhausted),
			       (unsigned long long)ld(&r->reclaimed));
			/* Enforcement (ABI minor 1); null from an older segment. */
			if (has_enforcement(s))
				printf(
				    ",\"untracked\":%llu,\"demoted\":%llu,\"reclaim_asked\":%llu,"
				    "\"reclaims\":%llu,\"gated\":%s",
				    (unsigned long long)ld(&r->untracked),
				    (unsigned long long)ld(&r->demoted),
				    (unsigned long long)ld(&r->reclaim_asked),
				    (unsigned long long)ld(&r->reclaims),
				    ld(&r->gated) ? "true" : "false");
			else
				printf(
				    ",\"untracked\":null,\"demoted\":null,\"reclaim_asked\":null,"
				    "\"reclaims\":null,\"gated\":null");
			/* The agent's counts (ABI minor 2), in pages; null without an agent. */
			if (agent != NULL) {
				const struct ta_shm_agent_tier *m = &agent->tier[t];
				printf(",\"migrations\":{\"promoted\":%llu,\"promoted_rate\":%llu,"
				       "\"demoted\":%llu,\"demoted_rate\":%llu,\"moved\":%llu,"
				       "\"moved_rate\":%llu}}",
				       (unsigned long long)ld(&m->promoted),
				       (unsigned long long)ld(&m->promoted_rate),
				       (unsigned long long)ld(&m->demoted),
				       (unsigned long long)ld(&m->demoted_rate),
				       (unsigned long long)ld(&m->moved),
				       (unsigned long long)ld(&m->moved_rate));
			} else {
				printf(",\"migrations\":null}");
			}
		}
		printf("],\"agent\":{\"available\":%s,\"why_not\":", agent ? "true" : "false");
		if (agent != NULL)
			printf("null,\"age_ms\":%llu,\"exact_nodes\":%s,\"alarms\":%llu}",
			       (unsigned long long)agent_age,
			       atomic_load(&((struct ta_shm_agent *)agent)->flags) &
				       TA_SHM_AGENT_EXACT_NODES
				   ? "true"
				   : "false",
			       (unsigned long long)ld(&agent->alarm));
		else {
			json_string(agent_why);
			printf(",\"age_ms\":null,\"exact_nodes\":null,\"alarms\":null}");
		}
		printf("}");
	}
	printf("]}\n");
}

static unsigned collect(const char *only, struct seg *segs, unsigned max)
{
	unsigned n = 0;
	if (only != NULL) {
		open_seg(only[0] == '/' ? only + 1 : only, &segs[n++]);
		return n;
	}
	DIR *d = opendir(shm_dir);
	if (d == NULL)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		if (strncmp(e->d_name, "tieralloc-v", 11) != 0)
			continue;
		open_seg(e->d_name, &segs[n++]);
	}
	closedir(d);
	return n;
}

static void release(struct seg *segs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (segs[i].hdr != NULL)
			munmap((void *)segs[i].hdr, segs[i].size);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tieralloc-stat [--json] [--watch SECONDS] [--name SEGMENT]\n"
		   "  Shows the per-cgroup, per-tier quotas of tieralloc processes (segments in "
		   "/dev/shm).\n"
		   "  --json          one JSON document instead of the table\n"
		   "  --watch N       redraw the table every N seconds (Ctrl-C to stop)\n"
		   "  --name SEGMENT  only this segment (e.g. /tieralloc-v1-cg123-t1a2b3c4d)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = { { "json", no_argument, NULL, 'j' },
						  { "watch", required_argument, NULL, 'w' },
						  { "name", required_argument, NULL, 'n' },
						  { "help", no_argument, NULL, 'h' },
						  { NULL, 0, NULL, 0 } };
	bool json = false;
	unsigned watch = 0;
	const char *only = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "jw:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'w': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end != '\0' || v == 0 || v > 3600) {
				fprintf(stderr, "tieralloc-stat: --watch takes 1..3600 seconds\n");
				return 2;
			}
			watch = (unsigned)v;
			break;
		}
		case 'n':
			only = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	static struct seg segs[256];
	for (;;) {
		unsigned n = collect(only, segs, 256);
		if (watch != 0 && !json)
			printf("\033[H\033[2J");
		if (json)
			print_json(segs, n);
		else
			print_table(segs, n);
		fflush(stdout);
		int bad = only != NULL && n == 1 && segs[0].error != NULL;
		release(segs, n);
		if (watch == 0)
			return bad ? 1 : 0;
		sleep(watch);
	}
}
