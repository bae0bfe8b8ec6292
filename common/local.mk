# What the agent and the tools share (issues 31 and 32): one reader library each of them links,
# so that no folder compiles another's sources. Here: the careful walk into other mount
# namespaces' directories (walk.c), cgroup paths as the kernel gives them (cgpath.c), what the
# readers make of a segment's bytes (segment.c), the Prometheus text of the segments (prom.c), the
# policies' status file's format (policies.c) and amounts of bytes as the tools print them
# (units.c). What the readers need of the core (the segment's ABI checks, the heat file, the
# cgroup's files, the options' size parser) stays in src/, which owns it, and comes in through
# src/libtareader.la, merged into this library.
noinst_LTLIBRARIES += common/libtacommon.la
common_libtacommon_la_SOURCES = common/walk.c common/walk.h common/cgpath.c common/cgpath.h \
	common/prom.c common/prom.h common/policies.c common/policies.h common/units.c common/units.h \
	common/segment.c common/segment.h
common_libtacommon_la_LIBADD = src/libtareader.la
