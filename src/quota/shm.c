/* SPDX-License-Identifier: MIT */
/*
 * The per-cgroup shared segment (layout: include/tieralloc/shm_abi.h), its mechanics: create or
 * attach, validate, claim this process's slot, take back the slots (and charges) of processes
 * that died, watch for truncation, and the access records. What is kept in it lives with its
 * concern: the charges in charge.c, the limits in limits.c, the agent's loans in loan.c.
 * Anything wrong with the segment costs one warning and leaves the process on local accounting.
 */
#include <fcntl.h>
#include <sys/file.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "quota/cgroup.h"
#include "quota/quota.h"
#include "quota/shm.h"

struct ta_shm ta_shm;

#define ATTACH_WAIT_NS (1000 * 1000 * 1000ull) /* for a live creator to finish filling */
#define CHECK_NS       (200 * 1000 * 1000ull)  /* how often a process looks at its mapping */

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
	h->access_off = TA_SHM_ACCESS_OFF;
	h->access_size = sizeof(struct ta_shm_access);
	h->lend_off = TA_SHM_LEND_OFF;
	h->lend_size = sizeof(struct ta_shm_lend);
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

/* ---- truncation ----
 * A mapping of a tmpfs file raises SIGBUS on a page past the file's end, and any process of the
 * user may truncate the file. So: the segment's address range is known to a SIGBUS handler that,
 * for a fault inside it, puts private zero pages there (every pointer into the segment, in every
 * thread, stays valid), turns the process to local accounting and lets the access run again;
 * any other SIGBUS goes to the disposition the program had. ta_shm_check looks for truncation
 * as well (at most every 200 ms), so that a program that replaced the handler is covered too,
 * apart from that window. */
static _Atomic(char *) bus_base;
static _Atomic size_t bus_len;
static _Atomic bool bus_lost, bus_installed;
static struct sigaction bus_old;
static char bus_name[160];

/* Async-signal-safe: from the handler, or from a check. */
static void lose(const char *why)
{
	atomic_store(&ta_shm.active, false);
	if (atomic_exchange(&bus_lost, true))
		return;
	char *base = atomic_load(&bus_base);
	if (base != NULL)
		mmap(base, atomic_load(&bus_len), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ta_log(TA_LOG_WARN,
	       "shared segment %s: %s; this process keeps its own accounting from now on", bus_name,
	       why);
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	char *base = atomic_load(&bus_base), *addr = si->si_addr;
	if (si->si_code > 0 && base != NULL && addr >= base &&
	    addr < base + atomic_load(&bus_len)) {
		/* Another thread may be replacing the mapping: the access faults again until it
		 * is done. */
		lose("the file was truncated under this process");
		return;
	}
	/* Not ours: what the program asked for (its handler runs without its sa_mask). */
	if (bus_old.sa_flags & SA_SIGINFO) {
		bus_old.sa_sigaction(sig, si, ctx);
		return;
	}
	if (bus_old.sa_handler == SIG_IGN && si->si_code <= 0)
		return;
	if (bus_old.sa_handler == SIG_DFL || bus_old.sa_handler == SIG_IGN) {
		/* A fault runs again and gets the default action (the kernel does not let a fault
		 * be ignored); a signal sent by someone is sent again, delivered once we return. */
		sigaction(SIGBUS, &bus_old, NULL);
		atomic_store(&bus_installed, false);
		if (si->si_code <= 0)
			syscall(SYS_tgkill, (int)getpid(), (int)syscall(SYS_gettid), sig);
		return;
	}
	bus_old.sa_handler(sig);
}

static void bus_watch(const char *name, void *base, size_t len)
{
	ta_format(bus_name, sizeof(bus_name), "%s", name);
	atomic_store(&bus_len, len);
	atomic_store(&bus_base, (char *)base);
	if (base == NULL || atomic_load(&bus_installed))
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &bus_old) == 0)
		atomic_store(&bus_installed, true);
}

/* Nothing of ours is mapped any more: the program's own disposition back. */
static void bus_unwatch(void)
{
	atomic_store(&bus_base, NULL);
	if (atomic_exchange(&bus_installed, false))
		sigaction(SIGBUS, &bus_old, NULL);
}

