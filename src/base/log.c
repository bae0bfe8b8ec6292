/* SPDX-License-Identifier: MIT */
/*
 * The logger: a small printf subset formatted into a stack buffer and written with one write(2)
 * per line. It never allocates, takes no lock and is async-signal-safe, because it runs inside
 * malloc, before the C library is ready, and from signal handlers that free.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

int ta_log_level = TA_LOG_WARN;

static __thread int log_depth __attribute__((tls_model("initial-exec")));

/* A string argument of a log line comes from outside (an environment value, a path, a segment's
 * name): its control bytes (newlines, escape sequences) and bytes above ASCII are written as \xNN,
 * so that a line stays one line and nothing reaches the terminal as a command. Whole escapes only:
 * one that does not fit is left out. */
static size_t put_str(char *buf, size_t pos, size_t size, const char *s, bool escape)
{
	static const char hex[] = "0123456789abcdef";
	if (s == NULL)
		s = "(null)";
	for (; *s != '\0' && pos + 1 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (!escape || (c >= 0x20 && c < 0x7f)) {
			buf[pos++] = (char)c;
			continue;
		}
		if (pos + 4 >= size)
			break;
		buf[pos++] = '\\';
		buf[pos++] = 'x';
		buf[pos++] = hex[c >> 4];
		buf[pos++] = hex[c & 15];
	}
	return pos;
}

static size_t put_uint(char *buf, size_t pos, size_t size, unsigned long long v, unsigned base)
{
	char tmp[24];
	int n = 0;
	do {
		unsigned d = (unsigned)(v % base);
		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v != 0 && n < (int)sizeof(tmp));
	while (n > 0 && pos + 1 < size)
		buf[pos++] = tmp[--n];
	return pos;
}

static size_t ta_vformat(char *buf, size_t size, bool escape, const char *fmt, va_list ap)
{
	size_t pos = 0;
	if (size == 0)
		return 0;
	for (const char *f = fmt; *f != '\0' && pos + 1 < size; f++) {
		if (*f != '%') {
			buf[pos++] = *f;
			continue;
		}
		f++;
		int lng = 0;
		bool sz = false;
		while (*f == 'l') {
			lng++;
			f++;
		}
		if (*f == 'z') {
			sz = true;
			f++;
		}
		switch (*f) {
		case 's':
			pos = put_str(buf, pos, size, va_arg(ap, const char *), escape);
			break;
		case 'c':
			buf[pos++] = (char)va_arg(ap, int);
			break;
		case 'd': {
			long long v = sz	 ? (long long)va_arg(ap, ssize_t)
				      : lng >= 2 ? va_arg(ap, long long)
				      : lng == 1 ? va_arg(ap, long)
						 : va_arg(ap, int);
			unsigned long long mag = (unsigned long long)v;
			if (v < 0) {
				buf[pos++] = '-';
				mag = 0ull - mag;
			}
			pos = put_uint(buf, pos, size, mag, 10);
			break;
		}
		case 'u':
		case 'x': {
			unsigned long long v = sz	  ? va_arg(ap, size_t)
					       : lng >= 2 ? va_arg(ap, unsigned long long)
					       : lng == 1 ? va_arg(ap, unsigned long)
							  : va_arg(ap, unsigned);
			pos = put_uint(buf, pos, size, v, *f == 'u' ? 10 : 16);
			break;
		}
		case 'p':
			pos = put_str(buf, pos, size, "0x", false);
			pos = put_uint(buf, pos, size, (uintptr_t)va_arg(ap, void *), 16);
			break;
		case '%':
			buf[pos++] = '%';
			break;
		case '\0':
			f--;
			break;
		default:
			buf[pos++] = '?';
			break;
		}
	}
	buf[pos] = '\0';
	return pos;
}

size_t ta_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t n = ta_vformat(buf, size, false, fmt, ap);
	va_end(ap);
	return n;
}

void ta_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		long r = syscall(SYS_write, fd, buf, len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += r;
		len -= (size_t)r;
	}
}

static const char *const level_names[] = { "error", "warning", "info", "debug" };

#define LINE_MAX_BYTES 320

static size_t log_vline(char *line, int level, const char *fmt, va_list ap)
{
	size_t n = ta_format(line, LINE_MAX_BYTES, "tieralloc: %s: ", level_names[level]);
	n += ta_vformat(line + n, LINE_MAX_BYTES - n - 1, true, fmt, ap);
	line[n++] = '\n';
	return n;
}

void ta_log(int level, const char *fmt, ...)
{
	if (level > ta_log_level || log_depth > 0)
		return;
	int saved_errno = errno;
	log_depth++;
	char line[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	size_t n = log_vline(line, level, fmt, ap);
	va_end(ap);
	ta_write_all(STDERR_FILENO, line, n);
	log_depth--;
	errno = saved_errno;
}

/* Configuration lines held during start-up (ta_config_hold); beyond HELD_MAX they are written at
 * once. Only the thread that runs ta_init writes them. */
#define HELD_MAX 8
static char held[HELD_MAX][LINE_MAX_BYTES];
static size_t held_len[HELD_MAX];
static unsigned nheld;
static bool holding;

void ta_config_hold(void)
{
	holding = true;
}

void ta_config_log(int level, const char *fmt, ...)
{
	if (level > ta_log_level || log_depth > 0)
		return;
	int saved_errno = errno;
	char line[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	size_t n = log_vline(line, level, fmt, ap);
	va_end(ap);
	if (holding && nheld < HELD_MAX) {
		memcpy(held[nheld], line, n);
		held_len[nheld++] = n;
	} else {
		ta_write_all(STDERR_FILENO, line, n);
	}
	errno = saved_errno;
}

void ta_config_release(bool (*first)(const char *line, size_t len))
{
	holding = false;
	for (unsigned i = 0; i < nheld; i++)
		if (first == NULL || first(held[i], held_len[i]))
			ta_write_all(STDERR_FILENO, held[i], held_len[i]);
	nheld = 0;
}

void ta_log_foreign(const void *p, const char *what)
{
	static _Atomic unsigned reported;
	if (atomic_fetch_add(&reported, 1) < 8)
		ta_log(TA_LOG_WARN, "%s(%p): pointer not allocated by tieralloc; ignored", what, p);
}

void ta_log_fatal_assert(const char *cond, const char *file, int line)
{
	ta_log(TA_LOG_ERROR, "assertion failed: %s at %s:%d", cond, file, line);
	abort();
}
