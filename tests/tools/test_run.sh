#!/bin/bash
# SPDX-License-Identifier: MIT
# tieralloc-run as a user meets it (tools/tieralloc-run.c): the command's exit status and death by
# a signal passed on as the wrapper's own (the wait status of its parent, not the shell's 128+N),
# 127 and 126 without a summary for a command not found or not executable, 2 and one error line
# for a usage error, the per-tier summary, --verbose's list of the processes counted, and why a
# run counted none.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
fail()
{
	echo "FAIL: $*" >&2
	exit 1
}
RUN=$TA_TEST_BUILDDIR/tools/tieralloc-run
[[ -x $RUN ]] || fail "$RUN is not built"
# The wrapper finds the build tree's preload library next to itself.
unset TIERALLOC_PRELOAD_LIB TIERALLOC_SUMMARY LD_PRELOAD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "== exit status, summary"
rc=0
"$RUN" -- sh -c 'cat /dev/null; exit 3' >out 2>err || rc=$?
cat err
[[ $rc == 3 ]] || fail "exit 3: the wrapper exited $rc"
grep -q '^tieralloc summary: sh -c cat /dev/null; exit 3 (exit 3), 1 process(es)$' err ||
	fail "exit 3: no summary line with the status and one process"
grep -q '^tier name  *nodes  *kind  *capacity  *allocs ' err || fail "no tier table header"
grep -Eq '^0 +[^ ]+ +[^ ]+ +[^ ]+ +[0-9.]+ [KMGT]?i?B +[1-9][0-9]* ' err || fail "no tier 0 row with allocations"
grep -q '^  process ' err && fail "the processes are listed without --verbose"
rc=0
"$RUN" -q -- sh -c 'exit 5' 2>err || rc=$?
[[ $rc == 5 && ! -s err ]] || fail "-q: exit $rc, or a summary: $(cat err)"
# LD_PRELOAD is prepended, the caller's kept after it.
got=$(LD_PRELOAD=libc.so.6 "$RUN" -q -- sh -c 'echo "$LD_PRELOAD"')
[[ $got == /*/libtieralloc-preload.so:libc.so.6 ]] || fail "LD_PRELOAD in the command: $got"

echo "== --verbose"
"$RUN" -v -- cat /dev/null 2>err
cat err
grep -Eq '^  process [0-9]+ cat$' err || fail "--verbose: cat is not listed with its pid"
[[ $(grep -c '^  process ' err) == 1 ]] || fail "--verbose: not exactly one process listed"

echo "== death by a signal"
if command -v python3 >/dev/null; then
	# Its parent must see the wrapper killed by SIGSEGV (returncode -11), after the summary.
	python3 - "$RUN" <<'PY' || fail "death by SIGSEGV is not passed on"
import subprocess, sys
p = subprocess.run([sys.argv[1], "sh", "-c", "cat /dev/null; kill -SEGV $$"],
                   stderr=subprocess.PIPE, text=True)
sys.stderr.write(p.stderr)
ok = p.returncode == -11 and "(killed by signal 11, " in p.stderr
print("returncode", p.returncode)
sys.exit(0 if ok else 1)
PY
else
	echo "python3 is not installed: the wait status is not checked"
fi
rc=0
"$RUN" -- sh -c 'kill -TERM $$' 2>err || rc=$?
cat err
[[ $rc == 143 ]] || fail "SIGTERM: the shell saw $rc, want 143 (128 + 15)"
grep -q 'killed by signal 15, before that' err || fail "SIGTERM: no reason for the empty summary"

echo "== not found, not executable"
rc=0
"$RUN" nosuchcmd >out 2>err || rc=$?
[[ $rc == 127 ]] || fail "not found: exit $rc, want 127"
[[ $(cat err) == "tieralloc-run: nosuchcmd: not found" && ! -s out ]] ||
	fail "not found: said \"$(cat err)\""
echo '#!/bin/sh' >noexec
chmod 644 noexec
rc=0
"$RUN" ./noexec >out 2>err || rc=$?
[[ $rc == 126 ]] || fail "not executable: exit $rc, want 126"
[[ $(cat err) == "tieralloc-run: ./noexec: permission denied" ]] ||
	fail "not executable: said \"$(cat err)\""

echo "== usage errors, --help, --version"
for bad in "-x:unknown option -x" "--nosuch:unknown option --nosuch" \
	"--tiers:--tiers needs a value" "-l:-l needs a value" \
	"--quiet=1:--quiet=1: this option takes no value"; do
	rc=0
	"$RUN" ${bad%%:*} >out 2>err || rc=$?
	[[ $rc == 2 ]] || fail "${bad%%:*}: exit $rc, want 2"
	[[ $(head -1 err) == "tieralloc-run: ${bad#*:}" ]] ||
		fail "${bad%%:*}: said \"$(head -1 err)\", want \"tieralloc-run: ${bad#*:}\""
	[[ $(grep -c '^tieralloc-run: ' err) == 1 && $(sed -n 2p err) == "usage: "* && ! -s out ]] ||
		fail "${bad%%:*}: not one error line and the usage on stderr"
done
for help in -h --help; do
	"$RUN" $help >out 2>err
	grep -q '^usage: tieralloc-run' out && [[ ! -s err ]] || fail "$help: no usage on stdout"
	grep -q -- '--verbose' out || fail "$help: --verbose is not in the usage"
done
[[ $("$RUN" --version) == "tieralloc-run $(cat "$TA_TEST_SRCDIR/VERSION")" ]] || fail "--version"

echo "== a program that cannot be preloaded"
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
if [[ -x $ldconfig ]] && command -v readelf >/dev/null && ! readelf -l "$ldconfig" | grep -q INTERP; then
	"$RUN" "$ldconfig" -p >/dev/null 2>err
	cat err
	grep -q "no process reported: $ldconfig is statically linked" err ||
		fail "a static program: the reason is not given"
else
	echo "no statically linked ldconfig here: not checked"
fi
echo PASS
