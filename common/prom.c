/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition (format 0.0.4) of segment snapshots: see prom.h. Names follow
 * Prometheus' conventions: the prefix tieralloc_, the unit in the name (_bytes, _pages, _ratio),
 * counters ending in _total; the counters are named as tieralloc-stat's table and JSON and
 * tieralloc-run's summary name them (steered_away, overflowed, refused_max). A limit that is not
 * set is +Inf, as the format allows; a value the segment does not have (an older ABI, no agent, no
 * cgroup v2) is left out, not written as 0.
 */
#include <stdlib.h>
#include <string.h>

#include "prom.h"

enum kind { GAUGE, COUNTER };

/* A tier's value for one metric: false when the tier has none. */
typedef bool tier_getter(const struct ta_prom_tier *t, uint64_t *v);

#define FIELD_GETTER(fn, cond, expr)                                                               \
	static bool fn(const struct ta_prom_tier *t, uint64_t *v)                                  \
	{                                                                                          \
		*v = (expr);                                                                       \
		return (cond);                                                                     \
	}

FIELD_GETTER(get_min, true, t->limit[TA_LIMIT_MIN])
FIELD_GETTER(get_low, true, t->limit[TA_LIMIT_LOW])
FIELD_GETTER(get_high, true, t->limit[TA_LIMIT_HIGH])
FIELD_GETTER(get_max, true, t->limit[TA_LIMIT_MAX])
FIELD_GETTER(get_capacity, true, t->capacity)
FIELD_GETTER(get_share, true, t->share_ppm)
FIELD_GETTER(get_charged, true, t->charged)
FIELD_GETTER(get_peak, true, t->peak)
FIELD_GETTER(get_observed, t->have_observed, t->observed)
FIELD_GETTER(get_steered, true, t->steered_away)
FIELD_GETTER(get_overflowed, true, t->overflowed)
FIELD_GETTER(get_refused_max, true, t->refused_max)
FIELD_GETTER(get_reclaimed, true, t->reclaimed)
FIELD_GETTER(get_untracked, t->have_enforcement, t->untracked)
FIELD_GETTER(get_demoted, t->have_enforcement, t->demoted)
FIELD_GETTER(get_reclaim_asked, t->have_enforcement, t->reclaim_asked)
FIELD_GETTER(get_reclaims, t->have_enforcement, t->reclaims)
FIELD_GETTER(get_gated, t->have_enforcement, t->gated != 0)
FIELD_GETTER(get_hot, t->have_access, t->hot)
FIELD_GETTER(get_cold, t->have_access, t->cold)
FIELD_GETTER(get_xup, t->have_access, t->exchange_promoted)
FIELD_GETTER(get_xdown, t->have_access, t->exchange_down)
FIELD_GETTER(get_loan, t->have_lend, t->loan)
FIELD_GETTER(get_lent, t->have_lend, t->lent)
FIELD_GETTER(get_yielded, t->have_lend, t->yielded)
FIELD_GETTER(get_taken_back, t->have_lend, t->taken_back)
FIELD_GETTER(get_take_backs, t->have_lend, t->take_backs)
FIELD_GETTER(get_kpromoted, t->have_agent, t->kernel_promoted)
FIELD_GETTER(get_kdemoted, t->have_agent, t->kernel_demoted)
FIELD_GETTER(get_kmoved, t->have_agent, t->kernel_moved)

enum format { PLAIN, LIMIT, PPM };

