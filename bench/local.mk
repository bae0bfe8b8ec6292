# Allocator benchmark (`make bench`): never part of a plain `make`, never gating.
# bench-malloc is a check program: `make check` builds it for the smoke test (bench/smoke.sh),
# `make bench` builds it and runs bench/run-bench.sh, which prints the comparison table.
check_PROGRAMS += bench/bench-malloc
bench_bench_malloc_SOURCES = bench/bench-malloc.c
# No malloc/free builtins: gcc could otherwise pair up and drop an allocation it sees through.
bench_bench_malloc_CFLAGS = $(AM_CFLAGS) $(MEMKIND_CFLAGS) -fno-builtin-malloc -fno-builtin-free \
	-pthread
bench_bench_malloc_LDADD = src/libtieralloc.la $(MEMKIND_SHARED_LIBS) $(DL_LIBS) -lpthread
# -no-install: a real binary (rpath to src/.libs), not a libtool wrapper script, so that
# LD_PRELOAD reaches the benchmark itself and not a shell.
bench_bench_malloc_LDFLAGS = -no-install
EXTRA_DIST += bench/run-bench.sh bench/smoke.sh bench/README.md bench/run-compare.sh

# BENCH_REPS=N repeats each cell N times (median reported); BENCH_ARGS passes options through.
bench: bench/bench-malloc$(EXEEXT)
	$(SHELL) $(top_srcdir)/bench/run-bench.sh --bin bench/bench-malloc$(EXEEXT) $(BENCH_ARGS)
.PHONY: bench

# Malloc latency under a lock while enforcement is needed, per TIERALLOC_ENFORCE mode, in the
# QEMU guest (`make bench-enforce`; BENCH_REPS rounds, default 3). Run under the preload.
check_PROGRAMS += bench/enforce-latency
bench_enforce_latency_SOURCES = bench/enforce-latency.c
bench_enforce_latency_CFLAGS = $(AM_CFLAGS) -fno-builtin-malloc -fno-builtin-free -pthread
bench_enforce_latency_LDADD = -lpthread
EXTRA_DIST += bench/run-enforce.sh

bench-enforce: bench/enforce-latency$(EXEEXT) $(lib_LTLIBRARIES)
	$(SHELL) $(top_srcdir)/bench/run-enforce.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-3}
.PHONY: bench-enforce

# Time to converge after a lowered limit, against the kernel's memory.reclaim of the same
# excess, in the guest on both kernels, host quiet and loaded (`make bench-converge`; BENCH_REPS
# rounds, default 3; BENCH_KERNELS, BENCH_LOADS, BENCH_CASES, BENCH_ARMS). The workload is the enforcement tests'.
EXTRA_DIST += bench/run-converge.sh
check_PROGRAMS += bench/converge-watch
bench_converge_watch_SOURCES = bench/converge-watch.c
bench-converge: tests/guest/enforce_work$(EXEEXT) tests/quota/shm_peek$(EXEEXT) \
		bench/converge-watch$(EXEEXT) $(lib_LTLIBRARIES)
	$(SHELL) $(top_srcdir)/bench/run-converge.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-3}
.PHONY: bench-converge

# How much of a program's resident anonymous memory tieralloc's quotas see, for runtimes whose
# heaps come from mmap (python3, node, java) and malloc programs (perl, sqlite3), each with and
# without the preload in the same run (`make bench-coverage`; this host, no guest).
EXTRA_DIST += bench/run-coverage.sh
bench-coverage: $(lib_LTLIBRARIES)
	bash $(top_srcdir)/bench/run-coverage.sh $(abs_top_builddir)
.PHONY: bench-coverage

