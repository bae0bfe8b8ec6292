# tieralloc-run (the wrapper users start programs with) and its built-in workload.
bin_SCRIPTS += tools/tieralloc-run
CLEANFILES += tools/tieralloc-run
EXTRA_DIST += tools/tieralloc-run.in
tools/tieralloc-run: $(top_srcdir)/tools/tieralloc-run.in Makefile
	$(AM_V_GEN)mkdir -p tools && sed -e 's|@libdir[@]|$(libdir)|g' \
		-e 's|@libexecdir[@]|$(libexecdir)|g' -e 's|@VERSION[@]|$(PACKAGE_VERSION)|g' \
		$(top_srcdir)/tools/tieralloc-run.in > $@ && chmod +x $@

tieralloc_demodir = $(libexecdir)/tieralloc
tieralloc_demo_PROGRAMS = tools/tieralloc-demo
tools_tieralloc_demo_SOURCES = tools/tieralloc-demo.c
tools_tieralloc_demo_LDADD = $(DL_LIBS)

# tieralloc-stat reads the shared segments: the validation and cgroup code, not the allocator
# (linking the core would start an allocator, and a segment, in the tool itself).
bin_PROGRAMS += tools/tieralloc-stat
tools_tieralloc_stat_SOURCES = tools/tieralloc-stat.c src/quota/shm_abi.c src/quota/cgroup.c \
	src/base/topo.c src/base/log.c src/base/env.c
