# SPDX-License-Identifier: MIT
# Helpers of the guest test scripts (quota.sh, enforce.sh, agent.sh), sourced by busybox sh after
# they set B (the build directory), $failed and $W (their scratch directory). The programs they
# share are named here.
# Timing (issue 12 item 15): every test holds on a host at a load average of 12 on 2 cores,
# where the emulated guest runs several times slower. A test waits for the outcome it checks,
# for at most GUARD_S seconds (300): a guard against a hang, not a deadline; how long it took is
# printed, and only a check that the outcome never came fails. Times belong in the output or in
# a benchmark, never in a pass/fail threshold tighter than the scenario's own length. (At a load
# of 15, demoting 20 MiB of 1 MiB blocks on 6.1 took up to 111 s instead of 2-4 s: every page
# moved one by one needs a TLB-flush IPI answered by the other vCPU, whose thread the host
# seldom runs.)
PRELOAD=$B/preload/.libs/libtieralloc-preload.so
WORK=$B/tests/guest/enforce_work
PEEK=$B/tests/quota/shm_peek
STAT=$B/tools/tieralloc-stat
M=1048576
: "${GUARD_S:=300}"

pass() { echo "PASS $1"; }
# fail NAME WHY...: every word of WHY is shown (callers split long reasons over arguments).
fail() {
	local test=$1
	shift
	echo "FAIL $test: $*"
	failed=1
}
mib() { echo "$(($1 / M))M"; }

# cg_new NAME MAX: a fresh cgroup with that memory.max, in $cg; its id (inode) in $cg_id.
cg_new() {
	cg=/sys/fs/cgroup/$1
	[ -d $cg ] && rmdir $cg
	mkdir $cg && echo "$2" >$cg/memory.max
	cg_id=$(stat -c %i "$cg")
}

# zram_fs DIR MIB: ext2 on a fresh zram device, mounted at DIR (once).
zram_fs() {
	grep -q " $1 " /proc/mounts && return 0
	[ -e /sys/class/zram-control/hot_add ] || return 1
	_z=$(cat /sys/class/zram-control/hot_add) &&
		echo "$2M" >/sys/block/zram"$_z"/disksize &&
		mke2fs -b 4096 /dev/zram"$_z" >/dev/null 2>&1 && mkdir -p "$1" &&
		mount -t ext2 /dev/zram"$_z" "$1"
}

# zram_swap: a 512 MiB zram swap device (the guest has no disk), once per boot; 1 when it cannot
# be set up (guest-run.sh needs --module zram).
zram_swap() {
	grep -q zram0 /proc/swaps && return 0
	echo 512M >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0
}

# kv LINE KEY: the value of KEY in a "key=value ..." line.
kv() { echo "$1" | sed -n "s/^\(.* \)\{0,1\}$2=\([^ ]*\).*/\2/p"; }

# seg_of CGROUP: the name of the cgroup's segment in /dev/shm.
seg_of() {
	for f in /dev/shm/tieralloc-v1-cg"$(stat -c %i "$1")"-t*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
		return
	done
}

# anon CGROUP: "N0 N1", the cgroup's anon bytes on nodes 0 and 1.
anon() { sed -n 's/^anon N0=\([0-9]*\) N1=\([0-9]*\).*/\1 \2/p' "$1/memory.numa_stat"; }

# peek_tier SEG TIER KEY
peek_tier() { kv "$("$PEEK" "$1" | grep "^tier=$2 ")" "$3"; }

# within A B TOL: |A - B| <= TOL
within() { [ $(($1 > $2 ? $1 - $2 : $2 - $1)) -le "$3" ]; }

now_cs() { sed 's/^\([0-9]*\)\.\([0-9]*\).*/\1\2/' /proc/uptime; }
# n0 CGROUP: the cgroup's bytes on node 0 (anon + file), as tieralloc's observation counts.
n0() {
	awk '/^(anon|file) /{for(i=2;i<=NF;i++) if ($i ~ /^N0=/) {sub("N0=","",$i); s+=$i}}
	     END {print s+0}' "$1/memory.numa_stat"
}
# share0 SEG BYTES: tier 0's share of a cgroup-wide limit, from the segment's share_ppm.
share0() { echo $(($2 * $(peek_tier "$1" 0 share_ppm) / 1000000)); }

