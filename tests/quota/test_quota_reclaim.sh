#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The charges of a process killed by SIGKILL come back to its cgroup's segment:
#   1. on attach: A charges 4 MiB to tier 0 and is killed; its slot keeps the charge (nothing
#      runs at a SIGKILL) until B attaches, which takes it back (tier charge and slot freed,
#      `reclaimed` grows by exactly A's charge);
#   2. on a refresh: C charges 2 MiB and is killed while B runs; B's next allocation slow path
#      once the limits went unread for two refresh periods (2 s, src/quota/shm.c LIMITS_REFRESH_NS)
#      starts B's worker, whose refresh takes C's charges back. Never B's own thread: the
#      refresh reads /proc for every slot. The script sleeps 2.5 s first (a sleep is never
#      shorter than asked), then waits for the outcome, the worker being a thread of its own.
# The killed processes are reaped first (wait): a zombie still answers kill(pid, 0), and its
# slot counts as alive until its parent reaps it.
# Variables named in check conditions are read by its arithmetic, unseen by shellcheck.
# shellcheck disable=SC2034
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

S=$(seg reclaim)
ENV=(TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S"
	TIERALLOC_TIER_LIMITS="0.high=64M;0.max=64M;1.high=64M;1.max=64M")

# slot_charge PID TIER: PID's slot charge in $PEEK, or "none".
slot_charge()
{
	local line
	line=$(grep "^slot pid=$1 " <<<"$PEEK" || true)
	if [[ -z $line ]]; then
		echo none
		return
	fi
	kv "$line" charged | cut -d, -f$(($2 + 1))
}

echo "== 1. SIGKILL, then another process attaches"
hog_start a "${ENV[@]}"
hog_cmd a pid
A=$(kv "$REPLY" pid)
hog_cmd a "alloc 4M 4K 1"
echo "   A ($A): $REPLY"
check "$(kv "$REPLY" tier0) == 4 << 20" "A's blocks in tier 0"
peek "$S"
ca0=$(slot_charge "$A" 0)
ca1=$(slot_charge "$A" 1)
check "ca0 >= 4 << 20 && $(pk tier=0 charged) == ca0" "A's charge is the tier's charge"
hog_kill9 a
peek "$S"
check "$(slot_charge "$A" 0) == ca0 && $(pk tier=0 charged) == ca0 && $(pk tier=0 reclaimed) == 0" \
	"a dead process keeps its charge until a peer takes it back"

hog_start b "${ENV[@]}"
hog_cmd b pid
B=$(kv "$REPLY" pid)
peek "$S"
echo "   A ($A) killed with $((ca0 / 1024)) KiB charged to tier 0; after B ($B) attached:"
grep -E '^(slot|tier=0 )' <<<"$PEEK" | sed 's/^/   /'
check "$(nslots) == 1" "only B's slot is left"
[[ $(slot_charge "$A" 0) == none ]] || ta_fail "A's slot was not freed"
check "$(pk tier=0 reclaimed) == ca0 && $(pk tier=1 reclaimed) == ca1" \
	"reclaimed is exactly what A had charged"
check "$(pk tier=0 charged) == $(slot_charge "$B" 0)" "the tier's charge is B's alone"

echo "== 2. SIGKILL while a peer runs: its next refresh takes the charges back"
hog_cmd b "alloc 2M 4K 1"
hog_start c "${ENV[@]}"
hog_cmd c pid
C=$(kv "$REPLY" pid)
hog_cmd c "alloc 2M 4K 1"
peek "$S"
cc0=$(slot_charge "$C" 0)
check "cc0 >= 2 << 20" "C charged its blocks"
hog_kill9 c
reclaimed_before=$(pk tier=0 reclaimed)
sleep 2.5
# New threads in B: their first allocations refill their stock and find the limits stale: B's
# worker starts and refreshes them, taking back dead slots.
hog_cmd b "alloc 1M 4K 2"
waited=0
while peek "$S" && [[ $(slot_charge "$C" 0) != none ]] && ((waited < TA_QUOTA_WAIT * 10)); do
	sleep 0.1
	waited=$((waited + 1))
done
echo "   C ($C) killed with $((cc0 / 1024)) KiB charged to tier 0; after B's refresh" \
	"($((waited * 100)) ms after B's allocation):"
grep -E '^(slot|tier=0 )' <<<"$PEEK" | sed 's/^/   /'
[[ $(slot_charge "$C" 0) == none ]] || ta_fail "C's slot was not taken back by B's refresh"
check "$(pk tier=0 reclaimed) == reclaimed_before + cc0" "reclaimed grew by C's charge"
check "$(pk tier=0 charged) == $(slot_charge "$B" 0)" "the tier's charge is B's alone"
hog_quit b
hog_stderr_clean b
q_finish
