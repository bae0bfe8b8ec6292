/* SPDX-License-Identifier: MIT */
/*
 * Writes a quota segment file the way the tests want it broken (tests/quota/test_quota_bad.sh,
 * test_quota_owner.sh): the library must survive each with one warning and local accounting,
 * and leave the file as it was. Independent of src/: the layout comes from the ABI header alone.
 *
 *   shm_forge PATH KIND [NTIERS]   create PATH (it must not exist), mode 0600
 * KIND: valid      a finished segment for NTIERS tiers (default 2), as the library makes it
 *       major2     valid, but ABI major version 2
 *       state0     valid, but its creator never set state = READY (and died: no lock held)
 *       sizes      valid, but seg_size says 4 KiB more than the file
 *       records    valid, but the slots lie past the end of the file
 *       garbage    pseudo-random bytes (a fixed seed), the size of a segment
 *       garbage1   the same with the state word READY, so that the magic is what refuses it
 *       bigtiers   a later minor version whose tier records are 256 bytes (and the slots, the
 *                  agent and the access blocks after them), otherwise valid
 *       wrapped    valid, but tier 0's counter absurd (1.8e19, as a wrapped one was seen)
 *       marker     valid, but slot 7 left held by the reclaim marker (pid 0xffffffff) with
 *                  1 MiB of tier 0, which the tier's counter holds too
 * For tieralloc-stat (tests/quota/test_stat_hostile.sh), segments that validate but whose
 * strings are hostile:
 *       nonul      20 KiB (five pages) without a NUL from the cgroup path to the end of the file
 *       ctrl       a cgroup path and tier names with terminal escapes, newlines, C1 controls and
 *                  bytes that are not UTF-8
 *   shm_forge PATH cgroup2 DIR   a cgroup v2 segment whose cgroup path is DIR
 *   shm_forge PATH claim DIR PRIORITY   a container user's forgery against the agent (issue 31):
 *                  a valid segment that names DIR, as written ("/sys/fs/cgroup/par//vic"), with
 *                  that directory's inode as its cgroup id and TIERALLOC_PRIORITY PRIORITY; this
 *                  process in slot 0 (pid and start time) and mapping the file, as an attached
 *                  process does. It prints "claimed", then raises tier 0's steered_away every
 *                  50 ms (a wish for the fast tier) until SIGTERM, and removes the file
 * Truncated, oversized, other owners and modes are made from "valid" by the script.
 *
 *   shm_forge PATH hold SECONDS    a creator at work: create PATH in state INIT, take its lock
 *                                  (as the library's creator does), print "held", sleep
 *   shm_forge PATH live N SEED     a hostile writer of the user: N times, rewrite a random field
 *                                  of the header (or a tier record) of the existing PATH with a
 *                                  random or edge value, or truncate the file (to 0, 100 bytes,
 *                                  a page or half) and grow it back; pwrite and ftruncate only
 *                                  (a mapping of its own would die of the truncations)
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge.h"
#include "tieralloc/shm_abi.h"

/* Room for the bigtiers layout too: 3 tier records of 256 bytes. */
#define SEG_MAX	   (TA_SHM_SEG_SIZE + TA_SHM_MAX_TIERS * 64)
#define NONUL_SIZE 32768
_Static_assert(NONUL_SIZE >= SEG_MAX, "the NUL-less segment holds every record");

static unsigned char seg[NONUL_SIZE];
static size_t seg_size = TA_SHM_SEG_SIZE;

static void fill_valid(unsigned ntiers)
{
	struct ta_shm_header *h = ta_forge_header(seg, TA_SHM_ABI_MINOR, TA_FORGE_ALL);
	h->creator_pid = 1;
	h->cgroup_version = 0;
	atomic_store(&h->ntiers, ntiers);
	struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
	for (unsigned i = 0; i < ntiers; i++) {
		/* A forged limit of 1 byte: were the segment used, nothing would fit in it. */
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			atomic_store(&t[i].limit[k], 1);
		atomic_store(&t[i].capacity, 1ull << 30);
		atomic_store(&t[i].share_ppm, 1000000 / ntiers);
		snprintf(t[i].name, sizeof(t[i].name), "forged%u", i);
	}
	atomic_store(&h->state, TA_SHM_READY);
}

static void fill_garbage(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < seg_size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		seg[i] = (unsigned char)x;
	}
}

/* Tier records of 256 bytes: each record is the 192-byte one followed by 64 bytes of later
 * fields (zero here); the slots, the agent and the access blocks move down by 3 x 64 bytes. */