static const struct tier_metric {
	const char *name, *help;
	enum kind kind;
	enum format format;
	tier_getter *get;
} tier_metrics[] = {
	{ "tier_min_bytes", "The cgroup's memory.min split to the tier (+Inf: none).", GAUGE, LIMIT,
	  get_min },
	{ "tier_low_bytes", "The cgroup's memory.low split to the tier (+Inf: none).", GAUGE, LIMIT,
	  get_low },
	{ "tier_high_bytes", "The cgroup's memory.high split to the tier (+Inf: none).", GAUGE,
	  LIMIT, get_high },
	{ "tier_max_bytes", "The cgroup's memory.max split to the tier (+Inf: none).", GAUGE, LIMIT,
	  get_max },
	{ "tier_capacity_bytes", "MemTotal of the tier's nodes.", GAUGE, PLAIN, get_capacity },
	{ "tier_share_ratio", "The tier's share of the limits.", GAUGE, PPM, get_share },
	{ "tier_charged_bytes", "Bytes the cgroup's tieralloc processes hold in the tier.", GAUGE,
	  PLAIN, get_charged },
	{ "tier_peak_bytes", "The highest charge seen in the tier.", GAUGE, PLAIN, get_peak },
	{ "tier_observed_bytes",
	  "The kernel's usage of the cgroup on the tier's nodes (memory.numa_stat, cgroup v2).",
	  GAUGE, PLAIN, get_observed },
	{ "tier_steered_away_total",
	  "Times a thread found the tier at its high or max share and moved on.", COUNTER, PLAIN,
	  get_steered },
	{ "tier_overflowed_total", "Allocations placed in the tier although every tier was at max.",
	  COUNTER, PLAIN, get_overflowed },
	{ "tier_refused_max_total", "Charges the tier refused at its max share.", COUNTER, PLAIN,
	  get_refused_max },
	{ "tier_reclaimed_bytes_total", "Charges taken back from dead processes.", COUNTER, PLAIN,
	  get_reclaimed },
	{ "tier_untracked_bytes", "Observed usage beyond the charges at the last reading.", GAUGE,
	  PLAIN, get_untracked },
	{ "tier_demoted_bytes_total", "Bytes the processes moved from the tier to a lower one.",
	  COUNTER, PLAIN, get_demoted },
	{ "tier_reclaim_asked_bytes_total",
	  "Bytes written to memory.reclaim for the tier's excess.", COUNTER, PLAIN,
	  get_reclaim_asked },
	{ "tier_reclaims_total", "Writes to memory.reclaim for the tier's excess.", COUNTER, PLAIN,
	  get_reclaims },
	{ "tier_gated", "1 while promotions into the tier are gated.", GAUGE, PLAIN, get_gated },
	{ "tier_hot_bytes", "Bytes in the tier written lately (each live process's last sample).",
	  GAUGE, PLAIN, get_hot },
	{ "tier_cold_bytes", "Bytes in the tier not written lately.", GAUGE, PLAIN, get_cold },
	{ "tier_exchange_promoted_bytes_total", "Bytes the exchange moved up into the tier.",
	  COUNTER, PLAIN, get_xup },
	{ "tier_exchange_demoted_bytes_total", "Bytes the exchange moved down out of the tier.",
	  COUNTER, PLAIN, get_xdown },
	{ "tier_loan_bytes",
	  "Bytes of other cgroups' idle shares the cgroup borrows now (tierallocd --lend).", GAUGE,
	  PLAIN, get_loan },
	{ "tier_lent_bytes", "Bytes of the cgroup's share lent to others now.", GAUGE, PLAIN,
	  get_lent },
	{ "tier_yielded_bytes",
	  "Bytes of the cgroup's share yielded to a higher priority now (tierallocd "
	  "--reclaim-for-priority).",
	  GAUGE, PLAIN, get_yielded },
	{ "tier_loan_taken_back_bytes_total", "Bytes of the cgroup's loans revoked.", COUNTER,
	  PLAIN, get_taken_back },
	{ "tier_take_backs_total", "Take-backs of the cgroup's lent share completed.", COUNTER,
	  PLAIN, get_take_backs },
	{ "tier_kernel_promoted_pages_total",
	  "Pages the kernel promoted into the tier (NUMA balancing; tierallocd).", COUNTER, PLAIN,
	  get_kpromoted },
	{ "tier_kernel_demoted_pages_total",
	  "Pages the kernel demoted into the tier (reclaim; tierallocd).", COUNTER, PLAIN,
	  get_kdemoted },
	{ "tier_kernel_moved_pages_total",
	  "Pages mbind(2) or move_pages(2) moved into the tier (tierallocd).", COUNTER, PLAIN,
	  get_kmoved },
};

/* A label value: valid UTF-8 as is but for the three characters the format escapes; a byte that
 * is not valid UTF-8 (or a control character other than a newline) becomes U+FFFD. */
void ta_prom_label_value(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	while (*s != '\0') {
		unsigned c = *s, len = 1, extra = 0;
		uint32_t cp = c, min = 0;
		if (c >= 0x80) {
			if ((c & 0xe0) == 0xc0)
				extra = 1, cp = c & 0x1f, min = 0x80;
			else if ((c & 0xf0) == 0xe0)
				extra = 2, cp = c & 0x0f, min = 0x800;
			else if ((c & 0xf8) == 0xf0)
				extra = 3, cp = c & 0x07, min = 0x10000;
			else
				extra = 4; /* never valid */
			bool ok = extra < 4;
			for (unsigned i = 1; ok && i <= extra; i++) {
				ok = (s[i] & 0xc0) == 0x80; /* a NUL stops here too */
				cp = cp << 6 | (s[i] & 0x3fu);
			}
			ok = ok && cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
			if (!ok) {
				fputs("\xef\xbf\xbd", f);
				s++;
				continue;
			}
			len = extra + 1;
		}
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '"')
			fputs("\\\"", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fputs("\xef\xbf\xbd", f);
		else
			fwrite(s, 1, len, f);
		s += len;
	}
}

