#!/bin/bash
# SPDX-License-Identifier: MIT
# Every page in man/ renders without a warning: groff with all warnings on (-ww), and man-db's
# man --warnings where it is installed (tests/install-deps.sh installs both). The five pages of
# issue 16 must be there.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
export LC_ALL=C MANWIDTH=80
command -v groff >/dev/null ||
	{ echo "SKIP: groff is not installed (Debian package: groff-base)" >&2; exit 77; }
fail=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for want in tieralloc.3 tieralloc.7 tieralloc-run.1 tieralloc-stat.1 tieralloc-plot.1 tierallocd.8; do
	[[ -f $TA_TEST_SRCDIR/man/$want ]] || { echo "FAIL: man/$want is missing" >&2; fail=1; }
done
for page in "$TA_TEST_SRCDIR"/man/*.[1-8]; do
	name=${page##*/}
	page_fail=0
	rc=0
	groff -man -ww -z "$page" 2>"$err" || rc=$?
	if [[ $rc != 0 || -s $err ]]; then
		echo "FAIL: groff -man -ww: $name (exit $rc):" >&2
		cat "$err" >&2
		page_fail=1
	fi
	if command -v man >/dev/null; then
		rc=0
		man --warnings -l "$page" >/dev/null 2>"$err" || rc=$?
		if [[ $rc != 0 || -s $err ]]; then
			echo "FAIL: man --warnings -l: $name (exit $rc):" >&2
			cat "$err" >&2
			page_fail=1
		fi
	fi
	if [[ $page_fail == 0 ]]; then
		echo "$name: renders without warnings"
	else
		fail=1
	fi
done
exit $fail
