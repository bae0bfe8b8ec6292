/* SPDX-License-Identifier: MIT */
/*
 * Cgroup paths (cgpath.h): pure string work, no system call, so that the unit tests can feed it
 * every spelling an owner could write.
 */
#include "cgpath.h"

#include <string.h>

int ta_cgpath_canon(const char *path, char *out, size_t len)
{
	if (path == NULL || path[0] != '/' || len < 2)
		return -1;
	size_t o = 0;
	const char *p = path;
	while (*p != '\0') {
		while (*p == '/')
			p++;
		const char *end = p;
		while (*end != '\0' && *end != '/') {
			if ((unsigned char)*end < 0x20 || *end == 0x7f)
				return -1;
			end++;
		}
		size_t n = (size_t)(end - p);
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
			p = end;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -1;
		if (o + 1 + n + 1 > len)
			return -1;
		out[o++] = '/';
		memcpy(out + o, p, n);
		o += n;
		p = end;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

bool ta_cgpath_same(const char *a, const char *b)
{
	char ca[4096], cb[4096];
	return ta_cgpath_canon(a, ca, sizeof(ca)) == 0 && ta_cgpath_canon(b, cb, sizeof(cb)) == 0 &&
	       strcmp(ca, cb) == 0;
}

int ta_cgpath_proc_v2(const char *text, char *out, size_t len)
{
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *nl = strchr(line, '\n');
		size_t n = nl != NULL ? (size_t)(nl - line) : strlen(line);
		if (n > 3 && strncmp(line, "0::", 3) == 0) {
			char path[4096];
			if (n - 3 >= sizeof(path))
				return -1;
			memcpy(path, line + 3, n - 3);
			path[n - 3] = '\0';
			/* The kernel writes it canonical: anything else is not its line. */
			char canon[4096];
			if (ta_cgpath_canon(path, canon, sizeof(canon)) != 0 ||
			    strcmp(canon, path) != 0 || strlen(canon) + 1 > len)
				return -1;
			memcpy(out, canon, strlen(canon) + 1);
			return 0;
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	return -1;
}

/* A mountinfo field, its \ooo escapes undone: the field's end, or NULL when out is too small. */
static const char *field(const char *p, char *out, size_t len)
{
	size_t o = 0;
	while (*p != '\0' && *p != ' ' && *p != '\n') {
		char c = *p;
		if (c == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			c = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		}
		if (o + 1 >= len)
			return NULL;
		out[o++] = c;
		p++;
	}
	out[o] = '\0';
	return p;
}

int ta_cgpath_mount_v2(const char *mountinfo, char *out, size_t len)
{
	for (const char *line = mountinfo; line != NULL && *line != '\0';) {
		const char *nl = strchr(line, '\n');
		/* "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ..." */
		char root[4096], mnt[4096], fstype[64];
		const char *p = line;
		for (int i = 0; i < 3 && p != NULL; i++) {
			p = strchr(p, ' ');
			p = p != NULL ? p + 1 : NULL;
		}
		const char *sep = p != NULL ? strstr(p, " - ") : NULL;
		if (sep != NULL && (nl == NULL || sep < nl) &&
		    (p = field(p, root, sizeof(root))) != NULL && *p == ' ' &&
		    field(p + 1, mnt, sizeof(mnt)) != NULL &&
		    field(sep + 3, fstype, sizeof(fstype)) != NULL &&
		    strcmp(fstype, "cgroup2") == 0 && strcmp(root, "/") == 0 &&
		    ta_cgpath_canon(mnt, out, len) == 0)
			return 0;
		line = nl != NULL ? nl + 1 : NULL;
	}
	return -1;
}

int ta_cgpath_join(const char *mount, const char *rel, char *out, size_t len)
{
	size_t m = strlen(mount);
	if (strcmp(mount, "/") == 0)
		m = 0;
	size_t r = strcmp(rel, "/") == 0 ? 0 : strlen(rel);
	if (m + r + 1 > len || (m == 0 && r == 0 && len < 2))
		return -1;
	memcpy(out, mount, m);
	memcpy(out + m, rel, r);
	if (m + r == 0)
		out[m + r++] = '/';
	out[m + r] = '\0';
	return 0;
}

bool ta_cgpath_ends_with(const char *path, const char *tail)
{
	if (strcmp(tail, "/") == 0)
		return true;
	size_t p = strlen(path), t = strlen(tail);
	return t <= p && strcmp(path + p - t, tail) == 0 && (t == p || tail[0] == '/');
}
