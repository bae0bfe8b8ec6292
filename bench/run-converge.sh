#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-converge`: how long tieralloc takes to bring a cgroup's node-0 usage down
# to its new tier-0 share after memory.max is lowered, next to how long the kernel alone takes to
# give back the same excess with memory.reclaim, in the QEMU guest of the tests
# (tests/vm/guest-run.sh), on each guest kernel, with the host quiet and loaded.
#
# Usage: run-converge.sh BUILDDIR SRCDIR [REPS]   (REPS rounds per kernel and load; default 3)
# Environment: BENCH_KERNELS (default "6.1 6.12"), BENCH_LOADS (default "quiet loaded"),
# BENCH_CASES (default "wide small large"), BENCH_ARMS (default "tieralloc kernel"). Loaded:
# a second guest spins on its two vCPUs, a host thread each, for the whole measurement (a host
# load of about 4 on two cores, as another container's test would make), started before and
# stopped after. The measured guest runs as TIERALLOC_VM_TCG says (guest-run.sh; default single).
#
# Cases (enforce_work under the preload; the same program under glibc for the kernel's arm):
#   wide   600 MiB of 64 KiB blocks, the first half read over and over, memory.max 1200M -> 900M
#   small  256 MiB of 4 KiB blocks, half of them read (interleaved), 768M -> 512M (enforce.sh)
#   large  256 MiB of 1 MiB blocks, the same (enforce.sh's large objects)
# Arms:
#   tieralloc  the limit is written; node 0 (anon + file of memory.numa_stat) watched every 50 ms
#              (bench/converge-watch, one pread a sample) until it is at or under the new
#              tier-0 share. converge_ms: from the write to that;
#              notice_ms: to the first sample 4 MiB below where it was; hot_down: the share of the
#              read set's pages on node 1 afterwards; bad: words changed (verify).
#   kernel     no preload; memory.reclaim asked for the same excess (node 0's usage less the
#              share), timed until the write returns, with /sys/kernel/mm/numa/demotion_enabled
#              on; node1_mib says what went to node 1 (demoted), swap_mib what was swapped out
#              (zram): a kernel whose memory tiers put both nodes in one tier has nowhere to
#              demote to and swaps.
# Each measurement prints a line of key=value; the summary gives min/median/max per kernel, load,
# case and arm, and the ratio of tieralloc's median to the kernel's.
set -eu
if [ "${1:-}" = --in-guest ]; then
	B=$2
	REPS=$3
	LOAD=$4
	CASES=${6:-wide small large}
	ARMS=${7:-tieralloc kernel}
	W=/tmp/converge
	# shellcheck source=tests/guest/lib.sh
	. "$5/tests/guest/lib.sh"
	# shellcheck disable=SC2034 # lib.sh's helpers set it
	failed=0
	mkdir -p $W
	out=$W/lines.txt
	: >$out
	kernel=$(uname -r | cut -d. -f1-2)
	zram_swap || echo "converge: no zram swap: the kernel arm can only demote"
	[ -w /sys/kernel/mm/numa/demotion_enabled ] && echo 1 >/sys/kernel/mm/numa/demotion_enabled
	total_mem=$(awk '/MemTotal/ {s += $4} END {print s * 1024}' \
		/sys/devices/system/node/node*/meminfo)
	node0_mem=$(awk '/MemTotal/ {print $4 * 1024}' /sys/devices/system/node/node0/meminfo)
	# share_of BYTES: tier 0's share of a cgroup limit, as tieralloc splits it (node 0's
	# MemTotal over all nodes').
	share_of() { echo $(($1 / 1024 * (node0_mem / 1024) / (total_mem / 1024) * 1024)); }
	swapped() { awk '/^pswpout/ {print $2 * 4096}' /proc/vmstat; }

	# measure CASE ARM TOTAL BLOCK HOT LAYOUT MAX0 MAX1
	measure() {
		c=$1 arm=$2 total=$3 block=$4 hot=$5 layout=$6 max0=$7 max1=$8
		cg_new "conv-$c-$arm" "$max0"
		name=c$$
		if [ "$arm" = tieralloc ]; then
			work_start "$name" 3 "$cg" "$total" "$block" "$hot" \
				ENFORCE_WORK_LAYOUT="$layout" ENFORCE_WORK_ACCESS=read || return 0
		else
			PRELOAD_SAVED=$PRELOAD
			PRELOAD=
			work_start "$name" 3 "$cg" "$total" "$block" "$hot" \
				ENFORCE_WORK_LAYOUT="$layout" ENFORCE_WORK_ACCESS=read || return 0
			PRELOAD=$PRELOAD_SAVED
		fi
		# Settled: node 0 the same over 1 s (the worker started, memkind grew).
		prev=0
		v=$(n0 "$cg")
		while [ $((v > prev ? v - prev : prev - v)) -gt $((2 * M)) ]; do
			prev=$v
			sleep 1
			v=$(n0 "$cg")
		done
		before=$v
		limit1=$(($(echo "$max1" | tr -d M) * M))
		# tieralloc's own split where it runs (the segment's share), else node 0's part of
		# MemTotal, which is what that split is.
		seg=$(seg_of "$cg" || true)
		if [ -n "$seg" ]; then
			target=$(share0 "$seg" "$limit1")
		else
			target=$(share_of "$limit1")
		fi
		excess=$((before - target))
		swap0=$(swapped)
		n1_0=$(anon "$cg" | cut -d' ' -f2)
		if [ "$arm" = tieralloc ]; then
			# A compiled stopwatch: a shell loop's forks would take the guest's CPU
			# from the pass it times (bench/converge-watch.c).
			r=$("$B/bench/converge-watch" "$cg" "$max1" "$target" "$before" "$GUARD_S")
			took_ms=$(kv "$r" converge_ms)
			notice_ms=$(kv "$r" notice_ms)
			v=$(kv "$r" node0_after)
		else
			# The kernel's arm is done when memory.reclaim returns, wherever node 0 is
			# (node0_after_mib).
			t0=$(now_cs)
			[ "$excess" -gt 0 ] && echo "$excess" >"$cg/memory.reclaim" 2>/dev/null
			t=$(now_cs)
			v=$(n0 "$cg")
			took_ms=$(((t - t0) * 10))
			notice_ms=$took_ms
		fi
		where_pm "$name"
		proc_cmd "$name" verify
		bad=$(kv "$REPLY" bad)
		n1=$(($(anon "$cg" | cut -d' ' -f2) - n1_0))
		sw=$(($(swapped) - swap0))
		proc_quit "$name"
		rmdir "$cg" 2>/dev/null || true
		echo "kernel=$kernel load=$LOAD case=$c arm=$arm converge_ms=$took_ms" \
			"notice_ms=$notice_ms excess_mib=$((excess / M))" \
			"hot_down=$(pct "$h1" "$((h0 + h1))")% node1_mib=$((n1 / M))" \
			"swap_mib=$((sw / M)) node0_after_mib=$((v / M)) share_mib=$((target / M))" \
			"bad=${bad:-?}" | tee -a $out
	}
	i=0
	while [ $i -lt "$REPS" ]; do
		for arm in $ARMS; do
			for c in $CASES; do
				case $c in
				wide) measure wide $arm 600M 64K 50 hot-first 1200M 900M ;;
				small) measure small $arm 256M 4K 50 interleaved 768M 512M ;;
				large) measure large $arm 256M 1M 50 interleaved 768M 512M ;;
				esac
			done
		done
		i=$((i + 1))
	done
	echo "CONVERGE-LINES-BEGIN"
	cat $out
	echo "CONVERGE-LINES-END"
	exit 0
