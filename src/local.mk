# The core, built once as PIC and linked into both shared libraries and the unit tests.
noinst_LTLIBRARIES += src/libtacore.la
src_libtacore_la_SOURCES = \
	src/internal.h src/log.c src/env.c src/topo.c src/backend.c src/sizeclass.c \
	src/boot.c src/arena.c src/tcache.c src/alloc.c src/init.c src/stats.c src/summary.c \
	src/api.c src/cgroup.c src/cgroup.h src/shm.h src/shm.c src/shm_abi.c src/quota.c \
	src/cold.c src/large.c src/demote.c src/enforce.c src/gate.c src/worker.c src/pages.c \
	src/memkind_link.c src/keep.c
# No builtins: gcc would turn our own malloc+memset into a call to calloc.
src_libtacore_la_CFLAGS = $(AM_CFLAGS) $(MEMKIND_CFLAGS) -fvisibility=hidden \
	-ftls-model=initial-exec -fno-builtin -pthread
src_libtacore_la_LIBADD = $(NUMA_LIBS) $(DL_LIBS) -lpthread
# memkind's archive, with the two variables it reads from other libraries renamed to ours
# (src/memkind_link.c): it was built for executables, which reach them without a GOT.
MEMKIND_LOCAL = src/libmemkind-local.a
$(MEMKIND_LOCAL): Makefile
	$(AM_V_GEN)$(OBJCOPY) --redefine-sym numa_all_nodes_ptr=ta_numa_all_nodes_ptr \
		--redefine-sym stderr=ta_memkind_stderr $(MEMKIND_ARCHIVE) $@
EXTRA_src_libtacore_la_DEPENDENCIES = $(MEMKIND_LOCAL)
CLEANFILES += $(MEMKIND_LOCAL)
# For every program or library that links the core: memkind's archive after it (libtool drops an
# archive from a convenience library's dependencies), its kinds calling our wrapper when they
# finalize (src/backend.c), and no symbol left undefined.
TACORE_LIBS = src/libtacore.la $(MEMKIND_LOCAL) $(NUMA_LIBS) $(DL_LIBS) -lpthread
TACORE_LDFLAGS = -Wl,--wrap=memkind_arena_finalize -Wl,-z,defs

# libtieralloc: link it directly and call tieralloc_*.
lib_LTLIBRARIES += src/libtieralloc.la
src_libtieralloc_la_SOURCES =
src_libtieralloc_la_LIBADD = $(TACORE_LIBS)
src_libtieralloc_la_LDFLAGS = $(TACORE_LDFLAGS) -version-info 0:0:0 \
	-Wl,--version-script=$(top_srcdir)/src/libtieralloc.sym
EXTRA_DIST += src/libtieralloc.sym
