#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Policy 2's options on this host (tierallocd --protect, issue 17): bad values are usage errors
# (exit 2, one line saying which, before anything needs root); a cgroup that does not exist, or
# one without cgroup v2's memory.low (this host's memory controller is v1), is refused with exit 1
# and one line, and the agent leaves nothing behind. The policy itself runs in the guest
# (tests/guest/protect.sh); its decisions are tests/unit/test_protect.c.
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
check_refused 2 'bad --protect "" (a cgroup, at most 8 of them)' --protect ''
nine=()
for i in 1 2 3 4 5 6 7 8 9; do nine+=(--protect "c$i"); done
check_refused 2 'bad --protect "c9" (a cgroup, at most 8 of them)' "${nine[@]}"
"$AGENT" --help | grep -q -- '--protect CGROUP' || ta_fail "--help does not name --protect"

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
echo "PASS"
ta_cleanup
