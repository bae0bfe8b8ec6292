/* SPDX-License-Identifier: MIT */
/*
 * The figures in a cgroup's control files, from their text (cgroup v2, and v1's where it has
 * them): pure, so that the unit tests read fixtures; cgctl.c reads the files.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgctl.h"

static int number(const char *p, const char **end, uint64_t *out)
{
	if (*p < '0' || *p > '9')
		return -1;
	char *e;
	errno = 0;
	unsigned long long v = strtoull(p, &e, 10);
	if (errno != 0)
		return -1;
	*out = v;
	*end = e;
	return 0;
}

int ta_cgstat_value(const char *text, uint64_t *out)
{
	const char *end;
	if (strncmp(text, "max", 3) == 0 && (text[3] == '\n' || text[3] == '\0')) {
		*out = UINT64_MAX;
		return 0;
	}
	if (number(text, &end, out) != 0 || (*end != '\n' && *end != '\0'))
		return -1;
	return 0;
}

int ta_cgstat_key(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *end;
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ' &&
		    number(line + klen + 1, &end, out) == 0 && (*end == '\n' || *end == '\0'))
			return 0;
		line = strchr(line, '\n');
		if (line != NULL)
			line++;
	}
	return -1;
}

int ta_cgstat_psi_total(const char *text, const char *kind, uint64_t *out)
{
	size_t klen = strlen(kind);
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *nl = strchr(line, '\n');
		size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
		if (strncmp(line, kind, klen) == 0 && line[klen] == ' ') {
			for (const char *p = line + klen; p < line + len; p++) {
				const char *end;
				if (strncmp(p, " total=", 7) == 0 &&
				    number(p + 7, &end, out) == 0 &&
				    (end == line + len || *end == ' '))
					return 0;
			}
			return -1;
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	return -1;
}
