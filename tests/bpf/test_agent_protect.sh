#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Policy 2's options on this host (tierallocd --protect, issue 17): bad values are usage errors
# (exit 2, one line saying which, before anything needs root); a cgroup that does not exist, or
# one without cgroup v2's memory.low (this host's memory controller is v1), is refused with exit 1
# and one line, and the agent leaves nothing behind. The runner on a stand-in directory of
# regular files named like a cgroup's: memory.low follows memory.current and is logged, the lease
# keeper restores it after SIGKILL of the agent and removes the state file, an agent started after
# both were killed restores the original from the state file at its start, a slow fall
# decays it. The status file (--status) says what it did, tieralloc-stat --policies shows it, and
# the agent removes it when it stops; its metrics (--textfile) have the same gauges and counters. Against a real kernel: tests/guest/protect.sh; the decisions: tests/unit/test_protect.c.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

AGENT=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -x $AGENT ]] || ta_skip "tierallocd not built (configure found no clang, bpftool or libbpf)"

check_refused()
{
	local status=$1 want=$2 rc=0
	shift 2
	"$AGENT" --once "$@" >"$TA_WORK/opt.out" 2>"$TA_WORK/opt.err" || rc=$?
	[[ $rc == "$status" ]] || ta_fail "$*: exit status $rc, want $status"
	[[ $(head -1 "$TA_WORK/opt.err") == "tierallocd: $want" ]] ||
		ta_fail "$*: \"$(head -1 "$TA_WORK/opt.err")\", want \"tierallocd: $want\""
}
echo "== options"
check_refused 2 'bad --protect-interval "0" (milliseconds, 1 to 1000)' --protect x \
	--protect-interval 0
check_refused 2 'bad --protect-interval "5ms" (milliseconds, 1 to 1000)' --protect x \
	--protect-interval 5ms
check_refused 2 'bad --protect-expiry "0" (seconds, 0.05 to 3600)' --protect x \
	--protect-expiry 0
check_refused 2 '--protect-interval or --protect-expiry without --protect' --protect-expiry 3
check_refused 2 '--protect-expiry 0.5 s is shorter than 4 --protect-interval (200 ms): requests would lapse between samples' \
	--protect x --protect-interval 200 --protect-expiry 0.5
check_refused 2 'bad --protect "" (a cgroup, at most 8 of them)' --protect ''
check_refused 2 '--status without --reclaim-for-priority or --protect' --status x
check_refused 2 '--status needs a path' --protect x --status ''
nine=()
for i in 1 2 3 4 5 6 7 8 9; do nine+=(--protect "c$i"); done
check_refused 2 'bad --protect "c9" (a cgroup, at most 8 of them)' "${nine[@]}"
# grep reads all of --help: with -q it would stop early and pipefail would see SIGPIPE.
"$AGENT" --help | grep -- '--protect CGROUP' >/dev/null || ta_fail "--help does not name --protect"

[[ $(id -u) == 0 ]] || ta_skip "not root: the agent loads BPF programs"
[[ -r /sys/kernel/btf/vmlinux ]] || ta_skip "this kernel has no BTF"
ta_agent_lock
echo "== cgroups it cannot protect"
check_refused 1 '--protect tieralloc-no-such-cgroup: no such cgroup (/sys/fs/cgroup/tieralloc-no-such-cgroup)' \
	--protect tieralloc-no-such-cgroup
dir=$TA_WORK/not-a-cgroup
mkdir "$dir"
check_refused 1 "--protect $dir: cannot open its memory.current and memory.low (No such file or directory): policy 2 needs cgroup v2's memory controller" \
	--protect "$dir"
# Nothing left running: no lease keeper outlives a refused start.
if pgrep -x tierallocd-leas >/dev/null; then
	ta_fail "a lease keeper was left running: $(pgrep -a -x tierallocd-leas)"
fi