# What the preload costs runtimes whose heaps are not malloc's (python3, node, java workloads of
# allocation and GC): time and max RSS without a preload, under tieralloc with the cgroup's
# segment and with one of its own, and under the installed peers, interleaved (`make bench-runtime-cost`;
# BENCH_REPS rounds, default 5; this host, no guest).
EXTRA_DIST += bench/run-runtime-cost.py bench/benchrun.py
bench-runtime-cost: $(lib_LTLIBRARIES)
	python3 $(top_srcdir)/bench/run-runtime-cost.py $(abs_top_builddir) --reps $${BENCH_REPS:-5}
.PHONY: bench-runtime-cost

# Memory footprint against glibc and jemalloc (`make bench-footprint` on this host;
# `make bench-footprint-guest` in the two-node QEMU guest with THP "always"). The workload is
# also used by the footprint tests. Not under the preload itself: the driver preloads it.
check_PROGRAMS += bench/footprint-work
bench_footprint_work_SOURCES = bench/footprint-work.c tests/lib/size_arg.h
bench_footprint_work_CFLAGS = $(WARN_CFLAGS)
bench_footprint_work_LDFLAGS =
EXTRA_DIST += bench/run-footprint.sh
check_PROGRAMS += bench/startup-time
bench_startup_time_SOURCES = bench/startup-time.c
bench_startup_time_CFLAGS = $(WARN_CFLAGS)
bench_startup_time_LDFLAGS =

bench-footprint: bench/footprint-work$(EXEEXT) bench/startup-time$(EXEEXT) $(lib_LTLIBRARIES)
	$(SHELL) $(top_srcdir)/bench/run-footprint.sh $(abs_top_builddir)
