/* SPDX-License-Identifier: MIT */
/*
 * The agent's policies' status file: tierallocd writes it (agent/status.c, with each policy's
 * lines from agent/reclaim.c and agent/protector.c) and tieralloc-stat shows it; policies.c
 * parses it.
 *
 * A first line "tierallocd-policies 1", then a line per cgroup and policy:
 *   KIND key=value ...
 * KIND is "reclaim" (--reclaim-for-priority: a cgroup that was pressured or reclaimed for
 * another) or "protect" (--protect). A value is decimal, "max", "never", words joined by
 * commas, or a path (keys path and for): a path is escaped, backslash as \\ and space, 0x7f and
 * every byte below 0x20 as \xHH, so that no value holds a space or a newline. Keys ending in
 * _bytes count bytes, in _s seconds. Every line has a path.
 */
#ifndef TA_POLICIES_H
#define TA_POLICIES_H

#include <stddef.h>

/* The agent's run-time directory: its policies' state files (what restores the cgroups' files
 * after the agent died) and, by default, their status file. Its systemd unit makes it and keeps
 * it across restarts (RuntimeDirectory=). */
#define TA_AGENT_RUN_DIR "/run/tierallocd"

#define TA_POLICIES_MAGIC   "tierallocd-policies 1"
#define TA_POLICIES_DEFAULT TA_AGENT_RUN_DIR "/policies"

#define TA_POLICY_KEYS	   24
#define TA_POLICY_KEY_MAX  31
#define TA_POLICY_PATH_MAX 1024

struct ta_policy_kv {
	char key[TA_POLICY_KEY_MAX + 1];
	char value[TA_POLICY_PATH_MAX + 1]; /* unescaped */
};

struct ta_policy {
	char kind[TA_POLICY_KEY_MAX + 1];
	unsigned n;
	struct ta_policy_kv kv[TA_POLICY_KEYS];
};

/* Parse the file's text (len bytes, need not end in NUL) into at most max entries: how many, or
 * -1 when the first line is not TA_POLICIES_MAGIC. A line that does not parse (a bad kind or
 * key, a bad escape, too many keys, a value too long, no path) is skipped and counted in *bad. */
int ta_policies_parse(const char *text, size_t len, struct ta_policy *out, unsigned max,
		      unsigned *bad);

/* The value of key in p, or NULL. */
const char *ta_policy_get(const struct ta_policy *p, const char *key);

#endif
