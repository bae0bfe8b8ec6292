#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Heap misuse under the preload (prog_misuse.c has the cases): each one must end the program with
# SIGABRT and one "tieralloc: error:" line naming the misuse and the pointer; under
# TIERALLOC_ON_MISUSE=warn the program must go on, after one warning line, with no object handed
# out twice, none inside a live one and no neighbour overwritten (the program checks, and says
# "ok").
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

PROG=$(ta_prog prog_misuse)
cd "$TA_WORK"
ulimit -c 0 # the aborts are expected: no core files

# CASE|regex of the misuse, after "<function>(<pointer>): " (link: the pointer is in the text)
cases=(
	"double-free-small|free\(PTR\): double free"
	"double-free-packed|free\(PTR\): double free"
	"realloc-freed|realloc\(PTR\): object already freed"
	"interior-free|free\(PTR\): not the start of an object"
	"interior-realloc|realloc\(PTR\): not the start of an object"
	"header-free|free\(PTR\): object header overwritten, or not the start of an object"
	"header-realloc|realloc\(PTR\): object header overwritten, or not the start of an object"
	"header-usable|malloc_usable_size\(PTR\): object header overwritten, or not the start of an object"
	"link-run|malloc\(\): free-list link of freed object PTR overwritten"
	"link-packed|malloc\(\): free-list link of freed object PTR overwritten"
)

show()
{
	echo "--- stdout:" >&2
	cat "$1.out" >&2
	echo "--- stderr:" >&2
	cat "$1.err" >&2
}

# check_line NAME LEVEL REGEX: NAME.err has exactly one tieralloc line, of LEVEL, matching REGEX
# with PTR one of the pointers the program printed.
check_line()
{
	local name=$1 level=$2 re=$3 ptrs line
	ptrs=$(sed -n 's/^ptr=\(0x[0-9a-f]*\)$/\1/p' "$name.out" | paste -sd'|')
	[[ -n $ptrs ]] || { show "$name"; ta_fail "$name: the program printed no pointer"; }
	[[ $(grep -c '^tieralloc: ' "$name.err") == 1 ]] ||
		{ show "$name"; ta_fail "$name: expected exactly one tieralloc line"; }
	line=$(grep '^tieralloc: ' "$name.err")
	re="^tieralloc: $level: ${re//PTR/($ptrs)}"
	[[ $line =~ $re ]] || { show "$name"; ta_fail "$name: '$line' does not match '$re'"; }
	echo "   $line"
}

for entry in "${cases[@]}"; do
	c=${entry%%|*}
	re=${entry#*|}

	echo "== $c: aborts"
	rc=0
	ta_preloaded env TIERALLOC_SHM_NAME=off "$PROG" "$c" >"$c.out" 2>"$c.err" || rc=$?
	if [[ $rc != 134 ]]; then
		show "$c"
		ta_fail "$c: status $rc, expected 134 (SIGABRT)"
	fi
	grep -qx ok "$c.out" && { show "$c"; ta_fail "$c: went on after the misuse"; }
	check_line "$c" error "$re; aborting"

	echo "== $c: TIERALLOC_ON_MISUSE=warn goes on, nothing handed out twice"
	rc=0
	ta_preloaded env TIERALLOC_SHM_NAME=off TIERALLOC_ON_MISUSE=warn "$PROG" "$c" \
		>"$c-warn.out" 2>"$c-warn.err" || rc=$?
	if [[ $rc != 0 ]] || ! grep -qx ok "$c-warn.out"; then
		show "$c-warn"
		ta_fail "$c: under TIERALLOC_ON_MISUSE=warn, status $rc and no 'ok'"
	fi
	check_line "$c-warn" warning "$re; "
done
echo "every misuse detected, and survived under TIERALLOC_ON_MISUSE=warn"
