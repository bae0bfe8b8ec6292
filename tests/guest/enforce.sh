#!/bin/sh
# SPDX-License-Identifier: MIT
# Enforcement in the two-tier guest (issue 5): node 0 (CPUs) is tier 0, the CPU-less node 1 tier
# 1, cgroup v2, a zram swap device. Run by suite.sh as root, busybox sh.
# Usage: enforce.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why"; exit 1 on failure.
#
#   enforce.converge.small / .large
#       enforce_work holds 256 MiB in 4 KiB (chunks) or 1 MiB blocks (large objects), half of
#       them a hot pointer chase, in a cgroup with memory.max 768M (tier-0 share ~384M: all of it
#       fits in node 0). memory.max drops to 512M while it runs: the cgroup's memory on node 0
#       (anon + file N0 of memory.numa_stat) must come down to the new tier-0 share (waited for
#       GUARD_S at most, lib.sh) and stay there for the next 3 s; every block's contents are
#       unchanged (checksums); the segment counts the demoted bytes. Reported: time to converge,
#       the excess over the share when the limit dropped, the largest excess seen after
#       converging, and the fraction of the hot and of the cold blocks' pages that were demoted.
#   enforce.huge_moves
#       384 MiB in 64 KiB blocks (chunks), TIERALLOC_LOG_LEVEL=debug, memory.max 768M dropped
#       to 512M (about 128 MiB to move): on 6.1 (a page at a
#       time, a TLB flush each) at least 32 MiB of the move goes as 2 MiB huge pages, none on
#       6.12 (batched flushes); either way node 0 comes down to the share, every block is intact,
#       no huge page is left in a MADV_NOHUGEPAGE mapping (smaps), and RssAnon grows by at most
#       1 MiB (the zeros a collapse fills in go back).
#   enforce.share
#       two processes of 128 MiB each in one cgroup, memory.max 768M dropped to 512M: node 0
#       comes down to the share, both processes demote, and together no more than the excess
#       (+50%, + 16 MiB: chunks move whole, and later readings see memkind's memory grow).
#   enforce.reclaim
#       TIERALLOC_TIER_LIMITS gives each tier a high share of 32M, with no room in tier 1 for
#       what tier 0 holds above its share: the worker writes the rest to memory.reclaim, the
#       kernel swaps it out (zram), and memory.current comes to at least RECLAIM_MIN below the
#       cgroup's memory.peak (waited for; the time it took is reported).
#   enforce.gate
#       kernel.numa_balancing=1, scan_delay_ms and scan_period_min_ms 100 (gate_test). A
#       workload with blocks on node 1 that are all hot and tier 0 at its share (memory.max
#       512M). With TIERALLOC_PROMOTION=always (no gate, no enforcement), the kernel promotes them: node 0
#       grows 16M past the share and past where it started. With the default (gated): nothing passes the share while the
#       gate is shut (watched 6 s), promotions happen while tier 0 has headroom (memory.max
#       1536M: node 0 grows 16M past where it was), and once memory.max drops again the gate
#       closes, node 0 comes back under the share and stays there while the chase goes on
#       (watched 4 s). Promotions and the way back are waited for (GUARD_S at most), and their
#       times reported: NUMA balancing's pace depends on how fast the emulated CPU runs.
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
W=/tmp/enforce
RECLAIM_MIN=$((32 * M))
failed=0

rm -rf $W
mkdir -p $W
for f in "$PRELOAD" "$WORK" "$PEEK" "$STAT"; do
	if [ ! -f "$f" ]; then
		fail enforce.setup "$f missing (make check builds it; check-guest includes it)"
		exit 1
	fi
done