static int map_segment(int fd, size_t size, const char *name, struct ta_shm *out)
{
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	bus_watch(name, m, size);
	out->hdr = m;
	out->size = size;
	return 0;
}

static void unmap_segment(struct ta_shm *out)
{
	bus_unwatch();
	munmap(out->hdr, out->size);
	out->hdr = NULL;
}

/* Size, zero and fill the file behind fd, then mark it ready; mapped in out. */
static int init_segment(int fd, const char *name, const struct ta_cgroup *cg,
			const struct ta_topology *topo, struct ta_shm *out)
{
	if (ftruncate(fd, TA_SHM_SEG_SIZE) != 0 || map_segment(fd, TA_SHM_SEG_SIZE, name, out) != 0)
		return -EIO;
	memset(out->hdr, 0, TA_SHM_SEG_SIZE);
	fill_header(out->hdr, cg, topo);
	atomic_store_explicit(&out->hdr->state, TA_SHM_READY, memory_order_release);
	return 0;
}

/* A file whose creator has not marked it ready: empty (sized yet), or in state INIT with no
 * magic or ours (being filled). Anything else is not being made, and validation judges it. */
static bool unfinished(int fd, const struct stat *st)
{
	if (st->st_size == 0)
		return true;
	struct ta_shm_header h;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return false;
	return atomic_load(&h.state) == TA_SHM_INIT && (h.magic == 0 || h.magic == TA_SHM_MAGIC);
}

/* Fixed fields of a header that no process changes once it is ready. */
static bool same_layout(const struct ta_shm_header *a, const struct ta_shm_header *b)
{
	return a->magic == b->magic && a->abi_major == b->abi_major &&
	       a->abi_minor == b->abi_minor && a->header_size == b->header_size &&
	       a->seg_size == b->seg_size && a->max_slots == b->max_slots &&
	       a->max_tiers == b->max_tiers && a->slot_size == b->slot_size &&
	       a->slots_off == b->slots_off && a->tier_size == b->tier_size &&
	       a->tiers_off == b->tiers_off && a->agent_off == b->agent_off &&
	       a->agent_size == b->agent_size && a->access_off == b->access_off &&
	       a->access_size == b->access_size && a->lend_off == b->lend_off &&
	       a->lend_size == b->lend_size && a->creator_pid == b->creator_pid &&
	       a->cgroup_id == b->cgroup_id && a->cgroup_version == b->cgroup_version &&
	       atomic_load_explicit((_Atomic uint32_t *)&a->state, memory_order_relaxed) ==
		   atomic_load_explicit((_Atomic uint32_t *)&b->state, memory_order_relaxed) &&
	       atomic_load_explicit((_Atomic uint32_t *)&a->ntiers, memory_order_relaxed) ==
		   atomic_load_explicit((_Atomic uint32_t *)&b->ntiers, memory_order_relaxed);
}

/* The header is copied once and only the copy is validated and used: a writer that changes the
 * live header afterwards cannot move what this process computes. */
static int adopt(struct ta_shm *out, const struct ta_topology *topo, const char **why)
{
	/* Pairs with the creator's release: the header it wrote before READY is visible. */
	(void)atomic_load_explicit(&out->hdr->state, memory_order_acquire);
	memcpy(&out->snap, out->hdr, sizeof(out->snap));
	const struct ta_shm_header *h = &out->snap;
	if (ta_shm_validate(h, out->size, why) != 0)
		return -EINVAL;
	if (atomic_load(&out->snap.state) != TA_SHM_READY) {
		*why = "its creator never finished it";
		return -EINVAL;
	}
	/* The library's tier records are indexed as an array of its own struct: a segment whose
	 * records have another size (tieralloc-stat and the agent read those) is refused rather
	 * than have one tier's charges land in another's record. */
	if (h->tier_size != sizeof(struct ta_shm_tier)) {
		*why = "tier records of another size (another ABI minor version)";
		return -EINVAL;
	}
	if (atomic_load(&out->snap.ntiers) != topo->ntiers) {
		*why = "made for another number of tiers";
		return -EINVAL;
	}
	out->tiers = (struct ta_shm_tier *)((char *)out->hdr + h->tiers_off);
	out->slots = (struct ta_shm_slot *)((char *)out->hdr + h->slots_off);
	out->nslots = h->max_slots < TA_SHM_MAX_SLOTS ? h->max_slots : TA_SHM_MAX_SLOTS;
	out->slot_size = h->slot_size;
	out->ntiers = topo->ntiers;
	const struct ta_shm_agent *a = ta_shm_agent_block(h, out->size);
	out->agent =
	    a == NULL
		? NULL
		: (struct ta_shm_agent *)((char *)out->hdr + ((const char *)a - (const char *)h));
	const struct ta_shm_access *acc = ta_shm_access_block(h, out->size);
	out->access = acc == NULL ? NULL
				  : (struct ta_shm_access *)((char *)out->hdr +
							     ((const char *)acc - (const char *)h));
	const struct ta_shm_lend *lend = ta_shm_lend_block(h, out->size);
	out->lend =
	    lend == NULL
		? NULL
		: (struct ta_shm_lend *)((char *)out->hdr + ((const char *)lend - (const char *)h));
	return 0;
}