fi

B=$1
S=$2
REPS=${3:-3}
lines=$(mktemp)
guest_out=$(mktemp)
trap 'rm -f "$lines" "$guest_out"; [ -n "${spin:-}" ] && kill "$spin" 2>/dev/null; true' EXIT
for k in ${BENCH_KERNELS:-6.1 6.12}; do
	for load in ${BENCH_LOADS:-quiet loaded}; do
		spin=
		if [ "$load" = loaded ]; then
			# Another guest, both vCPUs busy on a host thread each, for longer than any
			# measurement.
			printf 'while :; do :; done &\nwhile :; do :; done &\nsleep 3000\n' |
				TIERALLOC_VM_TCG=multi "$S/tests/vm/guest-run.sh" --kernel 6.1 --timeout 3000 -- - \
				>/dev/null 2>&1 &
			spin=$!
			sleep 15
		fi
		echo "=== kernel $k, host $load (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		"$S/tests/vm/guest-run.sh" --kernel "$k" --timeout 3000 --module zram \
			--include "$B/preload/.libs/libtieralloc-preload.so" \
			--include "$B/src/.libs/libtieralloc.so.0" \
			--include "$B/tests/guest/enforce_work" \
			--include "$B/tests/quota/shm_peek" \
			--include "$B/bench/converge-watch" \
			--include "$S/tests/guest/lib.sh" \
			--include "$S/bench/run-converge.sh" \
			-- "$S/bench/run-converge.sh" --in-guest "$B" "$REPS" "$load" "$S" \
			"${BENCH_CASES:-wide small large}" "${BENCH_ARMS:-tieralloc kernel}" \
			>"$guest_out" 2>&1 ||
			echo "=== the guest's run ended with status $?"
		sed '/CONVERGE-LINES-BEGIN/,$d' "$guest_out"
		sed -n '/CONVERGE-LINES-BEGIN/,/CONVERGE-LINES-END/p' "$guest_out" |
			grep '^kernel=' >>"$lines" || true
		echo "=== host load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
		if [ -n "$spin" ]; then
			# guest-run.sh stops its QEMU on SIGTERM.
			kill "$spin" 2>/dev/null || true
			wait "$spin" 2>/dev/null || true
			spin=
		fi
	done
