# The installed programs as a user meets them: --version on each (test_version.sh). The list
# comes from the install variables, so a program added to them is checked too.
EXTRA_DIST += tests/tools/test_version.sh
TESTS += tests/tools/test_version.sh
AM_TESTS_ENVIRONMENT += \
	export TA_TEST_PROGRAMS='$(bin_PROGRAMS) $(bin_SCRIPTS) $(sbin_PROGRAMS)'; \
	export TA_TEST_VERSION='$(PACKAGE_VERSION)';
# make install into a temporary DESTDIR (test_install.sh): the man pages, the docs, and what the
# systemd unit's Documentation= names.
EXTRA_DIST += tests/tools/test_install.sh
TESTS += tests/tools/test_install.sh
AM_TESTS_ENVIRONMENT += \
	export TA_TEST_MAKE='$(MAKE)' TA_TEST_MANDIR='$(mandir)' TA_TEST_DOCDIR='$(docdir)'; \
	export TA_TEST_MANS='$(dist_man_MANS) $(man_MANS)' TA_TEST_UNITDIR='$(systemdunitdir)'; \
	export TA_TEST_LIBDIR='$(libdir)' TA_TEST_CC='$(CC)' TA_TEST_SAN_CFLAGS='$(SAN_CFLAGS)';
# The agent's systemd unit lets it write every directory its --help lists (a static check of the
# unit's sandboxing: issue 31), parses cleanly, and is hardened: systemd-analyze security rates
# it at most 5.0 (test_unit_security.sh; TA_TEST_UNITDIR, set above, is empty without the agent).
EXTRA_DIST += tests/tools/test_unit_security.sh
TESTS += tests/tools/test_unit_security.sh
# The agent run under that unit (test_unit_run.sh): systemd booted in a systemd-nspawn container
# of the host's root, the built agent started, checked (running, its lock and status file, its
# read-only mounts, nothing refused in the journal) and stopped. Root and systemd-nspawn:
# skipped without them, failed under CI=true. Not in a sanitized build (not the shipped agent).
EXTRA_DIST += tests/tools/test_unit_run.sh
if !SANITIZED
TESTS += tests/tools/test_unit_run.sh
endif
# tieralloc-run (test_run.sh): exit statuses, death by a signal, usage errors, the summary. Not in
# a sanitized build: its preload cannot be loaded into the uninstrumented programs it runs.
EXTRA_DIST += tests/tools/test_run.sh
if !SANITIZED
TESTS += tests/tools/test_run.sh
endif
# tieralloc-stat --prometheus on a live segment, checked by promtool (test_stat_prometheus.sh);
# the segment's holder runs under the preload, so not in a sanitized build either.
EXTRA_DIST += tests/tools/test_stat_prometheus.sh
if !SANITIZED
TESTS += tests/tools/test_stat_prometheus.sh
endif
# tieralloc-stat as an operator's tool (test_stat_operator.sh): custom-named segments listed, a
# dead process's segment shown gone and removed by --reap (a live or mapped one kept), the
# default table within 100 columns, and the same counter named and valued alike in tieralloc-run's
# summary and in tieralloc-stat. Preloaded processes: not in a sanitized build.
EXTRA_DIST += tests/tools/test_stat_operator.sh
if !SANITIZED
TESTS += tests/tools/test_stat_operator.sh
endif
# The mount-namespace walk (test_stat_mntns.sh): a segment in an `unshare --mount` namespace with
# its own /dev/shm tmpfs is found, labelled, shown gone and reaped there; the host's /dev/shm seen
# through another namespace is listed once. Root only: elsewhere it says why and skips.
EXTRA_DIST += tests/tools/test_stat_mntns.sh
if !SANITIZED
TESTS += tests/tools/test_stat_mntns.sh
endif
# tieralloc-stat --record on a live segment that grows (test_stat_record.sh): the CSV's columns,
# rows and charges, SIGTERM and SIGKILL, appending and refusing (links at the path, other users'
# files: issue 31), hostile strings quoted and escaped; its holder runs under the preload.
EXTRA_DIST += tests/tools/test_stat_record.sh
if !SANITIZED
TESTS += tests/tools/test_stat_record.sh
endif
# tieralloc-plot (test_plot.sh): a recording of a live segment becomes a PNG, kept as
# tests/tools/test_plot.png; hostile strings, broken rows and bad input; output paths that gnuplot
# would run or that hold links, at the old temporary name and at the output (issue 31). Needs
# gnuplot.
EXTRA_DIST += tests/tools/test_plot.sh
CLEANFILES += tests/tools/test_plot.png
if !SANITIZED
TESTS += tests/tools/test_plot.sh
endif
