/* SPDX-License-Identifier: MIT */
/*
 * Leases on a cgroup control file the agent changed (the caps of --reclaim-for-priority on
 * memory.high): the agent renews them every round; a keeper process writes the original value
 * back once a lease has not been renewed for the expiry, so that a hung or killed agent
 * (SIGKILL included) leaves no cgroup capped. While a lease is held, a state file
 * (STATE_DIR/PREFIX-INODE) keeps the original for an agent started after both died.
 */
#ifndef TA_AGENT_LEASE_H
#define TA_AGENT_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#define TA_LEASE_MAX 64 /* leases held at once */

struct ta_lease;

/* Restores what earlier agents' state files say they left (when the file still holds what they
 * wrote), then forks the keeper. NULL with a line in err when it cannot. */
struct ta_lease *ta_lease_start(const char *file, const char *state_dir, const char *prefix,
				uint64_t expiry_ns, char *err, size_t errlen);
/* Before the agent writes `written` to cgroup's file: records it (original kept from the lease
 * already held, else the one given). 0, or -1 when all TA_LEASE_MAX are held. */
int ta_lease_hold(struct ta_lease *l, const char *cgroup, uint64_t original, uint64_t written);
/* Every round: every lease held is renewed. */
void ta_lease_renew(struct ta_lease *l);
/* The agent restored the original itself, or someone else's value now stands: forgotten. */
void ta_lease_drop(struct ta_lease *l, const char *cgroup);
/* Whether the keeper restored cgroup's original after an expiry (and forgot the lease). */
bool ta_lease_held(struct ta_lease *l, const char *cgroup);
/* The agent stops: every lease it holds is restored (when the file still holds what it wrote),
 * the keeper told and waited for. NULL is a no-op. */
void ta_lease_stop(struct ta_lease *l);

#endif
