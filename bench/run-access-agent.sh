#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-access-agent`: what the agent's access source costs (issue 14 items 3
# and 4, tierallocd --access damon, TIERALLOC_ACCESS=agent). In the QEMU guest on Debian's 6.12
# kernel (DAMON), two 2G nodes, a cgroup with a quota (memory.max 3G) as in run-access.sh:
# tierallocd --access damon runs, and bench/access-cost with a working set of WS_MIB (default
# 1024) for 90 s, under TIERALLOC_ACCESS=agent and, as the baseline, under TIERALLOC_ACCESS=age:
# REPS rounds of each (default 3), interleaved. Once the process's kdamond is up, the agent has
# written the process's access file and the process's faults have settled (under 100 in a
# second, at most 30 s: the priming clear of soft-dirty, which the process probes before the
# agent's file comes), it reads from /proc over 20 s the CPU time of that kdamond (a kernel
# thread), of the agent's DAMON thread (ta-damon) and of the process's worker (the thread named
# "tieralloc"), and the process's minor faults (soft-dirty's write faults, which the agent's
# source should not cause), as shares of one core. The tracking cost is the kdamond's and the
# agent thread's shares plus the process's sampler (the time its last sample took over its
# period: the worker's own measure, since the worker's ticks against its baseline under age
# swing by more than that on a loaded host).
#
# Usage: run-access-agent.sh BUILDDIR SRCDIR [REPS [WS_MIB]]
set -eu
# cpu_ticks PROCSTAT: utime + stime (fields 14, 15; the command in field 2 has no blanks here).
cpu_ticks() { awk '{ print $14 + $15 }' "$1"; }
if [ "${1:-}" = --in-guest ]; then
	B=$2
	REPS=$3
	WS=$4
	D=/sys/kernel/mm/damon/admin/kdamonds
	out=/tmp/access-agent-bench.txt
	: >$out
	"$B/agent/tierallocd" --rescan 1 --access damon >/tmp/agent.out 2>&1 &
	agent=$!
	i=0
	while [ $i -lt $((REPS * 2)) ]; do
		# Rounds alternate: agent, then age (no tracking in the process: the worker's
		# baseline; the agent watches it all the same).
		access=agent
		[ $((i % 2)) = 1 ] && access=age
		cg=/sys/fs/cgroup/bench-access-agent-$i
		mkdir $cg
		echo 3G >$cg/memory.max
		(echo 0 >$cg/cgroup.procs && exec env TIERALLOC_ACCESS=$access \
			LD_PRELOAD="$B/preload/.libs/libtieralloc-preload.so" \
			"$B/bench/access-cost" "$WS" 90 >/tmp/line) &
		work=$!
		kd=
		while [ -z "$kd" ]; do
			sleep 0.5
			p=$(cat $D/0/pid 2>/dev/null || echo -1)
			[ "$p" != -1 ] && kd=$p
		done
		n=0
		while [ ! -e /dev/shm/tieralloc_access.$work ] && [ $n -lt 40 ]; do
			sleep 0.5
			n=$((n + 1))
		done
		# Steady state: the faults after soft-dirty's priming clear (the process probes it
		# before the agent's file comes) are over when a second passes with under 100.
		settle=0
		f0=$(awk '{ print $10 }' /proc/$work/stat)
		while [ $settle -lt 30 ]; do
			sleep 1
			settle=$((settle + 1))
			f1=$(awk '{ print $10 }' /proc/$work/stat)
			[ $((f1 - f0)) -lt 100 ] && break
			f0=$f1
		done
		sleep 10 # past the agent's reconfiguration for this process and the last one's end
		tid=$(grep -l '^ta-damon$' /proc/$agent/task/*/comm | sed 's|/comm$||')
		wid=$(grep -l '^tieralloc$' /proc/$work/task/*/comm | sed 's|/comm$||')
		k0=$(cpu_ticks /proc/"$kd"/stat)
		a0=$(cpu_ticks "$tid"/stat)
		w0=$(cpu_ticks "$wid"/stat)
		f0=$(awk '{ print $10 }' /proc/$work/stat)
		t0=$(awk '{ print $1 }' /proc/uptime)
		sleep 20
		k1=$(cpu_ticks /proc/"$kd"/stat)
		a1=$(cpu_ticks "$tid"/stat)
		w1=$(cpu_ticks "$wid"/stat)
		f1=$(awk '{ print $10 }' /proc/$work/stat)
		t1=$(awk '{ print $1 }' /proc/uptime)
		wait $work
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
		echo "$(cat /tmp/line) kdamond_ticks=$((k1 - k0)) agent_ticks=$((a1 - a0))" \
			"worker_ticks=$((w1 - w0)) faults=$((f1 - f0)) settle_s=$settle wall_s=$wall" | tee -a $out
		rmdir $cg
		i=$((i + 1))
	done
	kill $agent
	wait $agent || true
	echo
	echo "medians of $REPS rounds each; CPU in % of one core (100 ticks a second)"
	awk '
	function med(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		w = v["worker_ticks"] / v["wall_s"]
		if (v["access"] == "age") { base = base " " w; next }
		k = k " " v["kdamond_ticks"] / v["wall_s"]; a = a " " v["agent_ticks"] / v["wall_s"]
		s = s " " (v["kdamond_ticks"] + v["agent_ticks"]) / v["wall_s"]; src = v["source"]
		wa = wa " " w; f = f " " v["faults"]
		if (v["period_ms"] > 0) sm = sm " " 100 * v["sample_ms"] / v["period_ms"]
	}
	END {
		printf "agent: kdamond %.2f%%, agent thread %.2f%%, together %.2f%% of a core\n",
		       med(k), med(a), med(s)
		printf "the process'"'"'s worker: %.2f%% under agent, %.2f%% under age (no tracking);" \
		       " minor faults in 20 s under agent %d; source %s\n", med(wa), med(base), med(f), src
		printf "the sampler itself (its last sample over its period): %.2f%%\n", med(sm)
		printf "tracking cost (kdamond + agent thread + the sampler): %.2f%% of a core\n",
		       med(s) + med(sm)
	}' $out
	exit 0
fi
B=$1
S=$2
REPS=${3:-3}
WS=${4:-1024}
exec "$S/tests/vm/guest-run.sh" --kernel 6.12 --timeout 1800 --node-mem 2G,2G \
	--include "$B/preload/.libs/libtieralloc-preload.so" \
	--include "$B/src/.libs/libtieralloc.so.0" \
	--include "$B/bench/access-cost" \
	--include "$B/agent/tierallocd" \
	--include "$S/bench/run-access-agent.sh" \
	-- "$S/bench/run-access-agent.sh" --in-guest "$B" "$REPS" "$WS"
