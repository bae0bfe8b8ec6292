# Tests: unit tests link the core directly; integration tests run real programs under the preload.
include tests/unit/local.mk
include tests/integration/local.mk
include tests/guest/local.mk
include tests/quota/local.mk
include tests/bpf/local.mk
include tests/tools/local.mk
include tests/man/local.mk
include tests/pkg/local.mk
include tests/containers/local.mk

# The layers of src/: the include rule (tests/check-layers.sh).
TESTS += tests/check-layers.sh
EXTRA_DIST += tests/check-layers.sh

# The benchmark's smoke run (every allocator gives usable memory); never its timings.
# The peers' suite's driver on stand-in programs (its parsing and its RSS, no timing).
if !SANITIZED
TESTS += bench/smoke.sh tests/bench/test_run_peers.sh
endif
EXTRA_DIST += tests/bench/test_run_peers.sh
