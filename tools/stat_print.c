/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat's output formats: see stat_print.h. What a segment says comes from its private
 * copy (stat_seg.c); each string of it is printed escaped (stat_text.c), so that no control
 * character reaches the terminal and JSON stays valid. What a segment is too old to have (the
 * enforcement counters, the agent's, access and lending blocks) is "n/a" in the table and null
 * in JSON. The counters are named as tieralloc-run's summary names them, and bytes printed as it
 * prints them (units.c).
 */
#include <stdio.h>
#include <string.h>

#include "prom.h"
#include "segment.h"
#include "stat_print.h"
#include "stat_seg.h"
#include "stat_text.h"
#include "quota/shm.h"

static uint64_t ld(const _Atomic uint64_t *p)
{
	return atomic_load((_Atomic uint64_t *)p);
}

static void print_migrations(const struct ta_stat_seg *s)
{
	const char *why;
	uint64_t age_ms;
	const struct ta_shm_agent *a = ta_stat_agent_counts(s, &why, &age_ms);
	if (a == NULL) {
		printf("kernel migrations: n/a (%s)\n", why);
		return;
	}
	printf("kernel migrations into each tier, in pages (tierallocd, %llu ms ago):\n",
	       (unsigned long long)age_ms);
	printf("  destinations %s; %llu alarms\n",
	       atomic_load(&((struct ta_shm_agent *)a)->flags) & TA_SHM_AGENT_EXACT_NODES
		   ? "exact"
		   : "of promotions only",
	       (unsigned long long)ld(&a->alarm));
	printf("%-4s %12s %10s %12s %10s %12s %10s\n", "tier", "promoted", "/s", "demoted", "/s",
	       "moved", "/s");
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		const struct ta_shm_agent_tier *m = &a->tier[t];
		char v[6][24];
		count(ld(&m->promoted), 12, v[0], sizeof(v[0]));
		count(ld(&m->promoted_rate), 10, v[1], sizeof(v[1]));
		count(ld(&m->demoted), 12, v[2], sizeof(v[2]));
		count(ld(&m->demoted_rate), 10, v[3], sizeof(v[3]));
		count(ld(&m->moved), 12, v[4], sizeof(v[4]));
		count(ld(&m->moved_rate), 10, v[5], sizeof(v[5]));
		printf("%-4u %12s %10s %12s %10s %12s %10s\n", t, v[0], v[1], v[2], v[3], v[4],
		       v[5]);
	}
}

static void print_access(const struct ta_stat_seg *s)
{
	const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
	if (acc == NULL) {
		printf("hot and cold: n/a (segment made before the access block, tieralloc < ABI "
		       "1.3)\n");
		return;
	}
	printf("hot and cold by writes lately (soft-dirty; each process's last sample), and the "
	       "exchange:\n");
	printf("%-4s %10s %10s %10s %10s\n", "tier", "hot", "cold", "promoted", "moved-down");
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		uint64_t hot, cold;
		char v[4][16];
		ta_stat_access_sums(s, t, &hot, &cold);
		human(hot, v[0], sizeof(v[0]));
		human(cold, v[1], sizeof(v[1]));
		human(ld(&acc->promoted[t]), v[2], sizeof(v[2]));
		human(ld(&acc->exchanged_down[t]), v[3], sizeof(v[3]));
		printf("%-4u %10s %10s %10s %10s\n", t, v[0], v[1], v[2], v[3]);
	}
}

/* One line per segment in the default table (within TA_STAT_COLUMNS for two tiers); a table with
 * --wide. */
static void print_lending(const struct ta_stat_seg *s, bool wide)
{
	bool live;
	const struct ta_shm_lend *l = ta_stat_lending(s, &live);
	if (l == NULL) {
		printf(
		    "lending: n/a (segment made before the lending block, tieralloc < ABI 1.5)\n");
		return;
	}
	if (wide) {
		printf("lending: priority %u, loans %s\n", ta_seg_priority(l),
		       live ? "live (the agent renews them)" : "none or lapsed");
		printf("%-4s %10s %10s %10s %10s %10s %10s %12s\n", "tier", "share", "loan", "lent",
		       "yielded", "borrowed", "taken_back", "take_back_s");
		for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
			const struct ta_shm_lend_tier *lt = &l->tier[t];
			char v[6][16];
			human(ld(&ta_stat_tier_rec(s, t)->limit[TA_LIMIT_HIGH]), v[0],
			      sizeof(v[0]));
			human(live ? ld(&lt->loan) : 0, v[1], sizeof(v[1]));
			human(live ? ld(&lt->lent) : 0, v[2], sizeof(v[2]));
			human(live ? ld(&lt->yielded) : 0, v[5], sizeof(v[5]));
			human(ld(&lt->borrowed), v[3], sizeof(v[3]));
			human(ld(&lt->taken_back), v[4], sizeof(v[4]));
			printf("%-4u %10s %10s %10s %10s %10s %10s %12.3f\n", t, v[0], v[1], v[2],
			       v[5], v[3], v[4], (double)ld(&lt->take_back_ns) / 1e9);
		}
		return;
	}
	printf("lending: priority %u\n", ta_seg_priority(l));
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		char share[16], loan[16], lent[16], yielded[16];
		const struct ta_shm_lend_tier *lt = &l->tier[t];
		human(ld(&ta_stat_tier_rec(s, t)->limit[TA_LIMIT_HIGH]), share, sizeof(share));
		human(live ? ld(&lt->loan) : 0, loan, sizeof(loan));
		human(live ? ld(&lt->lent) : 0, lent, sizeof(lent));
		human(live ? ld(&lt->yielded) : 0, yielded, sizeof(yielded));
		printf("  tier %u: share %s, loan %s, lent %s, yielded %s\n", t, share, loan, lent,
		       yielded);
	}
}