static void make_bigtiers(void)
{
	struct ta_shm_header *h = (struct ta_shm_header *)seg;
	unsigned char tiers[TA_SHM_MAX_TIERS * 192];
	memcpy(tiers, seg + TA_SHM_TIERS_OFF, sizeof(tiers));
	memset(seg + TA_SHM_TIERS_OFF, 0, SEG_MAX - TA_SHM_TIERS_OFF);
	for (unsigned t = 0; t < TA_SHM_MAX_TIERS; t++)
		memcpy(seg + TA_SHM_TIERS_OFF + t * 256, tiers + t * 192, 192);
	h->abi_minor = TA_SHM_ABI_MINOR + 1;
	h->tier_size = 256;
	h->slots_off = TA_SHM_TIERS_OFF + TA_SHM_MAX_TIERS * 256;
	h->agent_off = h->slots_off + TA_SHM_MAX_SLOTS * 64;
	h->access_off = h->agent_off + 256;
	h->lend_off = h->access_off + (uint32_t)sizeof(struct ta_shm_access);
	seg_size = SEG_MAX;
	h->seg_size = seg_size;
}

static uint64_t rnd_state;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static int hold(const char *path, unsigned seconds)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		perror(path);
		return 1;
	}
	fill_valid(2);
	atomic_store(&((struct ta_shm_header *)seg)->state, TA_SHM_INIT);
	if (write(fd, seg, TA_SHM_SEG_SIZE) != (ssize_t)TA_SHM_SEG_SIZE) {
		perror("write");
		return 1;
	}
	printf("held\n");
	fflush(stdout);
	sleep(seconds);
	return 0;
}

/* Byte offsets and widths of the header's fields, and of a few of tier 0's. */
static const struct {
	unsigned off, width;
} fields[] = {
	{ offsetof(struct ta_shm_header, magic), 8 },
	{ offsetof(struct ta_shm_header, abi_major), 2 },
	{ offsetof(struct ta_shm_header, abi_minor), 2 },
	{ offsetof(struct ta_shm_header, header_size), 4 },
	{ offsetof(struct ta_shm_header, seg_size), 8 },
	{ offsetof(struct ta_shm_header, max_slots), 4 },
	{ offsetof(struct ta_shm_header, max_tiers), 4 },
	{ offsetof(struct ta_shm_header, slot_size), 4 },
	{ offsetof(struct ta_shm_header, slots_off), 4 },
	{ offsetof(struct ta_shm_header, tier_size), 4 },
	{ offsetof(struct ta_shm_header, tiers_off), 4 },
	{ offsetof(struct ta_shm_header, state), 4 },
	{ offsetof(struct ta_shm_header, ntiers), 4 },
	{ offsetof(struct ta_shm_header, agent_off), 4 },
	{ offsetof(struct ta_shm_header, agent_size), 4 },
	{ offsetof(struct ta_shm_header, limits_read_ns), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, charged), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, limit), 8 },
	{ TA_SHM_TIERS_OFF + offsetof(struct ta_shm_tier, untracked), 8 },
};

static int live(const char *path, unsigned n, uint64_t seed)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	rnd_state = seed * 0x9e3779b97f4a7c15ull + 1;
	static const uint64_t edges[] = {
		0, 1, 7, 64, 4096, 0xffff, 0xffffffffull, 1ull << 20, UINT64_MAX, TA_SHM_SEG_SIZE
	};
	static const off_t cuts[] = { 0, 100, 4096, TA_SHM_SEG_SIZE / 2 };
	for (unsigned i = 0; i < n; i++) {
		uint64_t r = rnd();
		if (r % 8 == 0) {
			if (ftruncate(fd, cuts[(r >> 8) % 4]) != 0) {
				perror("ftruncate");
				return 1;
			}
			struct timespec ts = { 0, 2000000 };
			nanosleep(&ts, NULL);
			if (ftruncate(fd, TA_SHM_SEG_SIZE) != 0)
				return 1;
		} else {
			unsigned f = (unsigned)((r >> 8) % (sizeof(fields) / sizeof(fields[0])));
			uint64_t v = (r >> 16) % 2 ? edges[(r >> 20) % 10] : rnd();
			if (pwrite(fd, &v, fields[f].width, fields[f].off) !=
			    (ssize_t)fields[f].width)
				return 1;
		}
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* Field 22 of /proc/self/stat: this process's start time, as the library records it. */
static uint64_t own_start_time(void)
{
	char text[1024];
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f != NULL)
		fclose(f);
	text[n] = '\0';
	const char *p = strrchr(text, ')');
	unsigned field = 2;
	for (; p != NULL && *p != '\0' && field < 22; p++)
		if (*p == ' ')
			field++;
	return p != NULL && field == 22 ? strtoull(p, NULL, 10) : 0;
}