/* A node mask as a list of ranges, "0-1,3". */
static void node_list(FILE *f, uint64_t mask)
{
	bool first = true;
	for (unsigned a = 0; a < 64; a++) {
		if (!(mask & (1ull << a)))
			continue;
		unsigned b = a;
		while (b + 1 < 64 && (mask & (1ull << (b + 1))))
			b++;
		fprintf(f, b == a ? "%s%u" : "%s%u-%u", first ? "" : ",", a, b);
		first = false;
		a = b;
	}
}

static void segment_labels(FILE *f, const struct ta_prom_segment *s)
{
	fputs("cgroup=\"", f);
	ta_prom_label_value(f, s->cgroup);
	fputs("\",segment=\"", f);
	ta_prom_label_value(f, s->segment);
	fputc('"', f);
}

static void header(FILE *f, const char *name, const char *help, enum kind kind)
{
	fprintf(f, "# HELP tieralloc_%s %s\n# TYPE tieralloc_%s %s\n", name, help, name,
		kind == COUNTER ? "counter" : "gauge");
}

/* Whether segs[i] repeats the labels of an earlier segment. */
static bool repeated(const struct ta_prom_segment *segs, unsigned i)
{
	for (unsigned j = 0; j < i; j++)
		if (strcmp(segs[j].segment, segs[i].segment) == 0 &&
		    strcmp(segs[j].cgroup, segs[i].cgroup) == 0)
			return true;
	return false;
}

int ta_prom_write(FILE *f, const struct ta_prom_segment *segs, unsigned n)
{
	bool *repeat = calloc(n > 0 ? n : 1, sizeof(*repeat));
	if (repeat == NULL)
		return -1;
	for (unsigned i = 0; i < n; i++)
		repeat[i] = repeated(segs, i);

	header(f, "processes", "Live tieralloc processes attached to the segment.", GAUGE);
	for (unsigned i = 0; i < n; i++) {
		if (repeat[i])
			continue;
		fputs("tieralloc_processes{", f);
		segment_labels(f, &segs[i]);
		fprintf(f, "} %u\n", segs[i].processes);
	}
	header(f, "dead_slots", "Slots of dead processes whose charges are not yet taken back.",
	       GAUGE);
	for (unsigned i = 0; i < n; i++) {
		if (repeat[i])
			continue;
		fputs("tieralloc_dead_slots{", f);
		segment_labels(f, &segs[i]);
		fprintf(f, "} %u\n", segs[i].dead_slots);
	}

	header(f, "priority", "The cgroup's TIERALLOC_PRIORITY for lending (0 when undeclared).",
	       GAUGE);
	for (unsigned i = 0; i < n; i++) {
		if (repeat[i] || !segs[i].have_priority)
			continue;
		fputs("tieralloc_priority{", f);
		segment_labels(f, &segs[i]);
		fprintf(f, "} %u\n", segs[i].priority);
	}

	for (size_t m = 0; m < sizeof(tier_metrics) / sizeof(tier_metrics[0]); m++) {
		const struct tier_metric *tm = &tier_metrics[m];
		header(f, tm->name, tm->help, tm->kind);
		for (unsigned i = 0; i < n; i++) {
			const struct ta_prom_segment *s = &segs[i];
			unsigned nt = s->ntiers < TA_SHM_MAX_TIERS ? s->ntiers : TA_SHM_MAX_TIERS;
			for (unsigned t = 0; t < nt && !repeat[i]; t++) {
				uint64_t v;
				if (!tm->get(&s->tier[t], &v))
					continue;
				fprintf(f, "tieralloc_%s{", tm->name);
				segment_labels(f, s);
				fprintf(f, ",tier=\"%u\",tier_name=\"", t);
				ta_prom_label_value(f, s->tier[t].name);
				fputs("\",nodes=\"", f);
				node_list(f, s->tier[t].nodes);
				if (tm->format == LIMIT && v == TA_SHM_UNLIMITED)
					fputs("\"} +Inf\n", f);
				else if (tm->format == PPM)
					fprintf(f, "\"} %.6f\n", (double)v / 1e6);
				else
					fprintf(f, "\"} %llu\n", (unsigned long long)v);
			}
		}
	}
	free(repeat);
	return ferror(f) ? -1 : 0;
}
