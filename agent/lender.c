/* SPDX-License-Identifier: MIT */
/*
 * Lending's runner (tierallocd --lend, issue 15): each round reads every lending segment's
 * shares, usage and wishes and the nodes' free memory, asks lend.c (pure) for the loans, and
 * writes them back with their expiry; an owner that wants its share back holds it for a while,
 * and a cut loan raises the borrower's alarm.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "policy.h"
#include "quota/shm.h"
#include "segset.h"

/* ---- lending (--lend) ---- */

/* MemFree of the nodes in mask, from their meminfo. */
static uint64_t nodes_free(const struct ta_agent_segments *set, uint64_t mask)
{
	uint64_t sum = 0;
	for (unsigned n = 0; n < 64; n++) {
		if (!(mask & (1ull << n)))
			continue;
		char path[256], line[256];
		snprintf(path, sizeof(path), "%s/node%u/meminfo", set->node_dir, n);
		FILE *f = fopen(path, "re");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			unsigned node;
			unsigned long long kb;
			if (sscanf(line, "Node %u MemFree: %llu kB", &node, &kb) == 2) {
				sum += kb * 1024;
				break;
			}
		}
		fclose(f);
	}
	return sum;
}

/* One segment's figures for a round. */
struct lend_view {
	struct segment *s;
	bool ok, live;
	struct ta_shm_lend block;
	uint64_t share[TA_SHM_MAX_TIERS], used[TA_SHM_MAX_TIERS], charged[TA_SHM_MAX_TIERS];
	uint64_t steered[TA_SHM_MAX_TIERS], capacity[TA_SHM_MAX_TIERS];
	uint64_t floor[TA_SHM_MAX_TIERS]; /* the tier's low or min share, the larger */
	uint64_t loan[TA_SHM_MAX_TIERS], lent[TA_SHM_MAX_TIERS], yielded[TA_SHM_MAX_TIERS];
};

static bool lend_read(struct ta_agent_segments *set, struct lend_view *v)
{
	struct segment *s = v->s;
	char tiers[TA_SHM_MAX_TIERS * MAX_TIER_SIZE];
	size_t tiers_len = (size_t)s->ntiers * s->tier_size;
	if (!seg_read_at(set, s->fd, tiers, tiers_len, s->tiers_off) ||
	    !seg_read_at(set, s->fd, &v->block, sizeof(v->block), s->lend_off))
		return false;
	for (unsigned t = 0; t < s->ntiers; t++) {
		struct ta_shm_tier *r = (void *)(tiers + (size_t)t * s->tier_size);
		v->share[t] = atomic_load(&r->limit[TA_LIMIT_HIGH]);
		uint64_t low = atomic_load(&r->limit[TA_LIMIT_LOW]);
		uint64_t min = atomic_load(&r->limit[TA_LIMIT_MIN]);
		v->floor[t] = low > min ? low : min;
		v->charged[t] = atomic_load(&r->charged);
		uint64_t observed = atomic_load(&r->observed);
		v->used[t] = observed > v->charged[t] ? observed : v->charged[t];
		v->steered[t] = atomic_load(&r->steered_away);
		v->capacity[t] = atomic_load(&r->capacity);
	}
	v->live =
	    seg_slots_live(set, s->fd, &s->id, s->ns, s->slots_off, s->slot_size, s->max_slots);
	/* An agent started while an earlier one's loans are live goes on from them; the file is
	 * its user's, so a loan larger than the tier is not believed. */
	if (!s->lend_seen) {
		uint64_t expires = atomic_load(&v->block.expires_ns);
		for (unsigned t = 0; t < s->ntiers; t++) {
			uint64_t loan = atomic_load(&v->block.tier[t].loan);
			s->loan[t] =
			    ta_monotonic_ns() < expires && loan <= v->capacity[t] ? loan : 0;
			uint64_t yielded = atomic_load(&v->block.tier[t].yielded);
			s->yielded[t] =
			    s->yields && ta_monotonic_ns() < expires && yielded <= v->capacity[t]
				? yielded
				: 0;
			s->steered[t] = v->steered[t];
		}
	}
	return true;
}

/* Write a round's loans into a segment: the agent's fields only, around the processes'
 * priority and flags. */
