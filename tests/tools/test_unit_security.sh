#!/bin/bash
# SPDX-License-Identifier: MIT
# The agent's systemd unit, as built, is hardened: systemd-analyze security --offline rates its
# exposure at most 5.0 (agent/tierallocd.service.in says what each setting keeps and why). Skips
# without the agent (no unit) or without a systemd-analyze that has --offline (systemd 250).
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
max=5.0
if [[ -z ${TA_TEST_UNITDIR:-} ]]; then
	echo "SKIP: the agent is not built (configure found no BPF toolchain): no unit"
	exit 77
fi
unit=$TA_TEST_BUILDDIR/agent/tierallocd.service
[[ -s $unit ]] || { echo "FAIL: $unit was not built" >&2; exit 1; }
if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: no systemd-analyze (systemd is not installed)"
	exit 77
fi
out=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) || {
	if grep -q -e 'unrecognized option' -e 'Unknown option' <<<"$out"; then
		echo "SKIP: systemd-analyze $(systemd-analyze --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') has no --offline (250 and later)"
		exit 77
	fi
	echo "$out" >&2
	echo "FAIL: systemd-analyze security failed" >&2
	exit 1
}
# What is left exposed, then the score.
grep '✗' <<<"$out" | sed 's/  */ /g' || true
line=$(grep 'Overall exposure level' <<<"$out") || { echo "$out" >&2; echo "FAIL: no exposure level" >&2; exit 1; }
echo "$line"
score=$(sed -n 's/.*: \([0-9][0-9]*\.[0-9]\).*/\1/p' <<<"$line")
[[ -n $score ]] || { echo "FAIL: no score in \"$line\"" >&2; exit 1; }
if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s <= m) }'; then
	echo "PASS: exposure $score, at most $max"
else
	echo "FAIL: exposure $score, above $max" >&2
	exit 1
fi
