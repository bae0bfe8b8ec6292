#!/bin/bash
# SPDX-License-Identifier: MIT
#
# selftest.sh: check that tests/vm/guest-run.sh gives the guest the tests
# need (two NUMA nodes, node 1 CPU-less, the asked-for sizes, cgroup v2 with
# memory.reclaim and memory.numa_stat, BTF, tracefs, ...) and that it hands
# back output and exit status, and reports panics and hangs.
#
#   tests/vm/selftest.sh [--quick] [--kernel K]
#
# Prints "PASS name" / "FAIL name: why" lines, the time each guest run took,
# and "N passed, N failed"; exits 0 only if everything passed. --quick runs
# only the main guest (one boot) instead of five. --kernel K (6.1, 6.12 or a
# package name; default $TIERALLOC_VM_KERNEL or 6.1) is the guest kernel of
# every run, and the main guest checks that it booted that one.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GR=$HERE/guest-run.sh
quick=0
kernel=${TIERALLOC_VM_KERNEL:-6.1}
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) quick=1 ;;
	--kernel)
		[[ $# -ge 2 ]] || { echo "usage: $0 [--quick] [--kernel K]" >&2; exit 2; }
		kernel=$2
		shift
		;;
	*)
		echo "usage: $0 [--quick] [--kernel K]" >&2
		exit 2
		;;
	esac
	shift
done
# Every guest-run.sh below boots this kernel.
export TIERALLOC_VM_KERNEL=$kernel
echo "# kernel $kernel"

passed=0
failed=0
pass()
{
	echo "PASS $1"
	passed=$((passed + 1))
}
fail()
{
	echo "FAIL $*"
	failed=$((failed + 1))
}

work=$(mktemp -d /tmp/tieralloc-vm-selftest.XXXXXX)
trap 'rm -rf "$work"' EXIT

# guest NAME EXPECTED_RC [guest-run args...]: run the guest, keep its stdout
# in $work/NAME.out and stderr in $work/NAME.err, count the guest's own PASS
# and FAIL lines, and check the exit status.
guest()
{
	local name=$1 want=$2 rc=0 t0 t1
	shift 2
	t0=$(date +%s.%N)
	"$GR" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
	t1=$(date +%s.%N)
	echo "# $name: guest-run took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, exit $rc"
	while IFS= read -r line; do
		case $line in
		"PASS "*) pass "$name.${line#PASS }" ;;
		"FAIL "*) fail "$name.${line#FAIL }" ;;
		esac
	done <"$work/$name.out"
	if [[ $rc == "$want" ]]; then
		pass "${name}_exit_status"
	else
		fail "${name}_exit_status: got $rc, want $want; stderr: $(head -c 300 "$work/$name.err")"
	fi
	if grep -q $'\r' "$work/$name.out"; then
		fail "${name}_no_cr: output has CR characters"
	else
		pass "${name}_no_cr"
	fi
}

# Files to --include: a directory under /tmp (which the guest mounts a tmpfs
# on) with a data file and a dynamically linked host program.
inc=$work/include
mkdir -p "$inc"
echo included >"$inc/data.txt"
cp "$(command -v ls)" "$inc/host-ls"

# 1. Default topology, every guest check, args/env/cwd/include, a module
# (6.12's come compressed), the kernel asked for, exit 3.
guest main 3 --include "$inc" --env "SELFTEST_ENV=x y'z" --env "SELFTEST_DIR=$inc" \
	--env "SELFTEST_KERNEL=$kernel" --module zram \
	--cwd "$inc" -- "$HERE/selftest-guest.sh" 2 3 1024 1024 -- "a b" "it's" '$HOME "*"'

if [[ $quick == 0 ]]; then
	# 2. Three nodes of other sizes, one vCPU, script from stdin.
	guest three_nodes 0 --node-mem 768M,1G,512M --cpus 1 -- - 1 0 768 1024 512 \
		<"$HERE/selftest-guest.sh"

	# 3. A kernel panic is reported as one error line and exit 2.
	echo 'echo c >/proc/sysrq-trigger' >"$work/panic.sh"
	guest panic 2 -- "$work/panic.sh"
	if grep -q 'panicked' "$work/panic.err"; then pass panic_reported; else fail "panic_reported: $(cat "$work/panic.err")"; fi

	# 4. A hung script is killed at --timeout and reported, exit 124; the
	# output it printed before still arrives.
	printf 'echo started\nsleep 1000\n' >"$work/hang.sh"
	guest hang 124 --timeout 20 -- "$work/hang.sh"
	if grep -q 'did not finish' "$work/hang.err"; then pass hang_reported; else fail "hang_reported: $(cat "$work/hang.err")"; fi
	if grep -qx started "$work/hang.out"; then pass hang_output_kept; else fail "hang_output_kept"; fi

	# 5. python3 with its standard library, C extensions included.
	echo 'python3 -c "import ctypes, ssl, json, sqlite3, subprocess; print(\"python-ok\")"' >"$work/py.sh"
	guest python3 0 --with-python3 -- "$work/py.sh"
	if grep -qx python-ok "$work/python3.out"; then pass python3_runs; else fail "python3_runs: $(cat "$work/python3.out" "$work/python3.err")"; fi
fi

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
