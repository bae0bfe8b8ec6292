# Unit tests: C programs linked with the core's convenience library (every internal ta_* function
# visible), one per module. They need no NUMA hardware, no root and no LD_PRELOAD, so they also run
# in a build configured with --enable-asan --enable-ubsan (the SANITIZED conditional).
unit_tests = \
	tests/unit/test_env tests/unit/test_topo tests/unit/test_sizeclass tests/unit/test_tcache tests/unit/test_boot \
	tests/unit/test_api tests/unit/test_steering tests/unit/test_cgroup tests/unit/test_enforce \
	tests/unit/test_agent tests/unit/test_shm tests/unit/test_shm_fuzz tests/unit/test_backend \
	tests/unit/test_keep tests/unit/test_lheap tests/unit/test_startup tests/unit/test_limits tests/unit/test_say_once tests/unit/test_locks tests/unit/test_decay tests/unit/test_maps tests/unit/test_stress \
	tests/unit/test_access tests/unit/test_access_agent tests/unit/test_pack tests/unit/test_check \
	tests/unit/test_heatfile \
	tests/unit/test_damon tests/unit/test_lend tests/unit/test_pressure_plan tests/unit/test_protect \
	tests/unit/test_policies tests/unit/test_common
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)

unit_cppflags = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
unit_cflags = $(AM_CFLAGS) -pthread
unit_ldadd = $(TACORE_LIBS) -lpthread

tests_unit_test_env_SOURCES = tests/unit/test_env.c tests/lib/test.h
tests_unit_test_env_CPPFLAGS = $(unit_cppflags)
tests_unit_test_env_CFLAGS = $(unit_cflags)
tests_unit_test_env_LDADD = $(unit_ldadd)

tests_unit_test_topo_SOURCES = tests/unit/test_topo.c tests/lib/test.h
tests_unit_test_topo_CPPFLAGS = $(unit_cppflags)
tests_unit_test_topo_CFLAGS = $(unit_cflags)
tests_unit_test_topo_LDADD = $(unit_ldadd)

tests_unit_test_pack_SOURCES = tests/unit/test_pack.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_pack_CPPFLAGS = $(unit_cppflags)
tests_unit_test_pack_CFLAGS = $(unit_cflags)
tests_unit_test_pack_LDADD = $(unit_ldadd)
tests_unit_test_check_SOURCES = tests/unit/test_check.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_check_CPPFLAGS = $(unit_cppflags)
tests_unit_test_check_CFLAGS = $(unit_cflags)
tests_unit_test_check_LDADD = $(unit_ldadd)
tests_unit_test_sizeclass_SOURCES = tests/unit/test_sizeclass.c tests/lib/test.h
tests_unit_test_sizeclass_CPPFLAGS = $(unit_cppflags)
tests_unit_test_sizeclass_CFLAGS = $(unit_cflags)
tests_unit_test_sizeclass_LDADD = $(unit_ldadd)

tests_unit_test_tcache_SOURCES = tests/unit/test_tcache.c tests/lib/test.h
tests_unit_test_tcache_CPPFLAGS = $(unit_cppflags)
tests_unit_test_tcache_CFLAGS = $(unit_cflags)
tests_unit_test_tcache_LDADD = $(unit_ldadd)

tests_unit_test_boot_SOURCES = tests/unit/test_boot.c tests/lib/test.h
tests_unit_test_boot_CPPFLAGS = $(unit_cppflags)
tests_unit_test_boot_CFLAGS = $(unit_cflags)
tests_unit_test_boot_LDADD = $(unit_ldadd)

tests_unit_test_lheap_SOURCES = tests/unit/test_lheap.c tests/lib/test.h
tests_unit_test_lheap_CPPFLAGS = $(unit_cppflags)
tests_unit_test_lheap_CFLAGS = $(unit_cflags)
tests_unit_test_lheap_LDADD = $(unit_ldadd)

tests_unit_test_startup_SOURCES = tests/unit/test_startup.c tests/lib/test.h
tests_unit_test_startup_CPPFLAGS = $(unit_cppflags)
tests_unit_test_startup_CFLAGS = $(unit_cflags)
tests_unit_test_startup_LDADD = $(unit_ldadd)

tests_unit_test_limits_SOURCES = tests/unit/test_limits.c tests/lib/test.h
tests_unit_test_limits_CPPFLAGS = $(unit_cppflags)
tests_unit_test_limits_CFLAGS = $(unit_cflags)
tests_unit_test_limits_LDADD = $(unit_ldadd)
tests_unit_test_say_once_SOURCES = tests/unit/test_say_once.c tests/lib/test.h
tests_unit_test_say_once_CPPFLAGS = $(unit_cppflags)
tests_unit_test_say_once_CFLAGS = $(unit_cflags)
tests_unit_test_say_once_LDADD = $(unit_ldadd)

