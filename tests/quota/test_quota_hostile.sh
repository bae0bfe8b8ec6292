#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Segments that a process of the same user breaks, or that a creator left unfinished (issue 12):
#   - unfinished: an empty file, or one never marked ready, whose creator is gone (no process
#     holds its lock), is made again by the next process, which gets the quotas at once (same
#     output as with a good segment, nothing on stderr); while a creator holds the lock the
#     file is left alone (one warning, local accounting), and made once it is gone;
#   - wrapped: an absurd tier counter (1.8e19, as a wrapped one was seen) no longer refuses
#     the tier to everyone;
#   - marker: a slot left held by the reclaim marker is taken back (its 1 MiB with it);
#   - live: shm_forge rewrites header fields and truncates the file while a quota_hog
#     allocates, frees and checks its blocks; the hog must live, its blocks stay intact, and
#     it says at most one line (that it keeps its own accounting from now on).
# Needs no root.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

FORGE=$TA_TEST_BUILDDIR/tests/quota/shm_forge
[[ -x $FORGE ]] || ta_hard_error "$FORGE not built"
BLOCKS=$(ta_prog prog_blocks)
LIMITS="0.high=1M;0.max=1M;1.high=1G;1.max=1G"
cd "$TA_WORK"

# blocks NAME SHM_NAME: prog_blocks under the preload; NAME.out, NAME.err, status in $rc.
blocks()
{
	rc=0
	ta_preloaded env TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$2" \
		TIERALLOC_TIER_LIMITS="$LIMITS" "$BLOCKS" 8M 4K --tiers >"$1.out" 2>"$1.err" || rc=$?
}

# expect_quota NAME: the run had the segment's quotas, and said nothing.
expect_quota()
{
	if [[ $rc != 0 || -s $1.err ]] || ! cmp -s control.out "$1.out"; then
		cat "$1.out" "$1.err" >&2
		soft_fail "$1: expected status 0, the output of a working segment and no stderr"
		return
	fi
	echo "   $1: ok: quotas applied"
}

blocks local off
[[ $rc == 0 && ! -s local.err ]] || { cat local.err >&2; ta_hard_error "the run without a segment failed"; }
blocks control "$(seg control)"
[[ $rc == 0 && ! -s control.err ]] || { cat control.err >&2; ta_hard_error "the run with a good segment failed"; }
grep -q '^tiers: count 2 first 0 last 1$' control.out ||
	{ cat control.out >&2; ta_hard_error "with a working segment the 1M tier-0 max should move blocks to tier 1"; }

echo "== unfinished segments whose creator is gone are made again"
s=$(seg empty)
: >"/dev/shm/$s"
chmod 600 "/dev/shm/$s"
blocks empty "$s"
expect_quota empty
peek "$s"
[[ $(kv "$(head -n 1 <<<"$PEEK")" size) == "$(stat -c %s "/dev/shm/$(seg control)")" ]] ||
	soft_fail "empty: not made again"

s=$(seg state0)
"$FORGE" "/dev/shm/$s" state0
blocks state0 "$s"
expect_quota state0

echo "== an unfinished segment whose creator lives (holds the lock) is left alone"
s=$(seg held)
coproc HOLDER { exec "$FORGE" "/dev/shm/$s" hold 600; }
# shellcheck disable=SC2153 # HOLDER_PID is set by coproc
holder_pid=$HOLDER_PID
read -r line <&"${HOLDER[0]}" || ta_hard_error "shm_forge hold did not start"
[[ $line == held ]] || ta_hard_error "shm_forge hold: $line"
before=$(sha256sum <"/dev/shm/$s")
blocks held "$s"
want="tieralloc: warning: shared segment /$s: its creator never finished it; this process keeps its own accounting"
if [[ $rc != 0 || $(cat held.err) != "$want" ]] || ! cmp -s local.out held.out; then
	cat held.out held.err >&2
	soft_fail "held: expected local accounting and exactly: $want"
