/* SPDX-License-Identifier: MIT */
/*
 * Reclaim seen taking pages from watched cgroups (bpf/steals.bpf.c), for policy 2 (tierallocd
 * --protect, issue 17): the pages each has lost so far, and a descriptor that becomes readable
 * when one just lost some.
 */
#ifndef TA_STEALS_H
#define TA_STEALS_H

#include <stddef.h>
#include <stdint.h>

struct ta_steals;

/* Load and attach the program (kernel BTF at btf): the source, or NULL with the reason in err
 * (a kernel that cannot attach to shrink_lruvec(), no BTF, no privileges). */
struct ta_steals *ta_steals_open(const char *btf, char *err, size_t errlen);
/* Watch the cgroup with this v2 id (its directory's inode): 0, or -errno (-E2BIG: too many). */
int ta_steals_watch(struct ta_steals *s, uint64_t cgroup_id);
/* The pages reclaim took from a watched cgroup's own lists so far (0 if not watched). */
uint64_t ta_steals_pages(struct ta_steals *s, uint64_t cgroup_id);
/* Readable (poll: POLLIN) when an alert is waiting. */
int ta_steals_fd(const struct ta_steals *s);
/* Take the waiting alerts: how many there were. */
unsigned ta_steals_drain(struct ta_steals *s);
/* Detach and free; NULL: nothing. */
void ta_steals_close(struct ta_steals *s);

#endif