/* The segment's heading: its name, where it was seen, its processes and its cgroup. One line
 * with --wide; in the default table two, each at most TA_STAT_COLUMNS wide (the name and the path
 * elided in their middle). */
static void print_heading(const struct ta_stat_seg *s, bool wide)
{
	char name[4 * sizeof(s->name) + 8], path[4 * TA_SHM_PATH_MAX + 8], where[48] = "";
	char procs[128], version[64], id[32] = "";
	text_escape(s->name, name, sizeof(name));
	text_escape(s->cgroup_path[0] ? s->cgroup_path : "(none)", path, sizeof(path));
	if (s->place->via_pid != 0)
		snprintf(where, sizeof(where), " (mount ns of pid %d)", s->place->via_pid);
	if (s->hdr->cgroup_version == 2)
		snprintf(id, sizeof(id), ", id %llu", (unsigned long long)s->hdr->cgroup_id);
	snprintf(version, sizeof(version), " (v%u%s)", s->hdr->cgroup_version, id);
	int len = snprintf(procs, sizeof(procs), "  %u process(es)", s->alive);
	if (s->dead != 0)
		len += snprintf(procs + len, sizeof(procs) - (size_t)len, ", %u dead slot(s)",
				s->dead);
	if (s->gone)
		snprintf(procs + len, sizeof(procs) - (size_t)len, ": gone");
	if (wide) {
		printf("%s%s  cgroup %s%s%s\n", name, where, path, version, procs);
	} else {
		char fit[sizeof(path)];
		elide(name, TA_STAT_COLUMNS - strlen(where) - strlen(procs), fit, sizeof(fit));
		printf("%s%s%s\n", fit, where, procs);
		elide(path, TA_STAT_COLUMNS - strlen("cgroup ") - strlen(version), fit,
		      sizeof(fit));
		printf("cgroup %s%s\n", fit, version);
	}
	if (s->gone)
		printf("gone: its processes died; charges shown as they are once taken back (0); "
		       "--reap removes it\n");
}

