#!/bin/bash
# SPDX-License-Identifier: MIT
# tieralloc(7) documents every TIERALLOC_* variable the code reads, and none it does not:
#   - the option table of src/base/env.c, as compiled (tests/man/opt_names prints it);
#   - any other TIERALLOC_* name the installed code reads: getenv("TIERALLOC_...") in the C
#     sources of src/, preload/, tools/ and agent/, and ${TIERALLOC_...} in tools/*.in scripts.
# Each must have its own entry under ENVIRONMENT (".TP", then ".B TIERALLOC_NAME"), and every
# TIERALLOC_* name anywhere in the page must be one of them.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
export LC_ALL=C
fail=0
bad()
{
	echo "FAIL: $*" >&2
	fail=1
}
page=$TA_TEST_SRCDIR/man/tieralloc.7
names=$TA_TEST_BUILDDIR/tests/man/opt_names
[[ -f $page && -x $names ]] || { echo "ERROR: $page or $names missing" >&2; exit 99; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$names" >"$work/table"
[[ -s $work/table ]] || { echo "ERROR: opt_names printed no option" >&2; exit 99; }
(
	cd "$TA_TEST_SRCDIR"
	grep -rohE --include='*.c' --include='*.h' --include='*.cc' \
		'getenv\("TIERALLOC_[A-Z0-9_]+"' src preload tools agent |
		grep -oE 'TIERALLOC_[A-Z0-9_]+' || true
	grep -rohE --include='*.in' '\$\{?TIERALLOC_[A-Z0-9_]+' tools |
		grep -oE 'TIERALLOC_[A-Z0-9_]+' || true
) >"$work/read"
sort -u "$work/table" "$work/read" >"$work/code"
echo "the code reads $(wc -l <"$work/code") TIERALLOC_* variables: $(tr '\n' ' ' <"$work/code")"

# Entries: a ".B NAME" line right after ".TP".
awk 'prev == ".TP" && $1 == ".B" && $2 ~ /^TIERALLOC_[A-Z0-9_]+$/ { print $2 } { prev = $0 }' \
	"$page" | sort >"$work/entries"
grep -oE 'TIERALLOC_[A-Z0-9][A-Z0-9_]*' "$page" | sort -u >"$work/mentioned"

while read -r v; do
	grep -qx "$v" "$work/entries" || bad "$v is read by the code but has no entry in tieralloc(7)"
done <"$work/code"
while read -r v; do
	grep -qx "$v" "$work/code" || bad "tieralloc(7) names $v, which the code does not read"
done <"$work/mentioned"
while read -r v; do
	bad "tieralloc(7) has more than one entry for $v"
done < <(uniq -d "$work/entries")
[[ $fail == 0 ]] && echo "tieralloc(7) documents each of them, and no other"
exit $fail
