#!/bin/sh
# SPDX-License-Identifier: MIT
# The agent's access source (issue 14 item 3): tierallocd --access damon monitors the tieralloc
# processes with DAMON and writes each an access file; TIERALLOC_ACCESS=agent folds it into the
# heat, so memory that is only READ ranks hot, which soft-dirty cannot see. Two-tier guest as in
# hotness.sh (node 0 tier 0 with the CPUs, node 1 tier 1), run by suite.sh as root, busybox sh.
# Usage: access_agent.sh BUILDDIR SRCDIR. Prints "PASS name" / "FAIL name: why" / "SKIP ...".
#
# The workload: enforce_work, 600 MiB of 64 KiB blocks, the first third a working set that a
# thread only reads (ENFORCE_WORK_ACCESS=read), the rest untouched after it was filled;
# memory.max 900M dropped to 750M once the source ranks it. Node 0 must come to the new tier-0
# share (+15M). Each case prints what of the working set the drop sent to node 1 (its pages
# there after, less before: a few percent may be there from the start).
#   access.readset.soft-dirty  TIERALLOC_ACCESS=soft-dirty: the working set reads as cold as the
#                              untouched blocks (tier 0's hot bytes stay under 10% of it), so
#                              age alone decides between them; in most runs the working set,
#                              the oldest, went down first (35-46% of it), in one none of it:
#                              shown, not judged. Run on every kernel, for comparison.
#   access.readset.agent       TIERALLOC_ACCESS=agent with the agent's DAMON source: the working
#                              set reads hot (tier 0's hot bytes reach half of it before the
#                              drop), the untouched blocks go down instead: the drop sends at
#                              most 10% of it; access.source says "agent ...".
# On a kernel without DAMON's sysfs interface (Debian's 6.1):
#   access.agent.no_damon      the agent says the kernel has no DAMON and writes no file
#   access.readset.fallback    TIERALLOC_ACCESS=agent falls back to soft-dirty and says so
#                              (access.source "soft-dirty (agent: no access file ...)"), and
#                              the working set reads cold, as with soft-dirty.
# Convergence is waited for (GUARD_S at most, lib.sh) and its time printed, never judged.
B=$1
# shellcheck source=tests/guest/lib.sh
. "$2/tests/guest/lib.sh"
AGENT=$B/agent/tierallocd
W=/tmp/access_agent
SLACK=$((15 * M))
failed=0

if [ ! -x "$AGENT" ]; then
	echo "SKIP access_agent: tierallocd was not built (no clang, bpftool or libbpf at configure time)"
	exit 0
fi
rm -rf $W
mkdir -p $W
if [ -d /sys/kernel/mm/damon/admin ]; then damon=1; else damon=0; fi
echo "   access_agent: kernel $(uname -r): DAMON sysfs $([ $damon = 1 ] && echo yes || echo no)"

"$AGENT" --print --interval 0.5 --rescan 1 --access damon >$W/agent.out 2>$W/agent.err &
agent=$!
agent_attached() { grep -q "^tierallocd: attached" $W/agent.out; }
if ! until_true agent_attached; then
	fail access.agent "tierallocd did not attach: $(cat $W/agent.err)"
	kill "$agent" 2>/dev/null
	exit 1
fi
grep '^tierallocd: access' $W/agent.out
grep -- '--access' $W/agent.err

if [ $damon = 0 ]; then
	if grep -q -- "--access damon: this kernel has no DAMON sysfs interface" $W/agent.err &&
		! grep -q '^tierallocd: access: damon' $W/agent.out; then
		pass access.agent.no_damon
	else
		fail access.agent.no_damon "the agent did not say DAMON is missing:" \
			"$(cat $W/agent.err)"
	fi
fi

# Ranked: two samples taken after the hot thread started (access_base, lib.sh), no more than
# 16 MiB of tier 0 of unknown heat, and with the agent's source, tier 0's hot bytes at half the
# working set (200 MiB). Unknown ranks hottest: memory made since the source's counts began
# (the fill, for up to two of the agent's 5 s aggregations) is not yet judged.
ranked() {
	n0_watch
	proc_cmd "$name" access
	s=$(kv "$REPLY" samples)
	[ "${s:-0}" -ge $((samples0 + 2)) ] || return 1
	[ "$(kv "$REPLY" unknown0)" -le $((16 * M)) ] || return 1
	[ "$need_hot" = 0 ] || [ "$(kv "$REPLY" hot0)" -ge $((100 * M)) ]
}
# What a failure's message carries of an access reply (CI shows only PASS and FAIL lines).
brief() {
	echo "samples=$(kv "$1" samples) hot0=$(mib "$(kv "$1" hot0)")" \
		"cold0=$(mib "$(kv "$1" cold0)") unknown0=$(mib "$(kv "$1" unknown0)")" \
		"round_ms=$(kv "$1" round_ms) source=$(kv "$1" source)"
}
settled() {
	n0_watch
	[ "$(n0 "$cg")" -le $((target + SLACK)) ]
}

