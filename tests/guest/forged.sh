#!/bin/sh
# SPDX-License-Identifier: MIT
# What a container's user can make the agent do (issue 31), against the running tierallocd in
# the guest. Run by suite.sh as root, busybox sh, when the agent was built.
# Usage: forged.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why"; exit 1 on failure.
# FORGED_AGENT=PATH runs another build of the agent (an older one fails these checks).
#
# The attacker is uid 1000 in cgroup ta-forged/att, whose memory.high it keeps hitting (its own
# pressure). With --reclaim-for-priority --priority ta-forged/vic=100 --priority ta-forged/att=0
# --priority-ceiling 1000, it writes segments (tests/quota/shm_forge claim) that name
# ta-forged//att (declaring 1000), ta-forged//vic (0), ta-forged itself (1000) and the top-level
# cgroup ta-top (0), with their real inodes, each mapped by a live process of its own in att.
# vic and ta-top run no tieralloc and hold 64 MiB each.
#   forged.refused     the agent says, once each, that the segments naming ta-forged//vic,
#                      ta-forged and ta-top are not their processes' cgroup
#   forged.ranked      it knows att by its canonical path, with the operator's priority 0, and
#                      no path of a segment's spelling (no "//")
#   forged.not_capped  while att is pressured (40 rounds as the agent counts them), neither vic's
#                      nor ta-top's memory.high ever leaves max, and no reclaim line names them
#   forged.one_agent   a second agent, started meanwhile, refuses (exit 1, one line)
# A container's /dev/shm:
#   forged.symlink     a link to a host directory holding a valid segment: the agent never writes
#                      into it (its bytes are unchanged once it wrote another container's)
#   forged.fuse        a FUSE file system whose server never answers (mounted by root with
#                      allow_other, so that the agent is let in): the agent's rescans go on (it
#                      finds a container started after it), tieralloc-stat ends, and SIGTERM
#                      stops the agent
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
AGENT=${FORGED_AGENT:-$B/agent/tierallocd}
FORGE=$B/tests/quota/shm_forge
STALL=$B/tests/guest/fuse_stall
RW=$B/tests/guest/reclaim_work
SETPRIV=/usr/bin/setpriv # util-linux's (busybox's cannot change uid): the check-guest includes it
W=/tmp/forged
P=/sys/fs/cgroup/ta-forged
TOP=/sys/fs/cgroup/ta-top
ROUNDS=40
failed=0

if [ ! -x "$B/agent/tierallocd" ]; then
	echo "SKIP forged: tierallocd was not built (no clang, bpftool, libbpf or libcgroup)"
	exit 0
fi
rm -rf $W
mkdir -p $W
for tool in unshare md5sum; do
	if ! command -v $tool >/dev/null; then
		fail forged.setup "the guest's busybox has no $tool"
		exit 1
	fi
done
if ! "$SETPRIV" --help 2>&1 | grep -q -- --reuid; then
	fail forged.setup "no $SETPRIV that changes uid (util-linux's, from the host)"
	exit 1
fi
if ! zram_swap; then
	fail forged.setup "cannot set up zram swap (is the zram module in the guest?)"
	exit 1
fi
ceiling=
"$AGENT" --help | grep -q -- --priority-ceiling && ceiling="--priority-ceiling 1000"

# ---- forged segments against reclaim for priority ----
for d in $P/att $P/vic $P $TOP; do
	[ -d $d ] && rmdir $d
done
if ! { mkdir $P && echo +memory >$P/cgroup.subtree_control && mkdir $P/att $P/vic $TOP &&
	echo 48M >$P/att/memory.high; }; then
	fail forged.setup "cannot make $P"
	exit 1
fi
(echo 0 >$P/vic/cgroup.procs && exec "$RW" 64 0 1000) >$W/vic.out 2>&1 &
vic=$!
(echo 0 >$TOP/cgroup.procs && exec "$RW" 64 0 1000) >$W/top.out 2>&1 &
top=$!
until_true grep -q "^filled" $W/vic.out
until_true grep -q "^filled" $W/top.out
# in_att CMD...: CMD as uid 1000 in att, in the background.
in_att() {
	(echo 0 >$P/att/cgroup.procs &&
		exec "$SETPRIV" --reuid=1000 --regid=1000 --clear-groups "$@") &
}
in_att "$RW" 96 0 >$W/att.out 2>&1
pressure=$!
claims=
for c in "att $P//att 1000" "vic $P//vic 0" "par $P 1000" "top $TOP 0"; do
	set -- $c
	rm -f /dev/shm/tieralloc-forged-$1
	in_att "$FORGE" /dev/shm/tieralloc-forged-$1 claim "$2" "$3" >$W/claim-$1.out 2>&1
	claims="$claims $!"
	until_true grep -q claimed $W/claim-$1.out ||
		fail forged.setup "shm_forge claim $2: $(cat $W/claim-$1.out)"
