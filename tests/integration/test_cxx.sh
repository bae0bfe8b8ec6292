#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The C++ workload prog_cxx (containers, four threads trading strings, exceptions, aligned new)
# with and without the preload, then with two tiers and a small tier-0 limit so that aligned and
# plain objects land in both tiers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

PROG_CXX=$(ta_prog prog_cxx)
export PROG_CXX

work()
{
	"$PROG_CXX"
}
compare_runs cxx work
# shellcheck disable=SC2034 # read by compare_runs
TA_PRELOAD_ENV=(TIERALLOC_TIERS="0;0" TIERALLOC_PROCESS_LIMIT="0=2M" TIERALLOC_CHARGE_BATCH=64K)
TA_SUMMARY_MATCH="tier=1 .* steered_in=[1-9]" compare_runs cxx-two-tiers work
