#!/bin/sh
# SPDX-License-Identifier: MIT
# The agent in the two-tier guest (issue 6): tierallocd counts the kernel's migrations per
# cgroup. Run by suite.sh as root, busybox sh, when the agent was built.
# Usage: agent.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why"; exit 1 on failure.
#
#   agent.promotions  kernel.numa_balancing=1, scan_delay_ms and scan_period_min_ms 100
#                     (set below); in cgroup X, promote_work first touches 32 MiB on node 1
#                     and reads it from node 0's CPUs (until 90% moved): the agent's
#                     promotions for X (reason promote,
#                     destination node 0) come within 10% of the pages move_pages(2) finds
#                     moved; an idle cgroup Y has none.
#   agent.attribution the pages' cgroup, not the migrating task's: promote_work writes 16 MiB
#                     in cgroup A, moves itself to B, and NUMA balancing promotes A's pages
#                     while it runs in B: the promotions count for A (the kprobe reads the
#                     pages' memory cgroup; the same code attributes kswapd's demotions).
#   agent.demotion    tieralloc's own demotion (enforce_work, memory.max dropped, waited for
#                     until node 0 is within the new share) is counted as move_pages into node 1
#                     for its cgroup, not as promotions.
#   agent.quota       X's tier 0 at its share: enforce_work holds 320M under tieralloc in a
#                     cgroup with memory.max 512M (tier 0 full, the rest on node 1, the gate
#                     shut), and promote_work, in the same cgroup but not under tieralloc, has
#                     64 MiB on node 1 that NUMA balancing promotes (nothing binds it). The agent
#                     finds X's segment when X's pages are promoted (its periodic look is
#                     60 s apart here), writes the promotions into it (within 10% of what
#                     move_pages sees moved) and raises alarms, which enforce_work's worker
#                     takes (tieralloc-stat --json shows the counts); it demotes its own memory
#                     for what was promoted, down to where the gate shut, so that node 0 comes
#                     back within the share while promote_work still holds the promoted pages
#                     (--hold). A burst of promotions lands before anything can react: how far
#                     and how long node 0 was over the share, and whether it went over again,
#                     are reported, not judged (they depend on how fast the emulated guest
#                     runs), and so is the same run with the agent stopped.
# Every wait is for an outcome, GUARD_S at most (lib.sh): the agent writes its counts every 0.5 s
# and NUMA balancing promotes at the pace of the emulated CPU, which a loaded host slows.
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
AGENT=$B/agent/tierallocd
PROMOTE=$B/tests/guest/promote_work
W=/tmp/agent
failed=0

if [ ! -x "$AGENT" ]; then
	echo "SKIP agent: tierallocd was not built (no clang, bpftool or libbpf at configure time)"
	exit 0
fi
rm -rf $W
mkdir -p $W
SCAN=/sys/kernel/debug/sched/numa_balancing
echo 1 >/proc/sys/kernel/numa_balancing
echo 100 >$SCAN/scan_delay_ms
echo 100 >$SCAN/scan_period_min_ms

# --rescan 60: after its first look, the agent finds new segments only when their cgroup's
# pages are promoted (agent.quota depends on that).
"$AGENT" --print --stats --interval 0.5 --rescan 60 >$W/agent.out 2>$W/agent.err &
agent=$!
agent_attached() { grep -q "^tierallocd: attached" $W/agent.out; }
until_true agent_attached
head -1 $W/agent.out

# count CGROUP_ID REASON [NODE]: pages the agent counted for that key (its counters only grow:
# the largest total of any one report is the latest).
count() {
	awk -v c="$1" -v r="$2" -v n="${3:-any}" '
	/^counts/ { if (s > best) best = s; s = 0; next }
	/^cgroup=/ {
		split($1, a, "="); split($2, b, "="); split($3, d, "="); split($5, e, "=")
		if (a[2] == c && b[2] == r && (n == "any" || d[2] == n)) s += e[2]
	}
	END { print best + 0 }' $W/agent.out
}

# count_near CGROUP_ID REASON NODE PAGES TOL: the agent's count for that key is within TOL of
# PAGES (it lags the kernel by up to an interval: wait for it with until_true).
count_near() { within "$(count "$1" "$2" "$3")" "$4" "$5"; }