# The one harness of a program driven by commands, a line each, with a reply line each (quota_hog,
# enforce_work): proc_start starts it, proc_cmd sends a command and waits for its reply, proc_quit
# ends it.
#
# proc_start NAME FD CGROUP "PROGRAM [ARG...]" [VAR=value...]: the program (its words split at
# spaces) in CGROUP under the preload, with VAR=value in its environment; its commands through a
# FIFO held open on FD (3..9), its replies in $W/NAME.out, its stderr in $W/NAME.err.
proc_start() {
	eval "fd_$1=$2; cg_$1=$3; n_$1=0"
	_name=$1
	_fd=$2
	_cg=$3
	_argv=$4
	shift 4
	rm -f "$W/$_name.in"
	mkfifo "$W/$_name.in"
	: >"$W/$_name.out"
	# Held open for reading and writing: the program's open of the FIFO never blocks, and it
	# sees no end of file between commands.
	eval "exec $_fd<>$W/$_name.in"
	# "echo 0" moves the writing process: the subshell that then becomes the program.
	# shellcheck disable=SC2086 # the program's words, split on purpose
	(echo 0 >"$_cg/cgroup.procs" && exec env "$@" LD_PRELOAD="$PRELOAD" $_argv \
		<"$W/$_name.in" >"$W/$_name.out" 2>"$W/$_name.err") &
	eval "pid_$_name=\$!"
}

# proc_wait NAME: its next reply line, in $REPLY; 1 when it died first, or after a guard of
# 300 s against a hung program (not a timing check), saying so with its cgroup's events and its
# stderr.
# shellcheck disable=SC2154 # n_, pid_ and cg_ are set through eval
proc_wait() {
	eval "n=\$n_$1; pid=\$pid_$1; _cg=\$cg_$1"
	tries=0
	while [ "$(wc -l <"$W/$1.out")" -lt "$n" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ $tries -ge 3000 ]; then
			REPLY=
			echo "$1: no reply line $n; its cgroup's events:" \
				"$(cat "$_cg/memory.events" 2>/dev/null | tr '\n' ' '); stderr: $(cat "$W/$1.err")"
			return 1
		fi
		sleep 0.1
		tries=$((tries + 1))
	done
	REPLY=$(sed -n "${n}p" "$W/$1.out")
}

# proc_send NAME CMD: the command only; its reply is for a later proc_wait NAME (so that the
# caller can watch something while the program works).
proc_send() {
	eval "fd=\$fd_$1; n_$1=\$((n_$1 + 1))"
	echo "$2" >&"$fd"
}

# proc_cmd NAME CMD: send, wait for the reply line, leave it in $REPLY.
proc_cmd() {
	proc_send "$1" "$2"
	proc_wait "$1"
}

proc_quit() {
	eval "fd=\$fd_$1; pid=\$pid_$1"
	echo quit >&"$fd"
	wait "$pid"
	eval "exec $fd>&-"
	rm -f "$W/$1.in"
}

# work_start NAME FD CGROUP TOTAL BLOCK HOT [VAR=value...]: enforce_work (tests/guest/
# enforce_work.c) through proc_start; waits for its "ready" line.
work_start() {
	_work_name=$1
	_work_fd=$2
	_work_cg=$3
	_work_argv="$WORK $4 $5 $6"
	shift 6
	proc_start "$_work_name" "$_work_fd" "$_work_cg" "$_work_argv" "$@"
	eval "n_$_work_name=1"
	proc_wait "$_work_name"
}

