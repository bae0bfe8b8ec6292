# Integration tests: unmodified programs run under the LD_PRELOAD library.
#   test_<program>.sh  run a real program (python3, git, gcc, sqlite3, perl, bash, tar, sort, a
#                      C++ workload; node and java in test_runtimes.sh) with and without the
#                      preload and compare (lib.sh);
#                      test_env.sh checks the TIERALLOC_* variables as a user meets them.
#   prog_*.c           robustness programs started under the preload by tests/run-preload.sh
#                      (fork, thread churn, exit paths, signals, the malloc family mixed); they
#                      verify themselves. prog_blocks and prog_cxx are helpers of the scripts.
#
# tests/run-preload.sh is the LOG_COMPILER of the whole tree: it runs tests/integration/ tests
# under the preload and every other test as is. AM_TESTS_ENVIRONMENT is defined here and only
# here; other folders append with +=. Its variables are not named TIERALLOC_*: the preload warns
# about TIERALLOC_* names it does not know, which would change what the tests see.
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/run-preload.sh
AM_TESTS_ENVIRONMENT = \
	export TA_TEST_PRELOAD='$(abs_top_builddir)/preload/.libs/libtieralloc-preload.so'; \
	export TA_TEST_BUILDDIR='$(abs_top_builddir)'; \
	export TA_TEST_SRCDIR='$(abs_top_srcdir)';

EXTRA_DIST += tests/run-preload.sh tests/integration/lib.sh \
	tests/integration/test_bash.sh tests/integration/test_cxx.sh \
	tests/integration/test_env.sh tests/integration/test_gcc.sh \
	tests/integration/test_git.sh tests/integration/test_perl.sh \
	tests/integration/test_python.sh tests/integration/test_sort.sh \
	tests/integration/test_sqlite.sh tests/integration/test_tar.sh \
	tests/integration/test_twotier.sh tests/integration/test_stat.sh \
	tests/integration/test_misuse.sh tests/integration/prog_maps_place.env \
	tests/integration/test_runtimes.sh

# A sanitizer runtime wants malloc for itself: no LD_PRELOAD tests in a sanitized build.
if !SANITIZED
# Per-target flags replace AM_CFLAGS/AM_LDFLAGS: the programs are plain, never sanitized.
ta_it_cflags = $(WARN_CFLAGS) -pthread
ta_it_ldflags = -pthread

ta_it_progs = tests/integration/prog_fork tests/integration/prog_threads \
	tests/integration/prog_atexit tests/integration/prog_signal \
	tests/integration/prog_mix tests/integration/prog_stdio_exit tests/integration/prog_maps \
	tests/integration/prog_maps_place tests/integration/prog_handoff
check_PROGRAMS += $(ta_it_progs) tests/integration/prog_blocks tests/integration/prog_cxx \
	tests/integration/prog_misuse

tests_integration_prog_maps_SOURCES = tests/integration/prog_maps.c tests/integration/prog.h
tests_integration_prog_maps_CFLAGS = $(ta_it_cflags)
tests_integration_prog_maps_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_maps_LDADD = $(DL_LIBS)
tests_integration_prog_maps_place_SOURCES = tests/integration/prog_maps_place.c tests/integration/prog.h
tests_integration_prog_maps_place_CFLAGS = $(ta_it_cflags)
tests_integration_prog_maps_place_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_maps_place_LDADD = $(DL_LIBS)

# One thread allocates, another frees, for good: the footprint stays bounded.
tests_integration_prog_handoff_SOURCES = tests/integration/prog_handoff.c tests/integration/prog.h
tests_integration_prog_handoff_CFLAGS = $(ta_it_cflags)
tests_integration_prog_handoff_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_handoff_LDADD = $(DL_LIBS)

tests_integration_prog_fork_SOURCES = tests/integration/prog_fork.c tests/integration/prog.h
tests_integration_prog_fork_CFLAGS = $(ta_it_cflags)
tests_integration_prog_fork_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_fork_LDADD = $(DL_LIBS)

tests_integration_prog_threads_SOURCES = tests/integration/prog_threads.c tests/integration/prog.h
tests_integration_prog_threads_CFLAGS = $(ta_it_cflags)
tests_integration_prog_threads_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_threads_LDADD = $(DL_LIBS)

tests_integration_prog_atexit_SOURCES = tests/integration/prog_atexit.c tests/integration/prog.h
tests_integration_prog_atexit_CFLAGS = $(ta_it_cflags)
tests_integration_prog_atexit_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_atexit_LDADD = $(DL_LIBS)

tests_integration_prog_signal_SOURCES = tests/integration/prog_signal.c tests/integration/prog.h
tests_integration_prog_signal_CFLAGS = $(ta_it_cflags)
tests_integration_prog_signal_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_signal_LDADD = $(DL_LIBS)

tests_integration_prog_mix_SOURCES = tests/integration/prog_mix.c tests/integration/prog.h
tests_integration_prog_mix_CFLAGS = $(ta_it_cflags)
tests_integration_prog_mix_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_mix_LDADD = $(DL_LIBS)

tests_integration_prog_stdio_exit_SOURCES = tests/integration/prog_stdio_exit.c \
	tests/integration/prog.h
tests_integration_prog_stdio_exit_CFLAGS = $(ta_it_cflags)
tests_integration_prog_stdio_exit_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_stdio_exit_LDADD = $(DL_LIBS)

tests_integration_prog_blocks_SOURCES = tests/integration/prog_blocks.c tests/lib/size_arg.h
tests_integration_prog_blocks_CFLAGS = $(ta_it_cflags)
tests_integration_prog_blocks_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_blocks_LDADD = $(DL_LIBS)

# Not a test by itself: each case aborts by design (test_misuse.sh runs them).
tests_integration_prog_misuse_SOURCES = tests/integration/prog_misuse.c tests/integration/prog.h
tests_integration_prog_misuse_CFLAGS = $(ta_it_cflags)
tests_integration_prog_misuse_LDFLAGS = $(ta_it_ldflags)
tests_integration_prog_misuse_LDADD = $(DL_LIBS)

tests_integration_prog_cxx_SOURCES = tests/integration/prog_cxx.cc
tests_integration_prog_cxx_CXXFLAGS = -std=gnu++17 -Wall -Wextra -pthread
tests_integration_prog_cxx_LDFLAGS = $(ta_it_ldflags)

TESTS += $(ta_it_progs) \
	tests/integration/test_env.sh \
	tests/integration/test_misuse.sh \
	tests/integration/test_twotier.sh \
	tests/integration/test_stat.sh \
	tests/integration/test_cxx.sh \
	tests/integration/test_python.sh \
	tests/integration/test_runtimes.sh \
	tests/integration/test_git.sh \
	tests/integration/test_gcc.sh \
	tests/integration/test_sqlite.sh \
	tests/integration/test_perl.sh \
	tests/integration/test_bash.sh \
	tests/integration/test_tar.sh \
	tests/integration/test_sort.sh
endif
