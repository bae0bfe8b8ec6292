#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The agent on this host (issue 6): tierallocd loads and attaches its BPF programs as root (the
# host has BTF), counts the kernel's migrations (compaction is the kind this one-node host has;
# reported, not required), finds a running tieralloc process's segment and writes into it, and on
# SIGTERM detaches them and exits 0. tieralloc-stat tells a segment it writes from one it does
# not. Without root, or with no BTF where it looks, it exits 1 with one line saying which.
# Counting promotions and demotions per cgroup needs two nodes: tests/guest/agent.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

AGENT=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -x $AGENT ]] || ta_skip "tierallocd not built (configure found no clang, bpftool or libbpf)"

# The options first: they are parsed before anything needs root, BTF or BPF.
echo "== options"
rc=0
"$AGENT" --interval 0 >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || ta_fail "--interval 0: exit status $rc, want 2"
rc=0
"$AGENT" --rescan 0 >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || ta_fail "--rescan 0: exit status $rc, want 2"
# getopt_long: -h and --help alike, the usage on stdout and nothing on stderr.
for help in -h --help; do
	rc=0
	"$AGENT" $help >"$TA_WORK/help.out" 2>"$TA_WORK/help.err" || rc=$?
	[[ $rc == 0 ]] && grep -q '^usage: tierallocd' "$TA_WORK/help.out" ||
		ta_fail "$help: exit status $rc or no usage on stdout"
	[[ ! -s $TA_WORK/help.err ]] || ta_fail "$help: wrote to stderr"
done
# A usage error: exit 2, nothing on stdout, exactly one line saying what was wrong, then the
# usage, on stderr. -i is no short option (only --interval is).
for bad in "--nosuch:unknown option --nosuch" "-x:unknown option -x" "-i:unknown option -i" \
	"--interval:--interval needs a value" "--btf:--btf needs a value" \
	"--print=1:--print takes no value" "extra:unexpected argument \"extra\"" \
	"--reclaim-for-priority=1:--reclaim-for-priority takes no value" \
	"--reclaim-step:--reclaim-step needs a value" \
	"--reclaim-step 8M:--reclaim-step without --reclaim-for-priority" \
	"--reclaim-no-cap:--reclaim-no-cap without --reclaim-for-priority" \
	"--priority /sys/fs/cgroup/a=1:--priority without --lend or --reclaim-for-priority" \
	"--lend-reserve 8M:--lend-reserve without --lend"; do
	rc=0
	"$AGENT" ${bad%%:*} >"$TA_WORK/bad.out" 2>"$TA_WORK/bad.err" || rc=$?
	[[ $rc == 2 ]] || ta_fail "${bad%%:*}: exit status $rc, want 2"
	[[ $(head -1 "$TA_WORK/bad.err") == "tierallocd: ${bad#*:}" ]] ||
		ta_fail "${bad%%:*}: first line \"$(head -1 "$TA_WORK/bad.err")\", want \"${bad#*:}\""
	[[ $(sed -n 2p "$TA_WORK/bad.err") == "usage: tierallocd "* ]] ||
		ta_fail "${bad%%:*}: the usage does not follow the error line"
	[[ $(grep -c '^tierallocd: ' "$TA_WORK/bad.err") == 1 ]] ||
		ta_fail "${bad%%:*}: more than one error line"
	[[ ! -s $TA_WORK/bad.out ]] || ta_fail "${bad%%:*}: wrote to stdout"
done

# A bad value: exit 2 and one line saying what a good one is.
rc=0
"$AGENT" --reclaim-for-priority --reclaim-step 1K >"$TA_WORK/bad.out" 2>"$TA_WORK/bad.err" || rc=$?
[[ $rc == 2 ]] || ta_fail "--reclaim-step 1K: exit status $rc, want 2"
[[ $(cat "$TA_WORK/bad.err") == 'tierallocd: bad --reclaim-step "1K" (a size of 4K or more: 32M, 512K)' ]] ||
	ta_fail "--reclaim-step 1K: said \"$(cat "$TA_WORK/bad.err")\""

echo "== without root"
if command -v setpriv >/dev/null && [[ $(id -u) == 0 ]]; then
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$AGENT" --once \
		>"$TA_WORK/nonroot.out" 2>"$TA_WORK/nonroot.err" || rc=$?
	cat "$TA_WORK/nonroot.err"
	[[ $rc == 1 ]] || ta_fail "as nobody: exit status $rc, want 1"
	grep -q "needs root" "$TA_WORK/nonroot.err" || ta_fail "as nobody: no clear message"
	[[ $(wc -l <"$TA_WORK/nonroot.err") == 1 ]] || ta_fail "as nobody: more than one line"
elif [[ $(id -u) != 0 ]]; then
	rc=0
	"$AGENT" --once >/dev/null 2>"$TA_WORK/nonroot.err" || rc=$?
	cat "$TA_WORK/nonroot.err"
	[[ $rc == 1 ]] && grep -q "needs root" "$TA_WORK/nonroot.err" ||
		ta_fail "not root: exit status $rc or no clear message"
	ta_skip "not root: loading needs root (the refusal was checked)"
fi