bench-footprint-guest: bench/footprint-work$(EXEEXT) bench/startup-time$(EXEEXT) \
		$(lib_LTLIBRARIES)
	$(top_srcdir)/tests/vm/guest-run.sh --timeout 900 --include $(abs_top_builddir) \
		--include $(abs_top_srcdir)/bench \
		$$(for f in /usr/lib/*/libjemalloc.so.2; do [ -f $$f ] && echo --include $$f; done) -- \
		$(abs_top_srcdir)/bench/run-footprint.sh $(abs_top_builddir)
.PHONY: bench-footprint bench-footprint-guest

# What tracking written pages costs (soft-dirty against age), in the QEMU guest
# (`make bench-access`; BENCH_REPS rounds, default 3; BENCH_WS_MIB, default 1024).
check_PROGRAMS += bench/access-cost
bench_access_cost_SOURCES = bench/access-cost.c
bench_access_cost_CFLAGS = $(AM_CFLAGS) -fno-builtin-malloc -pthread
bench_access_cost_LDADD = -lpthread $(DL_LIBS)
EXTRA_DIST += bench/run-access.sh

bench-access: bench/access-cost$(EXEEXT) $(lib_LTLIBRARIES)
	$(SHELL) $(top_srcdir)/bench/run-access.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-3} $${BENCH_WS_MIB:-1024}
.PHONY: bench-access

# The benchmarks of the agent's policies need the agent: without it (no BPF toolchain or
# libcgroup at configure time) they say so and fail, instead of failing in the guest.
if HAVE_BPF
bench_needs_agent = :
else
bench_needs_agent = { echo "$@ needs tierallocd, which this build has not (--enable-bpf=no, or configure found no clang, bpftool, libbpf >= 1.0, libcgroup >= 2.0 or kernel BTF)" >&2; exit 1; }
endif

# What the agent's access source (tierallocd --access damon) costs, in the 6.12 guest
# (`make bench-access-agent`; BENCH_REPS, BENCH_WS_MIB as above). Needs the agent (HAVE_BPF).
EXTRA_DIST += bench/run-access-agent.sh
bench-access-agent: bench/access-cost$(EXEEXT) $(lib_LTLIBRARIES) $(sbin_PROGRAMS)
	@$(bench_needs_agent)
	$(SHELL) $(top_srcdir)/bench/run-access-agent.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-3} $${BENCH_WS_MIB:-1024}
.PHONY: bench-access-agent

# Lending idle fast-tier shares (issue 15): fast-tier utilisation with tierallocd --lend on and
# off, and the take-back times, in the QEMU guest (`make bench-lending`; BENCH_REPS rounds with
# lending on, default 3). Needs the agent (HAVE_BPF).
EXTRA_DIST += bench/run-lending.sh
bench-lending: tests/guest/enforce_work$(EXEEXT) tests/quota/shm_peek$(EXEEXT) $(lib_LTLIBRARIES) \
		$(sbin_PROGRAMS)
	@$(bench_needs_agent)
	$(SHELL) $(top_srcdir)/bench/run-lending.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-3}
.PHONY: bench-lending

# Reclaim for priority (issue 17 policy 1, seed 001): completion times of a pressured job and a
# harvested one sharing a parent's memory.max, with tierallocd --reclaim-for-priority and
# without, in the QEMU guest (`make bench-reclaim`; BENCH_REPS rounds, default 5; BENCH_KERNEL,
# default 6.1; the sizes through PARENT_MIB, HI_MIB, HI_PASSES, LO_MIB, LO_PASSES,
# LO_PAUSE_MS; RECLAIM_STEP for --reclaim-step; RECLAIM_WORKLOAD=file for the seed's own
# workload, bench/seed001-work). Needs the agent.
EXTRA_DIST += bench/run-reclaim.sh
check_PROGRAMS += bench/seed001-work
bench_seed001_work_SOURCES = bench/seed001-work.c
bench-reclaim: tests/guest/reclaim_work$(EXEEXT) bench/seed001-work$(EXEEXT) $(sbin_PROGRAMS)
	@$(bench_needs_agent)
	$(SHELL) $(top_srcdir)/bench/run-reclaim.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-5} $${BENCH_KERNEL:-6.1}
.PHONY: bench-reclaim

# Seed 004's experiment for policy 2 (tierallocd --protect, issue 17): the workloads and the 5 ms
# polling arm (also used by tests/guest/protect.sh), and `make bench-protect` (BENCH_REPS rounds
# of the three arms, default 15; BENCH_KERNEL, default 6.12). Needs the agent (HAVE_BPF).
# bench/cgroup-write-cost.c (not built: it needs libcgroup) measured why the agent writes
# memory.low with pwrite rather than through libcgroup (docs/DESIGN-NOTES.md).
check_PROGRAMS += bench/protect-work bench/protect-poll
bench_protect_work_SOURCES = bench/protect-work.c
bench_protect_poll_SOURCES = bench/protect-poll.c
EXTRA_DIST += bench/run-protect.sh bench/cgroup-write-cost.c
bench-protect: bench/protect-work$(EXEEXT) bench/protect-poll$(EXEEXT) $(sbin_PROGRAMS)
	@$(bench_needs_agent)
	$(SHELL) $(top_srcdir)/bench/run-protect.sh $(abs_top_builddir) $(abs_top_srcdir) \
		$${BENCH_REPS:-15} $${BENCH_KERNEL:-6.12}
.PHONY: bench-protect

# The peers' suite (issue 33): mimalloc-bench's programs, checked out and built outside this tree
# (bench/README.md, "The peers' suite"), under glibc, tieralloc's preload and the installed peers,
# interleaved (`make bench-peers MIMALLOC_BENCH=DIR`; BENCH_ROUNDS, default 2). Not in `make check`.
EXTRA_DIST += bench/run-peers.py
bench-peers: $(lib_LTLIBRARIES)
	@test -n "$(MIMALLOC_BENCH)" || { echo "bench-peers: MIMALLOC_BENCH=DIR, a built mimalloc-bench checkout (bench/README.md)" >&2; exit 2; }
	python3 $(top_srcdir)/bench/run-peers.py $(abs_top_builddir) "$(MIMALLOC_BENCH)" --rounds $${BENCH_ROUNDS:-2}
.PHONY: bench-peers
