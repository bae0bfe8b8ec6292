# What the agent and the tools share (issue 31): the careful walk into other mount namespaces'
# directories (walk.c) and cgroup paths as the kernel gives them (cgpath.c). A convenience
# library each of them links, so that neither folder compiles the other's sources for these.
noinst_LTLIBRARIES += common/libtacommon.la
common_libtacommon_la_SOURCES = common/walk.c common/walk.h common/cgpath.c common/cgpath.h
