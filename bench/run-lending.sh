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
# (node 0's capacity available to them). With lending on, A then asks for its share: it
# allocates 500 MiB, and its first allocations go past what it held while lending (the agent
# takes its whole share back at once). The take-back is timed from A's request until A holds its
# whole share again: nothing of it is lent (its segment's lent is 0, so no borrower may keep any
# of it) and node 0's free memory covers its share less its usage there, so that its
# allocations land in its share without waiting for anyone. In this guest node 0 is larger
# than the two shares, so that is when the loan is revoked; the borrower's demotion of what it
# borrowed, at the emulator's speed of page migration, is timed on its own (B back within its
# share, and 24 MiB), with the agent's count of the take-back (from the ask until every
# borrower is back), when A's allocation returned and when A's own usage reached its share
# (within 24 MiB): A's page faults take seconds in the emulator. No allocation of A's may fail
# and no word of A's or B's may change, or the round fails.
#
# Usage: run-lending.sh BUILDDIR SRCDIR [REPS]   (REPS rounds with lending on, one off; default 3)
# Prints each round, then the utilisation with lending off and on and the times' minimum,
# median and maximum.
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
	free0() { sed -n 's/.*MemFree: *\([0-9]*\) kB/\1/p' /sys/devices/system/node/node0/meminfo; }
	lends_nothing() { [ "$(lend0 "$la" lent)" = 0 ]; }
	room() { [ $(($(free0) * 1024)) -ge $((SHARE - $(n0 "$la"))) ]; }
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
		proc_cmd b "grow 600M 5"
		until_true steady "$lb"
		a0=$(n0 "$la")
		b0=$(n0 "$lb")
		util=$(pct $((a0 + b0)) $((2 * SHARE)))
		line="mode=$1 a_node0=$((a0 / M)) b_node0=$((b0 / M)) utilisation=$util"
		if [ "$1" = on ]; then
			# A asks for its share: its 500 MiB request, whose first allocations go past
			# what it held while lending. A holds its whole share again once nothing of it
			# is lent (its segment's lent is 0: no borrower may keep any of it) and node 0
			# has room for the rest of it (MemFree >= A's share - A's node 0): its
			# allocations land in its share on node 0, waiting for no one. The loans go in
			# the agent's round that saw A ask (its time, printed); this script's polls see
			# it later (each costs a few programs in the emulator: "seen"). The room only
			# grows meanwhile (A's allocations take as much room as they need less; B's
			# demotion frees some), so room at the poll that sees lent 0 was room then.
			t0=$(now_cs)
			proc_send a "grow 500M 0"
			until_true lends_nothing
			seen=$(($(now_cs) - t0))
			room_then=1
			room || room_then=0
			until_true room
			roomy=$(($(now_cs) - t0))
			until_true n0_within "$lb" $((SHARE + TOL))
			demoted=$(($(now_cs) - t0))
			proc_wait a
			grown_a=$REPLY
			alloc=$(($(now_cs) - t0))
			until_true n0_above "$la" $((SHARE - TOL))
			owner=$(($(now_cs) - t0))
			until_true grep -q "take-back" $W/agent-$2.out
			agent_s=$(sed -n 's/.*take-back .* took \([0-9.]*\) s.*/\1/p' $W/agent-$2.out |
				tail -1)
			# The agent's round that saw A ask and cut the loans (its CLOCK_MONOTONIC,
			# the guest's uptime clock): the take-back, if node 0 had room for A then.
			ask=$(sed -n 's/.*asks for its share back.* at \([0-9.]*\) s$/\1/p' \
				$W/agent-$2.out | head -1)
			ask_s=$(awk -v a="${ask:-0}" -v t="$t0" 'BEGIN { printf "%.1f", a - t / 100 }')
			back_s=$ask_s
			[ "$room_then" = 1 ] && [ -n "$ask" ] || back_s=$(secs $roomy)
			proc_cmd a verify
			va=$REPLY
			proc_cmd b verify
			vb=$REPLY
			if [ "$(kv "$grown_a" failed)" != 0 ] || [ "$(kv "$va" bad)" != 0 ] ||
				[ "$(kv "$vb" bad)" != 0 ]; then
				echo "round $2: A's allocations failed or memory lost: $grown_a; $va; $vb"
				failed=1
			fi
			line="$line take_back_s=$back_s seen_s=$(secs $seen)"
			line="$line borrower_back_s=$(secs $demoted)"
			line="$line alloc_s=$(secs $alloc)"
			line="$line owner_s=$(secs $owner) agent_take_back_s=${agent_s:-n/a}"
			kill -TERM "$agent"
			wait "$agent" || true
		fi
		proc_quit a
		proc_quit b
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
		bb = bb " " v["borrower_back_s"]; if (v["take_back_s"] + 0 <= 2) in2++; rounds++
		al = al " " v["alloc_s"]; se = se " " v["seen_s"]
	}
	END {
		printf "fast-tier utilisation (node 0 used by A and B / their tier-0 shares), %%:\n"
		printf "  lending off: %s\n  lending on:  %s\n", off, stats(on)
		printf "take-back: A holds its whole share again (the agent revoked every loan of it,\n"
		printf "  node 0 had room for the rest), s after A asked: %s  (%d of %d within 2 s)\n",
			stats(tb), in2, rounds
		printf "  the same seen by the polls of this script, s: %s\n", stats(se)
		printf "B back within its own share (its demotion of the loan), s after A asked:\n"
		printf "                                             %s\n", stats(bb)
		printf "  as the agent counts it (ask to all back), s: %s\n", stats(ag)
		printf "the 500 MiB allocation of A returned, s:     %s\n", stats(al)
		printf "the usage of A at its share on node 0, s:    %s\n", stats(own)
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
	--include "$B/tests/quota/shm_peek" \
	--include "$S/tests/guest/lib.sh" \
	--include "$S/bench/run-lending.sh" \
	-- "$S/bench/run-lending.sh" --in-guest "$B" "$REPS" "$S"
