#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Children join their parent's segment:
#   - fork: the child shares the parent's heap copy-on-write (the kernel counts it once, in the
#     parent's charge), so it takes a slot of its own, empty; the parent's slot does not change;
#     what the child allocates anew is charged to its slot; what it gives back of the inherited
#     heap never comes off the segment (src/alloc/arena.c, inherited);
#   - fork + exec: the new image attaches anew, with a slot charged with its own heap only; the
#     slot its pre-exec self took at fork (charged with a copy of the parent's heap that exec
#     threw away) must not stay charged;
#   - a killed, reaped child's slot is taken back by the next process that attaches.
# Variables named in check conditions are read by its arithmetic, unseen by shellcheck.
# shellcheck disable=SC2034
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

S=$(seg fork)
# TIERALLOC_PACK=0: the heap is of class runs, which the child can give back; packed runs (a
# process's first 8 MiB of 129 B-16 KiB objects) never go back, and a child reuses the inherited
# ones it frees without a charge of its own.
ENV=(TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$S" TIERALLOC_PACK=0
	TIERALLOC_TIER_LIMITS="0.high=64M;0.max=64M;1.high=64M;1.max=64M")
M=$((1 << 20))

# slot_charges PID: PID's slots' tier-0 charges in $PEEK, one per line.
slot_charges()
{
	grep "^slot pid=$1 " <<<"$PEEK" | sed 's/.* charged=\([0-9]*\),.*/\1/' || true
}

hog_start p "${ENV[@]}"
hog_cmd p pid
PARENT=$(kv "$REPLY" pid)
hog_cmd p "alloc 4M 4K 1"
check "$(kv "$REPLY" tier0) == 4 * M" "the parent's blocks in tier 0"
peek "$S"
cp0=$(slot_charges "$PARENT")

echo "== fork"
hog_cmd p fork
F=$(kv "$REPLY" pid)
peek "$S"
grep -E '^(slot|tier=0 )' <<<"$PEEK" | sed 's/^/   /'
check "$(nslots) == 2" "parent and forked child each have a slot"
[[ $(slot_charges "$PARENT") == "$cp0" ]] || ta_fail "the parent's slot changed at fork"
cf0=$(slot_charges "$F")
[[ -n $cf0 && $(wc -l <<<"$cf0") == 1 ]] || ta_fail "the forked child has no slot, or several"
check "cf0 == 0" "the forked child's slot starts empty: its heap is the parent's, copy-on-write"
check "$(pk tier=0 charged) == cp0 && $(pk tier=0 charged) == $(pk tier=0 slotsum)" \
	"the tier is charged once, with the parent's heap"
soft_check "$(pk tier=0 peak) >= $(pk tier=0 charged)" \
	"the tier's peak (highest charge seen) is at least its charge after the fork"

echo "== fork, the child frees the inherited heap, gives it back and allocates 2 MiB"
hog_cmd p "fork 2M free"
G=$(kv "$REPLY" pid)
peek "$S"
grep -E '^(slot|tier=0 )' <<<"$PEEK" | sed 's/^/   /'
cg0=$(slot_charges "$G")
[[ -n $cg0 && $(wc -l <<<"$cg0") == 1 ]] || ta_fail "the second child has no slot, or several"
# Its own runs only (4 KiB blocks in runs of 16 KiB pages), never a wrapped counter.
check "cg0 >= 2 * M && cg0 <= 2 * M + 256 * 1024" "the child is charged with what it made anew"
[[ $(slot_charges "$PARENT") == "$cp0" ]] || ta_fail "the parent's slot changed when a child gave its heap back"
check "$(pk tier=0 charged) == $(pk tier=0 slotsum)" "tier charge = sum of the slots"
hog_cmd p "kill $G"

echo "== fork + exec"
mkfifo "$TA_WORK/e.in"
exec {efd}<>"$TA_WORK/e.in"
hog_cmd p "spawn $TA_WORK/e.in $TA_WORK/e.out"
E=$(kv "$REPLY" pid)
echo pid >&"$efd"
wait_lines "$TA_WORK/e.out" 1 "exec'd child" ""
echo "alloc 2M 4K 1" >&"$efd"
wait_lines "$TA_WORK/e.out" 2 "exec'd child" ""
check "$(kv "$(sed -n 2p "$TA_WORK/e.out")" tier0) == 2 * M" "the exec'd child's blocks in tier 0"
peek "$S"
grep -E '^(slot|tier=0 )' <<<"$PEEK" | sed 's/^/   /'
ce=$(slot_charges "$E")
[[ -n $ce ]] || ta_fail "the exec'd child ($E) has no slot"
if [[ $(wc -l <<<"$ce") != 1 ]]; then
	soft_fail "the exec'd child ($E) holds $(wc -l <<<"$ce") slots, charged $(tr "\n" " " <<<"$ce"): the" \
		"slot its pre-exec self took at fork still counts the parent's heap"
	ce=$(sort -n <<<"$ce" | head -n 1) # the new image's, for the checks below
fi
check "ce >= 2 * M && ce < 3 * M" "the exec'd child's new slot is charged with its own heap only"
check "$(pk tier=0 charged) == $(pk tier=0 slotsum)" "tier charge = sum of the slots"

echo "== a killed child's slot is taken back"
hog_cmd p "kill $F"
hog_cmd p "kill $E"
hog_start q "${ENV[@]}"
hog_cmd q pid
peek "$S"
check "$(nslots) == 2" "parent and the new process are left"
[[ -z $(slot_charges "$F") && -z $(slot_charges "$E") ]] || ta_fail "a dead child's slot is still there"
check "$(pk tier=0 charged) == $(pk tier=0 slotsum)" "tier charge = sum of the slots"
hog_quit q
hog_quit p
hog_stderr_clean p
hog_stderr_clean q
q_finish
