#!/bin/sh
# SPDX-License-Identifier: MIT
# Lending of idle fast-tier shares (issue 15), with the agent (tierallocd --lend) running, in the
# two-tier guest. Run by suite.sh as root, busybox sh, when the agent was built.
# Usage: lending.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why"; exit 1 on failure.
#
# Every container has memory.max 900M and TIERALLOC_SPLIT=0=1;1=2: a tier-0 share of 300M.
#   lending.borrow     6(a): A holds 50 MiB; B grows to 700 MiB (1 MiB blocks, 5 ms apart):
#                      B ends with more than its share plus half of A's idle part less the
#                      reserve (64M) on node 0, and never more than its share plus its loan (as
#                      the segment says it) plus 24 MiB; tieralloc-stat --json shows the loan.
#   lending.take_back  6(a): then A allocates 500 MiB: A reaches its share on node 0 (within
#                      24 MiB) and B falls back to its own (within 24 MiB); no allocation of A's
#                      fails and every word of both is intact. Printed: how long A's allocation
#                      took, when A held its share on node 0, when B was back within its own
#                      (the take-back), and the agent's own count of the take-back.
#   lending.priority   6(b): three containers (memory.max 600M, shares of 200M): L holds 20 MiB,
#                      Lo (TIERALLOC_PRIORITY=0) grows and borrows L's idle share; then H
#                      (TIERALLOC_PRIORITY=10) grows too: Lo's loan is revoked first and H
#                      borrows it (H over its share plus half of what L lends, Lo back within
#                      its own; loans from the segments: H's above 0, Lo's 0); nothing lost.
#   lending.priority_together  6(b), at once: the same three, but Lo and H grow together from
#                      the start: H ends with the loan (over its share plus half of what L
#                      lends, H's loan >= Lo's, Lo back within its own), H was granted at least
#                      as much as Lo (the segments' borrowed counters), and Lo's loan, sampled
#                      throughout, never exceeded what L lends (none of H's share); nothing lost.
#   lending.expiry     6(c): C holds 50 MiB, D borrows as B did; the agent is killed with SIGKILL:
#                      D's loan lapses (2 s), its enforcement demotes the excess and D's node 0
#                      comes back within its share (within 24 MiB) by itself; nothing lost.
#   lending.yield      issue 17, the priority policy's tier side: a new agent with
#                      --reclaim-for-priority and without --lend; two containers (memory.max 600M,
#                      shares of 200M, no memory.low): Y (TIERALLOC_PRIORITY=0) fills its share
#                      of node 0, then P (TIERALLOC_PRIORITY=10) grows by 350 MiB and is steered
#                      away: Y yields (its segment says so), its node 0 falls by 64 MiB or more
#                      and its node 1 rises by as much (demoted, not reclaimed), P ends with
#                      more than its share plus 64 MiB on node 0; once P quits, Y's yield ends;
#                      nothing lost.
# Every wait is for an outcome, GUARD_S at most (lib.sh); times are printed, not judged.
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
AGENT=$B/agent/tierallocd
W=/tmp/lending
failed=0

if [ ! -x "$AGENT" ]; then
	echo "SKIP lending: tierallocd was not built (no clang, bpftool or libbpf at configure time)"
	exit 0
fi
rm -rf $W
mkdir -p $W
SPLIT="TIERALLOC_SPLIT=0=1;1=2"
SHARE=$((300 * M))
RESERVE=$((64 * M))
TOL=$((24 * M))

# The containers here cooperate: the priorities they declare count (--priority-ceiling 1000).
agent_start() {
	"$AGENT" --lend --lend-reserve 64M --priority-ceiling 1000 --interval 0.25 --rescan 0.5 \
		--print >$W/agent.out 2>$W/agent.err &
	agent=$!
	until_true grep -q "^tierallocd: attached" $W/agent.out
}

loan_of() { lend0 "$1" loan; }

both_settled() {
	[ "$(n0 "$la")" -ge $((SHARE - TOL)) ] && [ "$(n0 "$lb")" -le $((SHARE + TOL)) ]
}

echo "lending: node 0 $(sed -n 's/.*MemFree: *\([0-9]*\) kB/\1/p' \
	/sys/devices/system/node/node0/meminfo) kB free before the containers"
agent_start

# ------------------------------------------------------------- lending.borrow
cg_new ta-la 900M
la=$cg
cg_new ta-lb 900M
lb=$cg
work_start a 3 "$la" 50M 1M 0 "$SPLIT"
work_start b 4 "$lb" 100M 1M 0 "$SPLIT"
proc_cmd b "grow 600M 5"
grown_b=$REPLY
want=$((SHARE + (SHARE - 50 * M - RESERVE) / 2))
until_true n0_above "$lb" "$want"
b_n0=$(n0 "$lb")
a_n0=$(n0 "$la")
loan=$(loan_of "$lb")
echo "   borrow: A node0 $(mib "$a_n0"), B node0 $(mib "$b_n0") (share $(mib $SHARE), loan" \
	"$(mib "${loan:-0}"), $(secs "$took_cs") s after B grew: $grown_b)"
