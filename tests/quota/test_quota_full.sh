#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Every tier at its max (TIERALLOC_TIER_LIMITS: 1M high and max in both tiers):
#   - TIERALLOC_ON_FULL=enomem: malloc of small and large blocks returns NULL with errno ENOMEM
#     once both tiers are full, and the segment counts the refusals (exhausted); an explicit
#     tieralloc_malloc_tier still succeeds, in the tier asked for;
#   - the default (lowest) and ON_FULL=lowest: nothing fails, what does not fit goes to the last
#     tier (counted in overflowed), tier 0 stays within its max.
# Blocks are 4 KiB (small objects, charged through the thread's stock) and 1 MiB (large objects).
# Variables named in check conditions are read by its arithmetic, unseen by shellcheck.
# shellcheck disable=SC2034
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

M=$((1 << 20))
LIMITS="0.high=1M;0.max=1M;1.high=1M;1.max=1M"
# The hog starts threads after the tiers are full, and glibc allocates a few hundred bytes for
# each: from a class's run with room left. Packed, every class shares one area, which the 4 KiB
# blocks used up: pthread_create would fail with EAGAIN (correct at max, but not what is tested).
export TIERALLOC_PACK=0

echo "== TIERALLOC_ON_FULL=enomem"
S=$(seg enomem)
hog_start e TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S" TIERALLOC_TIER_LIMITS="$LIMITS" \
	TIERALLOC_ON_FULL=enomem
hog_cmd e "alloc 4M 4K 1"
echo "   4 MiB in 4 KiB blocks: $REPLY"
r=$REPLY
check "$(kv "$r" failed) > 0 && $(kv "$r" errno) == 12" "small allocations fail with ENOMEM"
check "$(kv "$r" tier0) <= M && $(kv "$r" tier1) <= M" "no tier passes its max"
check "$(kv "$r" tier0) + $(kv "$r" tier1) >= M" "the tiers were used before failing"
hog_cmd e "alloc 2M 1M 1"
echo "   2 MiB in 1 MiB blocks: $REPLY"
check "$(kv "$REPLY" failed) == 2 && $(kv "$REPLY" errno) == 12" "large allocations fail with ENOMEM"
hog_cmd e "tier 0 4K"
echo "   explicit: $REPLY"
check "$(kv "$REPLY" got) == 0" "tieralloc_malloc_tier(0, 4K) succeeds in tier 0"
hog_cmd e "tier 1 1M"
echo "   explicit: $REPLY"
check "$(kv "$REPLY" got) == 1" "tieralloc_malloc_tier(1, 1M) succeeds in tier 1"
hog_cmd e "tier 0 1M"
check "$(kv "$REPLY" got) == 0" "tieralloc_malloc_tier(0, 1M) succeeds in tier 0"
peek "$S"
grep '^tier=' <<<"$PEEK" | sed 's/^/   /'
check "$(pk tier=0 exhausted) > 0 && $(pk tier=1 exhausted) > 0" "refusals at max are counted"
check "$(pk tier=1 overflowed) == 0" "nothing overflowed"
hog_cmd e free
hog_quit e
hog_stderr_clean e

for mode in default lowest; do
	echo "== TIERALLOC_ON_FULL: $mode"
	S=$(seg "$mode")
	env=(TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S" TIERALLOC_TIER_LIMITS="$LIMITS")
	[[ $mode == default ]] || env+=(TIERALLOC_ON_FULL="$mode")
	hog_start "$mode" "${env[@]}"
	hog_cmd "$mode" "alloc 4M 4K 1"
	echo "   4 MiB in 4 KiB blocks: $REPLY"
	r=$REPLY
	check "$(kv "$r" failed) == 0" "nothing fails"
	check "$(kv "$r" tier0) <= M && $(kv "$r" tier1) >= 3 * M" "tier 0 within its max, the rest in tier 1"
	hog_cmd "$mode" "alloc 2M 1M 1"
	echo "   2 MiB in 1 MiB blocks: $REPLY"
	check "$(kv "$REPLY" failed) == 0 && $(kv "$REPLY" tier1) == 2 * M" "large blocks overflow into tier 1"
	peek "$S"
	grep '^tier=' <<<"$PEEK" | sed 's/^/   /'
	check "$(pk tier=1 overflowed) > 0" "overflow into the last tier is counted"
	check "$(pk tier=0 overflowed) == 0" "only the last tier overflows"
	check "$(pk tier=0 charged) <= M" "tier 0's charge within its max"
	check "$(pk tier=1 charged) > M" "tier 1 is charged beyond its max by the overflow"
	hog_cmd "$mode" free
	hog_quit "$mode"
	hog_stderr_clean "$mode"
done
q_finish
