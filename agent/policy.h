/* SPDX-License-Identifier: MIT */
/*
 * One shape for the agent's policies: what tierallocd.c's loop knows of each. A policy is a
 * pure decision file with fixture tests (lend.c, pressure.c, protect.c) and a runner (lender.c,
 * reclaim.c, protector.c) that the loop drives through this interface alone: a round each
 * interval (or a thread of its own), its lines in the status file, its metrics, its stop.
 */
#ifndef TA_AGENT_POLICY_H
#define TA_AGENT_POLICY_H

#include <stdio.h>

struct ta_agent_segments;

struct ta_agent_policy {
	const char *name; /* its option: "lend", "reclaim-for-priority", "protect" */
	void *self;
	/* One round each interval, after the migration counts are published, in the order the
	 * policies were started (NULL: it runs on a thread of its own). */
	void (*round)(void *self, struct ta_agent_segments *set);
	int (*status)(void *self, FILE *f);  /* its status-file lines (status.h): 0, or -1 */
	int (*metrics)(void *self, FILE *f); /* its Prometheus text: 0, or -1 */
	/* Undoes what it changed (the cgroup files it leased go back), frees self. */
	void (*stop)(void *self);
};

#endif
