#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-lending`: what lending idle fast-tier shares (tierallocd --lend, issue 15)
# buys and what taking them back costs, in the QEMU guest of the tests (two nodes, cgroup v2,
# root, the agent). The guest's CPU is emulated (TCG): page migration there is far slower than
# on a real machine, so the take-back times are the emulator's; compare on and off, not machines.
#
# One round: two containers, memory.max 900M and TIERALLOC_SPLIT=0=1;1=2 (tier-0 shares of 300M
# each). A holds 50 MiB; B grows to 700 MiB (1 MiB blocks, 5 ms apart); once B's node 0 stops
# growing (two readings 1 s apart the same), the fast-tier utilisation is
#     (A's + B's bytes on node 0) / (A's + B's tier-0 shares)
# (node 0's capacity available to them). With lending on, A then allocates 500 MiB: the round
# records when A holds its share on node 0 (within 24 MiB), when B is back within its own (the
# take-back, from A's command), the agent's count of the take-back (from its first cut), and how
# long after A's allocation returned B was back (in the emulator, A's own 500 MiB take seconds).
#
# Usage: run-lending.sh BUILDDIR SRCDIR [REPS]   (REPS rounds with lending on, one off; default 3)
# Prints each round, then the utilisation with lending off and on and the take-back times'
# minimum, median and maximum.
set -eu
if [ "${1:-}" = --in-guest ]; then
	set +u # lib.sh's helpers read variables they set through eval
	B=$2
	REPS=$3
	# shellcheck source=tests/guest/lib.sh
	. "$4/tests/guest/lib.sh"
	W=/tmp/lending-bench
	rm -rf $W
	mkdir -p $W
	failed=0
	SPLIT="TIERALLOC_SPLIT=0=1;1=2"
	SHARE=$((300 * M))
	TOL=$((24 * M))
	out=$W/rounds.txt
	: >$out
	steady() {
		_a=$(n0 "$1")
		sleep 1
		[ "$(n0 "$1")" = "$_a" ]
	}
	# round MODE I: one round, lending "on" or "off"; a line of key=value into $out.
	round() {
		cg_new "bench-la-$1-$2" 900M
		la=$cg
		cg_new "bench-lb-$1-$2" 900M
		lb=$cg
		if [ "$1" = on ]; then
			"$B/agent/tierallocd" --lend --interval 0.25 --rescan 0.5 --print \
				>$W/agent-$2.out 2>&1 &
			agent=$!
			until_true grep -q "^tierallocd: attached" $W/agent-$2.out
		fi
		work_start a 3 "$la" 50M 1M 0 "$SPLIT"
		work_start b 4 "$lb" 100M 1M 0 "$SPLIT"
		work_cmd b "grow 600M 5"
		until_true steady "$lb"
		a0=$(n0 "$la")
		b0=$(n0 "$lb")
		util=$(pct $((a0 + b0)) $((2 * SHARE)))
		line="mode=$1 a_node0=$((a0 / M)) b_node0=$((b0 / M)) utilisation=$util"
		if [ "$1" = on ]; then
			t0=$(now_cs)
			work_cmd a "grow 500M 0"
			alloc=$(($(now_cs) - t0))
			until_true n0_above "$la" $((SHARE - TOL))
			owner=$(($(now_cs) - t0))
			until_true n0_within "$lb" $((SHARE + TOL))
			back=$(($(now_cs) - t0))
			until_true grep -q "take-back" $W/agent-$2.out
			agent_s=$(sed -n 's/.*take-back .* took \([0-9.]*\) s.*/\1/p' $W/agent-$2.out |
				tail -1)
			line="$line alloc_s=$(secs $alloc) owner_s=$(secs $owner)"
			line="$line take_back_s=$(secs $back) agent_take_back_s=${agent_s:-n/a}"
			kill -TERM "$agent"
			wait "$agent" || true
		fi
		work_quit a
		work_quit b
		rmdir "$la" "$lb"
		echo "$line" | tee -a $out
	}
	round off 0
	i=1
	while [ $i -le "$REPS" ]; do
		round on $i
		i=$((i + 1))
	done
	echo
	awk '
	function stats(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return sprintf("min %s  median %s  max %s", a[1], a[int((n + 1) / 2)], a[n])
	}
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		if (v["mode"] == "off") { off = v["utilisation"]; next }
		on = on " " v["utilisation"]; own = own " " v["owner_s"]
		tb = tb " " v["take_back_s"]; ag = ag " " v["agent_take_back_s"]
		after = after " " sprintf("%.1f", v["take_back_s"] - v["alloc_s"])
	}
	END {
		printf "fast-tier utilisation (node 0 used by A and B / their tier-0 shares), %%:\n"
		printf "  lending off: %s\n  lending on:  %s\n", off, stats(on)
		printf "owner at its share, s after its 500 MiB request:   %s\n", stats(own)
		printf "borrower back within its share (take-back), s:     %s\n", stats(tb)
		printf "take-back as the agent counts it (from its cut), s: %s\n", stats(ag)
		printf "borrower back, s after the owner's allocation returned: %s\n", stats(after)
	}' $out
	exit $failed
fi
B=$1
S=$2
REPS=${3:-3}
exec "$S/tests/vm/guest-run.sh" --timeout 3600 \
	--include "$B/preload/.libs/libtieralloc-preload.so" \
	--include "$B/src/.libs/libtieralloc.so.0" \
	--include "$B/tests/guest/enforce_work" \
	--include "$B/agent/tierallocd" \
	--include "$S/tests/guest/lib.sh" \
	--include "$S/bench/run-lending.sh" \
	-- "$S/bench/run-lending.sh" --in-guest "$B" "$REPS" "$S"
