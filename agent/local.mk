# tierallocd, the privileged agent (issue 6): loads bpf/migrations.bpf.c (and bpf/steals.bpf.c
# for --protect), publishes its counts
# into the containers' segments, raises their alarms. Built with the BPF program (HAVE_BPF).
EXTRA_DIST += agent/tierallocd.service.in
if HAVE_BPF
sbin_PROGRAMS = agent/tierallocd
agent_tierallocd_SOURCES = agent/tierallocd.c agent/options.c agent/options.h agent/policy.h agent/agent.h agent/tally.c agent/segments.c agent/segset.h \
	agent/trust.c agent/publish.c agent/lender.c agent/snapshot.c \
	agent/lend.c agent/pressure.c agent/reclaim.c agent/reclaim.h agent/lease.c agent/lease.h agent/cgstat.c agent/cgfile.c agent/cgctl.c agent/cgctl.h agent/metrics.c agent/metrics.h \
	agent/damon.c agent/damon.h agent/protect.c agent/protect.h agent/protector.c agent/protector.h agent/status.c agent/status.h \
	agent/steals.c agent/steals.h agent/migcount.c agent/migcount.h bpf/steals_map.h \
	bpf/migrations.h
nodist_agent_tierallocd_SOURCES = bpf/migrations.skel.h bpf/steals.skel.h
agent_tierallocd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/bpf -I$(top_srcdir)/bpf \
	-I$(top_srcdir)/agent -I$(top_srcdir)/common
agent_tierallocd_CFLAGS = $(AM_CFLAGS) $(LIBBPF_CFLAGS) $(LIBCGROUP_CFLAGS)
agent_tierallocd_LDADD = common/libtacommon.la $(LIBBPF_LIBS) $(LIBCGROUP_LIBS) -lpthread
CLEANFILES += agent/tierallocd.service

# The systemd unit, with the installed paths of the agent and of the README its Documentation=
# names (installed by Makefile.am's dist_doc_DATA; tests/tools/test_install.sh checks both).
systemdunitdir = $(prefix)/lib/systemd/system
systemdunit_DATA = agent/tierallocd.service
agent/tierallocd.service: $(top_srcdir)/agent/tierallocd.service.in Makefile
	@$(MKDIR_P) agent
	$(AM_V_GEN)sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@docdir[@]|$(docdir)|g' \
		$(top_srcdir)/agent/tierallocd.service.in >$@
endif