# ------------------------------------------------------------- agent.promotions
cg_new ta-x max
x=$cg
x_id=$cg_id
cg_new ta-y max
y=$cg
y_id=$cg_id
(echo 0 >"$y/cgroup.procs" && exec sleep 100000) &
idle=$!
(echo 0 >"$x/cgroup.procs" && exec "$PROMOTE" 32 4) >$W/promote.out 2>&1
moved=$(kv "$(cat $W/promote.out)" node0)
until_true count_near "$x_id" promote 0 "${moved:-0}" $((${moved:-0} / 10))
seen=$(count "$x_id" promote 0)
idle_seen=$(count "$y_id" promote)
echo "   promote_work: $(cat $W/promote.out); agent: $seen pages promoted to node 0 for cgroup" \
	"$x_id ($(secs "$took_cs") s after promote_work), $idle_seen for the idle cgroup $y_id"
if [ -z "$moved" ] || [ "$moved" -lt 1024 ]; then
	fail agent.promotions "NUMA balancing promoted too little to compare ($moved pages)"
elif ! within "$seen" "$moved" $((moved / 10)); then
	fail agent.promotions "the agent counted $seen pages, move_pages saw $moved move"
elif [ "$idle_seen" != 0 ]; then
	fail agent.promotions "promotions counted for the idle cgroup: $idle_seen"
else
	pass agent.promotions
fi
kill $idle 2>/dev/null
wait $idle 2>/dev/null

# ------------------------------------------------------------- agent.attribution
if ! head -1 $W/agent.out | grep -q "migrate_pages() arguments"; then
	echo "SKIP agent.attribution: kernel $(uname -r) lets the agent attach no kprobe to" \
		"migrate_pages(), so it counts the migrating task's cgroup"
else
	cg_new ta-a max
	a=$cg
	a_id=$cg_id
	cg_new ta-b max
	b=$cg
	b_id=$cg_id
	(echo 0 >"$a/cgroup.procs" && exec "$PROMOTE" 16 4 "$b") >$W/attr.out 2>&1
	moved=$(kv "$(cat $W/attr.out)" node0)
	until_true count_near "$a_id" promote 0 "${moved:-0}" $((${moved:-0} / 10))
	for_a=$(count "$a_id" promote 0)
	for_b=$(count "$b_id" promote)
	echo "   promote_work (pages of $a_id, running in $b_id): $(cat $W/attr.out); agent:" \
		"$for_a pages for $a_id, $for_b for $b_id"
	if [ -z "$moved" ] || [ "$moved" -lt 512 ]; then
		fail agent.attribution "NUMA balancing promoted too little to tell ($moved pages)"
	elif ! within "$for_a" "$moved" $((moved / 10)); then
		fail agent.attribution "$for_a pages counted for the pages' cgroup, $moved moved"
	elif [ "$for_b" -gt $((moved / 10)) ]; then
		fail agent.attribution "$for_b pages counted for the running task's cgroup"
	else
		pass agent.attribution
	fi
	rmdir "$a" "$b" 2>/dev/null
fi

# ------------------------------------------------------------- agent.demotion
cg_new ta-z 768M
z=$cg
z_id=$cg_id
mkfifo $W/z.in
exec 3<>$W/z.in
: >$W/z.out
(echo 0 >"$z/cgroup.procs" && exec env LD_PRELOAD="$PRELOAD" "$WORK" 256M 4K 0 \
	<$W/z.in >$W/z.out 2>$W/z.err) &
zpid=$!
z_ready() { grep -q ready $W/z.out; }
z_demoted() { grep -q '^demoted' $W/z.out; }
until_true z_ready
zseg=$(seg_of "$z")
echo 512M >"$z/memory.max"
# Demotion done: node 0 within the new share, and a second more for the last move_pages.
settle_n0 "$z" "$(share0 "$zseg" $((512 * M)))"
demote_cs=$took_cs
sleep 1
echo demoted >&3
until_true z_demoted
demoted=$(kv "$(grep '^demoted' $W/z.out)" bytes)
echo quit >&3
wait $zpid
exec 3>&-
until_true count_near "$z_id" move_pages 1 $((${demoted:-0} / 4096)) $((${demoted:-0} / 40960 + 1024))
moves=$(count "$z_id" move_pages 1)
promos=$(count "$z_id" promote)
echo "   tieralloc demoted $(mib "${demoted:-0}") (node 0 within the share after" \
	"$(secs "$demote_cs") s); agent: $moves pages moved to node 1 by move_pages, $promos" \
	"promoted, for cgroup $z_id"
