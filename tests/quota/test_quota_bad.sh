#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Bad segments are survived. For each kind the script creates the named segment itself
# beforehand (shm_forge, then truncate/chmod/ln), runs prog_blocks (8 MiB in 4 KiB blocks, its
# tiers printed) under the preload on it, and requires:
#   - status 0 and the same stdout as a run with TIERALLOC_SHM_NAME=off (local accounting only):
#     with TIERALLOC_TIER_LIMITS="0.max=1M..." a working segment would put the last block in
#     tier 1 (the control run below checks that), local accounting keeps it in tier 0;
#   - stderr: exactly one line, "tieralloc: warning: shared segment /NAME: WHY; this process
#     keeps its own accounting", WHY the reason src/quota/shm.c gives for that kind;
#   - the file is left as it was (type, size, mode, owner, times, contents).
# A segment owned by another user: test_quota_owner.sh (needs root). Unfinished segments (empty,
# or never marked ready) whose creator is gone are made again: test_quota_hostile.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

FORGE=$TA_TEST_BUILDDIR/tests/quota/shm_forge
[[ -x $FORGE ]] || ta_hard_error "$FORGE not built"
BLOCKS=$(ta_prog prog_blocks)
LIMITS="0.high=1M;0.max=1M;1.high=1G;1.max=1G"
cd "$TA_WORK"

# blocks NAME SHM_NAME: prog_blocks under the preload; NAME.out, NAME.err, status in $rc.
blocks()
{
	rc=0
	ta_preloaded env TIERALLOC_TIERS="0;0" TIERALLOC_SHM_NAME="$2" \
		TIERALLOC_TIER_LIMITS="$LIMITS" "$BLOCKS" 8M 4K --tiers >"$1.out" 2>"$1.err" || rc=$?
}

# fingerprint PATH: everything about the file that an attach must not change.
fingerprint()
{
	stat -c '%F %s %a %u %g %Y %Z' "$1"
	if [[ -L $1 ]]; then
		readlink "$1"
		fingerprint "$(readlink "$1")"
	elif [[ -f $1 ]]; then
		sha256sum <"$1"
	fi
}

blocks local off
[[ $rc == 0 && ! -s local.err ]] || { cat local.err >&2; ta_hard_error "the run without a segment failed"; }
grep -q '^tiers: count 2 first 0 last 0$' local.out ||
	{ cat local.out >&2; ta_hard_error "local accounting should keep every block in tier 0"; }
good=$(seg good)
blocks control "$good"
[[ $rc == 0 && ! -s control.err ]] || { cat control.err >&2; ta_fail "the run with a good segment failed"; }
grep -q '^tiers: count 2 first 0 last 1$' control.out ||
	{ cat control.out >&2; ta_fail "with a working segment the 1M tier-0 max should move blocks to tier 1"; }
echo "== reference: local only: $(head -n 1 local.out); with a good segment: $(head -n 1 control.out)"

# bad CASE WHY: run on /dev/shm/<segment of CASE>, already created, and check everything.
bad()
{
	local name=$1 why=$2
	local s f before after
	s=$(seg "bad-$name")
	f=/dev/shm/$s
	before=$(fingerprint "$f")
	blocks "$name" "$s"
	after=$(fingerprint "$f")
	local want="tieralloc: warning: shared segment /$s: $why; this process keeps its own accounting"
	local ok=1
	if [[ $rc != 0 ]]; then
		echo "$name: status $rc" >&2
		ok=0
	fi
	if ! cmp -s local.out "$name.out"; then
		echo "$name: stdout differs from local accounting:" >&2
		diff local.out "$name.out" >&2 || true
		ok=0
	fi
	if [[ $(wc -l <"$name.err") != 1 || $(cat "$name.err") != "$want" ]]; then
		echo "$name: expected exactly one line: $want" >&2
		echo "--- got:" >&2
		cat "$name.err" >&2
		ok=0
	fi
	if [[ $before != "$after" ]]; then
		echo "$name: the file changed:" >&2
		diff <(echo "$before") <(echo "$after") >&2 || true
		ok=0
	fi
	[[ $ok == 1 ]] || ta_fail "bad segment: $name"
	echo "   $name: ok: $(cut -d' ' -f3- "$name.err")"
}

file() { echo "/dev/shm/$(seg "bad-$1")"; }

echo "== bad segments"
"$FORGE" "$(file truncated)" valid
truncate -s 100 "$(file truncated)"
bad truncated "truncated"

"$FORGE" "$(file oversized)" valid
truncate -s 32M "$(file oversized)"
bad oversized "oversized"

"$FORGE" "$(file major2)" major2
bad major2 "other ABI major version"

"$FORGE" "$(file garbage)" garbage
bad garbage "bad magic"

"$FORGE" "$(file garbage1)" garbage1
bad garbage1 "bad magic"

"$FORGE" "$(file mode0644)" valid
chmod 0644 "$(file mode0644)"
bad mode0644 "readable or writable by others"

"$FORGE" "$(file sizes)" sizes
bad sizes "sizes do not match the file"

"$FORGE" "$(file records)" records
bad records "records outside the segment"

# A later minor version with larger tier records: the library indexes its own records, so it
# refuses rather than write one tier's charges into another's (tieralloc-stat reads it).
"$FORGE" "$(file bigtiers)" bigtiers
bad bigtiers "tier records of another size (another ABI minor version)"

"$FORGE" "$(file tiers3)" valid 3
bad tiers3 "made for another number of tiers"

"$FORGE" "$TA_WORK/target" valid
ln -s "$TA_WORK/target" "$(file symlink)"
bad symlink "cannot open the existing segment (permissions?)"

mkdir -m 700 "$(file directory)"
bad directory "cannot open the existing segment (permissions?)"
rmdir "$(file directory)"

mkfifo -m 600 "$(file fifo)"
bad fifo "not a regular file"
q_finish
