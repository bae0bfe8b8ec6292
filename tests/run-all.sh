#!/bin/bash
# SPDX-License-Identifier: MIT
# Build tieralloc and run every test, in this order:
#   1. release build with -Werror: make check (unit + integration tests under the preload)
#   2. unit tests under ASan + UBSan, then under TSan (separate builds; no preload tests there),
#      then everything again with assertions on (--enable-debug: the lock order among them)
#   3. style: clang-format check of every tracked C file
#   4. guest tests: a QEMU guest with a CPU-less NUMA node and cgroup v2 (make check-guest), once
#      with each guest kernel, side by side: Debian 12's 6.1 and 6.12 (TIERALLOC_GUEST_KERNELS)
# TIERALLOC_TEST_DEADLINE (seconds since the epoch) bounds the guest suites; .ci/run sets it.
# Builds go to _build/<name> (VPATH). Ends with one line "N passed, N failed[, N skipped]" and exits
# non-zero on any failure. Under CI=true a suite that cannot run counts as failed, never skipped.
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0
skipped=0
failures=()

# The README's first command builds in the source tree; the builds below are VPATH builds, which
# automake refuses next to an in-tree configuration.
if [ -f config.status ]; then
	echo "=== the source tree is configured in-tree: make distclean first (VPATH builds below)"
	if ! make distclean >/dev/null 2>&1; then
		echo "run-all: 'make distclean' in $top failed; clean the tree and retry" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
fi

fail() {
	failed=$((failed + 1))
	failures+=("$1")
	echo "FAIL: $1"
}

# Add the counts of an automake test-suite summary (the "# PASS: n" lines) from a log.
count_automake() {
	local log=$1 what=$2 n
	local p f s
	p=$(awk '/^# PASS:/ {s += $3} /^# XFAIL:/ {s += $3} END {print s + 0}' "$log")
	f=$(awk '/^# FAIL:/ {s += $3} /^# XPASS:/ {s += $3} /^# ERROR:/ {s += $3} END {print s + 0}' "$log")
	s=$(awk '/^# SKIP:/ {s += $3} END {print s + 0}' "$log")
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	[ "$f" -gt 0 ] && failures+=("$what: $f test(s)")
	n=$((p + f + s))
	[ "$n" -gt 0 ] || fail "$what: no test ran"
}

build() {
	local name=$1 t0
	shift
	local dir="$top/_build/$name"
	t0=$(date +%s)
	mkdir -p "$dir"
	echo "=== build $name: configure $*"
	if ! (cd "$dir" && "$top/configure" -q "$@" >configure.out 2>&1); then
		cat "$dir/configure.out"
		fail "configure $name"
		return 1
	fi
	if ! make -C "$dir" -j"$jobs" >"$dir/build.out" 2>&1; then
		tail -40 "$dir/build.out"
		fail "build $name"
		return 1
	fi
	echo "=== build $name: $(($(date +%s) - t0)) s"
}

check() {
	local name=$1 target=$2 t0
	local dir="$top/_build/$name"
	echo "=== $name: make $target"
	t0=$(date +%s)
	make -C "$dir" -j"$jobs" "$target" >"$dir/$target.out" 2>&1
	local rc=$?
	grep -E '^(PASS|FAIL|XFAIL|XPASS|ERROR|SKIP):' "$dir/$target.out"
	if [ $rc -ne 0 ]; then
		find "$dir" -name '*.log' -newer "$dir/build.out" -path '*tests*' -print0 |
			xargs -0 -r grep -l -E '^(FAIL|ERROR)' | while read -r log; do
			echo "--- $log"
			tail -30 "$log"
		done
	fi
	count_automake "$dir/$target.out" "$name $target"
	echo "=== $name: make $target: $(($(date +%s) - t0)) s"
}

echo "=== autogen"
if ! ./autogen.sh >/dev/null 2>&1; then
	fail "autogen"
else
	build default --enable-werror && check default check
	build sanitize --enable-werror --enable-asan --enable-ubsan && check sanitize check
	# ThreadSanitizer over the unit tests, test_stress among them (threads against demotions
	# and purges). Its deadlock detector follows at most 64 held locks: the fork handlers
	# hold every arena lock at once, so it is off.
	export TSAN_OPTIONS="detect_deadlocks=0"
	build tsan --enable-werror --enable-tsan && check tsan check
	# Assertions on: every lock the tests take is checked against the allocator's lock order
	# (alloc/alloc.h, enum ta_lock_rank).
	build debug --enable-werror --enable-debug && check debug check
fi

echo "=== style: clang-format"
bad=$(git ls-files '*.c' '*.h' '*.cc' | xargs -r clang-format --dry-run -Werror 2>&1 | grep -c 'error:' || true)
if [ "$bad" = 0 ]; then
	passed=$((passed + 1))
	echo "PASS: clang-format"
else
	fail "clang-format: $bad place(s); run 'make format'"
fi

