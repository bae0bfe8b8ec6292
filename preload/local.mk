# The LD_PRELOAD library: the malloc family on top of the core.
lib_LTLIBRARIES += preload/libtieralloc-preload.la
preload_libtieralloc_preload_la_SOURCES = preload/preload.c
preload_libtieralloc_preload_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden \
	-ftls-model=initial-exec -fno-builtin
preload_libtieralloc_preload_la_LIBADD = $(TACORE_LIBS)
preload_libtieralloc_preload_la_LDFLAGS = $(TACORE_LDFLAGS) -avoid-version -module -shared \
	-Wl,--version-script=$(top_srcdir)/preload/libtieralloc-preload.sym -Wl,-z,nodelete
EXTRA_DIST += preload/libtieralloc-preload.sym
