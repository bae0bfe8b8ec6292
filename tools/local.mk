# tieralloc-run (the wrapper users start programs with) and its built-in workload.
# A program, not a script: it passes the command's death by a signal on as its own, and needs no
# bash or awk. It finds the installed preload library and demo by these paths.
bin_PROGRAMS += tools/tieralloc-run
tools_tieralloc_run_SOURCES = tools/tieralloc-run.c
tools_tieralloc_run_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/common -DTA_LIBDIR='"$(libdir)"' \
	-DTA_LIBEXECDIR='"$(libexecdir)"'
# Amounts of bytes as tieralloc-stat prints them (common/units.c).
tools_tieralloc_run_LDADD = common/libtacommon.la

tieralloc_demodir = $(libexecdir)/tieralloc
tieralloc_demo_PROGRAMS = tools/tieralloc-demo
tools_tieralloc_demo_SOURCES = tools/tieralloc-demo.c
tools_tieralloc_demo_LDADD = $(DL_LIBS)

# tieralloc-stat reads the shared segments with the readers' library (common/: the validation,
# the cgroup's files, the Prometheus writer, the policies' file), not the allocator (linking the
# core would start an allocator, and a segment, in the tool itself).
bin_PROGRAMS += tools/tieralloc-stat
tools_tieralloc_stat_SOURCES = tools/tieralloc-stat.c \
	tools/stat_seg.c tools/stat_seg.h tools/stat_print.c tools/stat_print.h \
	tools/record.c tools/record.h tools/stat_scan.c tools/stat_scan.h tools/stat_text.c \
	tools/stat_text.h tools/stat_policies.c tools/stat_policies.h
tools_tieralloc_stat_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/common
# floor() and isfinite() of the recording's schedule (record.c).
tools_tieralloc_stat_LDADD = common/libtacommon.la -lm

# tieralloc-plot draws a recording of tieralloc-stat --record with gnuplot: a POSIX sh script,
# its version put in at build time.
bin_SCRIPTS += tools/tieralloc-plot
EXTRA_DIST += tools/tieralloc-plot.in
CLEANFILES += tools/tieralloc-plot
tools/tieralloc-plot: tools/tieralloc-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools && \
	sed -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' $(srcdir)/tools/tieralloc-plot.in >$@.tmp && \
	chmod +x $@.tmp && mv -f $@.tmp $@
