/* SPDX-License-Identifier: MIT */
/*
 * NUMA nodes -> tiers. Order of sources: TIERALLOC_TIERS; else the kernel's memory tiers
 * (/sys/devices/virtual/memory_tiering/memory_tier<N>/nodelist, lower N = faster) when they show
 * more than one tier; else nodes with CPUs form tier 0 and CPU-less nodes tier 1 (how memkind
 * tells regular from kmem nodes). Runs inside the first malloc, so: raw syscalls, stack buffers,
 * no libnuma, no stdio. A sysfs root can be given so that tests feed fixtures.
 */
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

/* The tiers of this process, found at start (init.c). */
struct ta_topology ta_topo;
unsigned ta_ntiers = 1;

ssize_t ta_read_file(const char *path, char *buf, size_t size)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < size) {
		size_t want = size - 1 - got;
		long r = syscall(SYS_read, (int)fd, buf + got, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		/* Short: the end. The files read here are one record each (sysfs attributes, /proc
		 * single-record files, fixtures), which the kernel returns whole in one read; this
		 * saves a read per file at every process start. */
		if ((size_t)r < want)
			break;
	}
	syscall(SYS_close, (int)fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

int ta_nodelist_parse(const char *s, size_t len, uint64_t *mask)
{
	uint64_t m = 0;
	size_t i = 0;
	/* sysfs ends its lists with a newline. */
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
		len--;
	if (len == 0) {
		*mask = 0;
		return 0;
	}
	while (i < len) {
		unsigned a = 0, b;
		size_t start = i;
		while (i < len && s[i] >= '0' && s[i] <= '9' && a < 1000)
			a = a * 10 + (unsigned)(s[i++] - '0');
		if (i == start || a >= TA_MAX_NODES)
			return -EINVAL;
		b = a;
		if (i < len && s[i] == '-') {
			i++;
			start = i;
			b = 0;
			while (i < len && s[i] >= '0' && s[i] <= '9' && b < 1000)
				b = b * 10 + (unsigned)(s[i++] - '0');
			if (i == start || b >= TA_MAX_NODES || b < a)
				return -EINVAL;
		}
		for (unsigned n = a; n <= b; n++)
			m |= 1ull << n;
		if (i < len) {
			if (s[i] != ',')
				return -EINVAL;
			i++;
			if (i == len)
				return -EINVAL;
		}
	}
	*mask = m;
	return 0;
}

size_t ta_nodelist_format(uint64_t mask, char *buf, size_t n)
{
	size_t pos = 0;
	buf[0] = '\0';
	for (unsigned a = 0; a < TA_MAX_NODES; a++) {
		if (!(mask & (1ull << a)))
			continue;
		unsigned b = a;
		while (b + 1 < TA_MAX_NODES && (mask & (1ull << (b + 1))))
			b++;
		if (b == a)
			pos += ta_format(buf + pos, n - pos, "%s%u", pos ? "," : "", a);
		else
			pos += ta_format(buf + pos, n - pos, "%s%u-%u", pos ? "," : "", a, b);
		a = b;
	}
	return pos;
}

static void sys_path(char *buf, size_t n, const char *root, const char *rel)
{
	ta_format(buf, n, "%s/sys/%s", root, rel);
}

/* "Node 0 MemTotal:       1015836 kB" -> bytes. */
static uint64_t node_capacity(const char *root, unsigned node)
{
	char path[512], text[4096], rel[64];
	ta_format(rel, sizeof(rel), "devices/system/node/node%u/meminfo", node);
	sys_path(path, sizeof(path), root, rel);
	if (ta_read_file(path, text, sizeof(text)) <= 0)
		return 0;
	const char *p = strstr(text, "MemTotal:");
	if (p == NULL)
		return 0;
	p += strlen("MemTotal:");
	while (*p == ' ' || *p == '\t')
		p++;
	uint64_t kb = 0;
	while (*p >= '0' && *p <= '9')
		kb = kb * 10 + (uint64_t)(*p++ - '0');
	return kb * 1024;
}

static bool node_has_cpus(const char *root, unsigned node)
{
	char path[512], text[1024], rel[64];
	ta_format(rel, sizeof(rel), "devices/system/node/node%u/cpulist", node);
	sys_path(path, sizeof(path), root, rel);
	ssize_t n = ta_read_file(path, text, sizeof(text));
	return n > 0 && text[0] != '\n' && text[0] != '\0';
}

static int read_nodelist_file(const char *path, uint64_t *mask)
{
	char text[1024];
	ssize_t n = ta_read_file(path, text, sizeof(text));
	if (n < 0)
		return (int)n;
	return ta_nodelist_parse(text, (size_t)n, mask);
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Kernel memory tiers, fastest first, restricted to nodes with memory. Returns the count. */
static unsigned kernel_memory_tiers(const char *root, uint64_t mem_nodes,
				    uint64_t masks[TA_MAX_NODES])
{
	char dir[512];
	sys_path(dir, sizeof(dir), root, "devices/virtual/memory_tiering");
	long fd = syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct {
		unsigned id;
		uint64_t mask;
	} found[TA_MAX_NODES];
	unsigned nfound = 0;
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, (int)fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
			off += d->d_reclen;
			static const char pfx[] = "memory_tier";
			if (strncmp(d->d_name, pfx, sizeof(pfx) - 1) != 0)
				continue;
			const char *num = d->d_name + sizeof(pfx) - 1;
			unsigned id = 0;
			if (*num < '0' || *num > '9')
				continue;
			while (*num >= '0' && *num <= '9' && id < 100000)
				id = id * 10 + (unsigned)(*num++ - '0');
			char path[700];
			ta_format(path, sizeof(path), "%s/%s/nodelist", dir, d->d_name);
			uint64_t mask;
			if (read_nodelist_file(path, &mask) != 0)
				continue;
			mask &= mem_nodes;
			if (mask == 0 || nfound == TA_MAX_NODES)
				continue;
			found[nfound].id = id;
			found[nfound].mask = mask;
			nfound++;
		}
	}
	syscall(SYS_close, (int)fd);
	/* Insertion sort by tier id: a handful of entries. */
	for (unsigned i = 1; i < nfound; i++) {
		for (unsigned j = i; j > 0 && found[j - 1].id > found[j].id; j--) {
			unsigned id = found[j].id;
			uint64_t m = found[j].mask;
			found[j] = found[j - 1];
			found[j - 1].id = id;
			found[j - 1].mask = m;
		}
	}
	for (unsigned i = 0; i < nfound; i++)
		masks[i] = found[i].mask;
	return nfound;
}

static bool valid_name(const char *s, size_t len)
{
	if (len == 0 || len >= 32)
		return false;
	bool digits_only = true;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-';
		if (!ok)
			return false;
		if (c < '0' || c > '9')
			digits_only = false;
	}
	return !digits_only; /* a number would be confused with a tier index */
}

