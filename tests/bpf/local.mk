# The agent (issue 6) on the host: root and BTF parts, its refusals without them.
# Its metrics (issue 16): /metrics and --textfile checked by promtool, scraped by a real
# Prometheus server (test_agent_metrics.sh).
# Policy 2's options and refusals (test_agent_protect.sh; the policy runs in tests/guest/protect.sh).
# One agent at a time per state directory, and no stale lock (test_agent_lock.sh, issue 31).
EXTRA_DIST += tests/bpf/test_agent.sh tests/bpf/test_agent_metrics.sh tests/bpf/test_agent_protect.sh \
	tests/bpf/test_agent_lock.sh
if HAVE_BPF
if !SANITIZED
TESTS += tests/bpf/test_agent.sh tests/bpf/test_agent_metrics.sh tests/bpf/test_agent_protect.sh \
	tests/bpf/test_agent_lock.sh
endif
endif
