#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The robustness programs (prog_*) again, with two tiers on the one node and a 1 MiB limit on
# tier 0, and the smallest charge batch: most of their memory is then steered to tier 1, threads
# refill and trim their stock all the time, and blocks move between tiers on realloc. make check
# runs them with the default configuration already (through tests/run-preload.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

for prog in prog_mix prog_threads prog_signal prog_atexit prog_stdio_exit prog_fork; do
	path=$(ta_prog "$prog")
	echo "== $prog"
	rc=0
	(cd "$TA_WORK" && TA_TEST_UNDER_PRELOAD=1 ta_preloaded env TIERALLOC_TIERS="0;0" \
		TIERALLOC_PROCESS_LIMIT="0=1M" TIERALLOC_CHARGE_BATCH=4K \
		TIERALLOC_SUMMARY="$TA_WORK/$prog.summary" "$path") \
		>"$TA_WORK/$prog.out" 2>"$TA_WORK/$prog.err" || rc=$?
	cat "$TA_WORK/$prog.out"
	if [[ $rc != 0 ]] || grep -q '^tieralloc: ' "$TA_WORK/$prog.err"; then
		cat "$TA_WORK/$prog.err" >&2
		ta_fail "$prog with two tiers: status $rc"
	fi
	grep -Eq 'tier=1 .* steered_in=[1-9]' "$TA_WORK/$prog.summary" || {
		cat "$TA_WORK/$prog.summary" >&2
		ta_fail "$prog with two tiers: nothing was steered to tier 1"
	}
done
