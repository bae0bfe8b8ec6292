/* SPDX-License-Identifier: MIT */
/*
 * Heap integrity: the per-process secrets that the checks in alloc/alloc.h key with (a freed
 * object's mark, the packed headers' tag, the free-list links), and what happens when a check
 * fails. A misuse (a double free, a pointer that starts no object, a header or a free-list link
 * overwritten) has already corrupted the program's memory or is about to; as glibc does, the
 * default is one line on stderr and abort(). TIERALLOC_ON_MISUSE=warn says it instead (the first
 * 16 times) and leaks what was involved: nothing is handed out twice either way.
 *
 * The secrets come from getrandom(2), never from malloc, and are set once before the first
 * object exists; a forked child keeps them (its heap is its parent's).
 */
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc.h"

struct ta_secrets ta_secret;

/* splitmix64's step: spreads a weak seed over every bit. */
static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void ta_check_init(void)
{
	uint64_t s[3];
	long n = syscall(SYS_getrandom, s, sizeof(s), GRND_NONBLOCK);
	if (n != (long)sizeof(s)) {
		/* No entropy yet (early boot) or no getrandom: the kernel's 16 random bytes for
		 * this exec, stirred with the clock and an address (ASLR). */
		uint64_t x =
		    ta_monotonic_ns() ^ (uint64_t)(uintptr_t)&s ^ ((uint64_t)getpid() << 40);
		const uint64_t *r = (const uint64_t *)getauxval(AT_RANDOM);
		if (r != NULL)
			x ^= r[0] * 0xff51afd7ed558ccdull ^ r[1];
		for (unsigned i = 0; i < 3; i++)
			s[i] = mix(&x);
	}
	ta_secret.mark = s[0] | 1u; /* never 0: the mark would be the bare address */
	ta_secret.tag = s[1];
	ta_secret.link = s[2] | 1u;
}

static const char *const misuse_text[] = {
	[TA_MISUSE_DOUBLE_FREE] = "double free",
	[TA_MISUSE_FREED] = "object already freed",
	[TA_MISUSE_INVALID] = "not the start of an object",
	[TA_MISUSE_HEADER] = "object header overwritten, or not the start of an object",
};

void ta_misuse(enum ta_misuse what, const char *fn, const void *p)
{
	bool warn = ta_opts.on_misuse == TA_ON_MISUSE_WARN;
	static _Atomic unsigned said;
	if (warn && atomic_fetch_add(&said, 1) >= 16)
		return;
	int level = warn ? TA_LOG_WARN : TA_LOG_ERROR;
	if (what == TA_MISUSE_LINK)
		ta_log(level, "%s(): free-list link of freed object %p overwritten; %s", fn, p,
		       warn ? "it and the rest of its list leaked (TIERALLOC_ON_MISUSE=warn)"
			    : "aborting");
	else
		ta_log(level, "%s(%p): %s; %s", fn, p, misuse_text[what],
		       warn ? "ignored (TIERALLOC_ON_MISUSE=warn)" : "aborting");
	if (!warn)
		abort();
}

void ta_misuse_pointer(const char *fn, const void *p)
{
	bool packed = ta_chunk_class_of(p) == TA_PAGE_PACKED && ((uintptr_t)p & 15u) == 0;
	ta_misuse(packed ? TA_MISUSE_HEADER : TA_MISUSE_INVALID, fn, p);
}
