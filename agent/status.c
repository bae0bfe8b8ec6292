/* SPDX-License-Identifier: MIT */
/* The one rule the agent's policies share for their status lines: how a path is written. */
#include "status.h"

int ta_status_path(FILE *f, const char *key, const char *path)
{
	if (fprintf(f, " %s=", key) < 0)
		return -1;
	for (const unsigned char *p = (const unsigned char *)path; *p != '\0'; p++) {
		int rc = *p == '\\'		    ? fputs("\\\\", f)
			 : *p <= 0x20 || *p == 0x7f ? fprintf(f, "\\x%02x", *p)
						    : fputc(*p, f);
		if (rc < 0)
			return -1;
	}
	return 0;
}
