#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-access-agent`: what the agent's access source costs (issue 14 item 3,
# tierallocd --access damon, TIERALLOC_ACCESS=agent). In the QEMU guest on Debian's 6.12 kernel
# (DAMON), two 2G nodes, a cgroup with a quota (memory.max 3G) as in run-access.sh: tierallocd
# --access damon runs, and bench/access-cost with a working set of WS_MIB (default 1024) under
# TIERALLOC_ACCESS=agent for 30 s, REPS rounds (default 3). Over 20 s of each run, once the
# process's kdamond is up, it reads the CPU time of that kdamond (a kernel thread) and of the
# agent's DAMON thread (ta-damon) from /proc: together the cost of the source outside the
# process, as a share of one core. The process's own part (reading and folding its access file,
# on top of soft-dirty's sampling) shows in its process_cpu_ms against run-access.sh's.
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
	while [ $i -lt "$REPS" ]; do
		cg=/sys/fs/cgroup/bench-access-agent-$i
		mkdir $cg
		echo 3G >$cg/memory.max
		(echo 0 >$cg/cgroup.procs && exec env TIERALLOC_ACCESS=agent \
			LD_PRELOAD="$B/preload/.libs/libtieralloc-preload.so" \
			"$B/bench/access-cost" "$WS" 30 >/tmp/line) &
		work=$!
		kd=
		while [ -z "$kd" ]; do
			sleep 0.5
			p=$(cat $D/0/pid 2>/dev/null || echo -1)
			[ "$p" != -1 ] && kd=$p
		done
		tid=$(grep -l '^ta-damon$' /proc/$agent/task/*/comm | sed 's|/comm$||')
		k0=$(cpu_ticks /proc/"$kd"/stat)
		a0=$(cpu_ticks "$tid"/stat)
		t0=$(awk '{ print $1 }' /proc/uptime)
		sleep 20
		k1=$(cpu_ticks /proc/"$kd"/stat)
		a1=$(cpu_ticks "$tid"/stat)
		t1=$(awk '{ print $1 }' /proc/uptime)
		wait $work
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
		echo "$(cat /tmp/line) kdamond_ticks=$((k1 - k0)) agent_ticks=$((a1 - a0)) wall_s=$wall" |
			tee -a $out
		rmdir $cg
		i=$((i + 1))
	done
	kill $agent
	wait $agent || true
	echo
	echo "medians of $REPS rounds; CPU in % of one core (100 ticks a second)"
	awk '
	function med(list,   a, n, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	{
		for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
		k = k " " v["kdamond_ticks"] / v["wall_s"]; a = a " " v["agent_ticks"] / v["wall_s"]
		s = s " " (v["kdamond_ticks"] + v["agent_ticks"]) / v["wall_s"]; src = v["source"]
		p = p " " v["process_cpu_ms"] / 300
	}
	END {
		printf "kdamond %.2f%%, agent thread %.2f%%, together %.2f%% of a core;" \
		       " the process (writer and worker) %.1f%%; source %s\n",
		       med(k), med(a), med(s), med(p), src
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