# Time in hundredths of a second since boot.
# ------------------------------------------------------------- enforce.converge
converge() {
	test=enforce.converge.$1
	cg_new te-$1 768M
	if ! work_start "$1" 3 "$cg" 256M "$2" 50; then
		fail $test "the workload did not start"
		return
	fi
	seg=$(seg_of "$cg")
	# The worker starts on first need; give the first readings a moment.
	sleep 1
	before=$(n0 "$cg")
	proc_cmd "$1" where
	where0=$REPLY
	t0=$(now_cs)
	echo 512M >"$cg/memory.max"
	target=$(share0 "$seg" $((512 * M)))
	excess0=$((before - target))
	converged=
	worst_after=0
	deadline=$((t0 + GUARD_S * 100))
	settle_end=
	lowest=$before
	while :; do
		t=$(now_cs)
		v=$(n0 "$cg")
		[ "$v" -lt "$lowest" ] && lowest=$v
		if [ -z "$converged" ] && [ "$v" -le "$target" ]; then
			converged=$((t - t0))
			settle_end=$((t + 300))
		fi
		if [ -n "$converged" ]; then
			[ $((v - target)) -gt "$worst_after" ] && worst_after=$((v - target))
			[ "$t" -ge "$settle_end" ] && break
		fi
		[ "$t" -ge "$deadline" ] && break
		sleep 0.1
	done
	proc_cmd "$1" where
	where1=$REPLY
	proc_cmd "$1" verify
	verify=$REPLY
	demoted=$(peek_tier "$seg" 0 demoted)
	stat_json=$("$STAT" --json 2>&1)
	[ -z "$converged" ] && "$STAT" --name "/$seg" | sed 's/^/   /'
	proc_quit "$1"
	hot_n1=$(kv "$where1" hot_n1)
	hot_all=$(($(kv "$where1" hot_n0) + hot_n1))
	cold_n1=$(kv "$where1" cold_n1)
	cold_all=$(($(kv "$where1" cold_n0) + cold_n1))
	echo "   $1 blocks: node 0 held $(mib "$before") before; tier-0 share at 512M: $(mib "$target")"
	echo "   placement before: $where0"
	echo "   placement after:  $where1"
	if [ -z "$converged" ]; then
		fail $test "node 0 still at $((v / 1024)) KiB after ${GUARD_S}s, $((lowest / 1024)) KiB" \
			"at the lowest (share $((target / 1024)) KiB)"
	else
		echo "   converged in $((converged / 100)).$((converged % 100 / 10))s; excess when" \
			"the limit dropped $(mib $excess0); largest excess in the 3 s after:" \
			"$((worst_after / 1024)) KiB"
		echo "   demoted: $(mib "$demoted") (segment); hot pages demoted" \
			"$(pct "$hot_n1" "$hot_all")%, cold pages $(pct "$cold_n1" "$cold_all")%" \
			"(policy: age)"
		# Why the same move can take several times longer on one kernel (bench-converge).
		case $(uname -r) in
		6.1.*) echo "   kernel $(uname -r): a migration flushes the TLB once per 4 KiB page" \
			"moved (batched from 6.3 on), each flush an interrupt the other vCPU must" \
			"answer: under host load the moves wait for it (whole 2 MiB units move as" \
			"huge pages, enforce.huge_moves)" ;;
		esac
		if [ "$worst_after" -gt $((4 * M)) ]; then
			fail $test "node 0 went $(mib $worst_after) back over the share after converging"
		elif [ "$(kv "$verify" bad)" != 0 ] || [ -z "$(kv "$verify" bad)" ]; then
			fail $test "contents changed: $verify"
		elif [ "${demoted:-0}" -le 0 ]; then
			fail $test "the segment counts no demoted bytes"
		elif ! echo "$stat_json" | grep -q '"demoted":[1-9]'; then
			fail $test "tieralloc-stat --json shows no demoted bytes: $stat_json"
		else
			pass $test
		fi
	fi
	if [ -s $W/"$1".err ]; then
		fail $test "the workload wrote to stderr: $(cat $W/"$1".err)"
	fi
	rmdir "$cg" 2>/dev/null
}
# The small blocks' run is recorded by tieralloc-stat --record and printed for the host to draw
# (record_emit, lib.sh).
record_start enforce 0.25
converge small 4K
record_emit enforce
converge large 1M