static int open_fd(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW,
			    0600);
}

/* Attach to the existing file at path; -ENOENT: it went away, create it again. */
static int attach_existing(const char *path, const char *name, const struct ta_cgroup *cg,
			   const struct ta_topology *topo, struct ta_shm *out, const char **why)
{
	/* Non-blocking: a FIFO in its place must not hang the program. */
	int fd = open_fd(path, O_NONBLOCK);
	if (fd < 0) {
		int err = errno;
		if (err == ENOENT)
			return -ENOENT;
		struct stat lst;
		bool other =
		    syscall(SYS_newfstatat, AT_FDCWD, path, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
		    lst.st_uid != geteuid();
		*why = err == EACCES && other ? "owned by another user"
					      : "cannot open the existing segment (permissions?)";
		return -err;
	}
	int rc = 0;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		rc = -EINVAL;
	} else if (st.st_uid != geteuid()) {
		*why = "owned by another user";
		rc = -EPERM;
	} else if ((st.st_mode & 0077) != 0) {
		*why = "readable or writable by others";
		rc = -EPERM;
	}
	/* The creator may still be filling it in. It holds the file's lock meanwhile: a free
	 * lock on an unfinished file means that it died (killed between creating the file and
	 * marking it ready), and whoever takes the lock makes the segment in its place. */
	uint64_t deadline = ta_monotonic_ns() + ATTACH_WAIT_NS;
	while (rc == 0 && fstat(fd, &st) == 0 && unfinished(fd, &st)) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (fstat(fd, &st) == 0 && unfinished(fd, &st)) {
				struct ta_shm tmp;
				memset(&tmp, 0, sizeof(tmp));
				if (init_segment(fd, name, cg, topo, &tmp) != 0) {
					*why = "cannot make a segment whose creator died";
					rc = -EIO;
				} else {
					unmap_segment(&tmp);
					ta_log(TA_LOG_INFO,
					       "shared segment %s: its creator died before it was "
					       "ready; made it again",
					       name);
				}
			}
			flock(fd, LOCK_UN);
			continue;
		}
		if (ta_monotonic_ns() > deadline) {
			*why = "its creator never finished it";
			rc = -ETIMEDOUT;
			break;
		}
		struct timespec pause = { 0, 1000000 };
		nanosleep(&pause, NULL);
	}
	if (rc == 0 &&
	    ((size_t)st.st_size < sizeof(struct ta_shm_header) || st.st_size > (1 << 24))) {
		*why = st.st_size < (off_t)sizeof(struct ta_shm_header) ? "truncated" : "oversized";
		rc = -EINVAL;
	}
	if (rc == 0 && map_segment(fd, (size_t)st.st_size, name, out) != 0) {
		*why = "cannot map the segment";
		rc = -ENOMEM;
	}
	syscall(SYS_close, fd);
	if (rc != 0)
		return rc;
	rc = adopt(out, topo, why);
	if (rc == 0 && atomic_load(&bus_lost)) {
		*why = "the file was truncated while attaching";
		rc = -EIO;
	}
	if (rc != 0)
		unmap_segment(out);
	return rc;
}