# guest_run KERNEL OUT SECONDS: the runner's self-test and make check-guest on that guest kernel,
# into OUT, all within SECONDS (timeout kills the whole process group, QEMU with it); the exit
# status, 124 when the time ran out.
guest_run() {
	local k=$1 out=$2 secs=$3 rc rc1
	# The runner's own self-test first (one boot): a broken runner should say so as such.
	timeout -k 10 "$secs" tests/vm/selftest.sh --quick --kernel "$k" >"$out.selftest" 2>&1
	rc1=$?
	grep -v 'passed, .* failed$' "$out.selftest" >"$out"
	[ "$rc1" = 124 ] && return 124
	secs=$((guest_deadline - $(date +%s)))
	[ "$secs" -gt 0 ] || return 124
	timeout -k 10 "$secs" make -C "$top/_build/default" check-guest GUEST_KERNEL="$k" >>"$out" 2>&1
	rc=$?
	[ "$rc" != 124 ] && [ "$rc1" -ne 0 ] && rc=$rc1
	return $rc
}

# guest_attempts KERNEL: guest_run until a run ends without the guest kernel panicking, at most
# three runs while the time allows one more; the last run's output in OUT, its status in OUT.rc.
# Under TCG Debian's 6.12 has died of its own accord (a double fault in its slab allocator in a
# page fault; int3 oopses at patched kernel text), which says nothing of tieralloc; guest-run.sh
# now runs the vCPUs on one host thread, which takes away the cause seen. A panic that comes back
# in every run still fails, and every panic is shown.
guest_attempts() {
	local k=$1 out="$top/_build/default/check-guest-$1.out" rc attempt left t0
	for attempt in 1 2 3; do
		t0=$(date +%s)
		left=$((guest_deadline - t0))
		guest_run "$k" "$out" "$left"
		rc=$?
		if grep -q 'guest kernel panicked' "$out"; then
			grep 'guest kernel panicked' "$out" | sed 's/^/  /' >>"$out.panics"
			# Again only if a run as long as this one still fits.
			if [ "$attempt" -lt 3 ] && [ $((guest_deadline - $(date +%s))) -gt $(($(date +%s) - t0 + 60)) ]; then
				echo "guest kernel $k panicked (run $attempt of at most 3); running its suite again" >>"$out.panics"
				continue
			fi
		fi
		break
	done
	echo "$rc" >"$out.rc"
}

# guest_count KERNEL: every PASS/FAIL/SKIP line of its suite shown with the kernel's name, and
# counted.
guest_count() {
	local k=$1 out="$top/_build/default/check-guest-$1.out" rc gp gf gs
	rc=$(cat "$out.rc" 2>/dev/null || echo 1)
	echo "=== guest tests, kernel $k"
	[ -f "$out.panics" ] && cat "$out.panics"
	grep -E '^(PASS|FAIL|SKIP)|error' "$out" | sed -E "s/^(PASS|FAIL|SKIP)/\1 [kernel $k]/"
	gp=$(grep -c '^PASS' "$out" || true)
	gf=$(grep -c '^FAIL' "$out" || true)
	gs=$(grep -c '^SKIP' "$out" || true)
	passed=$((passed + gp))
	failed=$((failed + gf))
	[ "$gf" -gt 0 ] && failures+=("guest, kernel $k: $gf test(s)")
	if [ "${CI:-}" = true ]; then
		failed=$((failed + gs))
		[ "$gs" -gt 0 ] && failures+=("guest, kernel $k: $gs skipped under CI")
	else
		skipped=$((skipped + gs))
	fi
	if [ "$rc" = 124 ]; then
		tail -5 "$out" | sed 's/^/  last: /'
		fail "guest suite on kernel $k did not finish within the time left ($((guest_deadline - t_guests)) s)"
	elif [ "$rc" -ne 0 ] && [ "$gf" = 0 ]; then
		fail "guest suite on kernel $k exited $rc"
	fi
	[ $((gp + gf + gs)) -gt 0 ] || fail "guest, kernel $k: no test ran"
	echo "=== guest tests, kernel $k: $gp passed, $gf failed, $gs skipped"
}

# Both of Debian 12's kernels (tests/vm/README.md): 6.1, its default, and 6.12, which has DAMON,
# side by side: each guest runs on one host thread (guest-run.sh), so two fill the 2 cores, and
# the tests hold at that load. TIERALLOC_TEST_DEADLINE (seconds since the epoch; .ci/run sets it)
# bounds them: a suite still running then is killed and fails, so the last line still comes.
t_guests=$(date +%s)
guest_deadline=${TIERALLOC_TEST_DEADLINE:-$((t_guests + 3 * 6000))}
if [ "$guest_deadline" -le $((t_guests + 60)) ]; then
	fail "guest suites: no time left before TIERALLOC_TEST_DEADLINE"
elif [ -d "$top/_build/default" ] && [ -f "$top/_build/default/Makefile" ]; then
	kernels=${TIERALLOC_GUEST_KERNELS:-6.1 6.12}
	echo "=== guest tests, kernels $kernels, side by side ($((guest_deadline - t_guests)) s at most)"
	# Built once here: two makes building the same files at once would race.
	if ! make -C "$top/_build/default" -j"$jobs" check-guest-deps >"$top/_build/default/check-guest-deps.out" 2>&1; then
		tail -20 "$top/_build/default/check-guest-deps.out"
		fail "guest tests: building what they need failed (_build/default/check-guest-deps.out)"
		kernels=
	fi
	for k in $kernels; do
		rm -f "$top/_build/default/check-guest-$k.out"*
		guest_attempts "$k" &
	done
	wait
	for k in $kernels; do
		guest_count "$k"
	done
	echo "=== guest tests done in $(($(date +%s) - t_guests)) s"
fi

echo
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