# ------------------------------------------------------------- enforce.huge_moves
# smaps_nh_huge PID: kB of huge pages in the process's mappings that are MADV_NOHUGEPAGE (VmFlags
# "nh"), where the allocator keeps 4 KiB pages.
smaps_nh_huge() {
	awk '/^[0-9a-f]+-[0-9a-f]+ / { if (h != "") t += nh ? h : 0; h = ""; nh = 0 }
		/^AnonHugePages:/ { h = $2 } /^VmFlags:/ { nh = / nh/ }
		END { if (h != "") t += nh ? h : 0; print t + 0 }' "/proc/$1/smaps"
}
rss_anon() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
huge_moves_test() {
	test=enforce.huge_moves
	cg_new te-huge 768M
	if ! work_start huge 3 "$cg" 384M 64K 50 TIERALLOC_LOG_LEVEL=debug; then
		fail $test "the workload did not start"
		return
	fi
	seg=$(seg_of "$cg")
	sleep 1
	# shellcheck disable=SC2154 # set by proc_start
	pid=$pid_huge
	rss0=$(rss_anon "$pid")
	echo 512M >"$cg/memory.max"
	target=$(share0 "$seg" $((512 * M)))
	settle_n0 "$cg" "$target"
	ok=$?
	v=$(n0 "$cg")
	rss1=$(rss_anon "$pid")
	nh_huge=$(smaps_nh_huge "$pid")
	proc_cmd huge verify
	verify=$REPLY
	proc_quit huge
	rmdir "$cg" 2>/dev/null
	huge_mib=$(sed -n 's/.*moved .* KiB in .* ms, \([0-9]*\) MiB of it as huge pages/\1/p' \
		$W/huge.err | awk '{ s += $1 } END { print s + 0 }')
	echo "   moved as huge pages: ${huge_mib}M; RssAnon ${rss0} kB before, ${rss1} kB after;" \
		"huge pages left where the allocator keeps 4 KiB pages: ${nh_huge} kB"
	kernel=$(uname -r)
	case $kernel in
	6.1.* | 6.2.*)
		# The kernel migrates a page at a time: units of 2 MiB move as huge pages
		# (src/alloc/place.c, "Huge moves").
		want_huge=yes ;;
	*)
		echo "   kernel $kernel batches a migration's TLB flushes (6.3 on): pages move one by" \
			"one, none as huge pages"
		want_huge=no ;;
	esac
	if [ $ok != 0 ]; then
		fail $test "node 0 at $(mib "$v") after ${GUARD_S}s, share $(mib "$target")"
	elif [ "$(kv "$verify" bad)" != 0 ]; then
		fail $test "contents changed: $verify"
	elif [ "$nh_huge" != 0 ]; then
		fail $test "${nh_huge} kB of huge pages left in MADV_NOHUGEPAGE mappings"
	elif [ $want_huge = yes ] && [ "$huge_mib" -lt 32 ]; then
		fail $test "kernel $kernel: only ${huge_mib}M moved as huge pages: $(grep enforce: $W/huge.err)"
	elif [ $want_huge = no ] && [ "$huge_mib" != 0 ]; then
		fail $test "kernel $kernel: ${huge_mib}M moved as huge pages where pages move one by one"
	elif [ $((rss1 - rss0)) -gt 1024 ]; then
		# A collapse fills the pages no run holds; the arena gives them back after the split.
		fail $test "RssAnon grew $((rss1 - rss0)) kB across the move"
	else
		pass $test
	fi
}
huge_moves_test

