#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-protect`: seed 004's experiment for policy 2 (tierallocd --protect,
# issue 17) in the QEMU guest of the tests, on the scenario of tests/guest/protect_lib.sh (T:
# memory.max 160M, memory.low 64M, swap off; victim A re-reading 32 MiB of file every 500 ms,
# filler B streaming 256 MiB of file, a one-shot 64 MiB anonymous burst C).
#
# One run: a fresh T, caches dropped, A and B started, the arm started, 2 s to settle, then the
# 30 s window: the burst starts 5 s into it and holds 15 s. Measured over the window: pages stolen
# from A (pgsteal of A's memory.stat, as the seed counts), the arm's CPU (utime + stime from
# /proc/PID/stat; for ours the whole agent and its lease keeper), and A's memory.events low.
# Arms: none; poll (bench/protect-poll: memory.current every 5 ms, on a fall of 1 MiB/s or more
# the sample written to memory.low, never lowering what it wrote; outside T, like the agent);
# seed (the same, writing every such sample even when lower: the seed's U arm as it describes
# it); ours (tierallocd --protect). A round runs the arms in rotating order.
#
# Usage: run-protect.sh BUILDDIR SRCDIR [ROUNDS [KERNEL [ARMS]]]
#   (default 15 rounds, kernel 6.12, ARMS "none poll ours")
# Prints each run, then per arm the median and interquartile range of the pages stolen, the
# median CPU, and the ratios against the seed's numbers (U 3723, in-kernel 452).
set -eu
if [ "${1:-}" = --in-guest ]; then
	set +eu
	B=$2
	ROUNDS=$3
	ARMS=$5
	# shellcheck source=tests/guest/lib.sh
	. "$4/tests/guest/lib.sh"
	# shellcheck source=tests/guest/protect_lib.sh
	. "$4/tests/guest/protect_lib.sh"
	W=/tmp/protect-bench
	rm -rf $W
	mkdir -p $W
	failed=0
	out=$W/runs.txt
	: >$out
	scen_setup || { echo "cannot set up ext2 on zram"; exit 1; }
	echo "guest: $(uname -r), $(nproc) vCPUs; arms: $ARMS"
	# run ARM ROUND: one run; a line of key=value into $out.
	run() {
		scen_tree || { echo "cannot make $T"; failed=1; return; }
		scen_start $W || { echo "victim never ready"; failed=1; return; }
		sleep 3
		pids=
		case $1 in
		poll | seed)
			mode=max
			[ "$1" = seed ] && mode=sample
			"$PP" $T/a 5 1048576 $mode >$W/poll.out 2>&1 &
			pids=$!
			until_true grep -q '^polling' $W/poll.out
			;;
		ours)
			"$AGENT" --protect p004/a >$W/agent.out 2>&1 &
			pids=$!
			until_true grep -q '^tierallocd: protecting' $W/agent.out
			pids="$pids $(sed -n 's/.*keeper pid \([0-9]*\)).*/\1/p' $W/agent.out)"
			;;
		esac
		sleep 2
		s0=$(stolen)
		# shellcheck disable=SC2086 # a list of pids
		c0=$(cpu_ticks $pids)
		l0=$(sed -n 's/^low //p' $T/a/memory.events)
		sleep 5
		in_cg $T/c $W/burst.out "$PW" burst 64 15
		burst=$!
		sleep 25
		s1=$(stolen)
		# shellcheck disable=SC2086
		c1=$(cpu_ticks $pids)
		l1=$(sed -n 's/^low //p' $T/a/memory.events)
		low=$(low_of)
		writes=
		case $1 in
		poll | seed)
			kill -TERM $pids
			wait $pids
			writes=$(sed -n 's/.*writes=\([0-9]*\).*/\1/p' $W/poll.out)
			;;
		ours)
			set -- "$1" $pids
			kill -TERM "$2"
			wait "$2"
			writes=$(grep -c 'memory.low .* -> ' $W/agent.out)
			grep 'samples=' $W/agent.out | sed 's/^/   /'
			;;
		esac
		wait $burst
		scen_stop $W
		line="arm=$1 stolen=$((s1 - s0)) cpu_ms=$(((c1 - c0) * 10)) low_events=$((l1 - l0))"
		line="$line writes=${writes:-0} low_end=$((low / M))M victim=$(echo "$victim_said" | tr ' ' ,)"
		echo "$line" | tee -a $out
	}
	i=1
	order=$ARMS
	while [ $i -le "$ROUNDS" ]; do
		# Rotate: the first arm of the last round goes last.
		order="${order#* } ${order%% *}"
		echo "round $i: $order"
		for arm in $order; do run "$arm" "$i"; done
		i=$((i + 1))
	done
	for c in a b c; do rmdir $T/$c; done
	rmdir $T
	echo
	awk '
	function sort(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	}
	function q(a, n, f,   x, i) { x = 1 + (n - 1) * f; i = int(x); return a[i] + (x - i) * (a[i + 1 < n ? i + 1 : n] - a[i]) }
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		a = v["arm"]; n[a]++; st[a, n[a]] = v["stolen"]; cpu[a, n[a]] = v["cpu_ms"]
	}
	END {
		printf "%-5s %6s %8s %15s %9s %13s\n", "arm", "rounds", "stolen", "IQR", "min-max", "cpu_ms/window"
		split("none seed poll ours", arms, " ")
		for (k = 1; k <= 4; k++) {
			a = arms[k]; if (!n[a]) continue
			for (i = 1; i <= n[a]; i++) { s[i] = st[a, i]; c[i] = cpu[a, i] }
			sort(s, n[a]); sort(c, n[a])
			med[a] = q(s, n[a], 0.5)
			printf "%-5s %6d %8.0f %7.0f-%-7.0f %4d-%-5d %13.0f\n", a, n[a], med[a], q(s, n[a], 0.25), q(s, n[a], 0.75), s[1], s[n[a]], q(c, n[a], 0.5)
		}
		printf "seed 004 (15 rounds): U (5 ms polling) 3723 [2825-4730], in-kernel B2 452 [339-755]\n"
		for (k = 1; k <= 3; k++) {
			a = arms[k]; if (!n[a]) continue
			if (med["ours"] > 0)
				printf "%s/ours %.1fx (target against the polling arm: >= 4x; the seed U/B2: 8.2x)\n", a, med[a] / med["ours"]
			else
				printf "%s median %.0f, ours 0: %s/ours unbounded\n", a, med[a], a
		}
		printf "ours against the seed: %.2fx of its U median, %.2fx of its B2 median\n", med["ours"] / 3723, med["ours"] / 452
	}' $out
	exit $failed
fi
B=$1
S=$2
ROUNDS=${3:-15}
KERNEL=${4:-6.12}
ARMS=${5:-none poll ours}
exec "$S/tests/vm/guest-run.sh" --kernel "$KERNEL" --timeout $((ROUNDS * $(echo "$ARMS" | wc -w) * 90 + 300)) \
	--module zram --module ext4 --module crc32c_generic \
	--include "$B/agent/tierallocd" \
	--include "$B/bench/protect-work" \
	--include "$B/bench/protect-poll" \
	--include "$S/tests/guest/lib.sh" \
	--include "$S/tests/guest/protect_lib.sh" \
	--include "$S/bench/run-protect.sh" \
	-- "$S/bench/run-protect.sh" --in-guest "$B" "$ROUNDS" "$S" "$ARMS"