static bool lend_write(struct segment *s, const struct lend_view *v, uint64_t expires)
{
	struct ta_shm_lend b = v->block;
	atomic_store(&b.expires_ns, expires);
	atomic_store(&b.seq, atomic_load(&b.seq) + 1);
	atomic_store(&b.agent_pid, (uint32_t)getpid());
	for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++) {
		bool mine = t < s->ntiers;
		atomic_store(&b.tier[t].loan, mine ? v->loan[t] : 0);
		atomic_store(&b.tier[t].lent, mine ? v->lent[t] : 0);
		if (s->yields)
			atomic_store(&b.tier[t].yielded, mine ? v->yielded[t] : 0);
		atomic_store(&b.tier[t].borrowed, mine ? s->borrowed[t] : 0);
		atomic_store(&b.tier[t].taken_back, mine ? s->taken_back[t] : 0);
		atomic_store(&b.tier[t].take_backs, mine ? s->take_backs[t] : 0);
		atomic_store(&b.tier[t].take_back_ns, mine ? s->take_back_ns[t] : 0);
	}
	size_t head = offsetof(struct ta_shm_lend, priority);
	size_t tail = offsetof(struct ta_shm_lend, agent_pid);
	/* The loans first, then the expiry that makes them count. */
	return pwrite(s->fd, (char *)&b + tail, sizeof(b) - tail, s->lend_off + tail) ==
		   (ssize_t)(sizeof(b) - tail) &&
	       pwrite(s->fd, &b, head, s->lend_off) == (ssize_t)head;
}

/* Raise the segment's alarm and wake its workers: a loan was cut, its excess is to go now. */
static void lend_alarm(struct segment *s)
{
	s->alarm++;
	uint64_t alarm = s->alarm;
	if (pwrite(s->fd, &alarm, sizeof(alarm),
		   s->agent_off + offsetof(struct ta_shm_agent, alarm)) == (ssize_t)sizeof(alarm))
		seg_wake_workers(s);
}

/* Whether an owner holds its share of tier t this round: it asks for it back when its usage
 * grows past what it held while lending by more than a step (an eighth of the reserve, 4 MiB at
 * least: above the noise of charges and readings), and holds it until its usage has not grown by a
 * step for cfg->hold_ns. Taking the whole share back at once, rather than loan by loan as the
 * owner's allocations land, makes the take-back as fast as the borrowers' demotion, not as slow
 * as the owner's page faults. The ask starts the take-back's clock. */
static bool lend_holds(struct segment *s, unsigned t, uint64_t used,
		       const struct ta_agent_lend_config *cfg, uint64_t now, bool verbose)
{
	uint64_t step = cfg->reserve / 8 > (4ull << 20) ? cfg->reserve / 8 : (4ull << 20);
	if (s->hold_until[t] != 0) {
		if (used > s->hold_used[t] + step) {
			s->hold_used[t] = used;
			s->hold_until[t] = now + cfg->hold_ns;
		}
		if (now < s->hold_until[t])
			return true;
		s->hold_until[t] = 0;
	}
	if (s->lent[t] == 0 || used <= s->lend_base[t] + step)
		return false;
	s->hold_used[t] = used;
	s->hold_until[t] = now + cfg->hold_ns;
	if (s->take_back_since[t] == 0)
		s->take_back_since[t] = now;
	if (verbose)
		printf("tierallocd: lend tier %u: cgroup %llu asks for its share back (used %lluM, "
		       "%lluM when lending, lent %lluM) at %.3f s\n",
		       t, (unsigned long long)s->cgroup_id, (unsigned long long)(used >> 20),
		       (unsigned long long)(s->lend_base[t] >> 20),
		       (unsigned long long)(s->lent[t] >> 20), (double)now / 1e9);
	return true;
}

