# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers of the quota tests (tests/quota/test_*.sh), sourced after `set -euo pipefail`, on top
# of tests/integration/lib.sh (ta_fail, ta_skip, TA_WORK, a private copy of the preload).
#
# The tests never touch the machine's real cgroup segment: every process they start names its
# segment with TIERALLOC_SHM_NAME=tieralloc-test-<pid of the script>-<what>, and the segments
# are removed at exit. Limits come from TIERALLOC_TIER_LIMITS (both high and max of every tier,
# so that the host's cgroup limits play no part), tiers from TIERALLOC_TIERS="0;0" (two tiers on
# the one node).
#
# Workloads are quota_hog processes, driven line by line through a FIFO each (one reply line per
# command, see quota_hog.c); segments are read with shm_peek:
#   hog_start NAME [VAR=value...]   start hog NAME under the preload with that environment
#   hog_send NAME CMD               send a command without waiting
#   hog_reply NAME                  wait for the reply to the last command sent: in $REPLY
#   hog_cmd NAME CMD                both
#   hog_quit NAME                   "quit" and reap it (status must be 0)
#   hog_kill9 NAME                  SIGKILL and reap it
#   check COND MSG, soft_check      fail unless an arithmetic condition holds (soft: go on, fail
#   soft_fail MSG, q_finish         at q_finish, which prints PASS or exits 1)
#   peek SEGMENT                    read the segment into $PEEK (shm_peek's output)
#   pk PREFIX KEY                   value of KEY on the line of $PEEK starting with PREFIX
#   nslots                          slots in use in $PEEK
#   kv LINE KEY                     value of KEY in a "key=value ..." line
# Waiting loops poll with short sleeps and give up after $TA_QUOTA_WAIT seconds (default 120):
# a guard against a hung program, not a timing check.

# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

PEEK_BIN=$TA_TEST_BUILDDIR/tests/quota/shm_peek
HOG_BIN=$TA_TEST_BUILDDIR/tests/quota/quota_hog
[[ -x $PEEK_BIN && -x $HOG_BIN ]] || ta_hard_error "tests/quota programs not built (make check)"
: "${TA_QUOTA_WAIT:=120}"

SEG_PREFIX=tieralloc-test-$$-
declare -A HOG_PID HOG_FD HOG_WANT
PEEK=

q_cleanup()
{
	local name
	for name in "${!HOG_PID[@]}"; do
		{
			kill -9 "${HOG_PID[$name]}"
			wait "${HOG_PID[$name]}"
		} 2>/dev/null || true
	done
	rm -f /dev/shm/"$SEG_PREFIX"*
	ta_cleanup
}
trap q_cleanup EXIT

# seg WHAT: a segment name private to this run of this script.
seg()
{
	echo "$SEG_PREFIX$1"
}

hog_start()
{
	local name=$1
	shift
	local fd
	rm -f "$TA_WORK/$name.in"
	mkfifo "$TA_WORK/$name.in"
	# Held open for reading and writing: the hog's open of the FIFO never blocks, and it sees
	# no end of file between commands.
	exec {fd}<>"$TA_WORK/$name.in"
	# (made here, so that a wait that starts before the hog's shell opened it finds it)
	: >"$TA_WORK/$name.out"
	# TIERALLOC_MAPS=0 (a test may set it otherwise): the hog keeps its bookkeeping in mmap'd
	# pages so that its charges are its blocks alone; the worker's samples of the program's own
	# mappings would charge those pages too (docs/runtimes.md), by force, past the exact bounds
	# these tests check, which are malloc's.
	env TIERALLOC_MAPS=0 "$@" LD_PRELOAD="$TA_TEST_PRELOAD" "$HOG_BIN" <"$TA_WORK/$name.in" \
		>"$TA_WORK/$name.out" 2>"$TA_WORK/$name.err" &
	HOG_PID[$name]=$!
	HOG_FD[$name]=$fd
	HOG_WANT[$name]=0
}

hog_send()
{
	local name=$1
	shift
	HOG_WANT[$name]=$((HOG_WANT[$name] + 1))
	echo "$*" >&"${HOG_FD[$name]}"
}