void ta_stat_print_table(struct ta_stat_seg *s, bool wide)
{
	if (s->error != NULL) {
		text_print(s->name);
		printf(": unreadable: %s\n\n", s->error);
		return;
	}
	print_heading(s, wide);
	if (!ta_stat_reclaim_available(s))
		printf("memory.reclaim: not available (cgroup v1, no cgroup, or Linux < 5.19): an "
		       "excess stays\n");
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = ta_stat_observed(s, obs);
	if (wide)
		printf("%-4s %-8s %-6s %6s %10s %10s %10s %10s %10s %10s %10s %10s %12s %10s %11s "
		       "%10s %10s %13s %5s\n",
		       "tier", "name", "nodes", "share", "min", "low", "high", "max", "charged",
		       "peak", "observed", "headroom", "steered_away", "overflowed", "refused_max",
		       "reclaimed", "demoted", "reclaim_asked", "gated");
	else
		printf("%-4s %-8s %10s %10s %10s %10s %10s %12s %10s %5s\n", "tier", "name", "high",
		       "max", "charged", "observed", "headroom", "steered_away", "overflowed",
		       "gated");
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		const struct ta_shm_tier *r = ta_stat_tier_rec(s, t);
		char nodes[64], v[12][24], name[4 * TA_STAT_TIER_NAME_MAX + 1];
		text_escape(ta_stat_tier_name(s, t), name, sizeof(name));
		ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			human(ld(&r->limit[k]), v[k], sizeof(v[k]));
		uint64_t charged = ta_stat_charged_of(s, r), high = ld(&r->limit[TA_LIMIT_HIGH]);
		human(charged, v[4], sizeof(v[4]));
		if (have_obs)
			human(obs[t], v[5], sizeof(v[5]));
		else
			snprintf(v[5], sizeof(v[5]), "n/a");
		human(high > charged ? high - charged : 0, v[6], sizeof(v[6]));
		const char *gated = "n/a";
		if (ta_stat_has_enforcement(s)) {
			human(ld(&r->demoted), v[7], sizeof(v[7]));
			human(ld(&r->reclaim_asked), v[8], sizeof(v[8]));
			gated = ld(&r->gated) ? "yes" : "no";
		} else {
			snprintf(v[7], sizeof(v[7]), "n/a");
			snprintf(v[8], sizeof(v[8]), "n/a");
		}
		human(ld(&r->peak), v[9], sizeof(v[9]));
		human(ld(&r->reclaimed), v[10], sizeof(v[10]));
		char steered[24], overflowed[24], refused[24];
		count(ld(&r->steered_away), 12, steered, sizeof(steered));
		count(ld(&r->overflowed), 10, overflowed, sizeof(overflowed));
		count(ld(&r->exhausted), 11, refused, sizeof(refused));
		if (wide)
			printf(
			    "%-4u %-8.8s %-6s %5.1f%% %10s %10s %10s %10s %10s %10s %10s %10s %12s "
			    "%10s %11s %10s %10s %13s %5s\n",
			    t, name, nodes,
			    atomic_load(&((struct ta_shm_tier *)r)->share_ppm) / 10000.0, v[0],
			    v[1], v[2], v[3], v[4], v[9], v[5], v[6], steered, overflowed, refused,
			    v[10], v[7], v[8], gated);
		else
			printf("%-4u %-8.8s %10s %10s %10s %10s %10s %12s %10s %5s\n", t, name,
			       v[TA_LIMIT_HIGH], v[TA_LIMIT_MAX], v[4], v[5], v[6], steered,
			       overflowed, gated);
	}
	print_migrations(s);
	print_access(s);
	print_lending(s, wide);
	printf("\n");
}

