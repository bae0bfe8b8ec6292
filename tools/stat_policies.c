/* SPDX-License-Identifier: MIT */
/*
 * tieralloc-stat --policies: what tierallocd's policies decided, from the status file the agent
 * rewrites every second (common/policies.c parses it), as a table section or the JSON
 * document's "policies" member.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policies.h"
#include "stat_policies.h"
#include "stat_text.h"
#include "units.h"

/* The agent's policies' status file (common/policies.h), read like a segment: without following a
 * link or blocking, a regular file of at most 256 KiB. Its text in a malloc'd buffer (*len
 * bytes) and its age in seconds, or NULL with errno. */
static char *read_policies(const char *path, size_t *len, long *age)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fd, &st) != 0)
		goto out;
	if (!S_ISREG(st.st_mode) || st.st_size > 256 * 1024) {
		errno = !S_ISREG(st.st_mode) ? EINVAL : EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		goto out;
	ssize_t got = pread(fd, buf, (size_t)st.st_size, 0);
	if (got < 0) {
		free(buf);
		buf = NULL;
		goto out;
	}
	*len = (size_t)got;
	*age = (long)(time(NULL) - st.st_mtime);
out:
	close(fd);
	return buf;
}

/* A value as the table shows it: bytes in IEC units, seconds with "s" (and "ago" for a last_
 * time), paths escaped. */
static void policy_value(const struct ta_policy_kv *kv, char *out, size_t n)
{
	size_t klen = strlen(kv->key);
	char *end;
	unsigned long long v = strtoull(kv->value, &end, 10);
	bool number = kv->value[0] >= '0' && kv->value[0] <= '9' && *end == '\0';
	if (number && klen > 6 && strcmp(kv->key + klen - 6, "_bytes") == 0)
		ta_iec_bytes(v, out, n);
	else if (number && klen > 2 && strcmp(kv->key + klen - 2, "_s") == 0)
		snprintf(out, n, "%llu s%s", v, strncmp(kv->key, "last_", 5) == 0 ? " ago" : "");
	else
		text_escape(kv->value, out, n);
}

/* The key as the table shows it: its unit suffix dropped, "_" as " ". */
static void policy_key(const char *key, char *out, size_t n)
{
	size_t len = strlen(key);
	if (len > 6 && strcmp(key + len - 6, "_bytes") == 0)
		len -= 6;
	else if (len > 2 && strcmp(key + len - 2, "_s") == 0)
		len -= 2;
	snprintf(out, n, "%.*s", (int)len, key);
	for (char *c = out; *c != '\0'; c++)
		if (*c == '_')
			*c = ' ';
}

#define POLICIES_MAX 256

/* What the agent's policies decided (tierallocd --reclaim-for-priority, --protect), after the
 * segments: a table section or the document's "policies" member. Nothing in the table when
 * the agent runs no policy (no file), unless --policies named it. */
bool ta_stat_show_policies(const char *path, bool given, bool json)
{
	size_t len = 0;
	long age = 0;
	char *text = read_policies(path, &len, &age);
	int err = errno;
	struct ta_policy *p = NULL;
	int n = -1;
	unsigned bad = 0;
	if (text != NULL && (p = calloc(POLICIES_MAX, sizeof(*p))) != NULL)
		n = ta_policies_parse(text, len, p, POLICIES_MAX, &bad);
	free(text);
	char file[4 * 4096 + 8];
	text_escape(path, file, sizeof(file));
	if (text == NULL || n < 0) {
		const char *why = text == NULL ? strerror(err) : "not a tierallocd policies file";
		bool failed = given || (text != NULL && n < 0);
		if (failed)
			fprintf(stderr, "tieralloc-stat: %s: %s\n", file, why);
		if (json)
			printf(",\"policies\":null");
		free(p);
		return !failed;
	}
	if (json) {
		printf(",\"policies\":{\"file\":");
		json_string(path);
		printf(",\"age_s\":%ld,\"unparsed_lines\":%u,\"entries\":[", age, bad);
		for (int i = 0; i < n; i++) {
			printf("%s{\"kind\":", i ? "," : "");
			json_string(p[i].kind);
			for (unsigned k = 0; k < p[i].n; k++) {
				const char *v = p[i].kv[k].value;
				char *end;
				strtoull(v, &end, 10);
				printf(",");
				json_string(p[i].kv[k].key);
				printf(":");
				if (v[0] >= '0' && v[0] <= '9' && *end == '\0' && strlen(v) < 20)
					fputs(v, stdout);
				else
					json_string(v);
			}
			printf("}");
		}
		printf("]}");
		free(p);
		return true;
	}
	printf("\ntierallocd's policies (%s, written %ld s ago%s)%s\n", file, age,
	       age > 5 ? ": is tierallocd still running?" : "", n == 0 ? ": none yet" : "");
	for (int i = 0; i < n; i++) {
		char kind[4 * TA_POLICY_KEY_MAX + 8], where[4 * TA_POLICY_PATH_MAX + 8];
		text_escape(p[i].kind, kind, sizeof(kind));
		text_escape(ta_policy_get(&p[i], "path"), where, sizeof(where));
		printf("  %s %s\n   ", kind, where);
		unsigned col = 3;
		for (unsigned k = 0; k < p[i].n; k++) {
			if (strcmp(p[i].kv[k].key, "path") == 0)
				continue;
			char key[TA_POLICY_KEY_MAX + 1], value[4 * TA_POLICY_PATH_MAX + 8];
			policy_key(p[i].kv[k].key, key, sizeof(key));
			policy_value(&p[i].kv[k], value, sizeof(value));
			size_t w = strlen(key) + strlen(value) + 3;
			if (col > 3 && col + w > TA_STAT_COLUMNS) {
				printf(",\n   ");
				col = 3;
			} else if (col > 3) {
				putchar(',');
			}
			printf(" %s %s", key, value);
			col += (unsigned)w;
		}
		printf("\n");
	}
	if (bad > 0)
		printf("  (%u line%s not understood)\n", bad, bad == 1 ? "" : "s");
	free(p);
	return true;
}