# wait_lines FILE N WHO PID: until FILE has N lines; PID must stay alive meanwhile.
wait_lines()
{
	local file=$1 n=$2 who=$3 pid=$4 waited=0
	while [[ $(wc -l <"$file" 2>/dev/null || echo 0) -lt $n ]]; do
		if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
			[[ $(wc -l <"$file" 2>/dev/null || echo 0) -ge $n ]] && break
			echo "--- $who stderr:" >&2
			cat "${file%.out}.err" >&2 2>/dev/null || true
			ta_fail "$who died before its reply (line $n of $file)"
		fi
		sleep 0.05
		waited=$((waited + 1))
		[[ $waited -lt $((TA_QUOTA_WAIT * 20)) ]] ||
			ta_hard_error "$who: no reply within $TA_QUOTA_WAIT s (hung?)"
	done
}

hog_reply()
{
	local name=$1
	wait_lines "$TA_WORK/$name.out" "${HOG_WANT[$name]}" "hog $name" "${HOG_PID[$name]}"
	REPLY=$(sed -n "${HOG_WANT[$name]}p" "$TA_WORK/$name.out")
}

hog_cmd()
{
	hog_send "$@"
	hog_reply "$1"
}

hog_quit()
{
	local name=$1 rc=0
	echo quit >&"${HOG_FD[$name]}"
	wait "${HOG_PID[$name]}" || rc=$?
	unset "HOG_PID[$name]"
	close_fd "${HOG_FD[$name]}"
	[[ $rc == 0 ]] || { cat "$TA_WORK/$name.err" >&2; ta_fail "hog $name exited with $rc"; }
}

hog_kill9()
{
	local name=$1
	kill -9 "${HOG_PID[$name]}"
	wait "${HOG_PID[$name]}" 2>/dev/null || true
	unset "HOG_PID[$name]"
	close_fd "${HOG_FD[$name]}"
}

close_fd()
{
	local fd=$1
	exec {fd}>&-
}

# hog_stderr_clean NAME: the hog printed nothing on stderr (no tieralloc: warning either).
hog_stderr_clean()
{
	if [[ -s $TA_WORK/$1.err ]]; then
		cat "$TA_WORK/$1.err" >&2
		ta_fail "hog $1 wrote to stderr"
	fi
}

peek()
{
	PEEK=$("$PEEK_BIN" "$1") || ta_fail "shm_peek $1 failed"
}

pk()
{
	local line
	line=$(grep "^$1 " <<<"$PEEK" | head -n 1)
	[[ -n $line ]] || { echo "$PEEK" >&2; ta_fail "no '$1' line in the segment"; }
	kv "$line" "$2"
}

# nslots: slots in use in $PEEK.
nslots()
{
	grep -c '^slot ' <<<"$PEEK" || true
}

kv()
{
	local v
	v=$(sed -n "s/^\(.* \)\{0,1\}$2=\([^ ]*\).*/\2/p" <<<"$1")
	[[ -n $v ]] || ta_fail "no $2= in '$1'"
	echo "$v"
}

# check COND MESSAGE: fail with MESSAGE (and the last segment read) unless COND (an arithmetic
# expression) holds.
check()
{
	if ! (($1)); then
		echo "--- segment:" >&2
		echo "$PEEK" >&2
		ta_fail "$2 ($1)"
	fi
}

# soft_check COND MESSAGE: the same, but carry on (later steps still mean something); the test
# fails at q_finish. soft_fail MESSAGE: the same without a condition.
Q_FAILED=0
soft_check()
{
	if ! (($1)); then
		echo "--- segment:" >&2
		echo "$PEEK" >&2
		soft_fail "$2 ($1)"
	fi
}

soft_fail()
{
	echo "FAIL: $*" >&2
	Q_FAILED=1
}

# q_finish: the last line of a test: PASS, or exit 1 after soft failures.
q_finish()
{
	if [[ $Q_FAILED != 0 ]]; then
		echo "FAILED (see the FAIL lines above)"
		exit 1
	fi
	echo "PASS"
}
