#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Segments of other users (docs/security.md). A segment owned by another user is never
# used (include/tieralloc/shm_abi.h), and must not cost the container its quotas either: such a
# file is what a process of another user of the container makes first, or what anyone squats,
# /dev/shm being writable by all. Then each user shares a segment of its own name, NAME-u<uid>;
# a file of another user at that name can only be a squatter's, and is removed where the process
# may (root). Cases, each with prog_blocks (its tiers printed) under the preload:
#   root, NAME owned by nobody            -> NAME-u0: quotas, nothing on stderr, NAME untouched
#   root, NAME and NAME-u0 owned by nobody -> NAME-u0 removed (one warning), quotas
#   nobody, NAME owned by root             -> NAME-u65534: quotas, nothing on stderr
#   nobody, NAME and NAME-u65534 of root   -> one warning, local accounting, files untouched
# Needs root to chown and to act as nobody (exit 77 otherwise); CI runs as root.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || ta_skip "not root: cannot give a segment to another user"
nobody=$(id -u nobody 2>/dev/null) || ta_skip "no user 'nobody'"
command -v setpriv >/dev/null || ta_skip "no setpriv"
FORGE=$TA_TEST_BUILDDIR/tests/quota/shm_forge
[[ -x $FORGE ]] || ta_hard_error "$FORGE not built"
cd "$TA_WORK"
# What nobody runs must be readable by nobody.
pub=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-owner.XXXXXX")
trap 'rm -rf "$pub"; q_cleanup' EXIT
chmod 755 "$pub"
cp "$(ta_prog prog_blocks)" "$TA_TEST_PRELOAD" "$pub/"
BLOCKS=$pub/prog_blocks
PRELOAD=$pub/$(basename "$TA_TEST_PRELOAD")

# run NAME SHM_NAME [AS]: prog_blocks under the preload, as root or as nobody.
run()
{
	local as=()
	[[ ${3:-} == nobody ]] && as=(setpriv --reuid="$nobody" --regid="$(id -g nobody)" --clear-groups)
	rc=0
	"${ta_timeout[@]}" "${as[@]}" env LD_PRELOAD="$PRELOAD" TIERALLOC_TIERS="0;0" \
		TIERALLOC_SHM_NAME="$2" TIERALLOC_TIER_LIMITS="0.high=1M;0.max=1M;1.high=1G;1.max=1G" \
		"$BLOCKS" 8M 4K --tiers </dev/null >"$1.out" 2>"$1.err" || rc=$?
}

fingerprint()
{
	stat -c '%s %a %u %g %Y %Z' "$1"
	sha256sum <"$1"
}

# expect NAME OUTPUT(local|quota) [WARNING]: status 0, that output, exactly that stderr.
expect()
{
	local want_out=$1.out
	[[ $2 == local ]] && want_out=local.out || want_out=quota.out
	if [[ $rc != 0 ]] || ! cmp -s "$want_out" "$1.out" || [[ $(cat "$1.err") != "${3:-}" ]]; then
		echo "--- $1: status $rc, stdout:" >&2
		cat "$1.out" >&2
		echo "--- stderr (expected: ${3:-nothing}):" >&2
		cat "$1.err" >&2
		soft_fail "$1: expected the output of $2 accounting"
		return
	fi
	echo "   $1: ok ($2 accounting)"
}

run local off
[[ $rc == 0 && ! -s local.err ]] || ta_hard_error "the run without a segment failed"
run quota "$(seg quota)"
[[ $rc == 0 && ! -s quota.err ]] || ta_hard_error "the run with a good segment failed"
cmp -s local.out quota.out && ta_hard_error "quotas should change where the blocks land"

echo "== root, NAME owned by nobody"
s=$(seg owner)
"$FORGE" "/dev/shm/$s" valid
chown "$nobody" "/dev/shm/$s"
before=$(fingerprint "/dev/shm/$s")
run owner "$s"
expect owner quota
[[ $(fingerprint "/dev/shm/$s") == "$before" ]] || soft_fail "owner: nobody's file changed"
[[ $(stat -c %u "/dev/shm/$s-u0") == 0 ]] || soft_fail "owner: no $s-u0 of root's"

echo "== root, NAME and NAME-u0 squatted by nobody"
s=$(seg squat)
"$FORGE" "/dev/shm/$s" valid
"$FORGE" "/dev/shm/$s-u0" valid
chown "$nobody" "/dev/shm/$s" "/dev/shm/$s-u0"
before=$(fingerprint "/dev/shm/$s")
run squat "$s"
expect squat quota "tieralloc: warning: shared segment /$s-u0: made by user $nobody, not by this one; removed"
[[ $(fingerprint "/dev/shm/$s") == "$before" ]] || soft_fail "squat: nobody's NAME changed"
[[ $(stat -c %u "/dev/shm/$s-u0") == 0 ]] || soft_fail "squat: $s-u0 is not root's now"

echo "== nobody, NAME owned by root"
s=$(seg byroot)
run byroot-root "$s"
expect byroot-root quota
run byroot "$s" nobody
expect byroot quota
[[ $(stat -c %u "/dev/shm/$s-u$nobody") == "$nobody" ]] || soft_fail "byroot: no $s-u$nobody of nobody's"

echo "== nobody, NAME and NAME-u$nobody of root's: nobody cannot remove them"
s=$(seg rootsquat)
"$FORGE" "/dev/shm/$s" valid
"$FORGE" "/dev/shm/$s-u$nobody" valid
before=$(fingerprint "/dev/shm/$s-u$nobody")
run rootsquat "$s" nobody
expect rootsquat local "tieralloc: warning: shared segment /$s-u$nobody: owned by another user; this process keeps its own accounting"
[[ $(fingerprint "/dev/shm/$s-u$nobody") == "$before" ]] || soft_fail "rootsquat: root's file changed"
q_finish