/* Create the segment, or attach to the one another process created. */
static int open_segment(const char *name, const struct ta_cgroup *cg,
			const struct ta_topology *topo, struct ta_shm *out, const char **why)
{
	char path[300];
	ta_format(path, sizeof(path), "/dev/shm%s", name);
	for (unsigned round = 0; round < 4; round++) {
		int fd = open_fd(path, O_CREAT | O_EXCL);
		if (fd >= 0) {
			/* Ours to fill, under the lock that tells the others that its creator is
			 * alive. Unless a process that took the lock first (it found the file
			 * empty) filled it: then attach to that. */
			struct stat st;
			if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
			    st.st_size == 0) {
				int rc = init_segment(fd, name, cg, topo, out);
				if (rc == 0)
					rc = adopt(out, topo, why);
				if (rc != 0) {
					*why = "cannot size or map a new segment";
					if (out->hdr != NULL)
						unmap_segment(out);
					syscall(SYS_unlinkat, AT_FDCWD, path, 0);
					syscall(SYS_close, fd);
					return -EIO;
				}
				flock(fd, LOCK_UN);
				syscall(SYS_close, fd);
				out->created = true;
				return 0;
			}
			syscall(SYS_close, fd);
		} else if (errno != EEXIST) {
			*why = "cannot create /dev/shm segment";
			return -errno;
		}
		int rc = attach_existing(path, name, cg, topo, out, why);
		if (rc != -ENOENT)
			return rc;
	}
	*why = "it was removed again and again while attaching";
	return -EAGAIN;
}

/* Read /proc/<pid>/stat once: the process's start time (0: unreadable) and state letter. */
static uint64_t proc_stat(int pid, char *state)
{
	char path[64], text[1024];
	*state = '?';
	ta_format(path, sizeof(path), "/proc/%d/stat", pid);
	ssize_t n = ta_read_file(path, text, sizeof(text));
	if (n <= 0)
		return 0;
	uint64_t start;
	return ta_proc_stat_parse(text, state, &start) ? start : 0;
}

uint64_t ta_proc_start_time(int pid)
{
	char state;
	return proc_stat(pid, &state);
}

static struct ta_shm_slot *slot_at(const struct ta_shm *shm, unsigned i)
{
	return (struct ta_shm_slot *)((char *)shm->slots + (size_t)i * shm->slot_size);
}

/* The slot's record in the access block, or NULL (a segment before minor 3). */
static struct ta_shm_access_slot *access_of(const struct ta_shm *shm, const struct ta_shm_slot *s)
{
	if (shm->access == NULL)
		return NULL;
	size_t i = (size_t)((const char *)s - (const char *)shm->slots) / shm->slot_size;
	return i < TA_SHM_MAX_SLOTS ? &shm->access->slot[i] : NULL;
}

static void access_clear(const struct ta_shm *shm, const struct ta_shm_slot *s)
{
	struct ta_shm_access_slot *a = access_of(shm, s);
	if (a == NULL)
		return;
	for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++) {
		atomic_store(&a->hot[t], 0);
		atomic_store(&a->cold[t], 0);
	}
}

static bool process_alive(uint32_t pid, uint64_t start_time)
{
	if (syscall(SYS_kill, (int)pid, 0) != 0 && errno == ESRCH)
		return false;
	/* A zombie's memory is gone although kill() still finds it. One read gives both. */
	char state;
	uint64_t now_start = proc_stat((int)pid, &state);
	if (state == 'Z' || state == 'X')
		return false;
	/* Unreadable (another pid namespace): trust kill(). A different start time: pid reused. */
	return now_start == 0 || start_time == 0 || now_start == start_time;
}

#define MARKER		UINT32_MAX		    /* a slot being taken back */
#define MARKER_STALE_NS (2 * 1000 * 1000 * 1000ull) /* a clean-up takes microseconds */
#define PLAUSIBLE	(1ull << TA_ADDR_BITS)	    /* more bytes than any process can hold */

/* Empty a slot held by the marker. Idempotent: each charge leaves the slot by an exchange, so
 * two processes cleaning the same slot take each byte back once; the slot is freed by a CAS
 * from the marker, never by a store over a slot someone claimed meanwhile. */