# read_case TEST SOURCE WANT PREFIX: WANT "kept" (the working set ranked hot, the drop sends at
# most 10% of it to node 1) or "cold" (it ranked cold: tier 0's hot bytes under 10% of it); the
# source's name must start with PREFIX.
read_case() {
	test=$1
	name=r$$
	cg_new "aa-$test" 900M
	if ! work_start "$name" 3 "$cg" 600M 64K 33 ENFORCE_WORK_LAYOUT=hot-first \
		ENFORCE_WORK_ACCESS=read TIERALLOC_ACCESS="$2"; then
		fail "$test" "the workload did not start"
		rmdir "$cg"
		return
	fi
	seg=$(seg_of "$cg")
	target=$(share0 "$seg" $((900 * M)))
	n0_peak=0
	t0=$(now_cs)
	access_base "$name"
	need_hot=0
	[ "$3" = kept ] && need_hot=1
	if ! until_true ranked; then
		proc_cmd "$name" access
		fail "$test" "not ranked after ${GUARD_S}s: $REPLY"
		proc_quit "$name"
		rmdir "$cg"
		return
	fi
	proc_cmd "$name" access
	hot_ranked=$(kv "$REPLY" hot0)
	at_rank=$(brief "$REPLY")
	echo "   $test: ranked after $(secs $(($(now_cs) - t0)))s: $REPLY"
	where_pm "$name"
	before1=$h1
	echo "   $test: before the drop: $where"
	echo 750M >"$cg/memory.max"
	target=$(share0 "$seg" $((750 * M)))
	t0=$(now_cs)
	n0_peak=0
	if ! until_true settled; then
		fail "$test" "after ${GUARD_S}s node 0 $(mib "$(n0 "$cg")") (share $(mib "$target") + 15M)"
		proc_quit "$name"
		rmdir "$cg"
		return
	fi
	took=$took_cs
	# Then it holds: four more samples, node 0 watched.
	t1=$(now_cs)
	while [ $(($(now_cs) - t1)) -lt 400 ]; do
		n0_watch
		sleep 0.1
	done
	where_pm "$name"
	proc_cmd "$name" access
	echo "   $test: settled in $(secs "$took")s; node 0 $(mib "$(n0 "$cg")") against share" \
		"$(mib "$target") + 15M; working set on node 1: $((hot1_pm / 10)).$((hot1_pm % 10))%"
	echo "   $test: $where"
	echo "   $test: $REPLY"
	source=$(kv "$REPLY" source)
	# What the drop sent down: the working set's pages on node 1 now less before (some of it
	# may have been there from the start: the share was full while it was allocated).
	moved=$((h1 - before1))
	[ "$moved" -lt 0 ] && moved=0
	moved_pm=$((moved * 1000 / (h0 + h1 + 1)))
	echo "   $test: the drop sent $((moved_pm / 10)).$((moved_pm % 10))% of the working set" \
		"to node 1"
	proc_cmd "$name" verify
	if [ "$(kv "$REPLY" bad)" != 0 ]; then
		fail "$test" "contents changed: $REPLY"
	elif [ "${source#"$4"}" = "$source" ]; then
		fail "$test" "access.source is $source, expected $4..."
	elif [ "$(n0 "$cg")" -gt $((target + SLACK)) ]; then
		fail "$test" "node 0 at $(mib "$(n0 "$cg")"), past share $(mib "$target") + 15M"
	elif [ "$3" = kept ] && [ "$moved_pm" -gt 100 ]; then
		fail "$test" "the drop sent $((moved_pm / 10))% of the read working set to node 1" \
			"(at most 10%); at the drop: $at_rank; after: $(brief "$REPLY")"
	elif [ "$3" = cold ] && [ "$hot_ranked" -gt $((20 * M)) ]; then
		fail "$test" "tier 0 had $(mib "$hot_ranked") hot before the drop: this source" \
			"should not see the reads of the 200 MiB working set"
	else
		pass "$test"
	fi
	if [ -s "$W/$name.err" ]; then
		fail "$test" "the workload wrote to stderr: $(cat "$W/$name.err")"
	fi
	proc_quit "$name"
	rmdir "$cg" 2>/dev/null
}

read_case access.readset.soft-dirty soft-dirty cold soft-dirty
if [ $damon = 1 ]; then
	read_case access.readset.agent agent kept "agent_(damon"
	# The agent removes the files of processes gone (at its next rescan).
	no_files() { ! ls /dev/shm/ | grep -q '^tieralloc_access\.'; }
	if until_true no_files; then
		pass access.agent.files_removed
	else
		fail access.agent.files_removed "access files left: $(ls /dev/shm)"
	fi
else
	read_case access.readset.fallback agent cold "soft-dirty_(agent:_no_access_file"
fi
kill "$agent"
wait "$agent"
grep 'damon' $W/agent.out | head -5
# The process's side of the agent's source with real soft-dirty bits, which the host lacks
# (tests/unit/test_access_agent.c): no clear while the file is fresh, a priming period when it
# goes. Run with the agent stopped: the file is the test's own.
if "$B/tests/unit/test_access_agent" >"$W/unit.out" 2>&1; then
	pass access.agent.no_soft_dirty_under_agent
else
	fail access.agent.no_soft_dirty_under_agent "$(tail -5 "$W/unit.out" | tr '\n' ' ')"
fi
exit $failed