done 2>&1

echo
echo "convergence after a lowered limit, ms from the write (min / median / max of $REPS rounds);"
echo "tieralloc: node 0 at the new tier-0 share; kernel: memory.reclaim of the same excess."
echo "measured guest's TCG: ${TIERALLOC_VM_TCG:-single} (TIERALLOC_VM_TCG; the loaded host's spinner: multi)"
awk '
function sort(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
}
{
	for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
	key = v["kernel"] " " v["load"] " " v["case"]
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	ms[key, v["arm"]] = ms[key, v["arm"]] " " v["converge_ms"]
	extra[key, v["arm"]] = (v["arm"] == "tieralloc") ? "hot_down " v["hot_down"] " bad " v["bad"] \
		: "to node 1 " v["node1_mib"] "M, swapped " v["swap_mib"] "M"
	if (v["arm"] == "tieralloc") exc[key] = v["excess_mib"]
}
END {
	printf "%-6s %-7s %-6s %8s  %-20s %-20s %7s  %s\n", "kernel", "host", "case", "excess", \
		"tieralloc", "kernel alone", "ratio", "last round"
	for (i = 1; i <= nk; i++) {
		key = order[i]; split(key, p, " ")
		for (a = 1; a <= 2; a++) {
			arm = a == 1 ? "tieralloc" : "kernel"
			n = split(ms[key, arm], x, " "); sort(x, n)
			cell[a] = n ? sprintf("%d/%d/%d", x[1], x[int((n + 1) / 2)], x[n]) : "-"
			med[a] = n ? x[int((n + 1) / 2)] : 0
		}
		printf "%-6s %-7s %-6s %7dM  %-20s %-20s %7s  %s; %s\n", p[1], p[2], p[3], exc[key], \
			cell[1], cell[2], (med[2] > 0 ? sprintf("%.1fx", med[1] / med[2]) : "-"), \
			extra[key, "tieralloc"], extra[key, "kernel"]
	}
}' "$lines"