echo "== no BTF"
rc=0
"$AGENT" --once --btf "$TA_WORK/no-such-btf" >/dev/null 2>"$TA_WORK/nobtf.err" || rc=$?
cat "$TA_WORK/nobtf.err"
[[ $rc == 1 ]] || ta_fail "without BTF: exit status $rc, want 1"
grep -q "no kernel BTF" "$TA_WORK/nobtf.err" || ta_fail "without BTF: no clear message"

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
SEG=/tieralloc-v1-agenttest-$$
PY=$(command -v python3 || true)
# agent_field KEY: the segment's "agent" object's KEY, from tieralloc-stat --json.
agent_field()
{
	"$STAT" --json --name "$SEG" |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)["segments"][0]["agent"][sys.argv[1]])' "$1"
}

echo "== load, attach, count, publish, SIGTERM"
[[ -r /sys/kernel/btf/vmlinux ]] || ta_skip "this kernel has no BTF"
# From before its segment exists: no other test's agent may write into it.
ta_agent_lock
# A tieralloc process holding a segment for the agent to find.
ta_preloaded env TIERALLOC_SHM_NAME="$SEG" sleep 60 &
holder=$!
pid=
# A failed check must not leave the agent running: it would publish into later runs' segments.
trap 'kill $holder ${pid:-} 2>/dev/null || true; rm -f /dev/shm$SEG' EXIT
for _ in $(seq 1 50); do
	[[ -e /dev/shm$SEG ]] && break
	sleep 0.1
done
[[ -e /dev/shm$SEG ]] || ta_fail "the tieralloc process made no segment"
if [[ -n $PY ]]; then
	[[ $(agent_field available) == False ]] || ta_fail "agent counts before any agent ran"
	agent_field why_not | grep -q "no agent" || ta_fail "no 'no agent' reason before it ran"
fi
# The ids of the tracepoint programs loaded now (any agent's).
progs_ids()
{
	bpftool prog show 2>/dev/null | awk '/name on_migrate_pages/ { sub(":", "", $1); print $1 }'
}
ids_before=$(progs_ids)
"$AGENT" --print --interval 0.2 >"$TA_WORK/agent.out" 2>"$TA_WORK/agent.err" &
pid=$!
for _ in $(seq 1 100); do
	grep -q "^tierallocd: attached" "$TA_WORK/agent.out" && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
if ! grep -q "^tierallocd: attached" "$TA_WORK/agent.out"; then
	cat "$TA_WORK/agent.out" "$TA_WORK/agent.err" >&2
	ta_fail "the agent did not attach"
fi
head -1 "$TA_WORK/agent.out"
for _ in $(seq 1 50); do
	grep -q "^tierallocd: segment /dev/shm$SEG:" "$TA_WORK/agent.out" && break
	sleep 0.1
done
grep "^tierallocd: segment /dev/shm$SEG:" "$TA_WORK/agent.out" ||
	ta_fail "the agent did not find the tieralloc process's segment"
if [[ -n $PY ]]; then
	sleep 0.5
	"$STAT" --name "$SEG" | grep "^kernel migrations"
	cgv=$("$STAT" --json --name "$SEG" |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)["segments"][0]["cgroup"]["version"])')
	if [[ $cgv == 2 ]]; then
		[[ $(agent_field available) == True ]] || ta_fail "cgroup v2: the agent's counts are not shown"
	else
		# cgroup v1: BPF's cgroup ids are v2 ones, so nothing is attributable; said as such.
		[[ $(agent_field available) == False ]] || ta_fail "cgroup v1: counts shown as if attributable"
		agent_field why_not | grep -q "no cgroup v2 id" ||
			ta_fail "cgroup v1: the reason is not the missing cgroup id"
	fi
fi
BPFTOOL=$(command -v bpftool || echo /usr/sbin/bpftool)
ours=
if [[ -x $BPFTOOL ]]; then
	PATH=$PATH:$(dirname "$BPFTOOL")
	# The programs that appeared with this agent: another agent may run on the machine (a
	# parallel test run), so this one's are the ids that were not there before it started.
	ours=$(progs_ids | grep -vxF -f <(echo "$ids_before") || true)
	[[ -n $ours ]] || ta_fail "bpftool does not list the agent's tracepoint program"
fi
# Compaction migrates pages (reason "other" here); there may be nothing to compact.
echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true
sleep 0.6
kill -TERM $pid
rc=0
for _ in $(seq 1 50); do
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
kill -0 $pid 2>/dev/null && ta_fail "the agent is still running 5 s after SIGTERM"
wait $pid || rc=$?
grep -E "^cgroup=" "$TA_WORK/agent.out" | tail -3 | sed 's/^/   /' || true
[[ $rc == 0 ]] || ta_fail "after SIGTERM: exit status $rc, want 0"
tail -1 "$TA_WORK/agent.out" | grep -q "detached, stopped" || ta_fail "no 'detached' line"
[[ -s $TA_WORK/agent.err ]] && { cat "$TA_WORK/agent.err" >&2; ta_fail "the agent wrote to stderr"; }
if [[ -x $BPFTOOL ]]; then
	for id in $ours; do
		! bpftool prog show id "$id" >/dev/null 2>&1 ||
			ta_fail "program $id is still loaded after SIGTERM"
	done
fi
if [[ -n $PY ]]; then
	sleep 2.2
	agent_field why_not | grep -q "stopped writing" ||
		ta_fail "tieralloc-stat does not say the agent stopped: $(agent_field why_not)"
fi
echo PASS
