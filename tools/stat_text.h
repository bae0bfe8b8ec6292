/* SPDX-License-Identifier: MIT */
/* How tieralloc-stat prints what it read (stat_text.c). */
#ifndef TA_STAT_TEXT_H
#define TA_STAT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#define TA_STAT_COLUMNS 100 /* the default table's width */

/* For a terminal, into out (n bytes): printable ASCII as is, a backslash doubled, every other
 * byte as \xNN. */
void text_escape(const char *s, char *out, size_t n);
/* s escaped, to stdout. */
void text_print(const char *s);
/* s as a JSON string to stdout: valid UTF-8 as is but control characters escaped, a byte that is
 * not valid UTF-8 as U+FFFD. */
void json_string(const char *str);
/* Bytes as tieralloc-run prints them (IEC, one decimal); "max" for no limit. */
void human(uint64_t v, char *buf, size_t n);
/* A count in at most width characters: in full, or as 1.84e+19 when it does not fit (a forged
 * counter must not widen the table). */
void count(uint64_t v, int width, char *buf, size_t n);
/* s (ASCII, already escaped) in at most max characters: its middle elided with "...". */
void elide(const char *s, size_t max, char *out, size_t n);

#endif