# tieralloc-stat shows the loan (the default table's lending line, and --json).
"$STAT" --name "/$(seg_of "$lb")" | sed -n '/^lending/,$p' | sed 's/^/   /'
json_loan=$("$STAT" --json --name "/$(seg_of "$lb")" | grep -o '"lend":{"loan":[0-9]*' | head -1)
json_loan=${json_loan##*:}
if [ "${json_loan:-0}" -le 0 ]; then
	fail lending.borrow "tieralloc-stat --json shows no loan for B: $json_loan"
elif [ "$b_n0" -le "$want" ]; then
	fail lending.borrow "B has $(mib "$b_n0") on node 0, not more than $(mib "$want")"
elif [ "$b_n0" -gt $((SHARE + ${loan:-0} + TOL)) ]; then
	fail lending.borrow "B has $(mib "$b_n0") on node 0, over its share and loan" \
		"$(mib "${loan:-0}")"
else
	pass lending.borrow
fi

# ------------------------------------------------------------- lending.take_back
t0=$(now_cs)
proc_cmd a "grow 500M 0"
grown_a=$REPLY
a_done=$(($(now_cs) - t0))
until_true n0_above "$la" $((SHARE - TOL))
a_share=$(($(now_cs) - t0))
until_true both_settled
took=$(($(now_cs) - t0))
a_n0=$(n0 "$la")
b_n0=$(n0 "$lb")
proc_cmd a verify
va=$REPLY
proc_cmd b verify
vb=$REPLY
echo "   take-back: A's 500 MiB allocated in $(secs "$a_done") s, A at its share on node 0" \
	"$(secs "$a_share") s and B back within its own $(secs "$took") s after A's command;" \
	"A node0 $(mib "$a_n0"), B node0 $(mib "$b_n0") ($grown_a; $va; $vb)"
echo "   agent: $(grep 'asks for its share back' $W/agent.out | tail -1)"
echo "   agent: $(grep 'take-back' $W/agent.out | tail -1)"
if ! both_settled; then
	fail lending.take_back "A node0 $(mib "$a_n0"), B node0 $(mib "$b_n0")"
elif [ "$(kv "$grown_a" failed)" != 0 ]; then
	fail lending.take_back "A's allocations failed: $grown_a"
elif [ "$(kv "$va" bad)" != 0 ] || [ "$(kv "$vb" bad)" != 0 ]; then
	fail lending.take_back "memory lost: $va; $vb"
else
	pass lending.take_back
fi
proc_quit a
proc_quit b

# ------------------------------------------------------------- lending.priority
# memory.max 600M: shares of 200M. L holds 20 MiB (116M to lend above the reserve); Lo
# (priority 0) borrows it first, then H (priority 10) wants more too.
PSHARE=$((200 * M))
pwant=$((PSHARE + (PSHARE - 20 * M - RESERVE) / 2))
cg_new ta-pl 600M
pl=$cg
cg_new ta-plo 600M
plo=$cg
cg_new ta-ph 600M
ph=$cg
work_start l 5 "$pl" 20M 1M 0 "$SPLIT"
work_start lo 6 "$plo" 50M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=0
work_start h 7 "$ph" 50M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=10
proc_cmd lo "grow 350M 5"
until_true n0_above "$plo" "$pwant"
lo_first=$(n0 "$plo")
lo_took=$took_cs
t0=$(now_cs)
proc_cmd h "grow 350M 5"
h_over() { n0_above "$ph" "$pwant" && n0_within "$plo" $((PSHARE + TOL)); }
until_true h_over
took=$(($(now_cs) - t0))
h_n0=$(n0 "$ph")
lo_n0=$(n0 "$plo")
h_loan=$(loan_of "$ph")
lo_loan=$(loan_of "$plo")
proc_cmd lo verify
vlo=$REPLY
proc_cmd h verify
vh=$REPLY
echo "   priority: Lo borrowed first (node0 $(mib "$lo_first") after $(secs "$lo_took") s); then" \
	"H (priority 10) node0 $(mib "$h_n0") loan $(mib "${h_loan:-0}"), Lo node0 $(mib "$lo_n0")" \
	"loan $(mib "${lo_loan:-0}"), $(secs "$took") s after H grew ($vlo; $vh)"
if ! h_over; then
	fail lending.priority "H node0 $(mib "$h_n0"), Lo node0 $(mib "$lo_n0")"
elif [ "${lo_loan:-0}" != 0 ] || [ "${h_loan:-0}" -le 0 ]; then
	fail lending.priority "loans: H $(mib "${h_loan:-0}"), Lo $(mib "${lo_loan:-0}")"
elif [ "$(kv "$vlo" bad)" != 0 ] || [ "$(kv "$vh" bad)" != 0 ]; then
	fail lending.priority "memory lost: $vlo; $vh"
else
	pass lending.priority
fi
proc_quit l
proc_quit lo
proc_quit h

# ------------------------------------------------------------- lending.priority_together
# 6(b) with the two priorities competing at once: the same three containers, but Lo and H are
# told to grow in the same breath. H (priority 10) is served first whatever order the agent sees
# them in: at the end it holds the loan (H's above pwant on node 0, Lo back within its share,
# H's loan >= Lo's), it was granted at least as much as Lo over the whole run (the segments'
# borrowed counters), and Lo never held more than L lends (its loan, sampled throughout, never
# above L's share less its 20 MiB and the reserve): nothing of H's share went to Lo.
cg_new ta-tl 600M
tl=$cg
cg_new ta-tlo 600M
tlo=$cg
cg_new ta-th 600M
th=$cg
work_start l 5 "$tl" 20M 1M 0 "$SPLIT"
work_start lo 6 "$tlo" 50M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=0
work_start h 7 "$th" 50M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=10
lendable=$((PSHARE - 20 * M - RESERVE))
lo_max=0
# borrowed_of CGROUP: the bytes ever granted to it on tier 0 (the segment's counter).
borrowed_of() { lend0 "$1" borrowed; }
sample_lo() {
	_l=$(loan_of "$tlo")
	[ "${_l:-0}" -le "$lo_max" ] || lo_max=${_l:-0}
}
grown() { [ "$(wc -l <"$W/$1.out")" -ge "$(eval echo "\$n_$1")" ]; }
t0=$(now_cs)
proc_send lo "grow 350M 5"
proc_send h "grow 350M 5"
both_grown() { sample_lo && grown lo && grown h; }
until_true both_grown
proc_wait lo
glo=$REPLY
proc_wait h
gh=$REPLY
h_first() { sample_lo && n0_above "$th" "$pwant" && n0_within "$tlo" $((PSHARE + TOL)); }
until_true h_first
took=$(($(now_cs) - t0))
h_n0=$(n0 "$th")
lo_n0=$(n0 "$tlo")
h_loan=$(loan_of "$th")
lo_loan=$(loan_of "$tlo")
h_b=$(borrowed_of "$th")
lo_b=$(borrowed_of "$tlo")
proc_cmd lo verify
vlo=$REPLY
proc_cmd h verify
vh=$REPLY
echo "   priority_together: $(secs "$took") s after both grew ($glo; $gh): H node0 $(mib "$h_n0")" \
	"loan $(mib "${h_loan:-0}") borrowed $(mib "${h_b:-0}"), Lo node0 $(mib "$lo_n0") loan" \
	"$(mib "${lo_loan:-0}") borrowed $(mib "${lo_b:-0}"), Lo's largest loan seen" \
	"$(mib "$lo_max") (L lends at most $(mib "$lendable")) ($vlo; $vh)"
if ! h_first; then
	fail lending.priority_together "H node0 $(mib "$h_n0"), Lo node0 $(mib "$lo_n0")"
elif [ "${h_loan:-0}" -le 0 ] || [ "${h_loan:-0}" -lt "${lo_loan:-0}" ]; then
	fail lending.priority_together "loans: H $(mib "${h_loan:-0}"), Lo $(mib "${lo_loan:-0}")"
elif [ "${h_b:-0}" -lt "${lo_b:-0}" ]; then
	fail lending.priority_together "borrowed: H $(mib "${h_b:-0}"), Lo $(mib "${lo_b:-0}")"
elif [ "$lo_max" -gt "$lendable" ]; then
	fail lending.priority_together "Lo's loan reached $(mib "$lo_max"), more than L lends"
elif [ "$(kv "$glo" failed)" != 0 ] || [ "$(kv "$gh" failed)" != 0 ]; then
	fail lending.priority_together "allocations failed: $glo; $gh"
elif [ "$(kv "$vlo" bad)" != 0 ] || [ "$(kv "$vh" bad)" != 0 ]; then
	fail lending.priority_together "memory lost: $vlo; $vh"
else
	pass lending.priority_together
fi
proc_quit l
proc_quit lo
proc_quit h

# ------------------------------------------------------------- lending.expiry
cg_new ta-lc 900M
lc=$cg
cg_new ta-ld 900M
ld=$cg
work_start c 5 "$lc" 50M 1M 0 "$SPLIT"
work_start d 6 "$ld" 100M 1M 0 "$SPLIT"
proc_cmd d "grow 600M 5"
until_true n0_above "$ld" "$want"
d_n0=$(n0 "$ld")
kill -KILL "$agent"
wait "$agent" 2>/dev/null
t0=$(now_cs)
settle_n0 "$ld" $((SHARE + TOL))
took=$(($(now_cs) - t0))
d_after=$(n0 "$ld")
proc_cmd d verify
vd=$REPLY
echo "   expiry: D node0 $(mib "$d_n0") with the loan, $(mib "$d_after") $(secs "$took") s after" \
	"the agent was killed ($vd)"
if [ "$d_n0" -le "$want" ]; then
	fail lending.expiry "D never borrowed: $(mib "$d_n0") on node 0"
elif [ "$d_after" -gt $((SHARE + TOL)) ]; then
	fail lending.expiry "D still has $(mib "$d_after") on node 0"
elif [ "$(kv "$vd" bad)" != 0 ]; then
	fail lending.expiry "memory lost: $vd"
else
	pass lending.expiry
fi
proc_quit c
proc_quit d

# ------------------------------------------------------------- lending.yield
"$AGENT" --reclaim-for-priority --priority-ceiling 1000 --interval 0.25 --rescan 0.5 --print \
	>$W/agent-yield.out 2>$W/agent-yield.err &
agent=$!
until_true grep -q "^tierallocd: attached" $W/agent-yield.out
cg_new ta-ly 600M
ly=$cg
cg_new ta-lp 600M
lp=$cg
YSHARE=$((200 * M))
YMOVE=$((64 * M))
work_start y 5 "$ly" 190M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=0
work_start p 6 "$lp" 20M 1M 0 "$SPLIT" TIERALLOC_PRIORITY=10
# n1 CGROUP: its bytes on node 1 (anon and file).
n1() {
	awk '/^(anon|file) /{for(i=2;i<=NF;i++) if ($i ~ /^N1=/) {sub("N1=","",$i); s+=$i}}
	     END {print s+0}' "$1/memory.numa_stat"
}
y_n0=$(n0 "$ly")
y_n1=$(n1 "$ly")
t0=$(now_cs)
proc_cmd p "grow 350M 5"
gp=$REPLY
# The outcome: Y demoted for P and P placed on node 0 what Y gave.
yielded() {
	[ "$(n0 "$ly")" -le $((y_n0 - YMOVE)) ] && [ "$(n1 "$ly")" -ge $((y_n1 + YMOVE)) ] &&
		[ "$(n0 "$lp")" -gt $((YSHARE + YMOVE)) ]
}
until_true yielded
took=$(($(now_cs) - t0))
y_given=$(lend0 "$ly" yielded)
p_loan=$(loan_of "$lp")
ya_n0=$(n0 "$ly")
ya_n1=$(n1 "$ly")
p_n0=$(n0 "$lp")
proc_cmd y verify
vy=$REPLY
proc_cmd p verify
vp=$REPLY
echo "   yield: $(secs "$took") s after P grew ($gp): Y node0 $(mib "$y_n0") -> $(mib "$ya_n0")," \
	"node1 $(mib "$y_n1") -> $(mib "$ya_n1"), yielded $(mib "${y_given:-0}"); P node0" \
	"$(mib "$p_n0"), loan $(mib "${p_loan:-0}") ($vy; $vp)"
echo "   agent: $(grep -m 1 'yielded [1-9]' $W/agent-yield.out)"
ok=1
if [ "$y_n0" -lt $((YSHARE - TOL)) ]; then
	fail lending.yield "Y never filled its share of node 0: $(mib "$y_n0")"
	ok=0
elif ! yielded; then
	fail lending.yield "Y node0 $(mib "$ya_n0") node1 $(mib "$ya_n1"), P node0 $(mib "$p_n0")"
	ok=0
elif [ "${y_given:-0}" -le 0 ] || [ "${p_loan:-0}" -le 0 ]; then
	fail lending.yield "the segments show no yield ($y_given) or no loan ($p_loan)"
	ok=0
elif [ "$(kv "$gp" failed)" != 0 ]; then
	fail lending.yield "P's allocations failed: $gp"
	ok=0
elif [ "$(kv "$vy" bad)" != 0 ] || [ "$(kv "$vp" bad)" != 0 ]; then
	fail lending.yield "memory lost: $vy; $vp"
	ok=0
fi
proc_quit p
yield_over() { [ "$(lend0 "$ly" yielded)" = 0 ]; }
if [ $ok = 1 ] && ! until_true yield_over; then
	fail lending.yield "Y still yields $(mib "$(lend0 "$ly" yielded)") after P quit"
elif [ $ok = 1 ]; then
	echo "   yield: ended $(secs "$took_cs") s after P quit"
	pass lending.yield
fi
proc_quit y
kill "$agent"
wait "$agent" 2>/dev/null
exit $failed