/* The plans of tier t, one per set of nodes the segments give the tier. */
static void lend_tier(struct ta_agent_segments *set, struct lend_view *v, unsigned n, unsigned t,
		      bool *done, const struct ta_agent_lend_config *cfg, uint64_t now,
		      bool verbose)
{
	static struct ta_lend_cg cg[TA_LEND_MAX];
	static unsigned idx[TA_LEND_MAX];
	for (unsigned i = 0; i < n; i++) {
		if (done[i] || !v[i].ok || t + 1 >= v[i].s->ntiers)
			continue;
		uint64_t nodes = v[i].s->nodes[t];
		unsigned m = 0;
		for (unsigned j = i; j < n && m < TA_LEND_MAX; j++) {
			if (done[j] || !v[j].ok || t + 1 >= v[j].s->ntiers ||
			    v[j].s->nodes[t] != nodes)
				continue;
			done[j] = true;
			struct segment *s = v[j].s;
			uint64_t below = 0;
			for (unsigned u = t + 1; u < s->ntiers; u++)
				below += v[j].charged[u];
			/* The operator's word only for the cgroup the kernel puts the segment's
			 * processes in; the segment's own word within the operator's ceiling. */
			int q =
			    s->cg_state == CG_OK
				? ta_agent_priority_find(cfg->priorities.list, cfg->priorities.n,
							 s->cg_path, s->cg_id, (uint64_t)s->cg_dev)
				: -1;
			uint32_t prio = ta_agent_priority_of(
			    q >= 0, q >= 0 ? cfg->priorities.list[q].priority : 0,
			    atomic_load(&v[j].block.priority), cfg->priorities.ceiling);
			cg[m] = (struct ta_lend_cg){
				.share = v[j].share[t],
				.used = v[j].used[t],
				.below = below,
				.loan_before = s->loan[t],
				.priority = prio,
				.wants = s->lend_seen && v[j].steered[t] != s->steered[t],
				.live = v[j].live,
				.holds = lend_holds(s, t, v[j].used[t], cfg, now, verbose),
				.can_yield = s->yields,
				.floor = v[j].floor[t],
			};
			idx[m++] = j;
		}
		ta_lend_plan(cg, m, nodes_free(set, nodes), cfg->reserve, cfg->flags);
		/* Loans cut this round, and what borrowers hold over their share and loan. */
		bool cut = false;
		uint64_t over = 0;
		for (unsigned k = 0; k < m; k++) {
			struct segment *s = v[idx[k]].s;
			if (cg[k].loan < s->loan[t])
				cut = true;
			uint64_t limit = cg[k].share + cg[k].loan;
			uint64_t tol = ta_shm_gate_margin(cg[k].share) / 2;
			if (cg[k].live && cg[k].used > limit + tol)
				over += cg[k].used - limit;
		}
		for (unsigned k = 0; k < m; k++) {
			struct lend_view *w = &v[idx[k]];
			struct segment *s = w->s;
			w->loan[t] = cg[k].loan;
			w->lent[t] = cg[k].lent;
			w->yielded[t] = cg[k].yielded;
			if (cg[k].yielded > s->yielded[t])
				set->lend.yields += cg[k].yielded - s->yielded[t];
			set->lend.yielded_now += cg[k].yielded;
			if (cg[k].lent > 0 && (s->lent[t] == 0 || cg[k].used < s->lend_base[t]))
				s->lend_base[t] = cg[k].used;
			if (cg[k].loan > s->loan[t]) {
				s->borrowed[t] += cg[k].loan - s->loan[t];
				set->lend.granted += cg[k].loan - s->loan[t];
			} else if (cg[k].loan < s->loan[t]) {
				s->taken_back[t] += s->loan[t] - cg[k].loan;
				set->lend.taken_back += s->loan[t] - cg[k].loan;
			}
			/* A take-back begins for an owner that grew into what it had lent (not
			 * for one whose borrower wants less). */
			if (cut && cg[k].lent < s->lent[t] && s->take_back_since[t] == 0 &&
			    cg[k].used + cfg->reserve > cg[k].share - s->lent[t])
				s->take_back_since[t] = now;
			set->lend.lent_now += cg[k].lent;
			if (verbose && (cg[k].loan != s->loan[t] || cg[k].lent != s->lent[t] ||
					cg[k].yielded != s->yielded[t]))
				printf(
				    "tierallocd: lend tier %u: cgroup %llu priority %u share %lluM "
				    "used %lluM loan %lluM lent %lluM yielded %lluM\n",
				    t, (unsigned long long)s->cgroup_id, cg[k].priority,
				    (unsigned long long)(cg[k].share >> 20),
				    (unsigned long long)(cg[k].used >> 20),
				    (unsigned long long)(cg[k].loan >> 20),
				    (unsigned long long)(cg[k].lent >> 20),
				    (unsigned long long)(cg[k].yielded >> 20));
		}
		/* A take-back ends when the owners stopped growing into what they lent (no cut
		 * this round) and no borrower holds more than its share and loan: one episode
		 * however many rounds the owner's growth takes. */
		for (unsigned k = 0; k < m && over == 0 && !cut; k++) {
			struct segment *s = v[idx[k]].s;
			if (s->take_back_since[t] == 0)
				continue;
			uint64_t took = now - s->take_back_since[t];
			s->take_back_since[t] = 0;
			s->take_backs[t]++;
			s->take_back_ns[t] = took;
			set->lend.take_backs++;
			set->lend.take_back_ns_sum += took;
			set->lend.take_back_ns_last = took;
			if (took > set->lend.take_back_ns_max)
				set->lend.take_back_ns_max = took;
			if (verbose)
				printf("tierallocd: take-back on tier %u for cgroup %llu took %.3f "
				       "s\n",
				       t, (unsigned long long)s->cgroup_id, (double)took / 1e9);
		}
	}
}