void ta_stat_print_json(struct ta_stat_seg *s, bool first)
{
	static const char *const limit_names[TA_NLIMITS] = { "min", "low", "high", "max" };
	printf("%s{\"name\":", first ? "" : ",");
	json_string(s->name);
	if (s->error != NULL) {
		printf(",\"error\":");
		json_string(s->error);
		printf("}");
		return;
	}
	if (s->place->via_pid != 0)
		printf(",\"namespace_pid\":%d", s->place->via_pid);
	else
		printf(",\"namespace_pid\":null");
	printf(",\"cgroup\":{\"path\":");
	json_string(s->cgroup_path);
	printf(",\"id\":%llu,\"version\":%u},\"processes\":%u,\"dead_slots\":%u,\"gone\":%s,"
	       "\"generation\":%llu,\"reclaim_available\":%s,\"tiers\":[",
	       (unsigned long long)s->hdr->cgroup_id, s->hdr->cgroup_version, s->alive, s->dead,
	       s->gone ? "true" : "false",
	       (unsigned long long)ld(&((struct ta_shm_header *)s->hdr)->generation),
	       ta_stat_reclaim_available(s) ? "true" : "false");
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = ta_stat_observed(s, obs);
	const char *agent_why;
	uint64_t agent_age;
	const struct ta_shm_agent *agent = ta_stat_agent_counts(s, &agent_why, &agent_age);
	for (unsigned t = 0; t < ta_stat_ntiers(s); t++) {
		const struct ta_shm_tier *r = ta_stat_tier_rec(s, t);
		char nodes[64];
		ta_nodelist_format(ld(&r->nodes), nodes, sizeof(nodes));
		printf("%s{\"tier\":%u,\"name\":", t ? "," : "", t);
		json_string(ta_stat_tier_name(s, t));
		printf(",\"nodes\":");
		json_string(nodes);
		printf(",\"capacity\":%llu,\"share_ppm\":%u", (unsigned long long)ld(&r->capacity),
		       atomic_load(&((struct ta_shm_tier *)r)->share_ppm));
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			printf(",\"%s\":%llu", limit_names[k],
			       (unsigned long long)ld(&r->limit[k]));
		uint64_t charged = ta_stat_charged_of(s, r), high = ld(&r->limit[TA_LIMIT_HIGH]);
		printf(",\"charged\":%llu,\"peak\":%llu,\"observed\":", (unsigned long long)charged,
		       (unsigned long long)ld(&r->peak));
		if (have_obs)
			printf("%llu", (unsigned long long)obs[t]);
		else
			printf("null");
		printf(",\"headroom\":%llu,\"steered_away\":%llu,\"overflowed\":%llu,"
		       "\"refused_max\":%llu,\"reclaimed\":%llu",
		       (unsigned long long)(high > charged ? high - charged : 0),
		       (unsigned long long)ld(&r->steered_away),
		       (unsigned long long)ld(&r->overflowed),
		       (unsigned long long)ld(&r->exhausted),
		       (unsigned long long)ld(&r->reclaimed));
		/* Enforcement (ABI minor 1); null from an older segment. */
		if (ta_stat_has_enforcement(s))
			printf(",\"untracked\":%llu,\"demoted\":%llu,\"reclaim_asked\":%llu,"
			       "\"reclaims\":%llu,\"gated\":%s",
			       (unsigned long long)ld(&r->untracked),
			       (unsigned long long)ld(&r->demoted),
			       (unsigned long long)ld(&r->reclaim_asked),
			       (unsigned long long)ld(&r->reclaims),
			       ld(&r->gated) ? "true" : "false");
		else
			printf(",\"untracked\":null,\"demoted\":null,\"reclaim_asked\":null,"
			       "\"reclaims\":null,\"gated\":null");
		/* Hot and cold bytes, what the exchange moved (ABI minor 3); null before. */
		uint64_t hot, cold;
		const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
		if (ta_stat_access_sums(s, t, &hot, &cold))
			printf(",\"access\":{\"hot\":%llu,\"cold\":%llu,\"promoted\":%llu,"
			       "\"exchanged_down\":%llu}",
			       (unsigned long long)hot, (unsigned long long)cold,
			       (unsigned long long)ld(&acc->promoted[t]),
			       (unsigned long long)ld(&acc->exchanged_down[t]));
		else
			printf(",\"access\":null");
		/* Loans (ABI minor 5); null before. */
		bool lend_live;
		const struct ta_shm_lend *lend = ta_stat_lending(s, &lend_live);
		if (lend != NULL)
			printf(",\"lend\":{\"loan\":%llu,\"lent\":%llu,\"yielded\":%llu,"
			       "\"borrowed\":%llu,\"taken_back\":%llu,\"take_backs\":%llu,"
			       "\"take_back_ns\":%llu}",
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].loan) : 0),
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].lent) : 0),
			       (unsigned long long)(lend_live ? ld(&lend->tier[t].yielded) : 0),
			       (unsigned long long)ld(&lend->tier[t].borrowed),
			       (unsigned long long)ld(&lend->tier[t].taken_back),
			       (unsigned long long)ld(&lend->tier[t].take_backs),
			       (unsigned long long)ld(&lend->tier[t].take_back_ns));
		else
			printf(",\"lend\":null");
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
	bool lend_live;
	const struct ta_shm_lend *lend = ta_stat_lending(s, &lend_live);
	if (lend != NULL)
		printf("],\"priority\":%u,\"loans_live\":%s", ta_seg_priority(lend),
		       lend_live ? "true" : "false");
	else
		printf("],\"priority\":null,\"loans_live\":null");
	printf(",\"agent\":{\"available\":%s,\"why_not\":", agent ? "true" : "false");
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

void ta_stat_snapshot(struct ta_stat_seg *s, struct ta_prom_segment *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->segment, sizeof(p->segment), "%s", s->name);
	snprintf(p->cgroup, sizeof(p->cgroup), "%s", s->cgroup_path);
	p->processes = s->alive;
	p->dead_slots = s->dead;
	p->ntiers = ta_stat_ntiers(s);
	uint64_t obs[TA_SHM_MAX_TIERS];
	bool have_obs = ta_stat_observed(s, obs);
	const char *why;
	uint64_t age_ms;
	const struct ta_shm_agent *agent = ta_stat_agent_counts(s, &why, &age_ms);
	const struct ta_shm_access *acc = ta_shm_access_block(s->hdr, s->size);
	for (unsigned t = 0; t < p->ntiers; t++) {
		const struct ta_shm_tier *r = ta_stat_tier_rec(s, t);
		struct ta_prom_tier *pt = &p->tier[t];
		ta_seg_prom_tier(r, ta_stat_has_enforcement(s), pt);
		pt->charged = ta_stat_charged_of(s, r);
		pt->have_observed = have_obs;
		pt->observed = have_obs ? obs[t] : 0;
		pt->have_access = ta_stat_access_sums(s, t, &pt->hot, &pt->cold);
		if (pt->have_access)
			ta_seg_prom_exchange(acc, t, pt);
		pt->have_agent = agent != NULL;
		if (agent != NULL) {
			pt->kernel_promoted = ld(&agent->tier[t].promoted);
			pt->kernel_demoted = ld(&agent->tier[t].demoted);
			pt->kernel_moved = ld(&agent->tier[t].moved);
		}
	}
	bool lend_live;
	const struct ta_shm_lend *lend = ta_stat_lending(s, &lend_live);
	if (lend != NULL)
		ta_seg_prom_lend(lend, lend_live, p->ntiers, p);
}
