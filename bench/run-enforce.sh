#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-enforce`: malloc latency under a lock while a cgroup is over its tier-0
# share and enforcement has work to do, with TIERALLOC_ENFORCE=off, deferred and inline, all in
# one run (bench/enforce-latency.c says what one measurement does). It needs two tiers, cgroup
# v2 and root, so it boots the QEMU guest of the tests (tests/vm/guest-run.sh) and runs there;
# the guest's CPU is emulated (TCG): compare the modes with each other, not with other machines.
#
# Usage: run-enforce.sh BUILDDIR SRCDIR [REPS]   (REPS rounds, modes interleaved; default 3)
# Prints every measurement, then per mode the median over the rounds of each percentile and its
# ratio to "off".
set -eu
if [ "${1:-}" = --in-guest ]; then
	B=$2
	REPS=$3
	out=/tmp/enforce-bench.txt
	: >$out
	i=0
	while [ $i -lt "$REPS" ]; do
		for mode in off deferred inline; do
			cg=/sys/fs/cgroup/bench-$mode-$i
			mkdir $cg
			(echo 0 >$cg/cgroup.procs && exec env TIERALLOC_ENFORCE=$mode \
				LD_PRELOAD="$B/preload/.libs/libtieralloc-preload.so" \
				"$B/bench/enforce-latency") | tee -a $out
			rmdir $cg
		done
		i=$((i + 1))
	done
	echo
	echo "median of $REPS rounds, ns; ratio to off in brackets (node 0 MiB: before -> after)"
	awk '
	function med(list, n,   a, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	{
		split($1, m, "="); mode = m[2]; sect = ""
		for (f = 2; f <= NF; f++) {
			if ($f !~ /=/) { sect = $f; continue }
			split($f, kv, "="); key = (kv[1] ~ /^node0|^ops/) ? kv[1] : sect "." kv[1]
			vals[mode, key] = vals[mode, key] " " kv[2]
		}
	}
	END {
		split("malloc_ns.p50 malloc_ns.p99 malloc_ns.p999 malloc_ns.max wait_ns.p50 wait_ns.p99 wait_ns.p999 wait_ns.max", keys, " ")
		printf "%-10s", "mode"
		for (k = 1; k <= 8; k++) printf " %20s", keys[k]
		printf " %16s\n", "node0 MiB"
		split("off deferred inline", modes, " ")
		for (i = 1; i <= 3; i++) {
			md = modes[i]; printf "%-10s", md
			for (k = 1; k <= 8; k++) {
				v = med(vals[md, keys[k]]); o = med(vals["off", keys[k]])
				printf " %11d [%6.2f]", v, (o > 0 ? v / o : 0)
			}
			printf " %7d->%-7d\n", med(vals[md, "node0_before"]) / 1048576, med(vals[md, "node0_after"]) / 1048576
		}
	}' $out
	# A measurement the kernel's OOM killer ended shows as "Killed" above; say why.
	dmesg | grep -i "killed process" || true
	exit 0
fi
B=$1
S=$2
REPS=${3:-3}
exec "$S/tests/vm/guest-run.sh" --timeout 900 \
	--include "$B/preload/.libs/libtieralloc-preload.so" \
	--include "$B/src/.libs/libtieralloc.so.0" \
	--include "$B/bench/enforce-latency" \
	--include "$S/bench/run-enforce.sh" \
	-- "$S/bench/run-enforce.sh" --in-guest "$B" "$REPS"
