# The core, built once as PIC and linked into both shared libraries and the unit tests.
noinst_LTLIBRARIES += src/libtacore.la
src_libtacore_la_SOURCES = \
	src/internal.h src/log.c src/env.c src/topo.c src/backend.c src/sizeclass.c \
	src/boot.c src/arena.c src/tcache.c src/alloc.c src/init.c src/stats.c src/summary.c \
	src/api.c src/cgroup.c src/cgroup.h src/shm.h src/shm.c src/shm_abi.c src/quota.c \
	src/cold.c src/large.c src/demote.c src/enforce.c src/gate.c src/worker.c src/pages.c
# No builtins: gcc would turn our own malloc+memset into a call to calloc.
src_libtacore_la_CFLAGS = $(AM_CFLAGS) $(MEMKIND_CFLAGS) -fvisibility=hidden \
	-ftls-model=initial-exec -fno-builtin -pthread
src_libtacore_la_LIBADD = $(MEMKIND_LIBS) $(NUMA_LIBS) $(DL_LIBS) -lpthread

# libtieralloc: link it directly and call tieralloc_*.
lib_LTLIBRARIES += src/libtieralloc.la
src_libtieralloc_la_SOURCES =
src_libtieralloc_la_LIBADD = src/libtacore.la
src_libtieralloc_la_LDFLAGS = -version-info 0:0:0 \
	-Wl,--version-script=$(top_srcdir)/src/libtieralloc.sym
EXTRA_DIST += src/libtieralloc.sym
