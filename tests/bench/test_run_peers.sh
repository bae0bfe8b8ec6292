#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench/run-peers.py (make bench-peers) on stand-in programs: a run's cost is read as the
# program reports it where it runs a fixed span (larson's "relative time", xmalloc-test's "rtime"),
# its max RSS is the program's own and not the driver's (a Python process of 10 MiB and more), a
# failed run is said, its test left out of the means and the exit status 1, and a missing program
# is named and left out. No timing is judged.
# Exit: 0 pass, 1 fail, 77 skip.
set -u
builddir=${TA_TEST_BUILDDIR:-.}
srcdir=${TA_TEST_SRCDIR:-.}
if [ ! -e "$builddir/preload/.libs/libtieralloc-preload.so" ]; then
	echo "test_run_peers: the preload is not built; skipping" >&2
	exit 77
fi
tmp=$(mktemp -d /tmp/ta-peers-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mb/out/bench" "$tmp/mb/bench/espresso"
progs=$tmp/mb/out/bench
printf '#!/bin/sh\necho factors\n' >"$progs/cfrac"
printf '#!/bin/sh\necho "Throughput = 1 operations per second, relative time: 2.500s."\n' \
	>"$progs/larson-sized"
printf '#!/bin/sh\necho "rtime: 4.000, free/sec: 1 M"\n' >"$progs/xmalloc-test"
# espresso fails under every arm: its input is read and refused.
printf '#!/bin/sh\ncat "$1" >&2; exit 3\n' >"$progs/espresso"
echo "bad input" >"$tmp/mb/bench/espresso/largest.espresso"
chmod +x "$progs"/*
fail=0
python3 "$srcdir/bench/run-peers.py" "$builddir" "$tmp/mb" --rounds 1 \
	--tests cfrac,larsonN-sized,xmalloc-testN,espresso,mstressN >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check() {
	if ! grep -Eq "$1" "$tmp/out"; then
		echo "FAIL: $2 (no line matching: $1)"
		fail=1
	fi
}
[ $rc -eq 1 ] || { echo "FAIL: exit $rc with a failed test, want 1"; fail=1; }
check '^# mstressN: no mstress in .* left out' "a missing program is named"
check '^test=larsonN-sized arm=glibc round=1 .* cost=2\.500 ' "larson's own time is its cost"
check '^test=xmalloc-testN arm=tieralloc round=1 .* cost=4\.000 ' "xmalloc-test's rtime is its cost"
check '^# espresso under glibc failed \(status 3\): bad input' "a failed run is said with its error"
check '^espresso +time +fail' "a failed test's row says so"
check 'over the 3 tests .*\(espresso left out\)' "a failed test is left out of the means"
check '^larsonN-sized +time +2\.500 +1\.000x' "reported costs in the table"
# The stand-ins are shell scripts of 1-3 MiB under glibc; the driver is a Python process of
# 10 MiB or more.
big=$(sed -n 's/^test=cfrac arm=glibc .*maxrss_kib=\([0-9]*\) .*/\1/p' "$tmp/out")
if [ -z "$big" ] || [ "$big" -ge 6000 ]; then
	echo "FAIL: cfrac's max RSS ${big:-missing} KiB: the driver's own, not the program's"
	fail=1
fi
exit $fail