done
: >$W/high
(while :; do
	echo "vic $(cat $P/vic/memory.high) top $(cat $TOP/memory.high)" >>$W/high
	sleep 0.1
done) &
sampler=$!
: >$W/agent.out
# shellcheck disable=SC2086 # $ceiling: two words or none
"$AGENT" --interval 0.1 --rescan 0.5 --reclaim-for-priority --priority $P/vic=100 \
	--priority $P/att=0 $ceiling --status $W/policies >>$W/agent.out 2>&1 &
agent=$!
until_true grep -q "^tierallocd: attached" $W/agent.out
# The most rounds an entry naming att was pressured in, as the agent's status file says.
att_rounds() {
	r=$(sed -n 's/.*pressured_rounds=\([0-9]*\).* path=[^ ]*att$/\1/p' $W/policies 2>/dev/null |
		sort -n | tail -1)
	echo "${r:-0}"
}
att_pressured() { [ "$(att_rounds)" -ge $ROUNDS ]; }
until_true att_pressured
rounds=$(att_rounds)
# Meanwhile, a second agent.
rc=0
"$AGENT" --once >$W/second.out 2>$W/second.err || rc=$?
kill $sampler
wait $sampler 2>/dev/null
echo "forged: att pressured $rounds rounds ($(secs $took_cs) s to $ROUNDS);" \
	"memory.high samples $(wc -l <$W/high): vic $(sed -n 's/^vic \([^ ]*\).*/\1/p' $W/high |
		sort | uniq -c | tr -s ' \n' ' '), top $(sed -n 's/.* top \(.*\)/\1/p' $W/high |
		sort | uniq -c | tr -s ' \n' ' ')"
grep "ignored by the policies" $W/agent.out
refusals=0
for c in "vic $P//vic" "par $P " "top $TOP "; do
	set -- $c
	n=$(grep -c "segment /dev/shm/tieralloc-forged-$1 names cgroup $2.*ignored by the policies" \
		$W/agent.out)
	[ "$n" = 1 ] && refusals=$((refusals + 1))
done
if [ $refusals = 3 ] && ! grep -q "tieralloc-forged-att names" $W/agent.out; then
	pass forged.refused
else
	fail forged.refused "$refusals of 3 refusals said once, or att's own refused:" \
		"$(grep 'names cgroup' $W/agent.out | head -5)"
fi
grep "^reclaim" $W/policies | sed 's/^/   /'
if grep -q "^reclaim priority=0 .* path=$P/att$" $W/policies &&
	! grep -q "path=.*//" $W/policies && ! grep -q "path=$TOP$" $W/policies &&
	! grep -q "path=$P$" $W/policies; then
	pass forged.ranked
else
	fail forged.ranked "the agent's entries: $(grep '^reclaim' $W/policies | tr '\n' ';')"
fi
not_max=$(grep -vc "^vic max top max$" $W/high)
lines=$(grep -cE "reclaim: .*-> ($P/+vic|$TOP) " $W/agent.out)
if [ "$rounds" -ge $ROUNDS ] && [ "$not_max" = 0 ] && [ "$lines" = 0 ]; then
	pass forged.not_capped
else
	fail forged.not_capped "att pressured $rounds rounds; $not_max samples of vic's or ta-top's" \
		"memory.high below max; $lines reclaim lines for them:" \
		"$(grep 'reclaim: ' $W/agent.out | head -4)"
fi
if [ $rc = 1 ] && [ "$(wc -l <$W/second.err)" = 1 ] &&
	grep -q "^tierallocd: another tierallocd (pid $agent) is running" $W/second.err; then
	pass forged.one_agent
else
	fail forged.one_agent "a second agent: exit status $rc, '$(cat $W/second.err)'," \
		"$(head -2 $W/second.out)"
fi
# shellcheck disable=SC2086 # $claims: pids
kill -TERM $agent $pressure $claims $vic $top
wait $agent $pressure $claims $vic $top 2>/dev/null
echo "forged: after the agent stopped: vic memory.high $(cat $P/vic/memory.high)," \
	"ta-top $(cat $TOP/memory.high)"
rm -f /dev/shm/tieralloc-forged-*
for d in $P/att $P/vic $P $TOP; do
	rmdir $d 2>/dev/null
done

