/* SPDX-License-Identifier: MIT */
/*
 * The per-cgroup shared segment (layout: include/tieralloc/shm_abi.h): create or attach,
 * validate, claim this process's slot, charge and uncharge the cgroup's per-tier counters, take
 * back the charges of processes that died, and refresh the limits from the cgroup's files.
 * Charges arrive here only when a thread refills or trims its stock, never per allocation.
 * Anything wrong with the segment costs one warning and leaves the process on local accounting.
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "internal.h"
#include "shm.h"

struct ta_shm ta_shm;

#define ATTACH_WAIT_NS	  (200 * 1000 * 1000ull) /* for a creator to finish filling */
#define LIMITS_REFRESH_NS (1000 * 1000 * 1000ull)

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The tiers are part of the name: quotas only mean something between processes that agree on
 * what tier 0 is, and a process started with other TIERALLOC_TIERS must not be refused. */
static uint32_t tiers_fingerprint(const struct ta_topology *topo)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (unsigned t = 0; t < topo->ntiers; t++)
		for (unsigned b = 0; b < 8; b++) {
			h ^= (topo->tier[t].nodes >> (8 * b)) & 0xff;
			h *= 0x100000001b3ull;
		}
	h ^= topo->ntiers;
	h *= 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

void ta_shm_name(const struct ta_cgroup *cg, const struct ta_topology *topo, const char *override,
		 char *buf, size_t n)
{
	if (override != NULL && override[0] != '\0')
		ta_format(buf, n, "%s%s", override[0] == '/' ? "" : "/", override);
	else
		ta_format(buf, n, "/tieralloc-v%d-%s-t%x", TA_SHM_ABI_MAJOR, cg->key,
			  tiers_fingerprint(topo));
}

static void fill_header(struct ta_shm_header *h, const struct ta_cgroup *cg,
			const struct ta_topology *topo)
{
	h->magic = TA_SHM_MAGIC;
	h->abi_major = TA_SHM_ABI_MAJOR;
	h->abi_minor = TA_SHM_ABI_MINOR;
	h->header_size = sizeof(*h);
	h->seg_size = TA_SHM_SEG_SIZE;
	h->max_slots = TA_SHM_MAX_SLOTS;
	h->max_tiers = TA_SHM_MAX_TIERS;
	h->slot_size = sizeof(struct ta_shm_slot);
	h->slots_off = TA_SHM_SLOTS_OFF;
	h->tier_size = sizeof(struct ta_shm_tier);
	h->tiers_off = TA_SHM_TIERS_OFF;
	h->agent_off = TA_SHM_AGENT_OFF;
	h->agent_size = sizeof(struct ta_shm_agent);
	h->creator_pid = (uint32_t)getpid();
	h->cgroup_id = cg->id;
	h->cgroup_version = (uint32_t)cg->version;
	ta_format(h->cgroup_path, sizeof(h->cgroup_path), "%s", cg->path);
	atomic_store(&h->ntiers, topo->ntiers);
	struct ta_shm_tier *tiers = (struct ta_shm_tier *)((char *)h + TA_SHM_TIERS_OFF);
	for (unsigned t = 0; t < topo->ntiers; t++) {
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			atomic_store(&tiers[t].limit[k],
				     k <= TA_LIMIT_LOW ? 0 : topo->tier[t].capacity);
		atomic_store(&tiers[t].capacity, topo->tier[t].capacity);
		atomic_store(&tiers[t].nodes, topo->tier[t].nodes);
		atomic_store(&tiers[t].share_ppm, topo->tier[t].share_ppm);
		ta_format(tiers[t].name, sizeof(tiers[t].name), "%s", topo->tier[t].name);
	}
}

static int map_segment(int fd, size_t size, struct ta_shm *out)
{
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	out->hdr = m;
	out->size = size;
	out->tiers = (struct ta_shm_tier *)((char *)m + out->hdr->tiers_off);
	out->slots = (struct ta_shm_slot *)((char *)m + out->hdr->slots_off);
	return 0;
}

