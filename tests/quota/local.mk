# Quota tests (issue 4): several preloaded processes share one cgroup's segment, named by
# TIERALLOC_SHM_NAME so that the host's real cgroup plays no part; the scripts read the segment
# with shm_peek (a reader of their own), forge broken ones with shm_forge, and drive quota_hog, a
# command-driven workload.
#   test_quota_share.sh    4 processes x 2 threads share a tier-0 max of 8M (the batching bound)
#   test_quota_reclaim.sh  SIGKILL a process: the next attach or a refresh takes its charges back
#   test_quota_fork.sh     fork and fork+exec children join the segment with slots of their own
#   test_quota_bad.sh      bad segments (truncated, oversized, other ABI, garbage, 0644,
#                          unfinished, symlink, other tiers): one warning, local accounting
#   test_quota_owner.sh    a segment owned by another user: each user gets a segment of its own
#                          name, a squatter's file at that name is removed (root only, else 77)
#   test_quota_fork_stress.sh  fork from threads under tight quotas, inline and deferred
#   test_quota_hostile.sh  unfinished segments made again; wrapped counters and a stale reclaim
#                          marker repaired; header rewrites and truncation under a live process
#   test_quota_full.sh     every tier at its max: TIERALLOC_ON_FULL=enomem, lowest (default)
#   test_quota_limits.sh   a max alone, high below max; bad TIER_LIMITS/SPLIT/ON_FULL values
#   test_quota_enforce.sh  enforcement: deferred, inline and off; fork; no memory.reclaim on v1
#   test_stat_hostile.sh   tieralloc-stat against forged segments: strings without a NUL or
#                          with control characters, FIFOs, cgroup paths that lead elsewhere
#                          (it runs no program under the preload: sanitized builds run it too)
# The programs are plain (never sanitized) and built in every configuration: the guest suite
# (tests/guest/quota.sh) uses them too. The others are not run in a sanitized build: they run
# programs under the preload (see tests/integration/local.mk).
EXTRA_DIST += tests/quota/lib.sh tests/quota/test_quota_share.sh \
	tests/quota/test_quota_reclaim.sh tests/quota/test_quota_fork.sh \
	tests/quota/test_quota_bad.sh tests/quota/test_quota_owner.sh \
	tests/quota/test_quota_full.sh tests/quota/test_quota_limits.sh \
	tests/quota/test_quota_enforce.sh tests/quota/test_quota_hostile.sh \
	tests/quota/test_stat_hostile.sh tests/quota/test_quota_fork_stress.sh

check_PROGRAMS += tests/quota/shm_peek tests/quota/shm_forge tests/quota/quota_hog

tests_quota_shm_peek_SOURCES = tests/quota/shm_peek.c include/tieralloc/shm_abi.h
tests_quota_shm_peek_CPPFLAGS = -I$(top_srcdir)/include
tests_quota_shm_peek_CFLAGS = $(WARN_CFLAGS)

tests_quota_shm_forge_SOURCES = tests/quota/shm_forge.c include/tieralloc/shm_abi.h \
	tests/lib/forge.h
tests_quota_shm_forge_CPPFLAGS = -I$(top_srcdir)/include -I$(top_srcdir)/tests/lib
tests_quota_shm_forge_CFLAGS = $(WARN_CFLAGS)

tests_quota_quota_hog_SOURCES = tests/quota/quota_hog.c tests/lib/size_arg.h
tests_quota_quota_hog_CFLAGS = $(WARN_CFLAGS) -pthread
tests_quota_quota_hog_LDFLAGS = -pthread
tests_quota_quota_hog_LDADD = $(DL_LIBS)

if !SANITIZED
TESTS += tests/quota/test_quota_share.sh tests/quota/test_quota_reclaim.sh \
	tests/quota/test_quota_fork.sh tests/quota/test_quota_bad.sh \
	tests/quota/test_quota_owner.sh tests/quota/test_quota_full.sh \
	tests/quota/test_quota_limits.sh \
	tests/quota/test_quota_enforce.sh tests/quota/test_quota_hostile.sh \
	tests/quota/test_quota_fork_stress.sh
endif
TESTS += tests/quota/test_stat_hostile.sh