if [ "${demoted:-0}" -le 0 ]; then
	fail agent.demotion "the workload demoted nothing"
elif ! within $((moves * 4096)) "$demoted" $((demoted / 10 + 4 * M)); then
	fail agent.demotion "the agent counted $moves pages of move_pages for $(mib "$demoted") demoted"
elif [ "$promos" -gt $((moves / 10)) ]; then
	fail agent.demotion "counted as promotions: $promos"
else
	pass agent.demotion
fi

# ------------------------------------------------------------- agent.quota
# seg_promoted_near SEG PAGES: the agent's promotions into tier 0 in SEG are within 10% of PAGES.
seg_promoted_near() {
	within "$(kv "$("$PEEK" "$1" | grep '^agent_tier=0 ')" promoted)" "$2" $(($2 / 10))
}
# alarms_taken SEG: every alarm the agent raised in SEG was taken.
alarms_taken() {
	_line=$("$PEEK" "$1" | grep '^agent ')
	[ "$(kv "$_line" alarm)" = "$(kv "$_line" alarm_taken)" ]
}

# quota_run NAME [agent-stopped]: one run of the scenario; sets share, hi (node 0's largest while
# promote_work ran), over_cs (how long node 0 was over the share from the first sample over it),
# again (the largest after it first came back), back (when node 0 was within the share again, the
# promoted pages still held; empty if it never was), after (node 0 once promote_work exited),
# moved (pages promote_work saw promoted), promoted, alarm, taken (from the segment),
# json_promoted (tieralloc-stat --json's) and demoted (bytes tieralloc demoted meanwhile).
quota_run() {
	cg_new ta-q-$1 512M
	qcg=$cg
	if ! work_start "$1" 4 "$qcg" 320M 64K 0; then
		return 1
	fi
	seg=$(seg_of "$qcg")
	qseg=$seg
	share=$(share0 "$seg" $((512 * M)))
	settle_n0 "$qcg" "$share"
	sleep 1
	d0=$(peek_tier "$seg" 0 demoted)
	(echo 0 >"$qcg/cgroup.procs" && exec "$PROMOTE" --hold 64 5) >"$W/q-$1.out" 2>&1 &
	qp=$!
	# Sampled every 0.1 s while promote_work reads (until its report), then on, its promoted
	# pages held, until node 0 is within the share (GUARD_S at most after the report).
	hi=0
	last=0
	samples=
	t_over=
	over_cs=
	again=0
	back=
	t_start=$(now_cs)
	t_read=
	while kill -0 $qp 2>/dev/null; do
		v=$(n0 "$qcg")
		t=$(now_cs)
		last=$v
		[ "$v" -gt "$hi" ] && hi=$v
		samples="$samples $((v / M))"
		if [ -z "$t_over" ]; then
			[ "$v" -gt "$share" ] && t_over=$t
		elif [ -z "$over_cs" ]; then
			[ "$v" -le "$share" ] && over_cs=$((t - t_over))
		elif [ "$v" -gt "$again" ]; then
			again=$v
		fi
		if [ -z "$t_read" ]; then
			grep -q '^promote ' "$W/q-$1.out" && t_read=$t
		elif [ "$v" -le "$share" ]; then
			back=$((t - t_start))
			break
		elif [ $((t - t_read)) -ge $((GUARD_S * 100)) ]; then
			break
		fi
		sleep 0.1
	done
	[ -n "$t_over" ] && [ -z "$over_cs" ] && over_cs=$(($(now_cs) - t_over))
	echo "   node 0 every 0.1 s (MiB):$samples"
	kill -TERM $qp 2>/dev/null
	wait $qp
	after=$(n0 "$qcg")
	moved=$(kv "$(cat "$W/q-$1.out")" node0)
	echo "   promote_work: $(cat "$W/q-$1.out")"
	# The agent writes every 0.5 s, and a worker takes an alarm on its next wake-up.
	if [ "${2:-}" != agent-stopped ]; then
		until_true seg_promoted_near "$seg" "${moved:-0}"
		until_true alarms_taken "$seg"
	fi
	line=$("$PEEK" "$seg" | grep '^agent ')
	alarm=$(kv "$line" alarm)
	taken=$(kv "$line" alarm_taken)
	promoted=$(kv "$("$PEEK" "$seg" | grep '^agent_tier=0 ')" promoted)
	demoted=$(($(peek_tier "$seg" 0 demoted) - d0))
	"$STAT" --name "/$seg" | sed -n '/^kernel migrations/,$p' | sed 's/^/   /'
	json=$("$STAT" --json --name "/$seg")
	# (tier 0's, the first "migrations" of the document)
	json_promoted=$(echo "$json" | grep -o '"migrations":{"promoted":[0-9]*' | head -1 |
		sed 's/.*://')
	proc_cmd "$1" verify
	verify=$REPLY
	proc_quit "$1"
	rmdir "$qcg" 2>/dev/null
	return 0
}