/* Create the segment, or attach to the one another process created. */
static int open_segment(const char *name, const struct ta_cgroup *cg,
			const struct ta_topology *topo, struct ta_shm *out, const char **why)
{
	char path[300];
	ta_format(path, sizeof(path), "/dev/shm%s", name);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path,
			      O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		/* Ours to fill. ftruncate zero-fills; state stays INIT until the end. */
		if (ftruncate(fd, TA_SHM_SEG_SIZE) != 0 ||
		    map_segment(fd, TA_SHM_SEG_SIZE, out) != 0) {
			*why = "cannot size or map a new segment";
			syscall(SYS_unlinkat, AT_FDCWD, path, 0);
			syscall(SYS_close, fd);
			return -EIO;
		}
		syscall(SYS_close, fd);
		fill_header(out->hdr, cg, topo);
		out->tiers = (struct ta_shm_tier *)((char *)out->hdr + TA_SHM_TIERS_OFF);
		out->slots = (struct ta_shm_slot *)((char *)out->hdr + TA_SHM_SLOTS_OFF);
		out->agent = (struct ta_shm_agent *)((char *)out->hdr + TA_SHM_AGENT_OFF);
		atomic_store_explicit(&out->hdr->state, TA_SHM_READY, memory_order_release);
		out->created = true;
		return 0;
	}
	if (errno != EEXIST) {
		*why = "cannot create /dev/shm segment";
		return -errno;
	}
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		*why = "cannot open the existing segment (permissions?)";
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		syscall(SYS_close, fd);
		return -EINVAL;
	}
	if (st.st_uid != geteuid()) {
		*why = "owned by another user";
		syscall(SYS_close, fd);
		return -EPERM;
	}
	if ((st.st_mode & 0077) != 0) {
		*why = "readable or writable by others";
		syscall(SYS_close, fd);
		return -EPERM;
	}
	if ((size_t)st.st_size < sizeof(struct ta_shm_header) || st.st_size > (1 << 24)) {
		*why = st.st_size < (off_t)sizeof(struct ta_shm_header) ? "truncated" : "oversized";
		syscall(SYS_close, fd);
		return -EINVAL;
	}
	int rc = map_segment(fd, (size_t)st.st_size, out);
	syscall(SYS_close, fd);
	if (rc != 0) {
		*why = "cannot map the segment";
		return rc;
	}
	/* The creator may still be filling it in. */
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + ATTACH_WAIT_NS;
	while (atomic_load_explicit(&out->hdr->state, memory_order_acquire) != TA_SHM_READY) {
		if (now_ns(CLOCK_MONOTONIC) > deadline) {
			*why = "its creator never finished it";
			munmap(out->hdr, out->size);
			return -ETIMEDOUT;
		}
		struct timespec pause = { 0, 1000000 };
		nanosleep(&pause, NULL);
	}
	if (ta_shm_validate(out->hdr, out->size, why) != 0) {
		munmap(out->hdr, out->size);
		return -EINVAL;
	}
	out->tiers = (struct ta_shm_tier *)((char *)out->hdr + out->hdr->tiers_off);
	out->slots = (struct ta_shm_slot *)((char *)out->hdr + out->hdr->slots_off);
	out->agent = ta_shm_agent_block(out->hdr, out->size);
	if (atomic_load(&out->hdr->ntiers) != topo->ntiers) {
		*why = "made for another number of tiers";
		munmap(out->hdr, out->size);
		return -EINVAL;
	}
	return 0;
}

