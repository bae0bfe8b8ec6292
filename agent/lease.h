/* SPDX-License-Identifier: MIT */
/*
 * Leases on the cgroup control files the agent's policies change (--protect's memory.low,
 * --reclaim-for-priority's caps on memory.high): one table and one keeper process for them all.
 * A policy renews its leases every round; the keeper (tierallocd-lease) writes a file's original
 * value back once its lease has not been renewed for the policy's expiry, so that a hung or
 * killed agent (SIGKILL included) leaves no cgroup changed. While a lease is held, a state file
 * (STATE_DIR/lease-INODE-FILE: "original written path") keeps the original for an agent
 * started after both died, which restores it at its start.
 */
#ifndef TA_AGENT_LEASE_H
#define TA_AGENT_LEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TA_LEASE_MAX 64 /* leases held at once, all policies together */

/* What one policy leases: a control file (its name is the lease's key with the cgroup's path:
 * one policy per file) and how long a lease outlives its last renewal. */
struct ta_lease_kind {
	const char *file; /* "memory.low", "memory.high": "memory." and at most 31 characters */
	uint64_t expiry_ns;
};

struct ta_lease;

/* Restores what earlier agents' state files say they left (when the file still holds what they
 * wrote), then forks the keeper. NULL with a line in err when it cannot. */
struct ta_lease *ta_lease_start(const char *state_dir, char *err, size_t errlen);
/* The keeper's process id, for the log. */
pid_t ta_lease_keeper(const struct ta_lease *l);
/* Before the agent writes `written` to the cgroup's file: records it (the original kept from
 * the lease already held, else the one given). 0, or -1 when the directory is gone or all
 * TA_LEASE_MAX are held. */
int ta_lease_hold(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup,
		  uint64_t original, uint64_t written);
/* Every round: every lease of the kind is renewed (another policy's are not: a hung policy's
 * leases expire while the rest of the agent goes on). */
void ta_lease_renew(struct ta_lease *l, const struct ta_lease_kind *k);
/* The agent restored the original itself, or someone else's value now stands: forgotten. */
void ta_lease_drop(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup);
/* Whether the lease is still held (the keeper forgets one it restored after an expiry). */
bool ta_lease_held(struct ta_lease *l, const struct ta_lease_kind *k, const char *cgroup);
/* The keeper's rule: a lease renewed at renewed_ns has expired at now_ns. A renewal stamped after
 * the keeper read its clock (renewed_ns > now_ns: the policy's thread ran in between) is held. */
bool ta_lease_expired(uint64_t now_ns, uint64_t renewed_ns, uint64_t expiry_ns);
/* A policy stops: each of its leases restored (when the file still holds what it wrote) and
 * forgotten. */
void ta_lease_release(struct ta_lease *l, const struct ta_lease_kind *k);
/* The agent stops: every lease still held is restored, the keeper told and waited for. NULL is
 * a no-op. */
void ta_lease_stop(struct ta_lease *l);

#endif
