/* SPDX-License-Identifier: MIT */
/*
 * This process's memory cgroup: found from /proc/self/cgroup and /proc/self/mountinfo, named for
 * the shared segment, its limits read (with the ancestors' for high and max), the kernel's per-node
 * usage parsed from memory.numa_stat, and memory.reclaim written. It runs from malloc's slow paths
 * and from the worker thread, so it uses raw syscalls and bounded stack buffers only; files of any
 * length are read through a small line reader, and a line too long for it is skipped, not trusted.
 *
 * Mount roots. A mountinfo line's fourth field is the directory of the hierarchy that the mount
 * shows. It is "/" on a host and in a container with its own cgroup namespace. A container without
 * one (Docker on cgroup v1) gets a mount whose root is its own cgroup, "/docker/<id>", while
 * /proc/self/cgroup still says "/docker/<id>": the root is a prefix of our path, and the rest of
 * the path is taken below the mount point. A mount whose root is not a prefix of our path, or a
 * path with ".." (a process outside its cgroup namespace's root), cannot reach our cgroup: that
 * mount is skipped, and if no mount of the hierarchy reaches it, the cgroup is not found (-ENOENT).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"

#define FILE_PATH_MAX 768 /* root + cgroup directory + file name */
#define RAW_PATH_MAX  512 /* a path from /proc/self/cgroup; a mount root may strip part of it */
#define V1_UNLIMITED  (1ull << 62)

/* ---- strings ---- */

/* Append len bytes of s to buf (pos bytes used, size n); false when they do not fit. */
static bool append(char *buf, size_t n, size_t *pos, const char *s, size_t len)
{
	if (len >= n - *pos)
		return false;
	memcpy(buf + *pos, s, len);
	*pos += len;
	buf[*pos] = '\0';
	return true;
}

/* buf = a b c, or -ENAMETOOLONG. */
static int join3(char *buf, size_t n, const char *a, const char *b, const char *c)
{
	size_t pos = 0;
	buf[0] = '\0';
	if (!append(buf, n, &pos, a, strlen(a)) || !append(buf, n, &pos, b, strlen(b)) ||
	    !append(buf, n, &pos, c, strlen(c)))
		return -ENAMETOOLONG;
	return 0;
}

/* Is word one of the items of list, separated by sep (and ended by a NUL or a newline)? */
static bool has_item(const char *list, const char *word, char sep)
{
	size_t wl = strlen(word);
	const char *p = list;
	for (;;) {
		const char *e = p;
		while (*e != '\0' && *e != sep && *e != '\n')
			e++;
		if ((size_t)(e - p) == wl && memcmp(p, word, wl) == 0)
			return true;
		if (*e != sep)
			return false;
		p = e + 1;
	}
}

/* Decode mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash) in place.
 * Anything else after a backslash, and \000, is kept as it is. */
static void unescape(char *s)
{
	char *w = s;
	for (const char *r = s; *r != '\0';) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			unsigned v = (unsigned)(r[1] - '0') * 64 + (unsigned)(r[2] - '0') * 8 +
				     (unsigned)(r[3] - '0');
			if (v != 0) {
				*w++ = (char)v;
				r += 4;
				continue;
			}
		}
		*w++ = *r++;
	}
	*w = '\0';
}

/* Does a cgroup path have a ".." component? The kernel shows one for a cgroup outside the
 * reader's cgroup namespace; no mount can reach it. */
static bool has_dotdot(const char *p)
{
	for (const char *c = p; *c != '\0'; c++)
		if (c[0] == '.' && c[1] == '.' && (c == p || c[-1] == '/') &&
		    (c[2] == '/' || c[2] == '\0'))
			return true;
	return false;
}