static void clean_marked(struct ta_shm *shm, struct ta_shm_slot *s)
{
	for (unsigned t = 0; t < shm->ntiers; t++) {
		if (atomic_load(&s->pid) != MARKER)
			return;
		/* All of it, whatever it is: the tier's counter holds the same amount (the
		 * counters are modular), so a process that died holding an absurd charge (a huge
		 * request charged by force before it failed) leaves nothing behind. Only a
		 * plausible amount counts as reclaimed memory. */
		uint64_t c = atomic_exchange(&s->charged[t], 0);
		atomic_fetch_sub(&shm->tiers[t].charged, c);
		if (c < PLAUSIBLE)
			atomic_fetch_add(&shm->tiers[t].reclaimed, c);
	}
	access_clear(shm, s);
	uint32_t marker = MARKER;
	atomic_compare_exchange_strong(&s->pid, &marker, 0);
}

/* A tier's counter above what any process could hold (it wrapped, or was written over) would
 * refuse the tier to the whole cgroup for ever: it becomes the sum of the plausible charges of
 * the slots. */
static void repair_counters(struct ta_shm *shm)
{
	for (unsigned t = 0; t < shm->ntiers; t++) {
		struct ta_shm_tier *r = &shm->tiers[t];
		uint64_t c = atomic_load(&r->charged);
		if (c < PLAUSIBLE)
			continue;
		uint64_t sum = 0;
		for (unsigned i = 0; i < shm->nslots; i++) {
			struct ta_shm_slot *s = slot_at(shm, i);
			uint32_t pid = atomic_load(&s->pid);
			uint64_t v = atomic_load(&s->charged[t]);
			if (pid != 0 && pid != MARKER && v < PLAUSIBLE)
				sum += v;
		}
		if (atomic_compare_exchange_strong(&r->charged, &c, sum)) {
			ta_log(TA_LOG_INFO,
			       "shared segment %s: tier %u was charged %llu bytes; reset to the "
			       "processes' %llu",
			       shm->name, t, (unsigned long long)c, (unsigned long long)sum);
			uint64_t peak = atomic_load(&r->peak);
			if (peak >= PLAUSIBLE)
				atomic_compare_exchange_strong(&r->peak, &peak, sum);
		}
	}
}

unsigned ta_shm_reclaim_dead(struct ta_shm *shm)
{
	/* Another thread of ours is at it: its walk does this one's work. */
	if (atomic_exchange(&shm->reclaiming, true))
		return 0;
	unsigned taken = 0;
	uint64_t now = ta_monotonic_ns();
	atomic_store(&shm->reclaimed_ns, now);
	for (unsigned i = 0; i < shm->nslots; i++) {
		struct ta_shm_slot *s = slot_at(shm, i);
		uint32_t pid = atomic_load(&s->pid);
		if (pid == MARKER) {
			/* Left marked by a reclaimer that died (or by a writer): after a while,
			 * ours to finish. */
			if (shm->marked_since[i] == 0) {
				shm->marked_since[i] = now;
			} else if (now - shm->marked_since[i] >= MARKER_STALE_NS) {
				clean_marked(shm, s);
				shm->marked_since[i] = 0;
				taken++;
			}
			continue;
		}
		shm->marked_since[i] = 0;
		if (pid == 0 || s == shm->mine)
			continue;
		/* Our own pid in another slot: the image before an exec (its heap is gone). */
		bool stale = pid == (uint32_t)getpid() && shm->mine != NULL;
		if (!stale && process_alive(pid, atomic_load(&s->start_time)))
			continue;
		/* Whoever moves the slot from the dead pid to the marker owns the clean-up. */
		if (!atomic_compare_exchange_strong(&s->pid, &pid, MARKER))
			continue;
		clean_marked(shm, s);
		taken++;
	}
	repair_counters(shm);
	atomic_store(&shm->reclaiming, false);
	return taken;
}

