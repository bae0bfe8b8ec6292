# The BPF programs, libbpf-tools style: migrations.bpf.c counts the kernel's page migrations
# (issue 6), steals.bpf.c what reclaim takes from watched cgroups (issue 17); each with the header
# it shares with the agent. Built when configure
# found clang, bpftool, libbpf >= 1.0 and a kernel BTF (--enable-bpf=auto|yes|no), for the
# target architecture configure found (BPF_TARGET_ARCH). vmlinux.h, the BPF object and its
# skeleton are generated here, never committed. The agent that loads it is agent/.
EXTRA_DIST += bpf/migrations.bpf.c bpf/migrations.h bpf/steals.bpf.c bpf/steals_map.h
if HAVE_BPF
BUILT_SOURCES = bpf/migrations.skel.h bpf/steals.skel.h
CLEANFILES += bpf/vmlinux.h bpf/migrations.bpf.o bpf/migrations.skel.h bpf/steals.bpf.o \
	bpf/steals.skel.h

bpf/vmlinux.h:
	@$(MKDIR_P) bpf
	$(AM_V_GEN)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c >$@.tmp && mv $@.tmp $@

# -g: CO-RE relocations come from the object's BTF.
bpf/migrations.bpf.o: $(top_srcdir)/bpf/migrations.bpf.c $(top_srcdir)/bpf/migrations.h \
		bpf/vmlinux.h
	$(AM_V_GEN)$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(BPF_TARGET_ARCH) \
		-I$(top_builddir)/bpf -I$(top_srcdir)/bpf -c $< -o $@

bpf/steals.bpf.o: $(top_srcdir)/bpf/steals.bpf.c $(top_srcdir)/bpf/steals_map.h bpf/vmlinux.h
	$(AM_V_GEN)$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(BPF_TARGET_ARCH) \
		-I$(top_builddir)/bpf -I$(top_srcdir)/bpf -c $< -o $@

bpf/migrations.skel.h: bpf/migrations.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton $< >$@.tmp && mv $@.tmp $@

bpf/steals.skel.h: bpf/steals.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton $< >$@.tmp && mv $@.tmp $@
endif