/* TIERALLOC_TIERS: "0-1;2" or "dram=0-1;cxl=2". 0 or -EINVAL with a reason. */
static int parse_tiers_spec(const char *spec, uint64_t mem_nodes, struct ta_topology *topo,
			    const char **why)
{
	unsigned n = 0;
	const char *p = spec;
	for (;;) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (n == TA_MAX_TIERS) {
			*why = "more than "
			       "3"
			       " tiers";
			return -EINVAL;
		}
		struct ta_tier_desc *t = &topo->tier[n];
		memset(t, 0, sizeof(*t));
		const char *eq = memchr(p, '=', len);
		const char *list = p;
		size_t list_len = len;
		if (eq != NULL) {
			size_t name_len = (size_t)(eq - p);
			if (!valid_name(p, name_len)) {
				*why = "bad tier name (letters, digits, '_', '-'; not a number)";
				return -EINVAL;
			}
			memcpy(t->name, p, name_len);
			t->name[name_len] = '\0';
			list = eq + 1;
			list_len = len - name_len - 1;
		} else {
			ta_format(t->name, sizeof(t->name), "tier%u", n);
		}
		if (list_len == 0 || ta_nodelist_parse(list, list_len, &t->nodes) != 0 ||
		    t->nodes == 0) {
			*why = "bad node list (numactl syntax: 0,2-3)";
			return -EINVAL;
		}
		if (t->nodes & ~mem_nodes) {
			*why = "names a node that does not exist or has no memory";
			return -EINVAL;
		}
		for (unsigned i = 0; i < n; i++) {
			if (strcmp(topo->tier[i].name, t->name) == 0) {
				*why =
				    "duplicate tier name (a tier without a name is called tierN)";
				return -EINVAL;
			}
		}
		n++;
		if (end == NULL)
			break;
		p = end + 1;
	}
	topo->ntiers = n;
	return 0;
}

int ta_topo_discover(const char *root, const char *spec, struct ta_topology *topo,
		     struct ta_options *opts)
{
	char path[512];
	uint64_t cap[TA_MAX_NODES] = { 0 };
	memset(topo, 0, sizeof(*topo));

	sys_path(path, sizeof(path), root, "devices/system/node/has_memory");
	uint64_t mem_nodes = 0;
	if (read_nodelist_file(path, &mem_nodes) != 0 || mem_nodes == 0) {
		sys_path(path, sizeof(path), root, "devices/system/node/online");
		if (read_nodelist_file(path, &mem_nodes) != 0)
			mem_nodes = 0;
	}
	uint64_t cpu_nodes = 0;
	for (unsigned n = 0; n < TA_MAX_NODES; n++) {
		if (!(mem_nodes & (1ull << n)))
			continue;
		cap[n] = node_capacity(root, n);
		if (cap[n] == 0) {
			mem_nodes &= ~(1ull << n);
			continue;
		}
		if (node_has_cpus(root, n))
			cpu_nodes |= 1ull << n;
	}
	if (mem_nodes == 0) {
		/* No NUMA sysfs (CONFIG_NUMA=n): one node, sized from sysconf. */
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		if (pages <= 0 || psz <= 0)
			return -ENODEV;
		mem_nodes = cpu_nodes = 1;
		cap[0] = (uint64_t)pages * (uint64_t)psz;
	}
	topo->mem_nodes = mem_nodes;
	topo->cpu_nodes = cpu_nodes;

