#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Per-tier limits from TIERALLOC_TIER_LIMITS as steering uses them, and the quota options' bad
# values:
#   1. a max alone ("0.max=8M", high left to the cgroup: unlimited here, so the tier's
#      capacity) is still a hard limit: 32 MiB in 4 KiB blocks leave at most 8M in tier 0 (the
#      kernel's memory.high above memory.max is the max too);
#   2. high below max: steering leaves a tier at its high while a slower tier is below its own,
#      and comes back up to the max when every tier is at its high. Tiers 0 and 1 both with high
#      2M and max 4M: after 3 MiB, tier 0 holds ~2M (its high) and tier 1 the rest; after 8 MiB
#      more, tier 0 is filled up to ~4M (its max) and only then does tier 1 pass 4M (overflow);
#   3. bad TIERALLOC_TIER_LIMITS, TIERALLOC_SPLIT, TIERALLOC_ON_FULL values: exactly one warning
#      each, the program's output unchanged; with TIERALLOC_STRICT=1 an exit before main.
# "~": within the stock a thread holds unused (< BATCH + 2 x BLOCK = 264K each for the main
# thread and the worker). A tier's room is its limit less what the process held when tieralloc
# started, charged to tier 0 (the hog's startup0).
# Variables named in check conditions are read by its arithmetic, unseen by shellcheck.
# shellcheck disable=SC2034
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

M=$((1 << 20))
K=1024
SLACK=$((2 * (256 + 8) * K))

echo "== 1. a tier-0 max alone"
S=$(seg maxonly)
hog_start maxonly TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S" TIERALLOC_TIER_LIMITS="0.max=8M"
hog_cmd maxonly "alloc 32M 4K 1"
r=$REPLY
peek "$S"
grep '^tier=0' <<<"$PEEK" | sed 's/^/   /'
echo "   32 MiB: $r"
check "$(pk tier=0 max) == 8 * M" "tier-0 max from TIERALLOC_TIER_LIMITS"
soft_check "$(kv "$r" tier0) <= 8 * M - $(kv "$r" startup0)" \
	"tier 0 holds at most its max when only the max is set"
soft_check "$(pk tier=0 charged) <= 8 * M" "tier 0's charge within its max when only the max is set"
hog_quit maxonly
hog_stderr_clean maxonly

echo "== 2. high below max"
S=$(seg highmax)
hog_start highmax TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S" \
	TIERALLOC_TIER_LIMITS="0.high=2M;0.max=4M;1.high=2M;1.max=4M"
hog_cmd highmax "alloc 3M 4K 1"
r=$REPLY
echo "   3 MiB: $r"
st=$(kv "$r" startup0)
check "st > 0 && st < 2 * M" "the start-up charge is in tier 0"
check "$(kv "$r" tier0) <= 2 * M - st && $(kv "$r" tier0) >= 2 * M - st - SLACK" \
	"tier 0 filled to its high"
check "$(kv "$r" tier1) == 3 * M - $(kv "$r" tier0)" "the rest in tier 1"
hog_cmd highmax "alloc 8M 4K 1"
r2=$REPLY
echo "   8 MiB more: $r2"
t0=$(($(kv "$r" tier0) + $(kv "$r2" tier0)))
t1=$(($(kv "$r" tier1) + $(kv "$r2" tier1)))
peek "$S"
grep '^tier=' <<<"$PEEK" | sed 's/^/   /'
check "t0 <= 4 * M - st && t0 >= 4 * M - st - SLACK" \
	"tier 0 filled up to its max once both are at high"
check "t1 == 11 * M - t0" "the rest in tier 1"
check "$(pk tier=1 overflowed) > 0 && $(pk tier=0 overflowed) == 0" "tier 1 took the overflow"
hog_quit highmax
hog_stderr_clean highmax

echo "== 3. bad values"
BLOCKS=$(ta_prog prog_blocks)
cd "$TA_WORK"
run()
{
	local name=$1
	shift
	rc=0
	ta_preloaded env TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME=off "$@" "$BLOCKS" 8M 4K --tiers \
		>"$name.out" 2>"$name.err" || rc=$?
}
run good
[[ $rc == 0 && ! -s good.err ]] || { cat good.err >&2; ta_hard_error "the reference run failed"; }
bad_values=(
	"TIERALLOC_TIER_LIMITS=0.max=8Q"
	"TIERALLOC_TIER_LIMITS=7.max=1M"
	"TIERALLOC_TIER_LIMITS=0.huge=1M"
	"TIERALLOC_TIER_LIMITS=0max=1M"
	"TIERALLOC_TIER_LIMITS=0.max=1M;0.max=2M"
	"TIERALLOC_TIER_LIMITS=0.max="
	"TIERALLOC_TIER_LIMITS=0.max=1M;;"
	"TIERALLOC_SPLIT=0=75"
	"TIERALLOC_SPLIT=0=75;1=x"
	"TIERALLOC_SPLIT=0=0;1=0"
	"TIERALLOC_SPLIT=0=1;0=2"
	"TIERALLOC_SPLIT=9=1;1=1"
	"TIERALLOC_SPLIT=0=;1=1"
	"TIERALLOC_SPLIT=0=2000000;1=1"
	"TIERALLOC_ON_FULL=maybe"
	"TIERALLOC_ON_FULL="
)
i=0
for v in "${bad_values[@]}"; do
	i=$((i + 1))
	run "bad$i" "$v"
	var=${v%%=*}
	value=${v#*=}
	if [[ $rc != 0 ]] || ! cmp -s good.out "bad$i.out" || [[ $(wc -l <"bad$i.err") != 1 ]] ||
		! grep -qF "tieralloc: warning: $var=\"$value\": " "bad$i.err"; then
		echo "--- $v: status $rc; stdout:" >&2
		cat "bad$i.out" >&2
		echo "--- stderr:" >&2
		cat "bad$i.err" >&2
		soft_fail "$v: expected exactly one warning and unchanged output"
		continue
	fi
	echo "   $(cat "bad$i.err")"
	rc=0
	ta_preloaded env TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME=off TIERALLOC_STRICT=1 "$v" \
		"$BLOCKS" 1M 4K --pid >"strict$i.out" 2>"strict$i.err" || rc=$?
	[[ $rc == 1 && ! -s strict$i.out ]] ||
		{ cat "strict$i.err" >&2; ta_fail "$v with TIERALLOC_STRICT=1: status $rc, main ran?"; }
done
# Good values give no warning.
for v in "TIERALLOC_TIER_LIMITS=0.max=4G;tier1.high=3G;1.min=0;0.low=1M" "TIERALLOC_SPLIT=0=75;1=25" \
	"TIERALLOC_SPLIT=tier0=1;tier1=1" TIERALLOC_ON_FULL=lowest TIERALLOC_ON_FULL=ENOMEM; do
	run ok "$v"
	[[ $rc == 0 && ! -s ok.err ]] || { cat ok.err >&2; ta_fail "$v: status $rc or a warning"; }
done
q_finish