# ------------------------------------------------------------- enforce.share
# Two processes of one cgroup, 128 MiB each: the excess is divided between them in proportion to
# their charge in tier 0 (equal here), not demoted by each in full.
share_test() {
	test=enforce.share
	cg_new te-share 768M
	if ! work_start pa 3 "$cg" 128M 4K 0 || ! work_start pb 4 "$cg" 128M 4K 0; then
		fail $test "the workloads did not start"
		return
	fi
	seg=$(seg_of "$cg")
	sleep 1
	before=$(n0 "$cg")
	echo 512M >"$cg/memory.max"
	target=$(share0 "$seg" $((512 * M)))
	excess=$((before - target))
	settle_n0 "$cg" "$target"
	sleep 2
	proc_cmd pa demoted
	da=$(kv "$REPLY" bytes)
	proc_cmd pb demoted
	db=$(kv "$REPLY" bytes)
	now=$(n0 "$cg")
	proc_quit pa
	proc_quit pb
	total=$((da + db))
	echo "   two processes: node 0 $(mib "$before") for a share of $(mib "$target") (excess" \
		"$(mib $excess)); demoted $(mib "$da") + $(mib "$db") = $(mib $total); node 0 now" \
		"$(mib "$now")"
	if [ "$now" -gt $((target + 4 * M)) ]; then
		fail $test "node 0 did not come down to the share"
	elif [ "$da" -le 0 ] || [ "$db" -le 0 ]; then
		fail $test "one process did not take its part"
	elif [ $total -gt $((excess + excess / 2 + 16 * M)) ]; then
		fail $test "together they demoted $(mib $total) for an excess of $(mib $excess)"
	else
		pass $test
	fi
	rmdir "$cg" 2>/dev/null
}
share_test

# ------------------------------------------------------------- enforce.reclaim
# reclaimed_enough CGROUP: memory.current is RECLAIM_MIN or more below the cgroup's peak.
reclaimed_enough() {
	[ $(($(cat "$1/memory.peak") - $(cat "$1/memory.current"))) -ge $RECLAIM_MIN ]
}

# reclaimed_by_worker CGROUP: reclaimed_enough, and the segment ($seg) counts a write to
# memory.reclaim.
reclaimed_by_worker() {
	reclaimed_enough "$1" || return 1
	r0=$(peek_tier "$seg" 0 reclaims)
	r1=$(peek_tier "$seg" 1 reclaims)
	[ $((${r0:-0} + ${r1:-0})) -gt 0 ]
}

reclaim_test() {
	test=enforce.reclaim
	if ! zram_swap; then
		fail $test "cannot set up zram swap (is the zram module in the guest?)"
		return
	fi
	cg_new te-reclaim max
	if ! work_start reclaim 3 "$cg" 160M 64K 0 "TIERALLOC_TIER_LIMITS=0.high=32M;1.high=32M"; then
		fail $test "the workload did not start"
		return
	fi
	seg=$(seg_of "$cg")
	# Both: the drop, and the worker's write to memory.reclaim. With the guest short of memory
	# the kernel's own reclaim can make the drop first (6.1, swapped 65M, 0 writes yet).
	until_true reclaimed_by_worker "$cg"
	took=$took_cs
	# What came after the first drop, for the report.
	sleep 1
	peak=$(cat "$cg/memory.peak")
	after=$(cat "$cg/memory.current")
	swapped=$(cat "$cg/memory.swap.current")
	reclaims=$(($(peek_tier "$seg" 0 reclaims) + $(peek_tier "$seg" 1 reclaims)))
	asked=$(($(peek_tier "$seg" 0 reclaim_asked) + $(peek_tier "$seg" 1 reclaim_asked)))
	proc_cmd reclaim verify
	verify=$REPLY
	proc_quit reclaim
	echo "   memory.current peak $(mib "$peak"), $(mib "$after") 1 s after it was" \
		"$(mib $RECLAIM_MIN) below the peak ($(secs "$took") s after ready); swapped" \
		"$(mib "$swapped"); $reclaims writes to memory.reclaim asking $(mib "$asked")"
	if [ "$reclaims" -le 0 ]; then
		fail $test "no write to memory.reclaim was counted"
	elif [ $((peak - after)) -lt $RECLAIM_MIN ]; then
		fail $test "memory.current fell by $(mib $((peak - after))) only in ${GUARD_S}s"
	elif [ "$(kv "$verify" bad)" != 0 ]; then
		fail $test "contents changed: $verify"
	else
		pass $test
	fi
	rmdir "$cg" 2>/dev/null
}
reclaim_test

# ------------------------------------------------------------- enforce.gate
SCAN=/sys/kernel/debug/sched/numa_balancing
# The gate's workload: tier 0 at its share (~250M) and ~120M more on node 1, all hot. The
# cgroup keeps room: a promotion allocates the new page before freeing the old one, and at
# memory.max it fails.
GATE_MAX=512M
GATE_WORK=320M
# watch_n0 CGROUP SECONDS: the largest node-0 usage seen over that time, in $hi.
watch_n0() {
	hi=0
	end=$(($(now_cs) + $2 * 100))
	while [ "$(now_cs)" -lt $end ]; do
		v=$(n0 "$1")
		[ "$v" -gt "$hi" ] && hi=$v
		sleep 0.2
	done
}