/* Whether a segment takes part in the lending rounds: only as the cgroup its live, attached
 * processes are in (the operator's --priority for that cgroup applies), or, on a machine without
 * cgroup v2, one that names none. A segment that names a cgroup its processes are not in, names
 * none on a cgroup v2 machine, or has no live attached process, neither lends nor borrows (its
 * loans lapse): none of these could take a priority the operator did not give its cgroup. */
static bool lends(const struct ta_agent_segments *set, const struct segment *s)
{
	return s->cg_state == CG_OK || (s->cg_state == CG_NONE && set->cg_mount[0] == '\0');
}

void ta_agent_lend_tune(struct ta_agent_lend_config *cfg, uint32_t interval_ms)
{
	uint64_t expiry_ms = 4ull * interval_ms > 2000 ? 4ull * interval_ms : 2000;
	uint64_t hold_ms = 20ull * interval_ms > 5000 ? 20ull * interval_ms : 5000;
	memset(cfg, 0, sizeof(*cfg));
	cfg->expiry_ns = expiry_ms * 1000000ull;
	cfg->hold_ns = hold_ms * 1000000ull;
}

void ta_agent_segments_lend(struct ta_agent_segments *set, const struct ta_agent_lend_config *cfg,
			    bool verbose)
{
	unsigned n = 0;
	for (struct segment *s = set->list; s != NULL; s = s->next)
		if (s->lend_off != 0 && lends(set, s))
			n++;
	if (n == 0)
		return;
	struct lend_view *v = calloc(n, sizeof(*v));
	bool *done = calloc(n, sizeof(*done));
	if (v == NULL || done == NULL) {
		free(v);
		free(done);
		return;
	}
	unsigned i = 0;
	for (struct segment *s = set->list; s != NULL && i < n; s = s->next) {
		if (s->lend_off == 0 || !lends(set, s))
			continue;
		v[i].s = s;
		v[i].ok = lend_read(set, &v[i]);
		i++;
	}
	uint64_t now = ta_monotonic_ns();
	set->lend.lent_now = 0;
	set->lend.yielded_now = 0;
	for (unsigned t = 0; t + 1 < TA_SHM_MAX_TIERS; t++) {
		memset(done, 0, n * sizeof(*done));
		lend_tier(set, v, n, t, done, cfg, now, verbose);
	}
	for (i = 0; i < n; i++) {
		struct segment *s = v[i].s;
		if (!v[i].ok)
			continue;
		/* A loan cut or a yield raised: the excess is to go now. */
		bool cut = false;
		for (unsigned t = 0; t < s->ntiers; t++)
			cut |= v[i].loan[t] < s->loan[t] || v[i].yielded[t] > s->yielded[t];
		if (lend_write(s, &v[i], now + cfg->expiry_ns)) {
			memcpy(s->loan, v[i].loan, sizeof(s->loan));
			memcpy(s->lent, v[i].lent, sizeof(s->lent));
			memcpy(s->yielded, v[i].yielded, sizeof(s->yielded));
			if (cut)
				lend_alarm(s);
		}
		memcpy(s->steered, v[i].steered, sizeof(s->steered));
		s->lend_seen = true;
	}
	free(v);
	free(done);
}

void ta_agent_segments_lend_stats(const struct ta_agent_segments *set,
				  struct ta_agent_lend_stats *out)
{
	*out = set->lend;
}

/* ---- the policy (policy.h) ---- */

struct lender {
	struct ta_agent_lend_config cfg;
	bool verbose;
};

static void lender_round(void *self, struct ta_agent_segments *set)
{
	const struct lender *l = self;
	ta_agent_segments_lend(set, &l->cfg, l->verbose);
}

static void lender_stop(void *self)
{
	free(self);
}

int ta_lender_start(const struct ta_agent_lend_config *cfg, bool verbose,
		    struct ta_agent_policy *out)
{
	struct lender *l = malloc(sizeof(*l));
	if (l == NULL)
		return -1;
	*l = (struct lender){ .cfg = *cfg, .verbose = verbose };
	*out = (struct ta_agent_policy){
		.name = "lend", .self = l, .round = lender_round, .stop = lender_stop
	};
	return 0;
}