# over_share: "N KiB over the share" from hi and share, or "within the share".
over_share() {
	if [ "$hi" -gt "$share" ]; then
		echo "$(((hi - share) / 1024)) KiB over the share"
	else
		echo "within the share"
	fi
}

# report: one line on a run, for the output (times are reported here, never judged).
report() {
	echo "   $1: tier-0 share $(mib "$share"); promote_work had ${moved:-no} pages promoted," \
		"the segment says ${promoted:-nothing}; alarms ${alarm:-none} (taken ${taken:-none});" \
		"tieralloc demoted $(mib "$demoted"); node 0 at most $(mib "$hi") ($(over_share))," \
		"over it for $((${over_cs:-0} * 10)) ms, at most $(mib "$again") after it first came" \
		"back; within the share with the promoted pages held: $(
			[ -n "$back" ] && echo "$(secs "$back") s after promote_work started" ||
				echo "not in ${GUARD_S}s"
		); $(mib "$after") once promote_work exited"
}

if ! quota_run qa; then
	fail agent.quota "the workload did not start"
else
	report "with the agent"
	if [ -z "$moved" ] || [ "$moved" -lt 1024 ]; then
		fail agent.quota "NUMA balancing promoted too little to tell ($moved pages)"
	elif ! within "${promoted:-0}" "$moved" $((moved / 10)); then
		fail agent.quota "the segment says $promoted pages promoted, move_pages saw $moved"
	elif ! grep -q "^tierallocd: segment .*/$qseg:" $W/agent.out; then
		fail agent.quota "the agent did not find the segment when its cgroup's pages moved"
	elif ! echo "$json" | grep -q '"agent":{"available":true' ||
		! within "${json_promoted:-0}" "$moved" $((moved / 10)); then
		fail agent.quota "tieralloc-stat --json does not show the agent's counts: $json"
	elif [ "${alarm:-0}" -lt 1 ] || [ "$taken" != "$alarm" ]; then
		fail agent.quota "alarms raised ${alarm:-none}, taken ${taken:-none}"
	elif [ "$demoted" -le 0 ]; then
		fail agent.quota "tieralloc demoted nothing for the promoted pages"
	elif [ -z "$back" ]; then
		fail agent.quota "node 0 stayed over the share with the promoted pages held:" \
			"$(mib "$last") ${GUARD_S}s after promote_work's report"
	elif [ "$(kv "$verify" bad)" != 0 ]; then
		fail agent.quota "contents changed: $verify"
	else
		pass agent.quota
	fi
	# For comparison, not judged: the same with the agent stopped (its counts go stale, no
	# alarms; the workers read the cgroup every 200 ms on their own).
	kill -STOP $agent
	if quota_run qb agent-stopped; then
		report "agent stopped"
	fi
	kill -CONT $agent
fi

# Its cost: the programs' time per event (BPF stats) and the agent's CPU time.
grep "^prog=" $W/agent.out | tail -2 | sed 's/^/   /'
ticks=$(awk '{print $14 + $15}' /proc/$agent/stat)
echo "   agent CPU time: $((ticks * 10)) ms of user + system over the test"
kill -TERM $agent
wait $agent
tail -1 $W/agent.out
[ -s $W/agent.err ] && cat $W/agent.err
rmdir "$x" "$y" "$z" 2>/dev/null
exit $failed
