/* SPDX-License-Identifier: MIT */
/* tieralloc-stat --policies (stat_policies.c). */
#ifndef TA_STAT_POLICIES_H
#define TA_STAT_POLICIES_H

#include <stdbool.h>

/* What tierallocd's policies decided, from the status file at path, after the segments: a table
 * section, or the JSON document's "policies" member (null without a file). Nothing in the table
 * when the file is absent, unless the user named it (given). false when the file was named and
 * cannot be read, or is not a policies file (a line on stderr says why). */
bool ta_stat_show_policies(const char *path, bool given, bool json);

#endif
