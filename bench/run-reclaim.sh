#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-reclaim`: seed 001's experiment for tierallocd --reclaim-for-priority
# (issue 17 policy 1), in the QEMU guest of the tests (cgroup v2, zram swap, PSI, root, the
# agent). The guest's CPU is emulated (TCG): reclaim and swap there are far slower than on a
# real machine, so compare on and off, not machines.
#
# One run: a parent with memory.max PARENT_MIB and two children. lo (priority 0) is the
# harvested job: it maps LO_MIB and cycles over it LO_PASSES times, pausing LO_PAUSE_MS after
# each pass; once it is filled, hi (priority 100), the pressured one, maps HI_MIB and cycles over
# it HI_PASSES times without pausing. Together they need more than the parent holds. Each job's
# completion time is its own (reclaim_work's "done seconds", from its start); every word of both
# is checked. "off" runs the agent without --reclaim-for-priority, "on" with it (--interval
# 0.1, the default step, caps), "nocap" with it and --reclaim-no-cap (memory.reclaim alone, as
# before the caps); a round is one run of each, in alternating order, after a "solo" run: hi
# alone in the parent (no lo, no policy), the floor no policy can beat.
#
# RECLAIM_WORKLOAD=file runs seed 001's own workload instead (bench/seed001-work, as its
# selftest does it): the parent's memory.max 32M and swap off for it (memory.swap.max 0); hi and
# lo start together, each writes a 32 MiB file on ext2 (on a zram disk: the initramfs' page cache
# cannot be reclaimed) and then reads every page of it 50 times through a mapping; reclaim drops
# page cache and each page read again is a file refault. Files removed and caches dropped
# before each run.
#
# Usage: run-reclaim.sh BUILDDIR SRCDIR [REPS [KERNEL]]   (REPS rounds, default 5; the guest's
# kernel, 6.1 or 6.12, default 6.1)
# Prints each run, then per mode the medians, minimums and maximums of both completion times,
# next to the seed's medians.
set -eu
if [ "${1:-}" = --in-guest ]; then
	set +u # lib.sh's helpers read variables they set through eval
	B=$2
	REPS=$3
	# shellcheck source=tests/guest/lib.sh
	. "$4/tests/guest/lib.sh"
	W=/tmp/reclaim-bench
	rm -rf $W
	mkdir -p $W
	failed=0
	P=/sys/fs/cgroup/bench-rfp
	FS=/mnt/reclaim-bench
	WORKLOAD=${RECLAIM_WORKLOAD:-anon}
	if [ "$WORKLOAD" = file ]; then
		: "${PARENT_MIB:=32}" "${HI_MIB:=32}" "${HI_PASSES:=50}"
		: "${LO_MIB:=32}" "${LO_PASSES:=50}" "${LO_PAUSE_MS:=0}"
	else
		: "${PARENT_MIB:=256}" "${HI_MIB:=160}" "${HI_PASSES:=8}"
		: "${LO_MIB:=160}" "${LO_PASSES:=600}" "${LO_PAUSE_MS:=0}"
	fi
	RECLAIM_STEP=${RECLAIM_STEP:-}
	echo "bench-reclaim: Linux $(uname -r); $WORKLOAD workload; parent ${PARENT_MIB} MiB;" \
		"hi ${HI_MIB} MiB x $HI_PASSES passes; lo ${LO_MIB} MiB x $LO_PASSES passes," \
		"${LO_PAUSE_MS} ms pauses; $REPS rounds; step ${RECLAIM_STEP:-the default}"
	if [ ! -r /proc/pressure/memory ]; then
		echo "bench-reclaim: needs PSI in the guest"
		exit 1
	fi
	if [ "$WORKLOAD" = file ] && ! zram_fs $FS $((HI_MIB + LO_MIB + 64)); then
		echo "bench-reclaim: needs a zram disk with ext2 in the guest"
		exit 1
	elif [ "$WORKLOAD" != file ] && ! zram_swap; then
		echo "bench-reclaim: needs zram swap in the guest"
		exit 1
	fi
	# job NAME MIB PASSES [PAUSE_MS]: the workload of one job, in the current process.
	job() {
		if [ "$WORKLOAD" = file ]; then
			exec "$B/bench/seed001-work" $FS/"$1" "$2" "$3"
		else
			exec "$B/tests/guest/reclaim_work" "$2" "$3" ${4:+"$4"}
		fi
	}
	out=$W/runs.txt
	: >$out
	# run MODE I: one run with the policy "on" or "off"; a line of key=value into $out.
	run() {
		for d in $P/hi $P/lo $P; do
			[ -d $d ] && rmdir $d
		done
		mkdir $P && echo +memory >$P/cgroup.subtree_control &&
			echo "${PARENT_MIB}M" >$P/memory.max && mkdir $P/hi $P/lo
		if [ "$WORKLOAD" = file ]; then
			echo 0 >$P/memory.swap.max
			rm -f $FS/hi $FS/lo
			sync
			echo 3 >/proc/sys/vm/drop_caches
		fi
		mode=$1
		i=$2
		shift 2
		if [ "$mode" = on ] || [ "$mode" = nocap ]; then
			set -- --reclaim-for-priority --priority $P/hi=100 --priority $P/lo=0
			[ -n "$RECLAIM_STEP" ] && set -- "$@" --reclaim-step "$RECLAIM_STEP"
			[ "$mode" = nocap ] && set -- "$@" --reclaim-no-cap
		fi
		: >$W/agent-$mode-$i.out # before the agent's shell opens it: the wait reads it
		"$B/agent/tierallocd" --interval 0.1 "$@" >>$W/agent-$mode-$i.out 2>&1 &
		agent=$!
		if ! until_true grep -q "^tierallocd: attached" $W/agent-$mode-$i.out; then
			echo "bench-reclaim: the agent did not start: $(cat $W/agent-$mode-$i.out)"
			exit 1
		fi
		lo=
		: >$W/lo.out
		if [ "$mode" != solo ]; then
			(echo 0 >$P/lo/cgroup.procs &&
				job lo "$LO_MIB" "$LO_PASSES" "$LO_PAUSE_MS") >$W/lo.out 2>&1 &
			lo=$!
			# The seed's jobs start together; ours, hi once lo holds its set.
			[ "$WORKLOAD" = file ] || until_true grep -q "^filled" $W/lo.out
		fi
		(echo 0 >$P/hi/cgroup.procs && job hi "$HI_MIB" "$HI_PASSES") >$W/hi.out 2>&1
		hi_rc=$?
		lo_rc=0
		if [ -n "$lo" ]; then
			wait $lo
			lo_rc=$?
		fi
		kill -TERM $agent
		wait $agent || true
		hi_s=$(kv "$(tail -1 $W/hi.out)" seconds)
		lo_s=$(kv "$(tail -1 $W/lo.out)" seconds)
		asks=$(grep -c ": asking " $W/agent-$mode-$i.out || true)
		line="mode=$mode round=$i hi_s=${hi_s:-n/a} lo_s=${lo_s:-n/a} asks=$asks"
		if [ $hi_rc != 0 ] || [ $lo_rc != 0 ]; then
			line="$line FAILED: hi $(tail -1 $W/hi.out), lo $(tail -1 $W/lo.out)"
			failed=1
		fi
		echo "$line" | tee -a $out
		# The agent's decisions and writes, indented under the run.
		grep "reclaim: " $W/agent-$mode-$i.out | sed 's/^tierallocd: reclaim: /    /' || true
	}
	r=1
	while [ $r -le "$REPS" ]; do
		run solo $r
		if [ $((r % 2)) = 1 ]; then
			run off $r
			run on $r
			run nocap $r
		else
			run nocap $r
			run on $r
			run off $r
		fi
		r=$((r + 1))
	done
	echo
	awk '
	function stats(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		med = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		return sprintf("median %6.2f  min %6.2f  max %6.2f  (n=%d)", med, a[1], a[n], n)
	}
	function median(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	/FAILED/ { next }
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		hi[v["mode"]] = hi[v["mode"]] " " v["hi_s"]
		lo[v["mode"]] = lo[v["mode"]] " " v["lo_s"]
	}
	END {
		printf "pressured job alone, s:  %s\n", stats(hi["solo"])
		printf "pressured job (hi), s:   off   %s\n", stats(hi["off"])
		printf "                         on    %s\n", stats(hi["on"])
		printf "                         nocap %s\n", stats(hi["nocap"])
		printf "harvested job (lo), s:   off   %s\n", stats(lo["off"])
		printf "                         on    %s\n", stats(lo["on"])
		printf "                         nocap %s\n", stats(lo["nocap"])
		printf "hi: %.2fx faster with the policy (medians); the seed: 12.0 s -> 2.1 s, 5.7x\n", median(hi["off"]) / median(hi["on"])
		printf "hi: %.2fx faster with the policy without caps (--reclaim-no-cap, medians)\n", median(hi["off"]) / median(hi["nocap"])
		printf "hi alone would be %.2fx faster than off (medians): the most the policy could give\n", median(hi["off"]) / median(hi["solo"])
		printf "lo: %.2fx faster with the policy (medians); the seed:  9.7 s -> 5.1 s, 1.9x\n", median(lo["off"]) / median(lo["on"])
		printf "lo: %.2fx faster with the policy without caps (medians)\n", median(lo["off"]) / median(lo["nocap"])
	}' $out
	exit $failed
fi
B=$1
S=$2
REPS=${3:-5}
KERNEL=${4:-6.1}
# The sizes given in the environment go into the guest's.
envs=
for v in PARENT_MIB HI_MIB HI_PASSES LO_MIB LO_PASSES LO_PAUSE_MS RECLAIM_STEP RECLAIM_WORKLOAD; do
	eval "if [ -n \"\${$v:-}\" ]; then envs=\"\$envs --env $v=\$$v\"; fi"
done
# shellcheck disable=SC2086 # $envs: one word per option and value, none with a space
exec "$S/tests/vm/guest-run.sh" --kernel "$KERNEL" --timeout 5400 --module zram \
	--module ext4 --module crc32c_generic \
	--include "$B/tests/guest/reclaim_work" \
	--include "$B/bench/seed001-work" \
	--include "$B/agent/tierallocd" \
	--include "$S/tests/guest/lib.sh" \
	--include "$S/bench/run-reclaim.sh" $envs \
	-- "$S/bench/run-reclaim.sh" --in-guest "$B" "$REPS" "$S"
