# The core, built once as PIC and linked into both shared libraries and the unit tests.
noinst_LTLIBRARIES += src/libtacore.la
src_libtacore_la_SOURCES = src/internal.h \
	src/base/base.h src/base/log.c src/base/env.c src/base/topo.c src/base/pages.c \
	src/quota/charge.h src/quota/quota.h src/quota/shm.h src/quota/cgroup.h \
	src/quota/charge.c src/quota/quota.c src/quota/shm.c src/quota/shm_abi.c \
	src/quota/limits.c src/quota/loan.c \
	src/quota/cgroup.c src/quota/observe.c src/quota/startup.c \
	src/alloc/alloc.h src/alloc/sizeclass.c src/alloc/boot.c src/alloc/backend.c \
	src/alloc/memkind_link.c src/alloc/arena.c src/alloc/tcache.c src/alloc/lheap.c \
	src/alloc/keep.c src/alloc/large.c src/alloc/place.c src/alloc/maps.c src/alloc/alloc.c \
	src/alloc/check.c \
	src/enforce/enforce.h src/enforce/enforce.c src/enforce/cold.c src/enforce/demote.c \
	src/enforce/gate.c src/enforce/worker.c src/enforce/access.c src/enforce/exchange.c \
	src/enforce/fill.c src/enforce/heatfile.h src/enforce/heatfile.c \
	src/api/api.h src/api/init.c src/api/api.c src/api/stats.c src/api/summary.c src/api/maps.c
# No builtins: gcc would turn our own malloc+memset into a call to calloc.
src_libtacore_la_CFLAGS = $(AM_CFLAGS) $(MEMKIND_CFLAGS) -fvisibility=hidden \
	-ftls-model=initial-exec -fno-builtin -pthread
src_libtacore_la_LIBADD = $(DL_LIBS) -lpthread
# memkind's archive, with the two variables it reads from other libraries renamed to ours
# (src/alloc/memkind_link.c): it was built for executables, which reach them without a GOT.
# And without its jemalloc's constructor, which started jemalloc in every process at load: memkind
# starts when a process first needs it (src/alloc/backend.c), and jemalloc with it. (A memkind
# whose archive names that member otherwise keeps it: jemalloc then starts at load, as before.)
MEMKIND_LOCAL = src/libmemkind-local.a
$(MEMKIND_LOCAL): Makefile
	$(AM_V_GEN)rm -rf $@.tmp && mkdir $@.tmp && \
	$(OBJCOPY) --redefine-sym numa_all_nodes_ptr=ta_numa_all_nodes_ptr \
		--redefine-sym stderr=ta_memkind_stderr $(MEMKIND_ARCHIVE) $@.tmp/all.a && \
	(cd $@.tmp && ! $(AR) t all.a | grep -qx jemalloc.pic.o || \
	 { $(AR) x all.a jemalloc.pic.o && \
	   $(OBJCOPY) --remove-section=.init_array jemalloc.pic.o && \
	   $(AR) r all.a jemalloc.pic.o; }) && \
	mv $@.tmp/all.a $@ && rm -rf $@.tmp
EXTRA_src_libtacore_la_DEPENDENCIES = $(MEMKIND_LOCAL)
CLEANFILES += $(MEMKIND_LOCAL)
# For every program or library that links the core: memkind's archive after it (libtool drops an
# archive from a convenience library's dependencies), its kinds calling our wrapper when they
# finalize (src/alloc/backend.c), and no symbol left undefined.
# libnuma is not among them: memkind loads it when it starts (src/alloc/memkind_link.c).
TACORE_LIBS = src/libtacore.la $(MEMKIND_LOCAL) $(DL_LIBS) -lpthread
# -u ta_init: a program linked with the archive must get init.c, whose constructor starts the
# allocator, though nothing it calls names init.c (the layers never call up into it).
TACORE_LDFLAGS = -Wl,--wrap=memkind_arena_finalize -Wl,-z,defs -Wl,-u,ta_init

# libtieralloc: link it directly and call tieralloc_*.
lib_LTLIBRARIES += src/libtieralloc.la
src_libtieralloc_la_SOURCES =
src_libtieralloc_la_LIBADD = $(TACORE_LIBS)
src_libtieralloc_la_LDFLAGS = $(TACORE_LDFLAGS) -version-info 0:0:0 \
	-Wl,--version-script=$(top_srcdir)/src/libtieralloc.sym
EXTRA_DIST += src/libtieralloc.sym

# What the agent and the tools read of what the core writes: the segment's ABI checks, the heat
# file, the cgroup's files, and the options (with the size parser), logger and tiers they use.
# The core's own sources built a second time, with ordinary flags: the core's (hidden symbols, no
# builtins, its constructor) are the allocator's alone and stay as they are. Merged into
# common/libtacommon.la, the one library the readers link (common/local.mk).
noinst_LTLIBRARIES += src/libtareader.la
src_libtareader_la_SOURCES = src/quota/shm_abi.c src/quota/cgroup.c src/enforce/heatfile.c \
	src/base/env.c src/base/log.c src/base/topo.c