fi
[[ $(sha256sum <"/dev/shm/$s") == "$before" ]] || soft_fail "held: the file changed under its live creator"
kill "$holder_pid"
wait "$holder_pid" 2>/dev/null || true
blocks held-after "$s"
expect_quota held-after

echo "== absurd charges"
s=$(seg wrapped)
"$FORGE" "/dev/shm/$s" wrapped
blocks wrapped "$s"
expect_quota wrapped
peek "$s"
soft_check "$(pk 'tier=0' charged) < (1 << 47)" "wrapped: tier 0's counter still absurd"

s=$(seg marker)
"$FORGE" "/dev/shm/$s" marker
hog_start m TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$s" TIERALLOC_TIER_LIMITS="$LIMITS" \
	TIERALLOC_CHARGE_BATCH=4K
# Refills refresh the segment (and take dead slots back) once a second; the marker is taken
# back once it has been seen for 2 s.
waited=0
while peek "$s" && grep -q '^slot pid=4294967295 ' <<<"$PEEK"; do
	hog_cmd m "alloc 64K 4K 1"
	hog_cmd m "free"
	sleep 0.2
	waited=$((waited + 1))
	[[ $waited -lt $((TA_QUOTA_WAIT * 5)) ]] || { soft_fail "marker: the slot was never taken back"; break; }
done
peek "$s"
soft_check "$(pk 'tier=0' charged) == $(pk 'tier=0' slotsum)" "marker: its 1 MiB is still charged"
hog_quit m
hog_stderr_clean m
echo "   marker: ok: taken back after $waited rounds"

echo "== a writer rewrites the header and truncates the file under a running process"
for seed in 1 2 3 4; do
	s=$(seg "live$seed")
	hog_start "l$seed" TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$s" TIERALLOC_TIER_LIMITS="$LIMITS"
	hog_cmd "l$seed" "alloc 4M 4K 2"
	"$FORGE" "/dev/shm/$s" live 300 "$seed" &
	forger=$!
	rounds=0
	while kill -0 "$forger" 2>/dev/null || [[ $rounds -lt 3 ]]; do
		hog_cmd "l$seed" "alloc 1M 4K 1"
		hog_cmd "l$seed" "where"
		[[ $(kv "$REPLY" bad) == 0 ]] || soft_fail "live $seed: blocks changed: $REPLY"
		rounds=$((rounds + 1))
		[[ $rounds -lt 60 ]] || break
	done
	wait "$forger" || ta_hard_error "shm_forge live failed"
	hog_cmd "l$seed" "where"
	[[ $(kv "$REPLY" bad) == 0 ]] || soft_fail "live $seed: blocks changed: $REPLY"
	hog_cmd "l$seed" "free"
	hog_quit "l$seed"
	err=$TA_WORK/l$seed.err
	if [[ $(wc -l <"$err") -gt 1 ]] || grep -qv "^tieralloc: warning: shared segment /$s: .*; this process keeps its own accounting from now on$" "$err"; then
		cat "$err" >&2
		soft_fail "live $seed: expected at most one line, that the process keeps its own accounting"
	fi
	echo "   live $seed: ok: $rounds rounds; $(cut -d' ' -f5- "$err")"
done

# Deterministic: the file cut to nothing and left so; the next charge touches it.
s=$(seg cut)
hog_start cut TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$s" TIERALLOC_TIER_LIMITS="$LIMITS"
hog_cmd cut "alloc 2M 4K 2"
truncate -s 0 "/dev/shm/$s"
hog_cmd cut "alloc 2M 4K 2"
hog_cmd cut "where"
[[ $(kv "$REPLY" bad) == 0 ]] || soft_fail "cut: blocks changed: $REPLY"
hog_cmd cut "free"
hog_quit cut
want="tieralloc: warning: shared segment /$s: the file was truncated under this process; this process keeps its own accounting from now on"
[[ $(cat "$TA_WORK/cut.err") == "$want" ]] ||
	{ cat "$TA_WORK/cut.err" >&2; soft_fail "cut: expected exactly: $want"; }
echo "   cut: ok"
q_finish
