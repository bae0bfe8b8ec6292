#!/bin/bash
# SPDX-License-Identifier: MIT
#
# fork() from a multithreaded process under quotas tight enough that enforcement demotes while it
# forks (issue 12, item 13: a child was once seen to stall for 10-20 s in the inline mode):
# prog_fork's 50 rounds of fork while three threads allocate and free, each child checking its
# inherited memory, allocating, starting a thread and ending by exit, _exit or exec, run with
# TIERALLOC_ENFORCE=inline and =deferred. A child that deadlocks hangs the run: the guard below
# ends it and the test fails. The time each run took is printed, not judged.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

PROG=$TA_TEST_BUILDDIR/tests/integration/prog_fork
[[ -x $PROG ]] || ta_hard_error "prog_fork not built (make check)"
for mode in inline deferred; do
	S=$(seg "fork-$mode")
	start=$(date +%s%N)
	rc=0
	# A quarter of the workers' blocks asked of tier 0 explicitly, past its 2 MiB share:
	# enforcement demotes them while threads fork.
	timeout "$TA_QUOTA_WAIT" env LD_PRELOAD="$TA_TEST_PRELOAD" PROG_FORK_TIER0=1 TIERALLOC_TIERS="0;0" \
		TIERALLOC_SHM_NAME="$S" TIERALLOC_ENFORCE=$mode \
		TIERALLOC_TIER_LIMITS="0.high=2M;0.max=2M;1.high=1G;1.max=1G" \
		"$PROG" >"$TA_WORK/$mode.out" 2>&1 || rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "== $mode: exit $rc after $ms ms; $(tail -1 "$TA_WORK/$mode.out")"
	peek "$S"
	echo "   $(grep '^tier=0 ' <<<"$PEEK" | tr ' ' '\n' | grep -E '^(charged|demoted|max)=' |
		tr '\n' ' ')"
	[[ $rc != 124 ]] || ta_fail "$mode: prog_fork did not finish within $TA_QUOTA_WAIT s (a hang)"
	check "$(pk tier=0 demoted) > 0" "$mode: enforcement demoted while threads forked"
	[[ $rc == 0 ]] || { cat "$TA_WORK/$mode.out" >&2; ta_fail "$mode: prog_fork failed ($rc)"; }
done
q_finish
