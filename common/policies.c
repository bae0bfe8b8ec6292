/* SPDX-License-Identifier: MIT */
/* The parser of the agent's policies' status file (policies.h). The file is root's, but it is
 * read by a tool that may print it to a terminal: everything is checked, nothing trusted. */
#include "policies.h"

#include <stdbool.h>
#include <string.h>

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The value in [s, e) unescaped into out (TA_POLICY_PATH_MAX + 1 bytes); false if bad. */
static bool unescape(const char *s, const char *e, char *out)
{
	size_t n = 0;
	while (s < e) {
		char c = *s++;
		if (c == '\\') {
			if (s < e && *s == '\\') {
				c = '\\';
				s++;
			} else if (e - s >= 3 && s[0] == 'x' && hex(s[1]) >= 0 && hex(s[2]) >= 0) {
				c = (char)(hex(s[1]) * 16 + hex(s[2]));
				s += 3;
				if (c == '\0')
					return false;
			} else {
				return false;
			}
		} else if ((unsigned char)c < 0x20 || c == 0x7f) {
			return false;
		}
		if (n == TA_POLICY_PATH_MAX)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	return true;
}

/* One line [s, e) into p: false if it does not parse. */
static bool parse_line(const char *s, const char *e, struct ta_policy *p)
{
	memset(p, 0, sizeof(*p));
	const char *w = s;
	while (w < e && is_word_char(*w))
		w++;
	if (w == s || w - s > TA_POLICY_KEY_MAX || (w < e && *w != ' '))
		return false;
	memcpy(p->kind, s, (size_t)(w - s));
	for (s = w; s < e;) {
		if (*s++ != ' ' || p->n == TA_POLICY_KEYS)
			return false;
		const char *k = s;
		while (s < e && is_word_char(*s))
			s++;
		if (s == k || s - k > TA_POLICY_KEY_MAX || s == e || *s != '=')
			return false;
		struct ta_policy_kv *kv = &p->kv[p->n++];
		memcpy(kv->key, k, (size_t)(s - k));
		const char *v = ++s;
		while (s < e && *s != ' ')
			s++;
		if (!unescape(v, s, kv->value))
			return false;
		for (unsigned i = 0; i + 1 < p->n; i++)
			if (strcmp(p->kv[i].key, kv->key) == 0)
				return false; /* a key twice: which one would be meant? */
	}
	const char *path = ta_policy_get(p, "path");
	return path != NULL && path[0] != '\0';
}

int ta_policies_parse(const char *text, size_t len, struct ta_policy *out, unsigned max,
		      unsigned *bad)
{
	const char *end = text + len;
	const char *nl = memchr(text, '\n', len);
	size_t mlen = strlen(TA_POLICIES_MAGIC);
	*bad = 0;
	if (nl == NULL || (size_t)(nl - text) != mlen || memcmp(text, TA_POLICIES_MAGIC, mlen) != 0)
		return -1;
	int n = 0;
	for (const char *s = nl + 1; s < end;) {
		const char *e = memchr(s, '\n', (size_t)(end - s));
		/* A last line without its newline was cut short: not taken. */
		if (e == NULL) {
			(*bad)++;
			break;
		}
		if (e > s) {
			if ((unsigned)n < max && parse_line(s, e, &out[n]))
				n++;
			else
				(*bad)++;
		}
		s = e + 1;
	}
	return n;
}

const char *ta_policy_get(const struct ta_policy *p, const char *key)
{
	for (unsigned i = 0; i < p->n; i++)
		if (strcmp(p->kv[i].key, key) == 0)
			return p->kv[i].value;
	return NULL;
}