void ta_shm_wake_others(void)
{
	if (!atomic_load(&ta_shm.active))
		return;
	for (unsigned i = 0; i < ta_shm.nslots; i++) {
		struct ta_shm_slot *s = slot_at(&ta_shm, i);
		uint32_t pid = atomic_load(&s->pid);
		if (s == ta_shm.mine || pid == 0 || pid == MARKER)
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
		for (unsigned i = 0; i < shm->nslots; i++) {
			struct ta_shm_slot *s = slot_at(shm, i);
			uint32_t expect = 0;
			if (!atomic_compare_exchange_strong(&s->pid, &expect, me))
				continue;
			atomic_store(&s->start_time, start);
			for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++)
				atomic_store(&s->charged[t], 0);
			access_clear(shm, s);
			shm->mine = s;
			shm->mine_pid = me;
			return 0;
		}
		/* Full: dead processes may be holding slots. */
		ta_shm_reclaim_dead(shm);
	}
	return -ENOSPC;
}

static int attach_named(const char *name, const struct ta_cgroup *cg,
			const struct ta_topology *topo, const char **why)
{
	struct ta_shm shm;
	memset(&shm, 0, sizeof(shm));
	atomic_store(&bus_lost, false);
	int rc = open_segment(name, cg, topo, &shm, why);
	if (rc != 0)
		return rc;
	if (claim_slot(&shm) != 0) {
		*why = "every process slot is taken";
		unmap_segment(&shm);
		return -ENOSPC;
	}
	ta_format(shm.name, sizeof(shm.name), "%s", name);
	shm.cg = *cg;
	ta_shm = shm;
	return 0;
}

/* The file at name belongs to another user (a process of another user of the container made
 * it first, or someone squats the name: /dev/shm is writable by all). */
static bool foreign(const char *name)
{
	char path[300];
	ta_format(path, sizeof(path), "/dev/shm%s", name);
	struct stat st;
	return syscall(SYS_newfstatat, AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_uid != geteuid();
}

/* A file of another user at this user's own name can only be a squatter's: removed where this
 * process may (root, or the owner of /dev/shm's tmpfs; /dev/shm's sticky bit stops others). */
static bool remove_squatter(const char *name)
{
	char path[300];
	ta_format(path, sizeof(path), "/dev/shm%s", name);
	struct stat st;
	if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    st.st_uid == geteuid() || syscall(SYS_unlinkat, AT_FDCWD, path, 0) != 0)
		return false;
	ta_log(TA_LOG_WARN, "shared segment %s: made by user %u, not by this one; removed", name,
	       (unsigned)st.st_uid);
	return true;
}

int ta_shm_attach(const char *name, const struct ta_cgroup *cg, const struct ta_topology *topo)
{
	const char *why = NULL;
	char own[sizeof(ta_shm.name)];
	int rc = attach_named(name, cg, topo, &why);
	if (rc != 0 && foreign(name)) {
		/* Then each user of the container shares a segment of its own name. */
		ta_format(own, sizeof(own), "%s-u%u", name, (unsigned)geteuid());
		ta_log(TA_LOG_INFO, "shared segment %s: %s; using %s", name, why, own);
		name = own;
		rc = attach_named(name, cg, topo, &why);
		if (rc != 0 && foreign(name) && remove_squatter(name))
			rc = attach_named(name, cg, topo, &why);
	}
	if (rc != 0) {
		ta_log(TA_LOG_WARN, "shared segment %s: %s; this process keeps its own accounting",
		       name, why);
		return rc;
	}
	ta_shm_reclaim_dead(&ta_shm);
	/* TIERALLOC_PRIORITY is the cgroup's: the last process that declared one sets it. */
	if (ta_shm.lend != NULL && ta_opts.priority[0] != '\0') {
		atomic_store(&ta_shm.lend->priority, ta_priority_value(ta_opts.priority));
		atomic_fetch_or(&ta_shm.lend->flags, TA_SHM_LEND_PRIORITY_SET);
	}
	atomic_store_explicit(&ta_shm.active, true, memory_order_release);
	return 0;
}

