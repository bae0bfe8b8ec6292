#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat --prometheus on a live segment: a process under the preload holds a segment of
# its own with tier 0 limited to 4 MiB; Prometheus' own checker (promtool check metrics, Debian
# package prometheus) must accept the exposition, named and of every segment, and the samples
# must say what the segment holds. Skipped only when promtool is not installed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ta_require promtool prometheus

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
[[ -x $STAT ]] || ta_hard_error "tieralloc-stat not built: $STAT"
seg=tieralloc-v1-test-prom-$$
holder=
stop_holder()
{
	if [[ -n $holder ]]; then
		kill "$holder" 2>/dev/null || true
		wait "$holder" 2>/dev/null || true
	fi
	rm -f "/dev/shm/$seg"
	ta_cleanup
}
trap stop_holder EXIT

# Started directly (not through a shell function) so that $! is the process itself.
LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME="$seg" TIERALLOC_TIERS="0;0" \
	TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M" sleep 120 &
holder=$!
for _ in $(seq 1 100); do
	[[ -s /dev/shm/$seg ]] && "$STAT" --name "/$seg" >/dev/null 2>&1 && break
	sleep 0.1
done
"$STAT" --name "/$seg" >/dev/null || ta_fail "the tieralloc process made no readable segment"

"$STAT" --prometheus --name "/$seg" >"$TA_WORK/named.prom" || ta_fail "--prometheus --name failed"
promtool check metrics <"$TA_WORK/named.prom" || {
	cat "$TA_WORK/named.prom" >&2
	ta_fail "promtool rejects tieralloc-stat --prometheus --name"
}
echo "promtool (one segment): ok"
# Every segment on the machine (other tests' too): one document, still valid.
"$STAT" --prometheus >"$TA_WORK/all.prom" || ta_fail "--prometheus failed"
promtool check metrics <"$TA_WORK/all.prom" || ta_fail "promtool rejects tieralloc-stat --prometheus"
grep -q "segment=\"/$seg\"" "$TA_WORK/all.prom" || ta_fail "the live segment is not in the full listing"
echo "promtool (all segments): ok"

# sample NAME TIER: the value of NAME for tier TIER (or the segment's, TIER empty).
sample()
{
	local sel="segment=\"/$seg\""
	[[ -n $2 ]] && sel="$sel,tier=\"$2\""
	grep -F "tieralloc_$1{" "$TA_WORK/named.prom" | grep -F "$sel" | awk '{ print $NF }'
}
[[ $(sample processes "") == 1 ]] || ta_fail "tieralloc_processes is not 1"
[[ $(sample tier_max_bytes 0) == $((4 << 20)) ]] || ta_fail "tier 0's max is not 4 MiB"
[[ $(sample tier_high_bytes 0) == $((4 << 20)) ]] || ta_fail "tier 0's high is not 4 MiB"
[[ $(sample tier_charged_bytes 0) =~ ^[0-9]+$ ]] || ta_fail "no tier 0 charge"
for m in tier_min_bytes tier_low_bytes tier_steered_away_total tier_overflowed_total \
	tier_refused_max_total tier_demoted_bytes_total tier_reclaim_asked_bytes_total; do
	[[ $(sample $m 1) =~ ^[0-9]+$|^\+Inf$ ]] || ta_fail "no $m for tier 1"
done
grep -q '^# TYPE tieralloc_tier_steered_away_total counter$' "$TA_WORK/named.prom" ||
	ta_fail "tieralloc_tier_steered_away_total is not a counter"
grep -Fq 'tier_name="tier0",nodes="0"' "$TA_WORK/named.prom" || ta_fail "no tier_name or nodes label"
echo "samples: ok"

# A missing segment: exit 1 and one line on stderr; --json and --prometheus exclude each other.
rc=0
"$STAT" --prometheus --name /tieralloc-test-missing-$$ >/dev/null 2>"$TA_WORK/err" || rc=$?
[[ $rc == 1 ]] || ta_fail "a missing segment: exit status $rc, want 1"
grep -q unreadable "$TA_WORK/err" || ta_fail "a missing segment: no line saying it is unreadable"
rc=0
"$STAT" --prometheus --json >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || ta_fail "--prometheus --json: exit status $rc, want 2"
echo PASS