# lend0 CGROUP FIELD: tier 0's FIELD (loan, lent, borrowed...) in the lending block of the
# cgroup's segment, or 0 when the loans lapsed or there is none.
lend0() {
	_peek=$("$PEEK" "$(seg_of "$1")" 2>/dev/null)
	if [ "$(kv "$(echo "$_peek" | grep '^lend ')" live)" = 1 ]; then
		kv "$(echo "$_peek" | grep '^lend_tier=0 ')" "$2"
	else
		echo 0
	fi
}

# pct PART WHOLE: PART as a percentage of WHOLE, one decimal.
pct() { awk -v p="$1" -v w="$2" 'BEGIN { printf "%.1f", w ? 100 * p / w : 0 }'; }

# until_true CMD [ARGS...]: run CMD every 0.1 s until it succeeds, for at most GUARD_S seconds;
# 1 if it never did. How long it took, in hundredths of a second, is left in $took_cs.
until_true() {
	_t0=$(now_cs)
	while ! "$@"; do
		if [ $(($(now_cs) - _t0)) -ge $((GUARD_S * 100)) ]; then
			took_cs=$(($(now_cs) - _t0))
			return 1
		fi
		sleep 0.1
	done
	took_cs=$(($(now_cs) - _t0))
}

# secs CS: hundredths of a second as seconds with one decimal.
secs() { echo "$(($1 / 100)).$(($1 % 100 / 10))"; }

# n0_within CGROUP TARGET: node 0 is at or below TARGET; n0_above CGROUP LEVEL: above LEVEL.
n0_within() { [ "$(n0 "$1")" -le "$2" ]; }
n0_above() { [ "$(n0 "$1")" -gt "$2" ]; }

# settle_n0 CGROUP TARGET: wait (GUARD_S at most) for node 0 to be within TARGET; 1 if it never
# was. The time it took is in $took_cs.
settle_n0() { until_true n0_within "$1" "$2"; }

# record_start NAME INTERVAL: tieralloc-stat --record of every segment into $W/NAME.csv, a
# sample every INTERVAL seconds, in the background until record_emit.
record_start() {
	"$STAT" --record "$W/$1.csv" --interval "$2" &
	rec_pid=$!
}

# record_emit NAME: stop the recorder and print the recording between two marker lines: the
# guest has no way back to the host but its output, and make check-guest draws each recording
# it finds there (tests/guest/plots.sh) into the build directory.
record_emit() {
	kill -TERM "$rec_pid" 2>/dev/null
	wait "$rec_pid" || fail "record.$1" "tieralloc-stat --record: exit status $?"
	echo "TIERALLOC-CSV-BEGIN $1"
	cat "$W/$1.csv"
	echo "TIERALLOC-CSV-END $1"
}

# For the working-set tests (hotness.sh, access_agent.sh): the share of the working set's pages
# on node 1, in per mille, in $hot1_pm, and the placement line in $where (enforce_work's "where").
where_pm() {
	proc_cmd "$1" where
	where=$REPLY
	h0=$(kv "$where" hot_n0)
	h1=$(kv "$where" hot_n1)
	hot1_pm=$((h1 * 1000 / (h0 + h1 + 1)))
}
# samples_after NAME N: the workload NAME's access sampler has taken N samples since the first
# `access` command that gave $samples0 (set by access_base). Heat means something of the hot
# thread only from the second sample after it started: the samples before it saw the fill, which
# wrote every block once, and under load the period stretches to several seconds (the sampler
# keeps within 2% of a CPU), so a sample counted from the program's start can be older than the
# hot thread.
access_base() {
	proc_cmd "$1" access
	samples0=$(kv "$REPLY" samples)
	: "${samples0:=0}"
}
samples_after() {
	n0_watch
	proc_cmd "$1" access
	s=$(kv "$REPLY" samples)
	[ "${s:-0}" -ge $((samples0 + $2)) ]
}
# Node 0 of cgroup $cg watched while waiting: the highest it was, in $n0_peak.
n0_watch() {
	v=$(n0 "$cg")
	[ "$v" -gt "$n0_peak" ] && n0_peak=$v
	return 0
}
