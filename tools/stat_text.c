/* SPDX-License-Identifier: MIT */
/*
 * How tieralloc-stat prints what it read: every string escaped (no control character reaches
 * the terminal, JSON stays valid, whatever a segment's owner wrote), bytes as tieralloc-run
 * prints them, counts that cannot widen the table.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stat_text.h"
#include "units.h"
#include "tieralloc/shm_abi.h"

/* The code point of the UTF-8 sequence at s (at most n bytes), and its length; 0 when it is not
 * a valid, shortest-form sequence. */
static unsigned utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned len;
	uint32_t c = s[0], min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		len = 2, c &= 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3, c &= 0x0f, min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4, c &= 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (unsigned i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* For a terminal: printable ASCII as is, a backslash doubled, every other byte as \xNN. */
void text_escape(const char *s, char *out, size_t n)
{
	size_t pos = 0;
	for (; *s != '\0' && pos + 5 <= n; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\\')
			pos += (size_t)snprintf(out + pos, n - pos, "\\\\");
		else if (c >= 0x20 && c < 0x7f)
			out[pos++] = (char)c;
		else
			pos += (size_t)snprintf(out + pos, n - pos, "\\x%02x", c);
	}
	out[pos] = '\0';
}

void text_print(const char *s)
{
	char buf[4 * TA_SHM_PATH_MAX + 8];
	text_escape(s, buf, sizeof(buf));
	fputs(buf, stdout);
}

/* A JSON string: valid UTF-8 as is, except control characters (C0, DEL, C1), which are escaped;
 * a byte that is not valid UTF-8 becomes U+FFFD. */
void json_string(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);
	putchar('"');
	while (n > 0) {
		uint32_t cp;
		unsigned len = utf8_next(s, n, &cp);
		if (len == 0) {
			fputs("\\ufffd", stdout);
			len = 1;
		} else if (cp == '"' || cp == '\\') {
			printf("\\%c", (char)cp);
		} else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
			printf("\\u%04x", (unsigned)cp);
		} else {
			fwrite(s, 1, len, stdout);
		}
		s += len;
		n -= len;
	}
	putchar('"');
}

/* Bytes as tieralloc-run prints them (IEC, one decimal); "max" for no limit. */
void human(uint64_t v, char *buf, size_t n)
{
	if (v == TA_SHM_UNLIMITED)
		snprintf(buf, n, "max");
	else
		ta_iec_bytes(v, buf, n);
}

/* A count in at most width characters: in full, or as 1.84e+19 when it does not fit (a forged
 * counter must not widen the table). */
void count(uint64_t v, int width, char *buf, size_t n)
{
	if (snprintf(buf, n, "%llu", (unsigned long long)v) > width)
		snprintf(buf, n, "%.2e", (double)v);
}

/* s (ASCII, already escaped) in at most max characters: its middle elided with "...". */
void elide(const char *s, size_t max, char *out, size_t n)
{
	size_t len = strlen(s);
	if (len <= max || max < 8) {
		snprintf(out, n, "%s", s);
		return;
	}
	size_t head = (max - 3) / 2, tail = max - 3 - head;
	snprintf(out, n, "%.*s...%s", (int)head, s, s + len - tail);
}