	const char *why = NULL;
	if (spec != NULL && spec[0] != '\0') {
		if (parse_tiers_spec(spec, mem_nodes, topo, &why) == 0) {
			topo->source = "TIERALLOC_TIERS";
		} else {
			char nodes[128];
			ta_nodelist_format(mem_nodes, nodes, sizeof(nodes));
			ta_config_log(
			    TA_LOG_WARN,
			    "TIERALLOC_TIERS=\"%s\": %s (nodes with memory: %s); discovering "
			    "tiers instead",
			    spec, why, nodes);
			ta_config_error(opts);
			topo->ntiers = 0;
		}
	}
	if (topo->ntiers == 0) {
		uint64_t masks[TA_MAX_NODES];
		unsigned nk = kernel_memory_tiers(root, mem_nodes, masks);
		if (nk > 1) {
			if (nk > TA_MAX_TIERS) {
				ta_log(TA_LOG_INFO,
				       "kernel shows %u memory tiers; the slowest are merged into "
				       "tier %u",
				       nk, TA_MAX_TIERS - 1);
				for (unsigned i = TA_MAX_TIERS; i < nk; i++)
					masks[TA_MAX_TIERS - 1] |= masks[i];
				nk = TA_MAX_TIERS;
			}
			for (unsigned i = 0; i < nk; i++)
				topo->tier[i].nodes = masks[i];
			topo->ntiers = nk;
			topo->source = "memory_tiering";
		} else if (cpu_nodes != 0 && (mem_nodes & ~cpu_nodes) != 0) {
			topo->tier[0].nodes = cpu_nodes;
			topo->tier[1].nodes = mem_nodes & ~cpu_nodes;
			topo->ntiers = 2;
			topo->source = "cpu-less nodes";
		} else {
			topo->tier[0].nodes = mem_nodes;
			topo->ntiers = 1;
			topo->source = "one tier";
		}
		for (unsigned i = 0; i < topo->ntiers; i++)
			ta_format(topo->tier[i].name, sizeof(topo->tier[i].name), "tier%u", i);
	}

	for (unsigned i = 0; i < topo->ntiers; i++) {
		struct ta_tier_desc *t = &topo->tier[i];
		t->capacity = 0;
		for (unsigned n = 0; n < TA_MAX_NODES; n++)
			if (t->nodes & (1ull << n))
				t->capacity += cap[n];
		topo->total_capacity += t->capacity;
	}
	for (unsigned i = 0; i < topo->ntiers; i++) {
		struct ta_tier_desc *t = &topo->tier[i];
		t->share_ppm = topo->total_capacity
				   ? (uint32_t)((t->capacity * 1000000.0) / topo->total_capacity)
				   : 0;
	}
	return 0;
}

int ta_topo_tier_by_name(const struct ta_topology *topo, const char *s, size_t len)
{
	if (len == 0)
		return -1;
	bool digits = true;
	unsigned v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			digits = false;
			break;
		}
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > 1000)
			return -1;
	}
	if (digits)
		return v < topo->ntiers ? (int)v : -1;
	for (unsigned t = 0; t < topo->ntiers; t++)
		if (strlen(topo->tier[t].name) == len && memcmp(topo->tier[t].name, s, len) == 0)
			return (int)t;
	return -1;
}

int ta_topo_parse_limits(const struct ta_topology *topo, const char *spec,
			 uint64_t limits[TA_MAX_TIERS], struct ta_options *opts)
{
	uint64_t parsed[TA_MAX_TIERS];
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		limits[t] = parsed[t] = UINT64_MAX;
	if (spec == NULL || spec[0] == '\0')
		return 0;
	const char *p = spec, *why = NULL;
	for (;;) {
		size_t len = strcspn(p, ";,");
		const char *eq = memchr(p, '=', len);
		if (eq == NULL) {
			why = "expected TIER=SIZE entries separated by ';'";
			goto bad;
		}
		int t = ta_topo_tier_by_name(topo, p, (size_t)(eq - p));
		if (t < 0) {
			why = "unknown tier (an index or a name from TIERALLOC_TIERS)";
			goto bad;
		}
		char num[64];
		size_t nlen = len - (size_t)(eq - p) - 1;
		if (nlen == 0 || nlen >= sizeof(num)) {
			why = "bad size";
			goto bad;
		}
		memcpy(num, eq + 1, nlen);
		num[nlen] = '\0';
		if (parsed[t] != UINT64_MAX) {
			why = "tier given twice";
			goto bad;
		}
		if (ta_parse_size(num, &parsed[t]) != 0) {
			why = "bad size (e.g. 64K, 512M, 2G)";
			goto bad;
		}
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	for (unsigned t = 0; t < TA_MAX_TIERS; t++)
		limits[t] = parsed[t];
	return 0;
bad:
	ta_config_log(TA_LOG_WARN, "TIERALLOC_PROCESS_LIMIT=\"%s\": %s; using no limit", spec, why);
	ta_config_error(opts);
	return -EINVAL;
}
