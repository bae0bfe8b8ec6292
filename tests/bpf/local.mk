# The agent (issue 6) on the host: root and BTF parts, its refusals without them.
EXTRA_DIST += tests/bpf/test_agent.sh
if HAVE_BPF
if !SANITIZED
TESTS += tests/bpf/test_agent.sh
endif
endif
