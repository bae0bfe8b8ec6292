#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-access`: what tracking written pages costs (issue 14 item 4). In the QEMU
# guest of the tests (soft-dirty needs its kernel; this host's has none), with two 2G nodes so
# that a 1 GiB working set fits, a cgroup with a quota (memory.max 3G: a tier-0 share of about
# 1.5G, below node 0, so that the worker samples), bench/access-cost with a
# working set of WS_MIB (default 1024) written page by page for 20 s, TIERALLOC_ACCESS=age and
# soft-dirty interleaved, REPS rounds (default 3), with 4 KiB pages (THP off) and then with THP
# always. Prints every run, then per setting the medians and soft-dirty against age: the
# writer's throughput, the process's extra CPU as a share of one core, the faults.
#
# Usage: run-access.sh BUILDDIR SRCDIR [REPS [WS_MIB]]
set -eu
if [ "${1:-}" = --in-guest ]; then
	B=$2
	REPS=$3
	WS=$4
	out=/tmp/access-bench.txt
	: >$out
	for thp in never always; do
		echo $thp >/sys/kernel/mm/transparent_hugepage/enabled
		i=0
		while [ $i -lt "$REPS" ]; do
			for access in age soft-dirty; do
				cg=/sys/fs/cgroup/bench-access-$i
				mkdir $cg
				echo 3G >$cg/memory.max
				line=$( (echo 0 >$cg/cgroup.procs && exec env TIERALLOC_ACCESS=$access \
					LD_PRELOAD="$B/preload/.libs/libtieralloc-preload.so" \
					"$B/bench/access-cost" "$WS" 20))
				echo "thp=$thp $line" | tee -a $out
				rmdir $cg
			done
			i=$((i + 1))
		done
	done
	echo
	echo "medians of $REPS rounds; extra CPU = (process CPU / wall) of soft-dirty less age's, in"
	echo "% of one core; throughput = pages written per second, soft-dirty / age"
	awk '
	function med(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		k = v["thp"] SUBSEP v["access"]
		pps[k] = pps[k] " " v["pages_per_s"]; cpu[k] = cpu[k] " " v["process_cpu_ms"]
		flt[k] = flt[k] " " v["minflt"]; smp[k] = smp[k] " " v["sample_ms"]
		n[k] = n[k] " " v["samples"]; per[k] = per[k] " " v["period_ms"]
	}
	END {
		split("never always", thps, " ")
		for (t = 1; t <= 2; t++) {
			a = thps[t] SUBSEP "age"; s = thps[t] SUBSEP "soft-dirty"
			printf "THP %-6s: throughput %.3f (%d vs %d pages/s); extra CPU %.2f%% of a core;" \
			       " faults %d vs %d; %d samples, the last took %.1f ms, period %d ms\n", thps[t],
			       med(pps[s]) / med(pps[a]), med(pps[s]), med(pps[a]),
			       (med(cpu[s]) - med(cpu[a])) / 200, med(flt[s]), med(flt[a]),
			       med(n[s]), med(smp[s]), med(per[s])
		}
	}' $out
	exit 0
fi
B=$1
S=$2
REPS=${3:-3}
WS=${4:-1024}
exec "$S/tests/vm/guest-run.sh" --timeout 1800 --node-mem 2G,2G \
	--include "$B/preload/.libs/libtieralloc-preload.so" \
	--include "$B/src/.libs/libtieralloc.so.0" \
	--include "$B/bench/access-cost" \
	--include "$S/bench/run-access.sh" \
	-- "$S/bench/run-access.sh" --in-guest "$B" "$REPS" "$WS"
