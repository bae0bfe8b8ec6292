/* SPDX-License-Identifier: MIT */
/* The agent's side of the policies' status file (its format: common/policies.h). */
#ifndef TA_STATUS_H
#define TA_STATUS_H

#include <stdio.h>

#include "policies.h"

/* " KEY=PATH", PATH escaped as policies.h says: 0, or -1 if f failed. */
int ta_status_path(FILE *f, const char *key, const char *path);

#endif
