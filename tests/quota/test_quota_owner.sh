#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A segment owned by another user is refused (include/tieralloc/shm_abi.h: "a segment owned by
# anyone else is refused"), even a well-formed one that the process could open: root creates a
# valid segment, gives it to nobody, and runs prog_blocks on it. One warning, the output of
# local accounting, the file untouched. Needs root to chown (exit 77 otherwise); CI runs as root.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || ta_skip "not root: cannot give a segment to another user"
nobody=$(id -u nobody 2>/dev/null) || ta_skip "no user 'nobody'"
FORGE=$TA_TEST_BUILDDIR/tests/quota/shm_forge
[[ -x $FORGE ]] || ta_hard_error "$FORGE not built"
BLOCKS=$(ta_prog prog_blocks)
cd "$TA_WORK"

run()
{
	rc=0
	ta_preloaded env TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$2" \
		TIERALLOC_TIER_LIMITS="0.high=1M;0.max=1M;1.high=1G;1.max=1G" \
		"$BLOCKS" 8M 4K --tiers >"$1.out" 2>"$1.err" || rc=$?
}

run local off
[[ $rc == 0 && ! -s local.err ]] || ta_hard_error "the run without a segment failed"

s=$(seg owner)
f=/dev/shm/$s
"$FORGE" "$f" valid
chown "$nobody" "$f"
before=$(stat -c '%s %a %u %g %Y %Z' "$f"; sha256sum <"$f")
run owner "$s"
after=$(stat -c '%s %a %u %g %Y %Z' "$f"; sha256sum <"$f")
want="tieralloc: warning: shared segment /$s: owned by another user; this process keeps its own accounting"
cat owner.err
[[ $rc == 0 ]] || ta_fail "status $rc"
cmp -s local.out owner.out || { diff local.out owner.out >&2 || true; ta_fail "output differs from local accounting"; }
[[ $(wc -l <owner.err) == 1 && $(cat owner.err) == "$want" ]] || ta_fail "expected exactly: $want"
[[ $before == "$after" ]] || ta_fail "the segment file changed"
q_finish
