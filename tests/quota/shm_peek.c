/* SPDX-License-Identifier: MIT */
/*
 * A test-only reader of one shared quota segment (include/tieralloc/shm_abi.h), for the scripts
 * of tests/quota and tests/guest/quota.sh: it prints the numbers they check, one line per item,
 * in a key=value form that grep and sed take apart. It is deliberately independent of src/ (its
 * own small validation, no allocator): a bug in the library's reader must not hide in the tests.
 * Read-only: the file is opened O_RDONLY and mapped PROT_READ, so peeking changes nothing.
 *
 *   shm_peek NAME      NAME as in /dev/shm ("tieralloc-test-1", "/tieralloc-test-1") or a path
 *
 * Output (unlimited limits print as "max"):
 *   segment=/NAME size=BYTES abi=MAJOR.MINOR ntiers=N generation=G cgroup_version=V
 *           cgroup_id=ID cgroup_path=PATH
 *   slots=N                                                  slots with a pid
 *   slot pid=P start=T charged=C0,C1,C2                      one per used slot
 *   tier=T name=S charged=C slotsum=S peak=P min=.. low=.. high=.. max=.. capacity=..
 *          share_ppm=.. steered_away=.. overflowed=.. exhausted=.. reclaimed=.. observed=..
 *          and, from ABI minor 1: untracked=.. demoted=.. reclaim_asked=.. reclaims=.. gated=..
 * Exit status: 0; 1 no such segment or unreadable; 2 not a valid segment (why on stderr).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tieralloc/shm_abi.h"

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void limit(const char *key, uint64_t v)
{
	if (v == TA_SHM_UNLIMITED)
		printf(" %s=max", key);
	else
		printf(" %s=%" PRIu64, key, v);
}

static int invalid(const char *path, const char *why)
{
	fprintf(stderr, "shm_peek: %s: %s\n", path, why);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: shm_peek NAME\n");
		return 2;
	}
	char path[512];
	const char *name = argv[1];
	if (strncmp(name, "/dev/shm/", 9) == 0)
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "/dev/shm/%s", name[0] == '/' ? name + 1 : name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return invalid(path, "not a regular file");
	}
	size_t size = (size_t)st.st_size;
	if (size < sizeof(struct ta_shm_header)) {
		close(fd);
		return invalid(path, "truncated");
	}
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct ta_shm_header *h = m;
	if (h->magic != TA_SHM_MAGIC)
		return invalid(path, "bad magic");
	if (h->abi_major != TA_SHM_ABI_MAJOR)
		return invalid(path, "other ABI major version");
	if (LOAD(h->state) != TA_SHM_READY)
		return invalid(path, "not ready");
	uint32_t ntiers = LOAD(h->ntiers);
	if (h->seg_size != size || h->tier_size < sizeof(struct ta_shm_tier) ||
	    h->slot_size < sizeof(struct ta_shm_slot) || ntiers > TA_SHM_MAX_TIERS ||
	    ntiers > h->max_tiers ||
	    (uint64_t)h->tiers_off + (uint64_t)h->tier_size * h->max_tiers > size ||
	    (uint64_t)h->slots_off + (uint64_t)h->slot_size * h->max_slots > size)
		return invalid(path, "sizes do not match");

	char cgpath[TA_SHM_PATH_MAX + 1];
	memcpy(cgpath, h->cgroup_path, TA_SHM_PATH_MAX);
	cgpath[TA_SHM_PATH_MAX] = '\0';
	printf("segment=%s size=%zu abi=%u.%u ntiers=%u generation=%" PRIu64
	       " cgroup_version=%u cgroup_id=%" PRIu64 " cgroup_path=%s\n",
	       path + 8, size, h->abi_major, h->abi_minor, ntiers, LOAD(h->generation),
	       h->cgroup_version, h->cgroup_id, cgpath[0] != '\0' ? cgpath : "-");

	uint64_t slotsum[TA_SHM_MAX_TIERS] = { 0 };
	unsigned used = 0;
	unsigned nslots = h->max_slots < TA_SHM_MAX_SLOTS ? h->max_slots : TA_SHM_MAX_SLOTS;
	for (unsigned i = 0; i < nslots; i++) {
		struct ta_shm_slot *s =
		    (struct ta_shm_slot *)((char *)m + h->slots_off + (size_t)i * h->slot_size);
		if (LOAD(s->pid) != 0)
			used++;
	}
	printf("slots=%u\n", used);
	for (unsigned i = 0; i < nslots; i++) {
		struct ta_shm_slot *s =
		    (struct ta_shm_slot *)((char *)m + h->slots_off + (size_t)i * h->slot_size);
		uint32_t pid = LOAD(s->pid);
		if (pid == 0)
			continue;
		uint64_t c[TA_SHM_MAX_TIERS];
		for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++) {
			c[t] = LOAD(s->charged[t]);
			slotsum[t] += c[t];
		}
		printf("slot pid=%" PRIu32 " start=%" PRIu64 " charged=%" PRIu64 ",%" PRIu64
		       ",%" PRIu64 "\n",
		       pid, LOAD(s->start_time), c[0], c[1], c[2]);
	}
	for (unsigned t = 0; t < ntiers; t++) {
		struct ta_shm_tier *r =
		    (struct ta_shm_tier *)((char *)m + h->tiers_off + (size_t)t * h->tier_size);
		char tname[sizeof(r->name) + 1];
		memcpy(tname, r->name, sizeof(r->name));
		tname[sizeof(r->name)] = '\0';
		printf("tier=%u name=%s charged=%" PRIu64 " slotsum=%" PRIu64 " peak=%" PRIu64, t,
		       tname[0] != '\0' ? tname : "-", LOAD(r->charged), slotsum[t], LOAD(r->peak));
		limit("min", LOAD(r->limit[TA_LIMIT_MIN]));
		limit("low", LOAD(r->limit[TA_LIMIT_LOW]));
		limit("high", LOAD(r->limit[TA_LIMIT_HIGH]));
		limit("max", LOAD(r->limit[TA_LIMIT_MAX]));
		printf(" capacity=%" PRIu64 " share_ppm=%" PRIu32 " steered_away=%" PRIu64
		       " overflowed=%" PRIu64 " exhausted=%" PRIu64 " reclaimed=%" PRIu64
		       " observed=%" PRIu64,
		       LOAD(r->capacity), LOAD(r->share_ppm), LOAD(r->steered_away),
		       LOAD(r->overflowed), LOAD(r->exhausted), LOAD(r->reclaimed),
		       LOAD(r->observed));
		/* ABI minor 1: what enforcement did. */
		if (h->abi_minor >= 1)
			printf(" untracked=%" PRIu64 " demoted=%" PRIu64 " reclaim_asked=%" PRIu64
			       " reclaims=%" PRIu64 " gated=%" PRIu64,
			       LOAD(r->untracked), LOAD(r->demoted), LOAD(r->reclaim_asked),
			       LOAD(r->reclaims), LOAD(r->gated));
		printf("\n");
	}
	/* ABI minor 2: what the agent wrote. */
	if (h->abi_minor >= 2 && h->agent_off != 0 && h->agent_off % 8 == 0 &&
	    h->agent_size >= sizeof(struct ta_shm_agent) &&
	    (uint64_t)h->agent_off + h->agent_size <= size) {
		struct ta_shm_agent *a = (struct ta_shm_agent *)((char *)m + h->agent_off);
		printf("agent written_ns=%" PRIu64 " seq=%" PRIu64 " alarm=%" PRIu64
		       " alarm_taken=%" PRIu64 " pid=%" PRIu32 " flags=%" PRIu32
		       " interval_ms=%" PRIu32 "\n",
		       LOAD(a->written_ns), LOAD(a->seq), LOAD(a->alarm), LOAD(a->alarm_taken),
		       LOAD(a->pid), LOAD(a->flags), LOAD(a->interval_ms));
		for (unsigned t = 0; t < ntiers; t++)
			printf("agent_tier=%u promoted=%" PRIu64 " demoted=%" PRIu64
			       " moved=%" PRIu64 " promoted_rate=%" PRIu64 "\n",
			       t, LOAD(a->tier[t].promoted), LOAD(a->tier[t].demoted),
			       LOAD(a->tier[t].moved), LOAD(a->tier[t].promoted_rate));
	}
	/* ABI minor 5: the lending block (loans live: CLOCK_MONOTONIC before expires_ns). */
	if (h->abi_minor >= 5 && h->header_size >= offsetof(struct ta_shm_header, lend_size) + 4 &&
	    h->lend_off != 0 && h->lend_off % 64 == 0 &&
	    h->lend_size >= sizeof(struct ta_shm_lend) &&
	    (uint64_t)h->lend_off + h->lend_size <= size) {
		struct ta_shm_lend *w = (struct ta_shm_lend *)((char *)m + h->lend_off);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		uint64_t expires = LOAD(w->expires_ns);
		printf("lend priority=%" PRIu32 " flags=%" PRIu32 " live=%d seq=%" PRIu64
		       " agent_pid=%" PRIu32 "\n",
		       LOAD(w->priority), LOAD(w->flags), now < expires, LOAD(w->seq),
		       LOAD(w->agent_pid));
		for (unsigned t = 0; t < ntiers; t++)
			printf("lend_tier=%u loan=%" PRIu64 " lent=%" PRIu64 " borrowed=%" PRIu64
			       " taken_back=%" PRIu64 " take_backs=%" PRIu64
			       " take_back_ns=%" PRIu64 " yielded=%" PRIu64 "\n",
			       t, LOAD(w->tier[t].loan), LOAD(w->tier[t].lent),
			       LOAD(w->tier[t].borrowed), LOAD(w->tier[t].taken_back),
			       LOAD(w->tier[t].take_backs), LOAD(w->tier[t].take_back_ns),
			       LOAD(w->tier[t].yielded));
	}
	munmap(m, size);
	return 0;
}