static size_t put_u64(char *buf, size_t n, uint64_t v)
{
	char tmp[20];
	size_t len = 0, pos = 0;
	do {
		tmp[len++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (len > 0 && pos + 1 < n)
		buf[pos++] = tmp[--len];
	buf[pos] = '\0';
	return pos;
}

uint64_t ta_cgroup_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* ---- reading files line by line, any length, in a fixed buffer ---- */

struct line_reader {
	long fd;
	size_t start, end; /* unread bytes: buf[start, end) */
	bool eof;
	bool skipping; /* inside the rest of a line too long for buf */
	int err;       /* -errno of a failed read: the file ended early */
	char buf[2048];
};

static int reader_open(struct line_reader *r, const char *path)
{
	r->fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	r->start = r->end = 0;
	r->eof = r->skipping = false;
	r->err = 0;
	return 0;
}

static void reader_close(struct line_reader *r)
{
	syscall(SYS_close, (int)r->fd);
}

/*
 * Next line, NUL-terminated, without its newline, valid until the next call. Returns its length,
 * or -1 at the end. A line longer than the buffer comes back cut, with *cut set, and the rest of it
 * is skipped. A last line without a newline (a truncated file) is returned as it is.
 */
static ssize_t reader_next(struct line_reader *r, char **line, bool *cut)
{
	for (;;) {
		char *s = r->buf + r->start;
		char *nl = memchr(s, '\n', r->end - r->start);
		if (nl != NULL) {
			*nl = '\0';
			r->start = (size_t)(nl - r->buf) + 1;
			if (r->skipping) {
				r->skipping = false;
				continue;
			}
			*line = s;
			*cut = false;
			return nl - s;
		}
		if (r->skipping) {
			r->start = r->end = 0;
		} else if (r->start > 0) {
			memmove(r->buf, s, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		if (r->end == sizeof(r->buf) - 1 || (r->eof && r->end > 0)) {
			ssize_t len = (ssize_t)r->end;
			*cut = !r->eof;
			r->skipping = !r->eof;
			r->buf[r->end] = '\0';
			r->start = r->end = 0;
			*line = r->buf;
			return len;
		}
		if (r->eof)
			return -1;
		long got =
		    syscall(SYS_read, (int)r->fd, r->buf + r->end, sizeof(r->buf) - 1 - r->end);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			r->err = -errno;
		if (got <= 0)
			r->eof = true;
		else
			r->end += (size_t)got;
	}
}

/* ---- finding the cgroup ---- */

/* What /proc/self/cgroup says. */
struct self_lines {
	unsigned valid; /* well-formed lines */
	bool has_v1, has_v2;
	int v1_err, v2_err; /* -ENAMETOOLONG when the path did not fit */
	char v1[RAW_PATH_MAX];
	char v2[RAW_PATH_MAX];
};

static void keep_path(char *dst, int *err, const char *src, size_t len)
{
	if (len >= RAW_PATH_MAX) {
		*err = -ENAMETOOLONG;
		dst[0] = '\0';
		return;
	}
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* <root>/proc/self/<name>, opened for line reading. */
static int reader_open_self(struct line_reader *r, const char *root, const char *name)
{
	char path[FILE_PATH_MAX];
	int rc = join3(path, sizeof(path), root, "/proc/self/", name);
	return rc != 0 ? rc : reader_open(r, path);
}

/* "0::/a/b" (v2) or "4:memory:/a/b", "4:cpu,memory:/a/b" (v1). */
static int parse_self_cgroup(const char *root, struct self_lines *sl)
{
	struct line_reader r;
	int rc = reader_open_self(&r, root, "cgroup");
	if (rc != 0)
		return rc;
	char *line;
	bool cut;
	ssize_t len;
	while ((len = reader_next(&r, &line, &cut)) >= 0) {
		const char *p = line;
		bool v2 = p[0] == '0' && p[1] == ':';
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == line || *p != ':')
			continue;
		const char *ctl = ++p;
		while (*p != ':' && *p != '\0')
			p++;
		if (*p != ':' || p[1] != '/')
			continue;
		size_t ctl_len = (size_t)(p - ctl);
		p++;
		sl->valid++;
		size_t plen = (size_t)(len - (p - line));
		if (v2 && ctl_len == 0 && !sl->has_v2) {
			sl->has_v2 = true;
			keep_path(sl->v2, &sl->v2_err, p, plen);
			if (cut)
				sl->v2_err = -ENAMETOOLONG;
		} else if (ctl_len > 0 && !sl->has_v1) {
			char ctls[256];
			if (ctl_len >= sizeof(ctls))
				continue;
			memcpy(ctls, ctl, ctl_len);
			ctls[ctl_len] = '\0';
			if (!has_item(ctls, "memory", ','))
				continue;
			sl->has_v1 = true;
			keep_path(sl->v1, &sl->v1_err, p, plen);
			if (cut)
				sl->v1_err = -ENAMETOOLONG;
		}
	}
	reader_close(&r);
	if (r.err != 0)
		return r.err;
	return sl->valid > 0 ? 0 : -EINVAL;
}

/* The best mount of one hierarchy found so far. */
struct mount_pick {
	bool mounted;	 /* a mount of the hierarchy exists */
	bool found;	 /* dir is set */
	int err;	 /* why no mount reached the cgroup: -ENOENT or -ENAMETOOLONG */
	unsigned mp_len; /* mount point's length in dir */
	char dir[TA_SHM_PATH_MAX];
};

/* Our cgroup's directory through a mount of root mroot at mpoint (both decoded): 0, -ENOENT when
 * the mount does not reach cgpath, -ENAMETOOLONG when the result does not fit. */
static int resolve(const char *mroot, const char *mpoint, const char *cgpath, struct mount_pick *m)
{
	if (cgpath[0] != '/' || has_dotdot(cgpath) || mpoint[0] != '/')
		return -ENOENT;
	const char *rel = cgpath;
	if (strcmp(mroot, "/") != 0) {
		size_t rl = strlen(mroot);
		while (rl > 1 && mroot[rl - 1] == '/')
			rl--;
		if (strncmp(cgpath, mroot, rl) != 0 || (cgpath[rl] != '\0' && cgpath[rl] != '/'))
			return -ENOENT;
		rel = cgpath + rl;
	}
	size_t ml = strlen(mpoint), relen = strlen(rel);
	while (ml > 0 && mpoint[ml - 1] == '/')
		ml--; /* "/" becomes "": the cgroup path alone is the directory */
	while (relen > 0 && rel[relen - 1] == '/')
		relen--;
	size_t pos = 0;
	char dir[TA_SHM_PATH_MAX];
	dir[0] = '\0';
	if (!append(dir, sizeof(dir), &pos, mpoint, ml) ||
	    !append(dir, sizeof(dir), &pos, rel, relen) ||
	    (pos == 0 && !append(dir, sizeof(dir), &pos, "/", 1)))
		return -ENAMETOOLONG;
	memcpy(m->dir, dir, pos + 1);
	m->mp_len = (unsigned)ml;
	m->found = true;
	return 0;
}

static void pick_mount(struct mount_pick *m, const char *mroot, const char *mpoint,
		       const char *cgpath, bool wanted)
{
	m->mounted = true;
	if (!wanted || m->found)
		return;
	int rc = resolve(mroot, mpoint, cgpath, m);
	if (rc != 0 && m->err != -ENAMETOOLONG)
		m->err = rc;
}

/*
 * "36 30 0:33 /root /mount/point rw,relatime shared:18 - cgroup cgroup rw,memory": field 4 is the
 * mount's root, 5 the mount point, then optional fields up to "-", fstype, source, super options.
 */
static int scan_mounts(const char *root, const struct self_lines *sl, struct mount_pick *v1,
		       struct mount_pick *v2)
{
	struct line_reader r;
	int rc = reader_open_self(&r, root, "mountinfo");
	if (rc != 0)
		return rc;
	char *line;
	bool cut;
	while (reader_next(&r, &line, &cut) >= 0) {
		if (cut)
			continue; /* not a cgroup mount we could use: its paths would not fit */
		char *f[32];
		unsigned nf = 0, sep = 0;
		for (char *p = line; *p != '\0' && nf < 32;) {
			while (*p == ' ')
				*p++ = '\0';
			if (*p == '\0')
				break;
			f[nf++] = p;
			while (*p != ' ' && *p != '\0')
				p++;
		}
		for (unsigned i = 6; i < nf; i++) {
			if (strcmp(f[i], "-") == 0) {
				sep = i;
				break;
			}
		}
		if (sep == 0 || sep + 3 >= nf)
			continue;
		const char *fstype = f[sep + 1], *opts = f[sep + 3];
		bool is_v1 = strcmp(fstype, "cgroup") == 0 && has_item(opts, "memory", ',');
		bool is_v2 = strcmp(fstype, "cgroup2") == 0;
		if (!is_v1 && !is_v2)
			continue;
		unescape(f[3]);
		unescape(f[4]);
		if (is_v1)
			pick_mount(v1, f[3], f[4], sl->v1, sl->has_v1 && sl->v1_err == 0);
		else
			pick_mount(v2, f[3], f[4], sl->v2, sl->has_v2 && sl->v2_err == 0);
	}
	reader_close(&r);
	return r.err;
}

static void set_none(struct ta_cgroup *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->key, "machine", sizeof("machine"));
}

/* Does the cgroup2 mount's root directory offer the memory controller? */
static bool v2_has_memory(const char *root, const struct mount_pick *m)
{
	char mp[TA_SHM_PATH_MAX], path[FILE_PATH_MAX], text[256];
	memcpy(mp, m->dir, m->mp_len);
	mp[m->mp_len] = '\0';
	if (join3(path, sizeof(path), root, mp, "/cgroup.controllers") != 0)
		return false;
	ssize_t n = ta_read_file(path, text, sizeof(text));
	return n > 0 && has_item(text, "memory", ' ');
}

static int dir_inode(const char *root, const char *dir, uint64_t *ino)
{
	char path[FILE_PATH_MAX];
	struct stat st;
	int rc = join3(path, sizeof(path), root, dir, "");
	if (rc != 0)
		return rc;
#ifdef SYS_newfstatat
	/* The kernel's struct stat is the C library's on the 64-bit ABIs that have this call. */
	long r = syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0);
#else
	long r = fstatat(AT_FDCWD, path, &st, 0);
#endif
	if (r != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

int ta_cgroup_self(const char *root, struct ta_cgroup *out)
{
	struct self_lines sl;
	struct mount_pick v1, v2;
	set_none(out);
	if (root == NULL)
		root = "";
	memset(&sl, 0, sizeof(sl));
	int rc = parse_self_cgroup(root, &sl);
	if (rc != 0)
		return rc;
	memset(&v1, 0, sizeof(v1));
	memset(&v2, 0, sizeof(v2));
	rc = scan_mounts(root, &sl, &v1, &v2);
	if (rc != 0)
		return rc;

	if (v1.mounted && sl.has_v1) {
		if (!v1.found)
			return sl.v1_err != 0 ? sl.v1_err : v1.err != 0 ? v1.err : -ENOENT;
		out->version = 1;
		out->mount_len = v1.mp_len;
		memcpy(out->path, v1.dir, sizeof(out->path));
		uint64_t h = ta_cgroup_hash(out->path);
		memcpy(out->key, "v1-", 3);
		for (int i = 0; i < 16; i++)
			out->key[3 + i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 0xf];
		out->key[19] = '\0';
		return 0;
	}
	if (v2.mounted && sl.has_v2) {
		if (!v2.found)
			return sl.v2_err != 0 ? sl.v2_err : v2.err != 0 ? v2.err : -ENOENT;
		if (!v2_has_memory(root, &v2))
			return 0; /* cgroup v2 without the memory controller: none */
		uint64_t ino = 0;
		rc = dir_inode(root, v2.dir, &ino);
		if (rc != 0)
			return rc;
		out->version = 2;
		out->mount_len = v2.mp_len;
		memcpy(out->path, v2.dir, sizeof(out->path));
		out->id = ino;
		memcpy(out->key, "cg", 2);
		put_u64(out->key + 2, sizeof(out->key) - 2, ino);
		return 0;
	}
	return 0;
}

/* ---- limits ---- */

/* A limit file: "max" or a decimal number of bytes, then a newline. 0 or -errno; *v saturates at
 * TA_SHM_UNLIMITED. */
static int read_limit(const char *root, const char *dir, const char *name, uint64_t *v)
{
	char path[FILE_PATH_MAX], text[64], file[48];
	size_t pos = 0;
	file[0] = '\0';
	if (!append(file, sizeof(file), &pos, "/", 1) ||
	    !append(file, sizeof(file), &pos, name, strlen(name)))
		return -ENAMETOOLONG;
	int rc = join3(path, sizeof(path), root, dir, file);
	if (rc != 0)
		return rc;
	ssize_t n = ta_read_file(path, text, sizeof(text));
	if (n < 0)
		return (int)n;
	const char *p = text;
	if (strncmp(p, "max", 3) == 0) {
		*v = TA_SHM_UNLIMITED;
		p += 3;
	} else {
		uint64_t x = 0;
		const char *start = p;
		while (*p >= '0' && *p <= '9') {
			unsigned d = (unsigned)(*p++ - '0');
			x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
		}
		if (p == start)
			return -EINVAL;
		*v = x;
	}
	while (*p == '\n' || *p == ' ')
		p++;
	return *p == '\0' ? 0 : -EINVAL;
}

static bool cg_valid(const struct ta_cgroup *cg)
{
	size_t len = strnlen(cg->path, sizeof(cg->path));
	return len < sizeof(cg->path) && cg->path[0] == '/' && cg->mount_len <= len;
}

static void keep_first_error(int *err, int rc)
{
	if (rc != 0 && rc != -ENOENT && *err == 0)
		*err = rc;
}

int ta_cgroup_read_limits(const char *root, const struct ta_cgroup *cg, uint64_t limits[TA_NLIMITS])
{
	limits[TA_LIMIT_MIN] = 0;
	limits[TA_LIMIT_LOW] = 0;
	limits[TA_LIMIT_HIGH] = TA_SHM_UNLIMITED;
	limits[TA_LIMIT_MAX] = TA_SHM_UNLIMITED;
	if (cg == NULL || cg->version == 0)
		return 0;
	if ((cg->version != 1 && cg->version != 2) || !cg_valid(cg))
		return -EINVAL;
	if (root == NULL)
		root = "";
	bool v2 = cg->version == 2;
	const char *high = v2 ? "memory.high" : "memory.soft_limit_in_bytes";
	const char *max = v2 ? "memory.max" : "memory.limit_in_bytes";
	int err = 0, rc;
	uint64_t v;
	if (v2) {
		rc = read_limit(root, cg->path, "memory.min", &v);
		if (rc == 0)
			limits[TA_LIMIT_MIN] = v;
		keep_first_error(&err, rc);
		rc = read_limit(root, cg->path, "memory.low", &v);
		if (rc == 0)
			limits[TA_LIMIT_LOW] = v;
		keep_first_error(&err, rc);
	}
	/* The cgroup, then each ancestor up to the mount's root (included). */
	char dir[TA_SHM_PATH_MAX];
	size_t len = strlen(cg->path);
	memcpy(dir, cg->path, len + 1);
	for (;;) {
		const char *d = len > 0 ? dir : "/";
		for (int k = 0; k < 2; k++) {
			rc = read_limit(root, d, k == 0 ? high : max, &v);
			keep_first_error(&err, rc);
			if (rc != 0)
				continue;
			if (!v2 && v >= V1_UNLIMITED)
				v = TA_SHM_UNLIMITED;
			unsigned idx = k == 0 ? TA_LIMIT_HIGH : TA_LIMIT_MAX;
			if (v < limits[idx])
				limits[idx] = v;
		}
		if (len <= cg->mount_len)
			break;
		while (len > cg->mount_len && dir[len - 1] != '/')
			len--;
		if (len > cg->mount_len)
			len--; /* the slash */
		dir[len] = '\0';
	}
	return err;
}

/* ---- memory.numa_stat ---- */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * A character-level parser, so that a line of any length (1024 nodes) needs no buffer for it:
 * "<key> N<node>=<bytes> N<node>=<bytes>...\n". Only the anon and file lines count; an entry that
 * does not have that form is skipped up to the next space.
 */
enum ns_state { NS_KEY, NS_SKIP_LINE, NS_ENTRY, NS_NODE, NS_VALUE, NS_SKIP_ENTRY };

struct ns_parser {
	enum ns_state st;
	char key[16];
	unsigned klen;
	unsigned node, ndigits;
	uint64_t value;
	bool seen; /* an anon or file line */
};

static void ns_feed(struct ns_parser *ps, char c, uint64_t *per_node)
{
	bool end = c == '\n';
	bool space = c == ' ' || c == '\t';
	bool digit = c >= '0' && c <= '9';
	switch (ps->st) {
	case NS_KEY:
		if (space) {
			/* klen == sizeof(key): a longer key than any we want. */
			bool want = ps->klen < sizeof(ps->key);
			if (want) {
				ps->key[ps->klen] = '\0';
				want = strcmp(ps->key, "anon") == 0 || strcmp(ps->key, "file") == 0;
			}
			ps->seen |= want;
			ps->st = want ? NS_ENTRY : NS_SKIP_LINE;
		} else if (!end && ps->klen < sizeof(ps->key)) {
			if (ps->klen < sizeof(ps->key) - 1)
				ps->key[ps->klen] = c;
			ps->klen++;
		}
		break;
	case NS_SKIP_LINE:
		break;
	case NS_ENTRY:
		if (c == 'N') {
			ps->node = 0;
			ps->ndigits = 0;
			ps->st = NS_NODE;
		} else if (!space && !end) {
			ps->st = NS_SKIP_ENTRY;
		}
		break;
	case NS_NODE:
		if (digit) {
			if (ps->node < 100000)
				ps->node = ps->node * 10 + (unsigned)(c - '0');
			ps->ndigits++;
		} else if (c == '=' && ps->ndigits > 0) {
			ps->value = 0;
			ps->ndigits = 0;
			ps->st = NS_VALUE;
		} else {
			ps->st = space ? NS_ENTRY : NS_SKIP_ENTRY;
		}
		break;
	case NS_VALUE:
		if (digit) {
			unsigned d = (unsigned)(c - '0');
			ps->value =
			    ps->value > (UINT64_MAX - d) / 10 ? UINT64_MAX : ps->value * 10 + d;
			ps->ndigits++;
		} else if ((space || end) && ps->ndigits > 0) {
			if (ps->node < TA_CGROUP_NODES)
				per_node[ps->node] = sat_add(per_node[ps->node], ps->value);
			ps->st = NS_ENTRY;
		} else {
			ps->st = space ? NS_ENTRY : NS_SKIP_ENTRY;
		}
		break;
	case NS_SKIP_ENTRY:
		if (space)
			ps->st = NS_ENTRY;
		break;
	}
	if (end) {
		ps->st = NS_KEY;
		ps->klen = 0;
	}
}

int ta_cgroup_numa_stat(const char *root, const struct ta_cgroup *cg,
			uint64_t per_node[TA_CGROUP_NODES])
{
	memset(per_node, 0, TA_CGROUP_NODES * sizeof(per_node[0]));
	if (cg == NULL || cg->version != 2)
		return -ENOENT;
	if (!cg_valid(cg))
		return -EINVAL;
	char path[FILE_PATH_MAX];
	int rc = join3(path, sizeof(path), root != NULL ? root : "", cg->path, "/memory.numa_stat");
	if (rc != 0)
		return rc;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = ta_cgroup_numa_stat_fd((int)fd, per_node);
	syscall(SYS_close, (int)fd);
	return rc;
}

int ta_cgroup_numa_stat_fd(int fd, uint64_t per_node[TA_CGROUP_NODES])
{
	memset(per_node, 0, TA_CGROUP_NODES * sizeof(per_node[0]));
	struct ns_parser ps;
	memset(&ps, 0, sizeof(ps));
	char buf[512];
	int rc = 0;
	for (;;) {
		long n = syscall(SYS_read, fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		if (n <= 0)
			break;
		for (long i = 0; i < n; i++)
			ns_feed(&ps, buf[i], per_node);
	}
	ns_feed(&ps, '\n', per_node); /* a last line without its newline */
	if (rc != 0)
		return rc;
	return ps.seen ? 0 : -EINVAL;
}

/* ---- memory.reclaim ---- */

int ta_cgroup_reclaim(const char *root, const struct ta_cgroup *cg, uint64_t bytes)
{
	if (cg == NULL || cg->version != 2)
		return -ENOENT;
	if (!cg_valid(cg))
		return -EINVAL;
	if (bytes == 0)
		return 0;
	char path[FILE_PATH_MAX], text[24];
	int rc = join3(path, sizeof(path), root != NULL ? root : "", cg->path, "/memory.reclaim");
	if (rc != 0)
		return rc;
	size_t len = put_u64(text, sizeof(text), bytes);
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	long w;
	do
		w = syscall(SYS_write, (int)fd, text, len);
	while (w < 0 && errno == EINTR);
	rc = w < 0 ? -errno : (size_t)w == len ? 0 : -EIO;
	syscall(SYS_close, (int)fd);
	return rc;
}

/* ---- splitting a limit across tiers ---- */

int ta_cgroup_current(const char *root, const struct ta_cgroup *cg, uint64_t *bytes)
{
	if (cg == NULL || cg->version != 2)
		return -ENOENT;
	if (!cg_valid(cg))
		return -EINVAL;
	return read_limit(root != NULL ? root : "", cg->path, "memory.current", bytes);
}

uint64_t ta_cgroup_split(uint64_t value, uint32_t share_ppm)
{
	if (value == TA_SHM_UNLIMITED || share_ppm >= 1000000u)
		return value;
	/* value = q * 1e6 + r, so value * s / 1e6 = q * s + r * s / 1e6 exactly: q * s < value
	 * and r * s < 1e12, so nothing overflows and no 128-bit type is needed. */
	uint64_t q = value / 1000000u, r = value % 1000000u;
	return q * share_ppm + r * share_ppm / 1000000u;
}
