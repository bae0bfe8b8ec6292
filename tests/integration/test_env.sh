#!/bin/bash
# SPDX-License-Identifier: MIT
#
# TIERALLOC_* handling in a real preloaded process (the parser's table tests are unit tests;
# this checks what a user sees): TIERALLOC_DISABLE=1 passes through; each bad value costs exactly
# one warning line and changes nothing else; TIERALLOC_STRICT=1 turns a bad value into an exit
# before main; TIERALLOC_SUMMARY appends per-tier lines with the pid; two tiers with a 1 MiB
# limit on tier 0 steer a 64 MiB program into tier 1.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

BLOCKS=$(ta_prog prog_blocks)
cd "$TA_WORK"

"$BLOCKS" 8M 4K >plain.out 2>plain.err ||
	ta_hard_error "prog_blocks failed without the preload"
[[ -s plain.err ]] && ta_hard_error "prog_blocks wrote to stderr: $(cat plain.err)"

# A segment of its own for each run: a cgroup's processes say a configuration warning once
# (checked below), and these runs each count their own.
SEG=tieralloc-test-env-$$
trap 'rm -f /dev/shm/$SEG-*' EXIT

# run NAME [VAR=value...] -- [ARGS...]: prog_blocks under the preload with that environment;
# NAME.out, NAME.err, and the status in $rc.
run()
{
	local name=$1
	shift
	local -a vars=("TIERALLOC_SHM_NAME=$SEG-$name")
	while [[ $# -gt 0 && $1 != -- ]]; do
		vars+=("$1")
		shift
	done
	shift
	[[ $# -gt 0 ]] || set -- 8M 4K
	rc=0
	ta_preloaded env "${vars[@]}" "$BLOCKS" "$@" >"$name.out" 2>"$name.err" || rc=$?
}

show()
{
	echo "--- stdout:" >&2
	cat "$1.out" >&2
	echo "--- stderr:" >&2
	cat "$1.err" >&2
}

# --- pass-through ---
echo "== TIERALLOC_DISABLE=1"
run disable TIERALLOC_DISABLE=1 --
if [[ $rc != 0 || -s disable.err ]] || ! cmp -s plain.out disable.out; then
	show disable
	ta_fail "TIERALLOC_DISABLE=1: status $rc, or output differs"
fi
run disable-tiers TIERALLOC_DISABLE=1 -- 1M 4K --tiers
grep -qx 'tiers: count 1 first -22 last -22' disable-tiers.out ||
	{ show disable-tiers; ta_fail "TIERALLOC_DISABLE=1: memory should be the C library's"; }
run disable-show TIERALLOC_DISABLE=1 TIERALLOC_SHOW_CONFIG=1 --
grep -qx 'tieralloc: config: pass-through' disable-show.err ||
	{ show disable-show; ta_fail "TIERALLOC_DISABLE=1 TIERALLOC_SHOW_CONFIG=1: no pass-through line"; }
for v in 1 yes on true YES; do
	run disable-$v TIERALLOC_DISABLE=$v -- 1M 4K --tiers
	grep -q 'first -22' disable-$v.out || ta_fail "TIERALLOC_DISABLE=$v is not pass-through"
done

# --- each bad value: exactly one warning, same output, same status ---
bad_values=(
	TIERALLOC_CHARGE_BATCH=4Q
	TIERALLOC_CHARGE_BATCH=1K
	TIERALLOC_CHARGE_BATCH=128M
	TIERALLOC_CHARGE_BATCH=99999999999999999999K
	"TIERALLOC_TIERS=0;9"
	"TIERALLOC_TIERS=a=0;b=0;c=0;d=0"
	"TIERALLOC_TIERS=0-"
	TIERALLOC_PROCESS_LIMIT=foo
	TIERALLOC_PROCESS_LIMIT=0=12Q
	TIERALLOC_PROCESS_LIMIT=7=1M
	TIERALLOC_LOG_LEVEL=loud
	TIERALLOC_BOGUS=1
	TIERALLOC_tiers=0
	TIERALLOC_DISABLE=maybe
	TIERALLOC_SHOW_CONFIG=2
	TIERALLOC_STRICT=perhaps
	"TIERALLOC_SUMMARY=/$(printf 'x%.0s' {1..300})"
	"TIERALLOC_SHM_NAME=../..$TA_WORK/escaped"
	TIERALLOC_SHM_NAME=a/b
	TIERALLOC_SHM_NAME=..
	$'TIERALLOC_LOG_LEVEL=warn\ntieralloc: error: forged'
	$'TIERALLOC_ON_FULL=\e[2J\e]0;x\a'
)
n=0
for kv in "${bad_values[@]}"; do
	n=$((n + 1))
	echo "== $kv"
	run bad$n "$kv" --
	warnings=$(grep -c '^tieralloc: warning: ' bad$n.err || true)
	lines=$(wc -l <bad$n.err)
	if [[ $rc != 0 || $warnings != 1 || $lines != 1 ]] || ! cmp -s plain.out bad$n.out; then
		show bad$n
		ta_fail "$kv: status $rc, $warnings warning(s) in $lines stderr line(s); expected" \
			"status 0 and exactly one warning line, and the same output"
	fi
	name=${kv%%=*}
	grep -q "$name" bad$n.err || { show bad$n; ta_fail "$kv: the warning does not name $name"; }
	if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' bad$n.err; then
		show bad$n
		ta_fail "$kv: control characters passed into the warning"
	fi
done
# TIERALLOC_SHM_NAME stays in /dev/shm.
[[ ! -e $TA_WORK/escaped ]] || ta_fail "TIERALLOC_SHM_NAME=../..$TA_WORK/escaped created a file there"

# Names that are not TIERALLOC_* options are none of our business.
run foreign TIERALLOCX=1 TIERALLOC=1 tieralloc_disable=1 --
[[ $rc == 0 && ! -s foreign.err ]] || { show foreign; ta_fail "non-TIERALLOC_ names warned about"; }

# The log level is applied first, so that it governs the other options' warnings.
run quiet TIERALLOC_LOG_LEVEL=error TIERALLOC_BOGUS=1 TIERALLOC_CHARGE_BATCH=4Q --
if [[ $rc != 0 || -s quiet.err ]] || ! cmp -s plain.out quiet.out; then
	show quiet
	ta_fail "TIERALLOC_LOG_LEVEL=error did not silence the warnings"
fi

# Two bad values: two warnings.
run two TIERALLOC_BOGUS=1 TIERALLOC_CHARGE_BATCH=4Q --
[[ $(grep -c '^tieralloc: warning: ' two.err) == 2 ]] ||
	{ show two; ta_fail "two bad values should give two warnings"; }

# --- one warning per cgroup: its processes share the segment, which remembers the line ---
echo "== five processes of one segment, one bad value"
for i in 1 2 3 4 5; do
	run "shared$i" TIERALLOC_SHM_NAME=$SEG-shared TIERALLOC_CHARGE_BATCH=4Q --
	[[ $rc == 0 ]] && cmp -s plain.out "shared$i.out" ||
		{ show "shared$i"; ta_fail "process $i of a shared segment: status $rc or other output"; }
done
said=$(cat shared[1-5].err | grep -c '^tieralloc: warning: TIERALLOC_CHARGE_BATCH="4Q"' || true)
[[ $said == 1 && $(cat shared[1-5].err | wc -l) == 1 ]] ||
	{ cat shared[1-5].err >&2; ta_fail "five processes of one segment: $said warnings, expected 1"; }
run shared6 TIERALLOC_SHM_NAME=$SEG-shared TIERALLOC_CHARGE_BATCH=5Q --
grep -q 'TIERALLOC_CHARGE_BATCH="5Q"' shared6.err ||
	{ show shared6; ta_fail "another bad value in the same segment was not said"; }
echo "== without a segment, each process says it"
for i in 1 2 3; do
	run "own$i" TIERALLOC_SHM_NAME=off TIERALLOC_CHARGE_BATCH=4Q --
done
said=$(cat own[1-3].err | grep -c '^tieralloc: warning: TIERALLOC_CHARGE_BATCH="4Q"' || true)
[[ $said == 3 ]] || { cat own[1-3].err >&2; ta_fail "TIERALLOC_SHM_NAME=off: $said warnings of 3"; }
echo "== TIERALLOC_STRICT=1 in a segment that said it: said again, and fatal"
run shared-strict TIERALLOC_SHM_NAME=$SEG-shared TIERALLOC_STRICT=1 TIERALLOC_CHARGE_BATCH=4Q -- \
	8M 4K --pid
if [[ $rc == 0 || -s shared-strict.out ]] || ! grep -q 'TIERALLOC_CHARGE_BATCH="4Q"' shared-strict.err ||
	! grep -q '^tieralloc: error: ' shared-strict.err; then
	show shared-strict
	ta_fail "TIERALLOC_STRICT=1: status $rc; expected the warning, an error line and an exit"
fi

# --- TIERALLOC_STRICT=1 ---
for kv in TIERALLOC_CHARGE_BATCH=4Q TIERALLOC_BOGUS=1 "TIERALLOC_TIERS=0;9" \
	TIERALLOC_DISABLE=maybe "TIERALLOC_SHM_NAME=../..$TA_WORK/escaped"; do
	echo "== TIERALLOC_STRICT=1 $kv"
	run strict TIERALLOC_STRICT=1 "$kv" -- 8M 4K --pid
	if [[ $rc == 0 || -s strict.out ]] || ! grep -q '^tieralloc: error: ' strict.err; then
		show strict
		ta_fail "TIERALLOC_STRICT=1 $kv: status $rc; expected a non-zero exit with an" \
			"error line, before main (no output)"
	fi
done
run strict-ok TIERALLOC_STRICT=1 TIERALLOC_CHARGE_BATCH=64K TIERALLOC_LOG_LEVEL=warn --
if [[ $rc != 0 || -s strict-ok.err ]] || ! cmp -s plain.out strict-ok.out; then
	show strict-ok
	ta_fail "TIERALLOC_STRICT=1 with good values should run normally"
fi

# --- TIERALLOC_SUMMARY=<file> appends per-tier lines with the pid ---
echo "== TIERALLOC_SUMMARY"
summary=$TA_WORK/summary.txt
run sum1 TIERALLOC_SUMMARY="$summary" -- 8M 4K --pid
run sum2 TIERALLOC_SUMMARY="$summary" -- 8M 4K --pid
pid1=$(sed -n 's/^pid //p' sum1.out)
pid2=$(sed -n 's/^pid //p' sum2.out)
for pid in "$pid1" "$pid2"; do
	grep -Eq "^tieralloc-summary v=1 pid=$pid comm=prog_blocks tier=0 .* allocs=[1-9]" \
		"$summary" || { cat "$summary" >&2; ta_fail "no summary line for pid $pid"; }
done
[[ $(wc -l <"$summary") == 2 && ! -s sum1.err ]] ||
	{ cat "$summary" sum1.err >&2; ta_fail "expected one line per process (one tier)"; }
# Every field one key=value word (parsers split on spaces), the kind among them.
grep -Eqv '^tieralloc-summary( [a-z_]+=[^ ]+)+$' "$summary" &&
	{ cat "$summary" >&2; ta_fail "a summary field is not one key=value word"; }
grep -Eq ' kind=[^ ]+ bound=' "$summary" || { cat "$summary" >&2; ta_fail "no kind in the summary"; }
run sum-stderr TIERALLOC_SUMMARY=stderr --
grep -q '^tieralloc-summary v=1 ' sum-stderr.err || ta_fail "TIERALLOC_SUMMARY=stderr"

# --- two tiers, 1 MiB on tier 0: 64 MiB in 4 KiB blocks lands mostly in tier 1 ---
echo "== TIERALLOC_TIERS=\"0;0\" TIERALLOC_PROCESS_LIMIT=\"0=1M\""
summary=$TA_WORK/summary-tiers.txt
run tiers TIERALLOC_TIERS="0;0" TIERALLOC_PROCESS_LIMIT="0=1M" TIERALLOC_SUMMARY="$summary" \
	-- 64M 4K --tiers
[[ $rc == 0 && ! -s tiers.err ]] || { show tiers; ta_fail "two tiers: status $rc"; }
grep -qx 'tiers: count 2 first 0 last 1' tiers.out ||
	{ show tiers; ta_fail "two tiers: the first block should be in tier 0, the last in tier 1"; }
grep -v '^tiers:' tiers.out | cmp -s - <("$BLOCKS" 64M 4K) ||
	ta_fail "two tiers: output differs from the run without the preload"
grep -Eq '^tieralloc-summary v=1 pid=[0-9]+ comm=prog_blocks tier=0 .* limit=1048576 ' \
	"$summary" || { cat "$summary" >&2; ta_fail "tier 0 summary should show the 1 MiB limit"; }
grep -Eq '^tieralloc-summary v=1 pid=[0-9]+ comm=prog_blocks tier=1 .* allocs=[1-9][0-9]* .*steered_in=[1-9]' \
	"$summary" || { cat "$summary" >&2; ta_fail "tier 1 summary should show steered allocations"; }
run tiers-show TIERALLOC_TIERS="0;0" TIERALLOC_SHOW_CONFIG=1 --
grep -q '^tieralloc: config: tier 1 ' tiers-show.err ||
	{ show tiers-show; ta_fail "TIERALLOC_SHOW_CONFIG=1 should list tier 1"; }
# --- the preload must not change the program's environment (memkind reads its node variables) ---
echo "== environment left as it was"
# bash too: it has its own setenv(), which once made memkind miss its variable.
for tiers in "" "0;0"; do
	for shell in "" "bash -c"; do
		# shellcheck disable=SC2086 # $shell is a command prefix, split on purpose
		env -u LD_PRELOAD $shell env | grep -v '^_=' | sort >env-plain.txt
		# shellcheck disable=SC2086
		TIERALLOC_TIERS=$tiers ta_preloaded $shell env 2>env-preload.err |
			grep -v -e '^_=' -e '^LD_PRELOAD=' -e '^TIERALLOC_TIERS=' | sort >env-preload.txt
		diff -u env-plain.txt env-preload.txt >&2 ||
			ta_fail "TIERALLOC_TIERS=\"$tiers\" ${shell:-env}: the program's environment changed"
		[[ ! -s env-preload.err ]] ||
			{ cat env-preload.err >&2; ta_fail "TIERALLOC_TIERS=\"$tiers\" ${shell:-env}: stderr"; }
	done
done
echo "all environment checks passed"