static int claim(const char *path, const char *dir, const char *priority)
{
	struct stat st;
	if (stat(dir, &st) != 0 || strlen(dir) >= TA_SHM_PATH_MAX) {
		perror(dir);
		return 1;
	}
	fill_valid(2);
	struct ta_shm_header *h = (struct ta_shm_header *)seg;
	h->cgroup_version = 2;
	h->cgroup_id = (uint64_t)st.st_ino;
	strcpy(h->cgroup_path, dir);
	struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
	for (unsigned i = 0; i < 2; i++) {
		atomic_store(&t[i].nodes, 1ull << i);
		for (unsigned k = 0; k < TA_NLIMITS; k++)
			atomic_store(&t[i].limit[k], 64ull << 20);
	}
	struct ta_shm_lend *lend = (struct ta_shm_lend *)(seg + TA_SHM_LEND_OFF);
	atomic_store(&lend->priority, (uint32_t)strtoul(priority, NULL, 10));
	atomic_store(&lend->flags, TA_SHM_LEND_PRIORITY_SET);
	struct ta_shm_slot *slot = (struct ta_shm_slot *)(seg + TA_SHM_SLOTS_OFF);
	atomic_store(&slot->pid, (uint32_t)getpid());
	atomic_store(&slot->start_time, own_start_time());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, seg, TA_SHM_SEG_SIZE) != (ssize_t)TA_SHM_SEG_SIZE) {
		perror(path);
		return 1;
	}
	unsigned char *map = mmap(NULL, TA_SHM_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("claimed\n");
	fflush(stdout);
	struct ta_shm_tier *live = (struct ta_shm_tier *)(map + TA_SHM_TIERS_OFF);
	while (!stop) {
		atomic_fetch_add(&live[0].steered_away, 1);
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
	}
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[2], "claim") == 0)
		return claim(argv[1], argv[3], argv[4]);
	if (argc == 4 && strcmp(argv[2], "hold") == 0)
		return hold(argv[1], (unsigned)atoi(argv[3]));
	if (argc == 5 && strcmp(argv[2], "live") == 0)
		return live(argv[1], (unsigned)atoi(argv[3]), strtoull(argv[4], NULL, 10));
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: shm_forge PATH KIND [NTIERS]\n"
				"       shm_forge PATH cgroup2 DIR\n"
				"       shm_forge PATH claim DIR PRIORITY\n");
		return 2;
	}
	const char *kind = argv[2];
	bool cgroup2 = strcmp(kind, "cgroup2") == 0;
	unsigned ntiers = argc == 4 && !cgroup2 ? (unsigned)atoi(argv[3]) : 2;
	struct ta_shm_header *h = (struct ta_shm_header *)seg;
	if (strcmp(kind, "garbage") == 0 || strcmp(kind, "garbage1") == 0) {
		fill_garbage();
		/* garbage: make sure the state word is not READY by chance. */
		atomic_store(&h->state, strcmp(kind, "garbage1") == 0 ? TA_SHM_READY : 0xa5a5a5a5u);
	} else {
		fill_valid(ntiers);
		if (strcmp(kind, "major2") == 0)
			h->abi_major = 2;
		else if (strcmp(kind, "state0") == 0)
			atomic_store(&h->state, TA_SHM_INIT);
		else if (strcmp(kind, "sizes") == 0)
			h->seg_size = TA_SHM_SEG_SIZE + 4096;
		else if (strcmp(kind, "records") == 0)
			h->slots_off = TA_SHM_SEG_SIZE - 64;
		else if (strcmp(kind, "bigtiers") == 0)
			make_bigtiers();
		else if (strcmp(kind, "wrapped") == 0)
			atomic_store(&((struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF))->charged,
				     18000000000000000000ull);
		else if (strcmp(kind, "marker") == 0) {
			struct ta_shm_slot *s7 =
			    (struct ta_shm_slot *)(seg + TA_SHM_SLOTS_OFF + 7 * sizeof(*s7));
			atomic_store(&s7->pid, UINT32_MAX);
			atomic_store(&s7->charged[0], 1u << 20);
			atomic_store(&((struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF))->charged,
				     1u << 20);
		} else if (strcmp(kind, "nonul") == 0) {
			/* Every byte from the path on is 'A' (no agent block then). */
			seg_size = NONUL_SIZE;
			h->seg_size = NONUL_SIZE;
			size_t from = offsetof(struct ta_shm_header, cgroup_path);
			memset(seg + from, 'A', NONUL_SIZE - from);
		} else if (strcmp(kind, "ctrl") == 0) {
			static const char path[] = "/sys/fs/cgroup/\033[2J\033]0;owned\007\nfake "
						   "line\r\xc2\x9b"
						   "31m\xff\xfe\x7f\\end";
			memcpy(h->cgroup_path, path, sizeof(path));
			h->cgroup_version = 1;
			struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
			memcpy(t[0].name, "\033[31mred\n", 10);
			memset(t[1].name, '\033', sizeof(t[1].name)); /* and no NUL */
		} else if (cgroup2) {
			if (argc != 4 || strlen(argv[3]) >= sizeof(h->cgroup_path)) {
				fprintf(stderr, "shm_forge: cgroup2 takes a directory\n");
				return 2;
			}
			h->cgroup_version = 2;
			h->cgroup_id = 4242;
			strcpy(h->cgroup_path, argv[3]);
			struct ta_shm_tier *t = (struct ta_shm_tier *)(seg + TA_SHM_TIERS_OFF);
			atomic_store(&t[0].nodes, 1);
		} else if (strcmp(kind, "valid") != 0) {
			fprintf(stderr, "shm_forge: unknown kind %s\n", kind);
			return 2;
		}
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	if (write(fd, seg, seg_size) != (ssize_t)seg_size || close(fd) != 0) {
		perror("write");
		return 1;
	}
	return 0;
}