bool ta_shm_check(bool now)
{
	static _Atomic uint64_t last;
	if (!atomic_load_explicit(&ta_shm.active, memory_order_acquire))
		return false;
	uint64_t t = ta_monotonic_ns(), l = atomic_load_explicit(&last, memory_order_relaxed);
	if (!now && (t - l < CHECK_NS || !atomic_compare_exchange_strong(&last, &l, t)))
		return true;
	/* Truncated: the kernel cannot resolve the segment's last word (EFAULT, no signal). */
	char *end = (char *)ta_shm.hdr + ((ta_shm.size - sizeof(uint32_t)) & ~(size_t)3);
	if (syscall(SYS_futex, end, FUTEX_WAKE, 0, NULL, NULL, 0) < 0 && errno == EFAULT) {
		lose("the file was truncated under this process");
		return false;
	}
	/* Only the fixed fields, read in place: the header's counters (limits_read_ns, the
	 * observation's claim) are written meanwhile by this process's other threads. */
	if (!same_layout(ta_shm.hdr, &ta_shm.snap)) {
		lose("its header was rewritten");
		return false;
	}
	if (ta_shm.mine != NULL && atomic_load(&ta_shm.mine->pid) != ta_shm.mine_pid) {
		lose("another process took this process's slot");
		return false;
	}
	return true;
}

static _Atomic uint32_t private_word;

_Atomic uint32_t *ta_shm_wake_word(int *futex_flags)
{
	if (atomic_load_explicit(&ta_shm.active, memory_order_acquire) && ta_shm.mine != NULL) {
		*futex_flags = 0; /* shared: keyed by the segment's inode, not our address space */
		return &ta_shm.mine->wake;
	}
	*futex_flags = FUTEX_PRIVATE_FLAG;
	return &private_word;
}

/* fork: the child takes a slot of its own, empty: the heap it shares with its parent
 * (copy-on-write) stays charged in the parent's slot. */
void ta_shm_fork_child(void)
{
	if (!atomic_load(&ta_shm.active))
		return;
	ta_shm.mine = NULL;
	/* The parent's worker may have been walking the slots: that walk did not come along. */
	atomic_store(&ta_shm.reclaiming, false);
	if (claim_slot(&ta_shm) != 0) {
		atomic_store(&ta_shm.active, false);
		ta_log(TA_LOG_WARN,
		       "shared segment %s: no slot for a forked child; it keeps its own "
		       "accounting",
		       ta_shm.name);
		return;
	}
}

void ta_shm_publish_heat(const uint64_t hot[], const uint64_t cold[], unsigned n)
{
	if (!atomic_load(&ta_shm.active) || ta_shm.mine == NULL)
		return;
	struct ta_shm_access_slot *a = access_of(&ta_shm, ta_shm.mine);
	if (a == NULL)
		return;
	for (unsigned t = 0; t < n && t < TA_SHM_MAX_TIERS; t++) {
		atomic_store(&a->hot[t], hot[t]);
		atomic_store(&a->cold[t], cold[t]);
	}
}

void ta_shm_count_exchange(unsigned tier, uint64_t up, uint64_t down)
{
	if (!atomic_load(&ta_shm.active) || ta_shm.access == NULL || tier >= TA_SHM_MAX_TIERS)
		return;
	if (up != 0)
		atomic_fetch_add(&ta_shm.access->promoted[tier], up);
	if (down != 0)
		atomic_fetch_add(&ta_shm.access->exchanged_down[tier], down);
}

int ta_shm_access_field(const struct ta_shm *shm, unsigned tier, const char *field, uint64_t *out)
{
	if (shm->access == NULL || tier >= TA_SHM_MAX_TIERS)
		return -ENOENT;
	struct ta_shm_access *acc = shm->access;
	if (strcmp(field, "promoted") == 0) {
		*out = atomic_load(&acc->promoted[tier]);
		return 0;
	}
	if (strcmp(field, "exchanged_down") == 0) {
		*out = atomic_load(&acc->exchanged_down[tier]);
		return 0;
	}
	bool hot = strcmp(field, "hot") == 0;
	if (!hot && strcmp(field, "cold") != 0)
		return -ENOENT;
	/* Live slots only: a dead process's record goes with its slot. */
	uint64_t sum = 0;
	for (unsigned i = 0; i < shm->nslots && i < TA_SHM_MAX_SLOTS; i++) {
		uint32_t pid = atomic_load(&slot_at(shm, i)->pid);
		if (pid == 0 || pid == MARKER)
			continue;
		sum += atomic_load(hot ? &acc->slot[i].hot[tier] : &acc->slot[i].cold[tier]);
	}
	*out = sum;
	return 0;
}