# ---- a container's /dev/shm that is a link ----
# ns_start NAME SCRIPT: a mount namespace of its own running SCRIPT (sh -c), which prints "ready"
# and then sleeps; its pid in $ns_pid.
ns_start() {
	unshare -m sh -c "mount --make-rprivate / 2>/dev/null; $2 && echo ready && exec sleep 900" \
		>$W/ns-$1.out 2>&1 &
	ns_pid=$!
	until_true grep -q ready $W/ns-$1.out ||
		fail forged.setup "namespace $1: $(cat $W/ns-$1.out)"
}
mkdir -p /tmp/ta-bait
rm -f /tmp/ta-bait/tieralloc-bait
"$FORGE" /tmp/ta-bait/tieralloc-bait valid
bait0=$(md5sum </tmp/ta-bait/tieralloc-bait)
ns_start bait "mount -t tmpfs ta-dev /dev && ln -s /tmp/ta-bait /dev/shm"
bait_ns=$ns_pid
ns_start canary "mount -t tmpfs ta-shm /dev/shm && $FORGE /dev/shm/tieralloc-canary valid"
canary_ns=$ns_pid
canary=/proc/$canary_ns/root/dev/shm/tieralloc-canary
canary0=$(md5sum <$canary)
: >$W/agent-link.out
"$AGENT" --print --interval 0.1 --rescan 0.5 >>$W/agent-link.out 2>&1 &
agent=$!
# Both namespaces were there from the agent's first rescan on: once it wrote into the canary,
# it had walked the other one too.
canary_written() { [ "$(md5sum <$canary)" != "$canary0" ]; }
until_true canary_written
wrote_canary=$took_cs
kill -TERM $agent
wait $agent
if [ "$(md5sum <$canary)" = "$canary0" ]; then
	fail forged.symlink "the agent never wrote into the canary container's segment" \
		"$(grep segment $W/agent-link.out | head -3)"
elif [ "$(md5sum </tmp/ta-bait/tieralloc-bait)" != "$bait0" ] ||
	grep -q "tieralloc-bait" $W/agent-link.out; then
	fail forged.symlink "the agent followed the container's /dev/shm link into the host's" \
		"/tmp/ta-bait: $(grep bait $W/agent-link.out | head -2)"
else
	pass forged.symlink
	echo "   the canary written $(secs $wrote_canary) s after the start; the host file untouched"
fi
kill $bait_ns $canary_ns 2>/dev/null
rm -rf /tmp/ta-bait

# ---- a container's /dev/shm on FUSE ----
# ended PID: the process exited (gone, or a zombie nobody waited for yet).
ended() {
	_st=$(sed 's/.*) \(.\).*/\1/' /proc/"$1"/stat 2>/dev/null)
	[ -z "$_st" ] || [ "$_st" = Z ]
}
if [ ! -c /dev/fuse ]; then
	fail forged.fuse "this kernel has no FUSE (/dev/fuse missing after loading the fuse" \
		"module): the walk past a FUSE /dev/shm is not tested here"
else
	unshare -m sh -c "mount --make-rprivate / 2>/dev/null; exec $STALL /dev/shm" \
		>$W/stall.out 2>&1 &
	stall=$!
	until_true grep -q mounted $W/stall.out || fail forged.setup "fuse_stall: $(cat $W/stall.out)"
	: >$W/agent-fuse.out
	"$AGENT" --print --interval 0.1 --rescan 0.5 >>$W/agent-fuse.out 2>&1 &
	agent=$!
	until_true grep -q "^tierallocd: attached" $W/agent-fuse.out
	# A container started after the agent, behind the FUSE one in no particular order: found
	# only if the rescans go on.
	ns_start late "mount -t tmpfs ta-shm /dev/shm && $FORGE /dev/shm/tieralloc-late valid"
	late_ns=$ns_pid
	found=no
	until_true grep -q "segment /proc/[0-9]*/root/dev/shm/tieralloc-late" $W/agent-fuse.out &&
		found=yes
	"$STAT" >$W/stat-fuse.out 2>&1 &
	st=$!
	stat_done=no
	until_true ended $st && stat_done=yes
	kill -TERM $agent
	stopped=no
	until_true ended $agent && stopped=yes
	echo "forged: fuse: a later container found: $found; tieralloc-stat ended: $stat_done;" \
		"SIGTERM stopped the agent: $stopped ($(secs $took_cs) s)"
	if [ $found = yes ] && [ $stat_done = yes ] && [ $stopped = yes ]; then
		pass forged.fuse
	else
		fail forged.fuse "later container found $found, tieralloc-stat ended $stat_done," \
			"agent stopped by SIGTERM $stopped: $(tail -3 $W/agent-fuse.out)"
	fi
	# The stalled ones go with the file system (closing its device ends their requests).
	kill -TERM $stall $late_ns 2>/dev/null
	wait $stall 2>/dev/null
	kill -KILL $agent $st 2>/dev/null
	wait $agent 2>/dev/null
fi
exit $failed
