#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One agent at a time (issue 31): two agents would share STATE_DIR/lease-INODE-FILE, each taking
# the other's cap for a cgroup's own memory.high, and leave the cgroup capped after both stopped.
# A second tierallocd on the same --state-dir refuses to start (exit 1, one line naming the
# first's pid and the lock); once the first is killed (SIGKILL: its lock file stays behind), a
# new one starts, and it stops on SIGTERM with status 0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

AGENT=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -x $AGENT ]] || ta_skip "tierallocd not built (configure found no clang, bpftool or libbpf)"
rc=0
"$AGENT" --state-dir run >/dev/null 2>"$TA_WORK/opt.err" || rc=$?
[[ $rc == 2 && $(cat "$TA_WORK/opt.err") == "tierallocd: --state-dir needs an absolute path" ]] ||
	ta_fail "--state-dir run: status $rc, \"$(cat "$TA_WORK/opt.err")\""
[[ $(id -u) == 0 ]] || ta_skip "not root: the agent loads BPF programs"
[[ -r /sys/kernel/btf/vmlinux ]] || ta_skip "this kernel has no BTF"
ta_agent_lock

state=$TA_WORK/run
first='' third=''
trap 'kill -KILL $first $third 2>/dev/null || true; ta_cleanup' EXIT
# start N: an agent on $state, its output in agentN.out; its pid in $started.
start() {
	: >"$TA_WORK/agent$1.out"
	"$AGENT" --interval 0.2 --state-dir "$state" >"$TA_WORK/agent$1.out" 2>&1 &
	started=$!
}
attached() { grep -q "^tierallocd: attached" "$TA_WORK/agent$1.out"; }
wait_for() { # wait_for CMD...: until it holds, 60 s at most (a loaded host is slow, not wrong)
	for _ in $(seq 1 600); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

echo "== a first agent"
start 1
first=$started
wait_for attached 1 || ta_fail "the first agent did not attach: $(cat "$TA_WORK/agent1.out")"
[[ $(cat "$state/lock") == "$first" ]] || ta_fail "the lock holds '$(cat "$state/lock")', not $first"

echo "== a second one on the same state directory"
rc=0
"$AGENT" --interval 0.2 --state-dir "$state" >"$TA_WORK/agent2.out" 2>"$TA_WORK/agent2.err" || rc=$?
cat "$TA_WORK/agent2.err"
[[ $rc == 1 ]] || ta_fail "the second agent: exit status $rc, want 1"
[[ $(wc -l <"$TA_WORK/agent2.err") == 1 ]] &&
	grep -q "^tierallocd: another tierallocd (pid $first) is running ($state/lock is locked)" \
		"$TA_WORK/agent2.err" || ta_fail "the second agent did not say why"
attached 2 && ta_fail "the second agent attached"
kill -0 "$first" || ta_fail "the first agent died"

echo "== the first killed: its lock does not hold a new one back"
kill -KILL "$first"
wait "$first" 2>/dev/null || true
first=''
[[ -e $state/lock ]] || ta_fail "no lock file left behind to test with"
start 3
third=$started
wait_for attached 3 || ta_fail "a new agent did not start after a SIGKILL: $(cat "$TA_WORK/agent3.out")"
kill -TERM "$third"
rc=0
wait "$third" || rc=$?
third=''
[[ $rc == 0 ]] || ta_fail "after SIGTERM: exit status $rc"
echo PASS