gate_test() {
	if ! echo 1 >/proc/sys/kernel/numa_balancing || ! echo 100 >$SCAN/scan_delay_ms ||
		! echo 100 >$SCAN/scan_period_min_ms; then
		fail enforce.gate "cannot turn on NUMA balancing with the scan settings"
		return
	fi
	# Without the gate: the hot blocks on node 1 come up, past tier 0's share.
	test=enforce.gate.without
	cg_new te-nogate $GATE_MAX
	if ! work_start nogate 3 "$cg" $GATE_WORK 64K 100 TIERALLOC_PROMOTION=always \
		TIERALLOC_ENFORCE=off; then
		fail $test "the workload did not start"
		return
	fi
	seg=$(seg_of "$cg")
	share=$(share0 "$seg" $((${GATE_MAX%M} * M)))
	start=$(n0 "$cg")
	# Past the share, and grown: node 0 may start above the share (memkind's metadata, with
	# enforcement off), and that is no promotion.
	level=$((share > start ? share + 16 * M : start + 16 * M))
	until_true n0_above "$cg" $level
	hi=$(n0 "$cg")
	proc_quit nogate
	echo "   no gate: tier-0 share $(mib "$share"); node 0 $(mib "$start") at start," \
		"$(mib "$hi") after $(secs "$took_cs") s"
	if [ "$hi" -gt $level ]; then
		pass $test
	else
		fail $test "node 0 did not grow past the share + 16M in ${GUARD_S}s (the kernel promoted nothing?)"
	fi
	rmdir "$cg" 2>/dev/null

	# With the gate (the default): shut while tier 0 is at its share, open with headroom,
	# shut again (taking the promoted pages back) when the share drops.
	test=enforce.gate.with
	cg_new te-gate $GATE_MAX
	if ! work_start gate 3 "$cg" $GATE_WORK 64K 100; then
		fail $test "the workload did not start"
		return
	fi
	seg=$(seg_of "$cg")
	share=$(share0 "$seg" $((${GATE_MAX%M} * M)))
	# What the kernel shows before the first readings (memkind's metadata) may be demoted for.
	settle_n0 "$cg" "$share"
	watch_n0 "$cg" 6
	closed_hi=$hi
	echo 1536M >"$cg/memory.max"
	until_true n0_above "$cg" $((closed_hi + 16 * M))
	open_cs=$took_cs
	open_hi=$(n0 "$cg")
	echo $GATE_MAX >"$cg/memory.max"
	back=
	settle_n0 "$cg" "$share" && back=$took_cs
	watch_n0 "$cg" 4
	after_hi=$hi
	proc_cmd gate verify
	verify=$REPLY
	proc_quit gate
	echo "   gated: tier-0 share $(mib "$share"); node 0 at most $(mib "$closed_hi") while" \
		"shut, $(mib "$open_hi") $(secs "$open_cs") s after memory.max went to 1536M, back" \
		"under the share in $(secs "${back:-0}") s, at most $(mib "$after_hi") after"
	if [ "$closed_hi" -gt $((share + 4 * M)) ]; then
		fail $test "node 0 passed the share while the gate was shut"
	elif [ "$open_hi" -le $((closed_hi + 16 * M)) ]; then
		fail $test "nothing was promoted in ${GUARD_S}s while tier 0 had headroom"
	elif [ -z "$back" ]; then
		fail $test "node 0 did not come back under the share in ${GUARD_S}s"
	elif [ "$after_hi" -gt $((share + 4 * M)) ]; then
		fail $test "node 0 passed the share again with the gate shut"
	elif [ "$(kv "$verify" bad)" != 0 ]; then
		fail $test "contents changed: $verify"
	else
		pass $test
	fi
	rmdir "$cg" 2>/dev/null
}
gate_test

exit $failed