uint64_t ta_proc_start_time(int pid)
{
	char path[64], text[1024];
	ta_format(path, sizeof(path), "/proc/%d/stat", pid);
	ssize_t n = ta_read_file(path, text, sizeof(text));
	if (n <= 0)
		return 0;
	/* Field 22; the command (field 2) may hold spaces and ')', so count from the last ')'. */
	const char *p = strrchr(text, ')');
	if (p == NULL)
		return 0;
	unsigned field = 2;
	for (; *p != '\0' && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return v;
}

static struct ta_shm_slot *slot_at(const struct ta_shm *shm, unsigned i)
{
	return (struct ta_shm_slot *)((char *)shm->slots + (size_t)i * shm->hdr->slot_size);
}

static unsigned slot_count(const struct ta_shm *shm)
{
	unsigned n = shm->hdr->max_slots;
	return n < TA_SHM_MAX_SLOTS ? n : TA_SHM_MAX_SLOTS;
}

static bool process_alive(uint32_t pid, uint64_t start_time)
{
	if (syscall(SYS_kill, (int)pid, 0) != 0 && errno == ESRCH)
		return false;
	/* A zombie's memory is gone although kill() still finds it. */
	char path[64], text[256];
	ta_format(path, sizeof(path), "/proc/%u/stat", pid);
	ssize_t n = ta_read_file(path, text, sizeof(text));
	const char *state = n > 0 ? strrchr(text, ')') : NULL;
	if (state != NULL && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X'))
		return false;
	uint64_t now_start = ta_proc_start_time((int)pid);
	/* Unreadable (another pid namespace): trust kill(). A different start time: pid reused. */
	return now_start == 0 || start_time == 0 || now_start == start_time;
}

unsigned ta_shm_reclaim_dead(struct ta_shm *shm)
{
	unsigned taken = 0, ntiers = atomic_load(&shm->hdr->ntiers);
	if (ntiers > TA_SHM_MAX_TIERS)
		return 0;
	for (unsigned i = 0; i < slot_count(shm); i++) {
		struct ta_shm_slot *s = slot_at(shm, i);
		uint32_t pid = atomic_load(&s->pid);
		if (pid == 0 || pid == UINT32_MAX || s == shm->mine)
			continue;
		/* Our own pid in another slot: the image before an exec (its heap is gone). */
		bool stale = pid == (uint32_t)getpid() && shm->mine != NULL;
		if (!stale && process_alive(pid, atomic_load(&s->start_time)))
			continue;
		/* Whoever moves the slot from the dead pid to a marker owns the clean-up. */
		if (!atomic_compare_exchange_strong(&s->pid, &pid, UINT32_MAX))
			continue;
		for (unsigned t = 0; t < ntiers; t++) {
			/* All of it, whatever it is: the tier's counter holds the same amount (the
			 * counters are modular), so a process that died holding an absurd charge
			 * (a huge request charged by force before it failed) leaves nothing behind.
			 * Only a plausible amount counts as reclaimed memory. */
			uint64_t c = atomic_exchange(&s->charged[t], 0);
			atomic_fetch_sub(&shm->tiers[t].charged, c);
			if (c < (1ull << TA_ADDR_BITS))
				atomic_fetch_add(&shm->tiers[t].reclaimed, c);
		}
		atomic_store(&s->start_time, 0);
		atomic_store(&s->pid, 0);
		taken++;
	}
	return taken;
}

void ta_shm_wake_others(void)
{
	if (!atomic_load(&ta_shm.active))
		return;
	for (unsigned i = 0; i < slot_count(&ta_shm); i++) {
		struct ta_shm_slot *s = slot_at(&ta_shm, i);
		uint32_t pid = atomic_load(&s->pid);
		if (s == ta_shm.mine || pid == 0 || pid == UINT32_MAX)
			continue;
		atomic_fetch_add(&s->wake, 1);
		syscall(SYS_futex, &s->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
}

static int claim_slot(struct ta_shm *shm)
{
	uint32_t me = (uint32_t)getpid();
	uint64_t start = ta_proc_start_time((int)me);
	for (int attempt = 0; attempt < 2; attempt++) {
		for (unsigned i = 0; i < slot_count(shm); i++) {
			struct ta_shm_slot *s = slot_at(shm, i);
			uint32_t expect = 0;
			if (!atomic_compare_exchange_strong(&s->pid, &expect, me))
				continue;
			atomic_store(&s->start_time, start);
			for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++)
				atomic_store(&s->charged[t], 0);
			shm->mine = s;
			return 0;
		}
		/* Full: dead processes may be holding slots. */
		ta_shm_reclaim_dead(shm);
	}
	return -ENOSPC;
}

int ta_shm_attach(const char *name, const struct ta_cgroup *cg, const struct ta_topology *topo)
{
	struct ta_shm shm;
	memset(&shm, 0, sizeof(shm));
	const char *why = NULL;
	int rc = open_segment(name, cg, topo, &shm, &why);
	if (rc == 0 && claim_slot(&shm) != 0) {
		why = "every process slot is taken";
		munmap(shm.hdr, shm.size);
		rc = -ENOSPC;
	}
	if (rc != 0) {
		ta_log(TA_LOG_WARN, "shared segment %s: %s; this process keeps its own accounting",
		       name, why);
		return rc;
	}
	ta_format(shm.name, sizeof(shm.name), "%s", name);
	shm.cg = *cg;
	ta_shm = shm;
	ta_shm_reclaim_dead(&ta_shm);
	atomic_store_explicit(&ta_shm.active, true, memory_order_release);
	return 0;
}

bool ta_shm_charge(unsigned tier, uint64_t bytes, int level, bool force)
{
	struct ta_shm_tier *r = &ta_shm.tiers[tier];
	uint64_t limit = atomic_load_explicit(&r->limit[level], memory_order_relaxed);
	/* What the kernel sees there beyond the charges (memkind's metadata, page cache, pages it
	 * promoted): intent plus the last observed truth. */
	uint64_t untracked = atomic_load_explicit(&r->untracked, memory_order_relaxed);
	uint64_t now = atomic_fetch_add(&r->charged, bytes) + bytes;
	if ((now > limit || untracked > limit - now) && !force) {
		atomic_fetch_sub(&r->charged, bytes);
		if (level == TA_LIMIT_MAX)
			atomic_fetch_add(&r->exhausted, 1);
		return false;
	}
	atomic_fetch_add_explicit(&ta_shm.mine->charged[tier], bytes, memory_order_relaxed);
	/* Under a real quota, a tier half-way to its high share or a process holding 16 MiB there:
	 * enforcement has something to watch (enforce.c). Not sooner, so that the many short
	 * programs of a container (shells, compilers' drivers) never start a worker thread. */
	uint64_t high = atomic_load_explicit(&r->limit[TA_LIMIT_HIGH], memory_order_relaxed);
	uint64_t mine = atomic_load_explicit(&ta_shm.mine->charged[tier], memory_order_relaxed);
	if (!atomic_load_explicit(&ta_enforce_wanted, memory_order_relaxed) &&
	    high < atomic_load_explicit(&r->capacity, memory_order_relaxed) &&
	    (now + untracked >= high / 2 || mine >= (16ull << 20)))
		atomic_store(&ta_enforce_wanted, true);
	uint64_t peak = atomic_load_explicit(&r->peak, memory_order_relaxed);
	while (now > peak && !atomic_compare_exchange_weak(&r->peak, &peak, now))
		;
	return true;
}

/* Slot first, tier second (and the reverse when charging): a process killed between the two
 * leaves the tier over-charged by one batch, never below the sum of the slots, so taking back a
 * dead slot's charges cannot wrap the tier's counter. */
void ta_shm_uncharge(unsigned tier, uint64_t bytes)
{
	atomic_fetch_sub_explicit(&ta_shm.mine->charged[tier], bytes, memory_order_relaxed);
	atomic_fetch_sub(&ta_shm.tiers[tier].charged, bytes);
}

void ta_shm_refresh_limits(bool now)
{
	struct ta_shm_header *h = ta_shm.hdr;
	uint64_t t_now = now_ns(CLOCK_MONOTONIC);
	uint64_t last = atomic_load_explicit(&h->limits_read_ns, memory_order_relaxed);
	if (!now && t_now - last < LIMITS_REFRESH_NS)
		return;
	/* One process of the cgroup re-reads per period. */
	if (!now && !atomic_compare_exchange_strong(&h->limits_read_ns, &last, t_now))
		return;
	atomic_store(&h->limits_read_ns, t_now);
	/* Processes that exited leave their slot to be taken back by a peer: no exit-time detach,
	 * which would race with the process's other threads still charging. */
	ta_shm_reclaim_dead(&ta_shm);
	uint64_t cg[TA_NLIMITS];
	if (ta_cgroup_read_limits("", &ta_shm.cg, cg) != 0) {
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			cg[k] = k <= TA_LIMIT_LOW ? 0 : TA_SHM_UNLIMITED;
	}
	bool changed = false;
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		uint64_t cap = atomic_load(&r->capacity), v[TA_NLIMITS];
		for (unsigned k = 0; k < TA_NLIMITS; k++) {
			if (!ta_quota_override(t, k, &v[k]))
				v[k] = ta_cgroup_split(cg[k], ta_quota_share(t));
			/* No limit anywhere means the tier's capacity. */
			if (k >= TA_LIMIT_HIGH && v[k] > cap)
				v[k] = cap;
		}
		/* Steering tries high first: a high above max (memory.high is "max" by default)
		 * would let the max pass unchecked. */
		if (v[TA_LIMIT_HIGH] > v[TA_LIMIT_MAX])
			v[TA_LIMIT_HIGH] = v[TA_LIMIT_MAX];
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			if (atomic_exchange(&r->limit[k], v[k]) != v[k])
				changed = true;
		atomic_store(&r->share_ppm, ta_quota_share(t));
	}
	if (changed)
		atomic_fetch_add(&h->generation, 1);
}

/* fork: the child has the parent's heap, so it takes a slot of its own charged with it. */
void ta_shm_fork_child(const uint64_t charged[TA_MAX_TIERS])
{
	if (!atomic_load(&ta_shm.active))
		return;
	ta_shm.mine = NULL;
	if (claim_slot(&ta_shm) != 0) {
		atomic_store(&ta_shm.active, false);
		ta_log(TA_LOG_WARN,
		       "shared segment %s: no slot for a forked child; it keeps its own "
		       "accounting",
		       ta_shm.name);
		return;
	}
	for (unsigned t = 0; t < ta_ntiers; t++) {
		struct ta_shm_tier *r = &ta_shm.tiers[t];
		uint64_t now = atomic_fetch_add(&r->charged, charged[t]) + charged[t];
		atomic_store(&ta_shm.mine->charged[t], charged[t]);
		uint64_t peak = atomic_load(&r->peak);
		while (now > peak && !atomic_compare_exchange_weak(&r->peak, &peak, now))
			;
	}
}