tests_unit_test_locks_SOURCES = tests/unit/test_locks.c tests/lib/test.h
tests_unit_test_locks_CPPFLAGS = $(unit_cppflags)
tests_unit_test_locks_CFLAGS = $(unit_cflags)
tests_unit_test_locks_LDADD = $(unit_ldadd)

tests_unit_test_api_SOURCES = tests/unit/test_api.c tests/lib/test.h
tests_unit_test_api_CPPFLAGS = $(unit_cppflags)
tests_unit_test_api_CFLAGS = $(unit_cflags)
tests_unit_test_api_LDADD = $(unit_ldadd)

tests_unit_test_steering_SOURCES = tests/unit/test_steering.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_steering_CPPFLAGS = $(unit_cppflags)
tests_unit_test_steering_CFLAGS = $(unit_cflags)
tests_unit_test_steering_LDADD = $(unit_ldadd)

tests_unit_test_cgroup_SOURCES = tests/unit/test_cgroup.c tests/lib/test.h
tests_unit_test_cgroup_CPPFLAGS = $(unit_cppflags)
tests_unit_test_cgroup_CFLAGS = $(unit_cflags)
tests_unit_test_cgroup_LDADD = $(unit_ldadd)

tests_unit_test_enforce_SOURCES = tests/unit/test_enforce.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_enforce_CPPFLAGS = $(unit_cppflags)
tests_unit_test_enforce_CFLAGS = $(unit_cflags)
tests_unit_test_enforce_LDADD = $(unit_ldadd)

tests_unit_test_shm_SOURCES = tests/unit/test_shm.c tests/lib/test.h tests/lib/forge.h
tests_unit_test_shm_CPPFLAGS = $(unit_cppflags)
tests_unit_test_shm_CFLAGS = $(unit_cflags)
tests_unit_test_shm_LDADD = $(unit_ldadd)

tests_unit_test_shm_fuzz_SOURCES = tests/unit/test_shm_fuzz.c tests/lib/test.h tests/lib/forge.h
tests_unit_test_shm_fuzz_CPPFLAGS = $(unit_cppflags)
tests_unit_test_shm_fuzz_CFLAGS = $(unit_cflags)
tests_unit_test_shm_fuzz_LDADD = $(unit_ldadd)

# The agent's segment side (agent/tally.c, the segment set's files (agent/segset.h) and the
# metrics they format with common/prom.c) needs no BPF: always built.
tests_unit_test_agent_SOURCES = tests/unit/test_agent.c tests/lib/test.h tests/lib/forge.h \
	agent/tally.c agent/segments.c agent/segset.h agent/trust.c agent/publish.c \
	agent/lender.c agent/snapshot.c agent/lend.c agent/agent.h
tests_unit_test_agent_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/bpf -I$(top_srcdir)/agent \
	-I$(top_srcdir)/common
tests_unit_test_agent_CFLAGS = $(unit_cflags)
tests_unit_test_agent_LDADD = common/libtacommon.la $(unit_ldadd)

tests_unit_test_backend_SOURCES = tests/unit/test_backend.c tests/lib/test.h
tests_unit_test_backend_CPPFLAGS = $(unit_cppflags)
tests_unit_test_backend_CFLAGS = $(unit_cflags)
tests_unit_test_backend_LDADD = $(unit_ldadd)

tests_unit_test_keep_SOURCES = tests/unit/test_keep.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_keep_CPPFLAGS = $(unit_cppflags)
tests_unit_test_keep_CFLAGS = $(unit_cflags)
tests_unit_test_keep_LDADD = $(unit_ldadd)

tests_unit_test_decay_SOURCES = tests/unit/test_decay.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_decay_CPPFLAGS = $(unit_cppflags)
tests_unit_test_decay_CFLAGS = $(unit_cflags)
tests_unit_test_decay_LDADD = $(unit_ldadd)

tests_unit_test_stress_SOURCES = tests/unit/test_stress.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_stress_CPPFLAGS = $(unit_cppflags)
tests_unit_test_stress_CFLAGS = $(unit_cflags)
tests_unit_test_stress_LDADD = $(unit_ldadd)

tests_unit_test_access_SOURCES = tests/unit/test_access.c tests/lib/test.h tests/lib/tiers.h
tests_unit_test_access_CPPFLAGS = $(unit_cppflags)
tests_unit_test_access_CFLAGS = $(unit_cflags)
tests_unit_test_access_LDADD = $(unit_ldadd)

