#!/bin/bash
# SPDX-License-Identifier: MIT
# --version on every installed program (bin_PROGRAMS, bin_SCRIPTS, sbin_PROGRAMS, passed by
# tests/tools/local.mk): one line "NAME VERSION" on stdout, nothing on stderr, exit status 0,
# VERSION being configure's PACKAGE_VERSION, which comes from the VERSION file.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
fail()
{
	echo "FAIL: $*" >&2
	exit 1
}
[[ -n ${TA_TEST_PROGRAMS:-} && -n ${TA_TEST_VERSION:-} ]] ||
	{ echo "ERROR: run from make check (TA_TEST_PROGRAMS, TA_TEST_VERSION unset)" >&2; exit 99; }

file_version=$(cat "$TA_TEST_SRCDIR/VERSION")
[[ $TA_TEST_VERSION == "$file_version" ]] ||
	fail "configure's PACKAGE_VERSION is $TA_TEST_VERSION, VERSION says $file_version"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seen=" "
for prog in $TA_TEST_PROGRAMS; do
	name=${prog##*/}
	rc=0
	"$TA_TEST_BUILDDIR/$prog" --version >"$work/out" 2>"$work/err" </dev/null || rc=$?
	echo "$name --version: $(cat "$work/out") (exit $rc)"
	[[ $rc == 0 ]] || fail "$name --version: exit status $rc, want 0"
	[[ $(cat "$work/out") == "$name $TA_TEST_VERSION" ]] ||
		fail "$name --version printed \"$(cat "$work/out")\", want \"$name $TA_TEST_VERSION\""
	[[ $(wc -l <"$work/out") == 1 ]] || fail "$name --version: more than one line"
	[[ ! -s $work/err ]] || fail "$name --version wrote to stderr: $(cat "$work/err")"
	seen="$seen$name "
done
# Not vacuous: the programs every build installs are among them.
for name in tieralloc-run tieralloc-stat tieralloc-plot; do
	[[ $seen == *" $name "* ]] || fail "$name is not among the installed programs ($seen)"
done
