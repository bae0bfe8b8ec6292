# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the integration tests (tests/integration/test_*.sh), sourced after `set -euo
# pipefail`. The central one is compare_runs: run a workload once with the C library's allocator
# and once under the preload, in the same directory path (programs print their working
# directory), and require the same stdout, stderr and exit status. The preloaded run also writes a
# TIERALLOC_SUMMARY file, which proves that tieralloc really served the allocations instead of
# silently passing them to the C library.
#
# Environment (from AM_TESTS_ENVIRONMENT; defaults suit a manual run from an in-tree build):
#   TA_TEST_PRELOAD   the preload library     TA_TEST_BUILDDIR  top build directory
#   TA_TEST_SRCDIR    top source directory    TA_TEST_TIMEOUT   seconds before a run counts as hung
#   TA_TEST_KEEP=1    keep the temporary directory for inspection

ta_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${TA_TEST_SRCDIR:=$(cd "$ta_lib_dir/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
: "${TA_TEST_PRELOAD:=$TA_TEST_BUILDDIR/preload/.libs/libtieralloc-preload.so}"
: "${TA_TEST_TIMEOUT:=600}"
export TA_TEST_PRELOAD TA_TEST_BUILDDIR TA_TEST_SRCDIR

if [[ ! -f $TA_TEST_PRELOAD ]]; then
	echo "ERROR: preload library not found: $TA_TEST_PRELOAD" >&2
	exit 99
fi

# A TIERALLOC_* variable from the caller's shell would change what the tests see.
while read -r ta_var; do
	unset "$ta_var"
done < <(compgen -e | grep '^TIERALLOC_' || true)
unset ta_var
export LC_ALL=C TZ=UTC

ta_fail()
{
	echo "FAIL: $*" >&2
	exit 1
}

ta_hard_error()
{
	echo "ERROR: $*" >&2
	exit 99
}

ta_skip()
{
	echo "SKIP: $*" >&2
	exit 77
}

# ta_require PROGRAM DEBIAN_PACKAGE: skip the test when PROGRAM is not installed.
ta_require()
{
	command -v "$1" >/dev/null 2>&1 ||
		ta_skip "$1 is not installed (Debian package: $2)"
}

# ta_prog NAME: path of a program built by `make check` in tests/integration/.
ta_prog()
{
	local p=$TA_TEST_BUILDDIR/tests/integration/$1
	[[ -x $p ]] || ta_hard_error "$p not built (run make check)"
	echo "$p"
}

# A fresh temporary directory, removed at exit. Everything a test writes goes below it.
TA_WORK=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-it.XXXXXX")
export TA_WORK
ta_cleanup()
{
	if [[ ${TA_TEST_KEEP:-0} == 1 ]]; then
		echo "kept $TA_WORK" >&2
	else
		rm -rf "$TA_WORK"
	fi
}
trap ta_cleanup EXIT

# Run a snapshot of the library: a rebuild while the test runs (make in another shell) would
# otherwise give the two runs of a comparison different libraries, or a half-written one.
cp "$TA_TEST_PRELOAD" "$TA_WORK/libtieralloc-preload.so"
TA_TEST_PRELOAD=$TA_WORK/libtieralloc-preload.so

ta_timeout=()
if command -v timeout >/dev/null 2>&1; then
	# A guard against hangs (a deadlock after fork, say), not a performance check.
	ta_timeout=(timeout -k 10 "$TA_TEST_TIMEOUT")
fi

# ta_run MODE DIR OUT ERR CMD...: run CMD in DIR, MODE "plain" or "preload"; prints the exit
# status. CMD may be a shell function: it is exported and run by a fresh bash with set -euo
# pipefail, so it sees exported variables only. In preload mode every process the workload starts
# inherits LD_PRELOAD, as with a user's `LD_PRELOAD=... cmd`; extra settings for that run come
# from the array TA_RUN_ENV (NAME=value words).
ta_run()
{
	local mode=$1 dir=$2 out=$3 err=$4
	shift 4
	if declare -F "$1" >/dev/null; then
		export -f "${1?}"
	fi
	local rc=0
	(
		cd "$dir"
		if [[ $mode == preload ]]; then
			export LD_PRELOAD=$TA_TEST_PRELOAD
			local kv
			for kv in "${TA_RUN_ENV[@]}"; do
				export "${kv?}"
			done
		else
			unset LD_PRELOAD
		fi
		exec "${ta_timeout[@]}" bash -c 'set -euo pipefail; "$@"' ta-run "$@"
	) </dev/null >"$out" 2>"$err" || rc=$?
	echo "$rc"
}

# Settings for the preloaded runs of compare_runs, e.g. TA_PRELOAD_ENV=(TIERALLOC_TIERS="0;0").
TA_PRELOAD_ENV=()
TA_RUN_ENV=()

# compare_runs NAME CMD...: run CMD without and with the preload, each time in a fresh directory
# with the same path ($TA_WORK/NAME/run), and fail when stdout, stderr or the exit status differ,
# when the preloaded run printed a tieralloc: line, or when tieralloc served no allocation.
# TA_EXPECT_RC (default 0) is the status the run without the preload must have, otherwise the
# test itself is broken (exit 99). TA_COMPARE_STDERR=0 compares stdout and status only.
# TA_SUMMARY_MATCH: an extended regex that at least one summary line must match.
compare_runs()
{
	local name=$1
	shift
	local base=$TA_WORK/$name
	local run=$base/run
	local summary=$base/summary
	mkdir -p "$base"

	echo "== $name: $*"
	mkdir "$run"
	local rc_plain rc_preload
	rc_plain=$(ta_run plain "$run" "$base/plain.out" "$base/plain.err" "$@")
	mv "$run" "$base/plain-tree"
	mkdir "$run"
	local -a TA_RUN_ENV=("${TA_PRELOAD_ENV[@]}" "TIERALLOC_SUMMARY=$summary")
	rc_preload=$(ta_run preload "$run" "$base/preload.out" "$base/preload.err" "$@")
	mv "$run" "$base/preload-tree"

	if [[ $rc_plain != "${TA_EXPECT_RC:-0}" ]]; then
		echo "--- stderr without the preload:" >&2
		tail -n 30 "$base/plain.err" >&2
		ta_hard_error "$name: exit status $rc_plain without the preload (expected" \
			"${TA_EXPECT_RC:-0}): the test itself is broken"
	fi
	local bad=0
	if [[ $rc_plain != "$rc_preload" ]]; then
		echo "$name: exit status $rc_plain without the preload, $rc_preload with it" >&2
		[[ $rc_preload == 124 ]] && echo "$name: the preloaded run timed out (hang?)" >&2
		bad=1
	fi
	if ! cmp -s "$base/plain.out" "$base/preload.out"; then
		echo "$name: stdout differs (--- without, +++ with the preload):" >&2
		diff -u "$base/plain.out" "$base/preload.out" | head -n 60 >&2 || true
		bad=1
	fi
	if [[ ${TA_COMPARE_STDERR:-1} == 1 ]] && ! cmp -s "$base/plain.err" "$base/preload.err"; then
		echo "$name: stderr differs (--- without, +++ with the preload):" >&2
		diff -u "$base/plain.err" "$base/preload.err" | head -n 60 >&2 || true
		bad=1
	fi
	if grep -q '^tieralloc: ' "$base/preload.err"; then
		echo "$name: tieralloc printed on stderr:" >&2
		grep '^tieralloc: ' "$base/preload.err" | head -n 20 >&2
		bad=1
	fi
	if [[ $bad == 0 ]] && ! grep -Eq ' allocs=[1-9]' "$summary" 2>/dev/null; then
		echo "$name: no TIERALLOC_SUMMARY line shows an allocation: was the preload used?" >&2
		bad=1
	fi
	if [[ $bad == 0 && -n ${TA_SUMMARY_MATCH:-} ]] && ! grep -Eq "$TA_SUMMARY_MATCH" "$summary"; then
		echo "$name: no TIERALLOC_SUMMARY line matches '$TA_SUMMARY_MATCH':" >&2
		head -n 10 "$summary" >&2
		bad=1
	fi
	if [[ $bad != 0 ]]; then
		echo "--- stderr with the preload (last lines):" >&2
		tail -n 30 "$base/preload.err" >&2
		ta_fail "$name"
	fi
	local nproc
	nproc=$(cut -d' ' -f3 "$summary" | sort -u | wc -l)
	echo "   same output ($(wc -l <"$base/plain.out") lines), status $rc_plain;" \
		"$nproc preloaded process(es) summarised"
}

# ta_agent_lock: wait (10 minutes at most) until no other test runs a tierallocd, and hold that
# until the script exits. An agent writes into every segment it finds, and tests/bpf/test_agent.sh
# checks that none writes into its own once its agent stopped: the tests that start an agent
# (in this make check -j or another tree's) take turns.
ta_agent_lock()
{
	local lock
	exec {lock}>>"${TMPDIR:-/tmp}/tieralloc-agent-tests.lock"
	flock -w 600 "$lock" || ta_hard_error "another test has run an agent for 10 minutes"
}

# ta_preloaded CMD...: run CMD under the preload with the given environment in front, e.g.
# `ta_preloaded env TIERALLOC_X=1 prog`. stdout and stderr are the caller's.
ta_preloaded()
{
	LD_PRELOAD=$TA_TEST_PRELOAD "${ta_timeout[@]}" "$@" </dev/null
}