tests_unit_test_access_agent_SOURCES = tests/unit/test_access_agent.c tests/lib/test.h
tests_unit_test_access_agent_CPPFLAGS = $(unit_cppflags)
tests_unit_test_access_agent_CFLAGS = $(unit_cflags)
tests_unit_test_access_agent_LDADD = $(unit_ldadd)

tests_unit_test_heatfile_SOURCES = tests/unit/test_heatfile.c tests/lib/test.h
tests_unit_test_heatfile_CPPFLAGS = $(unit_cppflags)
tests_unit_test_heatfile_CFLAGS = $(unit_cflags)
tests_unit_test_heatfile_LDADD = $(unit_ldadd)

# tierallocd --access damon's file side (agent/damon.c) needs no BPF and no DAMON: always built.
tests_unit_test_damon_SOURCES = tests/unit/test_damon.c tests/lib/test.h agent/damon.c agent/damon.h agent/agent.h
tests_unit_test_damon_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_damon_CFLAGS = $(unit_cflags)
tests_unit_test_damon_LDADD = $(unit_ldadd)
# The lending policy (agent/lend.c, pure) and the library's side of loans.
tests_unit_test_lend_SOURCES = tests/unit/test_lend.c tests/lib/test.h agent/lend.c agent/agent.h
tests_unit_test_lend_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_lend_CFLAGS = $(unit_cflags)
tests_unit_test_lend_LDADD = $(unit_ldadd)
tests_unit_test_pressure_plan_SOURCES = tests/unit/test_pressure_plan.c tests/lib/test.h agent/pressure.c \
	agent/cgstat.c agent/agent.h agent/cgctl.h agent/reclaim.h
tests_unit_test_pressure_plan_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_pressure_plan_CFLAGS = $(unit_cflags)
tests_unit_test_pressure_plan_LDADD = $(unit_ldadd)

# Policy 2's decision (agent/protect.c, pure: tierallocd --protect).
tests_unit_test_protect_SOURCES = tests/unit/test_protect.c tests/lib/test.h agent/protect.c \
	agent/protect.h
tests_unit_test_protect_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_protect_CFLAGS = $(unit_cflags)
tests_unit_test_protect_LDADD = $(unit_ldadd)

# The agent's policies' status file: its writer's escaping (agent/status.c) and tieralloc-stat's
# parser (common/policies.c).
tests_unit_test_policies_SOURCES = tests/unit/test_policies.c tests/lib/test.h agent/status.c \
	agent/status.h
tests_unit_test_policies_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent -I$(top_srcdir)/common
tests_unit_test_policies_CFLAGS = $(unit_cflags)
tests_unit_test_policies_LDADD = common/libtacommon.la $(unit_ldadd)

# The agent's libcgroup wrapper on this host's hierarchy: built with the agent (HAVE_BPF, which
# needs libcgroup).
if HAVE_BPF
check_PROGRAMS += tests/unit/test_cgctl
TESTS += tests/unit/test_cgctl
tests_unit_test_cgctl_SOURCES = tests/unit/test_cgctl.c tests/lib/test.h agent/cgctl.c \
	agent/cgctl.h agent/cgstat.c agent/agent.h agent/reclaim.h
tests_unit_test_cgctl_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_cgctl_CFLAGS = $(unit_cflags) $(LIBCGROUP_CFLAGS)
tests_unit_test_cgctl_LDADD = $(unit_ldadd) $(LIBCGROUP_LIBS)
endif

# The leases of the agent's policies on cgroup files (agent/lease.c), their one keeper, and the
# plain file access it uses (agent/cgfile.c), on stand-in directories.
check_PROGRAMS += tests/unit/test_lease
TESTS += tests/unit/test_lease
tests_unit_test_lease_SOURCES = tests/unit/test_lease.c tests/lib/test.h agent/lease.c \
	agent/lease.h agent/cgstat.c agent/cgfile.c agent/cgctl.h
tests_unit_test_lease_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/agent
tests_unit_test_lease_CFLAGS = $(unit_cflags)
tests_unit_test_lease_LDADD = $(unit_ldadd)
tests_unit_test_maps_SOURCES = tests/unit/test_maps.c tests/lib/test.h
tests_unit_test_maps_CPPFLAGS = $(unit_cppflags)
tests_unit_test_maps_CFLAGS = $(unit_cflags)
tests_unit_test_maps_LDADD = $(unit_ldadd)

# What the agent and tieralloc-stat share (common/): no core needed.
tests_unit_test_common_SOURCES = tests/unit/test_common.c tests/lib/test.h
tests_unit_test_common_CPPFLAGS = $(unit_cppflags) -I$(top_srcdir)/common
tests_unit_test_common_CFLAGS = $(unit_cflags)
tests_unit_test_common_LDADD = common/libtacommon.la