# The runner on a stand-in: a directory with regular files named like the cgroup's (this host's
# memory controller is v1, without memory.low). Its parent has no memory.low: no cap.
echo "== following usage, the lease after SIGKILL, a restart"
fake=$TA_WORK/cg/victim
mkdir -p "$fake"
echo $((32 << 20)) >"$fake/memory.current"
echo 1048576 >"$fake/memory.low"
state=/run/tierallocd/lease-$(stat -c %i "$fake")-memory.low
agent='' keeper=''
stop() {
	local p
	for p in $agent $keeper; do kill -KILL "$p" 2>/dev/null || true; done
	rm -f "$state"
	ta_cleanup
}
trap stop EXIT
start_agent() {
	: >"$TA_WORK/agent$1.out"
	"$AGENT" --protect "$fake" --protect-expiry 1 --status "$TA_WORK/policies" \
		--textfile "$TA_WORK/metrics.prom" >"$TA_WORK/agent$1.out" 2>&1 &
	agent=$!
	wait_for "agent $1 started" grep -q '^tierallocd: protecting' "$TA_WORK/agent$1.out"
	keeper=$(sed -n 's/.*keeper pid \([0-9]*\)).*/\1/p' "$TA_WORK/agent$1.out")
}
# wait_for WHAT CMD...: CMD succeeds within 60 s (a guard against a hang, not a deadline).
wait_for() {
	local what=$1 i
	shift
	for ((i = 0; i < 600; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	ta_fail "$what: not within 60 s; agent: $(cat "$TA_WORK"/agent*.out)"
}
low_is() { [[ $(tr -d '\n' <"$fake/memory.low") == "$1" ]]; }
start_agent 1
# 32M + 4M of headroom; then 40M + an eighth.
wait_for "memory.low at 36M" low_is $((36 << 20))
echo $((40 << 20)) >"$fake/memory.current"
wait_for "memory.low at 45M" low_is $((45 << 20))
grep -q "memory.low $((36 << 20)) -> $((45 << 20)) (grow; usage $((40 << 20))" \
	"$TA_WORK/agent1.out" || ta_fail "no log line for the raise: $(cat "$TA_WORK/agent1.out")"
[[ $(cat "$state") == "00000000000001048576 00000000000047185920 $fake" ]] ||
	ta_fail "state file: $(cat "$state")"
# The decision as tieralloc-stat shows it (the file is rewritten every second).
STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
shows() {
	"$STAT" --policies "$TA_WORK/policies" >"$TA_WORK/stat.out" 2>&1 &&
		grep -q -x "  protect $fake" "$TA_WORK/stat.out" &&
		grep -q "low 45.0 MiB, original 1.0 MiB, usage 40.0 MiB, cap max" "$TA_WORK/stat.out" &&
		grep -q "raises [2-9]" "$TA_WORK/stat.out"
}
wait_for "tieralloc-stat showing memory.low 45M" shows
# And in the agent's metrics (--textfile, rewritten every second).
metrics_show() {
	grep -q -x "tieralloc_agent_protect_low_bytes{cgroup=\"$fake\"} $((45 << 20))" \
		"$TA_WORK/metrics.prom" 2>/dev/null &&
		grep -q -x "tieralloc_agent_protect_original_bytes{cgroup=\"$fake\"} 1048576" \
			"$TA_WORK/metrics.prom" &&
		grep -q "^tieralloc_agent_protect_raises_total{cgroup=\"$fake\"} [2-9]$" \
			"$TA_WORK/metrics.prom"
}
wait_for "metrics showing memory.low 45M" metrics_show
"$STAT" --json --policies "$TA_WORK/policies" | python3 -c '
import json, sys
p = json.load(sys.stdin)["policies"]["entries"]
assert [e["kind"] for e in p] == ["protect"], p
assert p[0]["low_bytes"] == 45 << 20 and p[0]["original_bytes"] == 1 << 20, p
assert p[0]["path"] == sys.argv[1], p' "$fake" || ta_fail "tieralloc-stat --json: $("$STAT" --json --policies "$TA_WORK/policies")"
kill -KILL "$agent"
wait "$agent" 2>/dev/null || true
wait_for "memory.low restored by the keeper after SIGKILL" low_is 1048576
wait_for "the keeper gone" bash -c "! kill -0 $keeper 2>/dev/null"
[[ ! -e $state ]] || ta_fail "$state left behind by the keeper"
grep -q "^tierallocd-lease: lease expired: $fake: memory.low $((45 << 20)) -> 1048576 (the original)" \
	"$TA_WORK/agent1.out" || ta_fail "the keeper said: $(tail -2 "$TA_WORK/agent1.out")"

# Both killed: memory.low stays raised; the next agent finds the original and restores it.
start_agent 2
wait_for "memory.low raised again" low_is $((45 << 20))
kill -KILL "$agent" "$keeper"
wait "$agent" 2>/dev/null || true
low_is $((45 << 20)) || ta_fail "memory.low $(cat "$fake/memory.low") after both were killed"
start_agent 3
grep -q "^tierallocd: an earlier agent's lease: $fake: memory.low $((45 << 20)) -> 1048576 (the original)" \
	"$TA_WORK/agent3.out" || ta_fail "agent 3 did not find the original: $(cat "$TA_WORK/agent3.out")"
# The usage falls slowly (the victim's own doing): memory.low decays towards 20M + 4M.
echo $((20 << 20)) >"$fake/memory.current"
decayed() { (($(tr -d '\n' <"$fake/memory.low") <= (25 << 20))); }
wait_for "memory.low decayed" decayed
kill -TERM "$agent"
wait "$agent"
agent=''
low_is 1048576 || ta_fail "memory.low $(cat "$fake/memory.low") after SIGTERM, not 1048576"
[[ ! -e $state ]] || ta_fail "$state left behind after SIGTERM"
[[ ! -e $TA_WORK/policies ]] || ta_fail "the status file left behind after SIGTERM"
rc=0
"$STAT" --policies "$TA_WORK/policies" >"$TA_WORK/stat.out" 2>&1 || rc=$?
[[ $rc == 1 ]] && grep -q "tieralloc-stat: $TA_WORK/policies: No such file or directory" "$TA_WORK/stat.out" ||
	ta_fail "tieralloc-stat --policies on a missing file: exit $rc, $(cat "$TA_WORK/stat.out")"
grep -q "samples=.* decay=[1-9]" "$TA_WORK/agent3.out" ||
	ta_fail "counters: $(grep samples= "$TA_WORK/agent3.out")"
echo "PASS"
