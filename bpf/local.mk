# The BPF observer of the kernel's page migrations and the agent that loads it (issue 6). Built
# when configure found clang, bpftool, libbpf >= 1.0 and a kernel BTF (--enable-bpf=auto|yes|no).
# vmlinux.h, the BPF object and its skeleton are generated here, never committed.
EXTRA_DIST += bpf/tieralloc.bpf.c bpf/tieralloc_bpf.h bpf/tierallocd.service.in
if HAVE_BPF
sbin_PROGRAMS = bpf/tierallocd
bpf_tierallocd_SOURCES = bpf/tierallocd.c bpf/tieralloc_bpf.h bpf/agent.h bpf/tally.c \
	bpf/segments.c src/shm_abi.c
nodist_bpf_tierallocd_SOURCES = bpf/tieralloc.skel.h
bpf_tierallocd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/bpf -I$(top_srcdir)/bpf \
	-I$(top_srcdir)/src
bpf_tierallocd_CFLAGS = $(AM_CFLAGS) $(LIBBPF_CFLAGS)
bpf_tierallocd_LDADD = $(LIBBPF_LIBS)
BUILT_SOURCES = bpf/tieralloc.skel.h
CLEANFILES += bpf/vmlinux.h bpf/tieralloc.bpf.o bpf/tieralloc.skel.h bpf/tierallocd.service

bpf/vmlinux.h:
	@$(MKDIR_P) bpf
	$(AM_V_GEN)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c >$@.tmp && mv $@.tmp $@

# -g: CO-RE relocations come from the object's BTF.
bpf/tieralloc.bpf.o: $(top_srcdir)/bpf/tieralloc.bpf.c $(top_srcdir)/bpf/tieralloc_bpf.h \
		bpf/vmlinux.h
	$(AM_V_GEN)$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 \
		-I$(top_builddir)/bpf -I$(top_srcdir)/bpf -c $< -o $@

bpf/tieralloc.skel.h: bpf/tieralloc.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton $< >$@.tmp && mv $@.tmp $@

# The systemd unit, with the installed path of the agent.
systemdunitdir = $(prefix)/lib/systemd/system
systemdunit_DATA = bpf/tierallocd.service
bpf/tierallocd.service: $(top_srcdir)/bpf/tierallocd.service.in
	@$(MKDIR_P) bpf
	$(AM_V_GEN)sed 's|@sbindir[@]|$(sbindir)|g' $< >$@
endif
