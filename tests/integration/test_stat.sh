#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat against a running container in miniature: a python3 process under the preload
# holds 12.5 MiB with tier 0 limited to 4 MiB (two logical tiers on node 0, a segment of its own);
# the table, the JSON and the watch mode must show its limits, charges and steering, and its
# charges must come back after it is killed with SIGKILL.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
ta_require python3 python3
# The interpreter itself, not a wrapper script that would attach more processes to the segment.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
[[ -x $STAT ]] || ta_hard_error "tieralloc-stat not built: $STAT"
seg=tieralloc-test-stat-$$
cleanup_seg() { rm -f "/dev/shm/$seg"; }
trap 'cleanup_seg; [[ -n ${holder:-} ]] && kill -9 "$holder" 2>/dev/null; true' EXIT
cleanup_seg

export TIERALLOC_SHM_NAME=$seg TIERALLOC_TIERS="0;0" TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M"
fifo=$(mktemp -u)
mkfifo "$fifo"
PYTHONMALLOC=malloc LD_PRELOAD=$TA_TEST_PRELOAD "$PY" -c '
import ctypes, sys, time
blocks = [bytearray(65536) for _ in range(200)]
lib = ctypes.CDLL(None)
def ctl(name):
    value, size = ctypes.c_uint64(), ctypes.c_size_t(8)
    rc = lib.tieralloc_ctl_get(name.encode(), ctypes.byref(value), ctypes.byref(size))
    return value.value if rc == 0 else rc
print("ready", ctl("cgroup.tier.0.max"), ctl("cgroup.tier.0.high"), ctl("cgroup.tier.1.max"),
      ctl("cgroup.tier.0.bogus"), flush=True)
time.sleep(120)
' >"$fifo" &
holder=$!
read -r line <"$fifo"
rm -f "$fifo"
read -r word lib_t0_max lib_t0_high lib_t1_max lib_bogus <<<"$line"
[[ $word == ready ]] || ta_fail "the holder did not start"
# The library's control entry point shows the same limits as the tool (-2 = -ENOENT).
[[ $lib_t0_max == $((4 << 20)) && $lib_t0_high == $((4 << 20)) && $lib_bogus == -2 ]] ||
	ta_fail "tieralloc_ctl_get(cgroup.tier.*): $line"

json=$("$STAT" --json --name "/$seg")
check() {
	"$PY" - "$1" "$2" <<'PY' || ta_fail "tieralloc-stat --json: $2"
import json, sys
doc = json.loads(sys.argv[1])
seg = doc["segments"][0]
t0, t1 = seg["tiers"][0], seg["tiers"][1]
ok = eval(sys.argv[2])
if not ok:
    print(json.dumps(doc, indent=1), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
check "$json" 'doc["version"] == 1 and len(doc["segments"]) == 1 and seg["processes"] == 1'
check "$json" 't0["max"] == 4 << 20 and t0["high"] == 4 << 20 and t1["max"] == t1["capacity"]'
check "$json" 't0["charged"] <= 4 << 20 and t1["charged"] >= 8 << 20 and t0["steered_away"] > 0'
check "$json" 't0["headroom"] == t0["high"] - t0["charged"] and t0["nodes"] == "0"'
check "$json" "t1[\"max\"] == $lib_t1_max"
# memory.reclaim is cgroup v2's: on v1 (or without a cgroup) it is never available, whether or
# not a process has tried it yet (this one has not: it is under its high share).
check "$json" 'seg["cgroup"]["version"] == 2 or seg["reclaim_available"] is False'
echo "json: ok"

table=$("$STAT" --name "/$seg")
grep -q "^/$seg .* 1 process(es)" <<<"$table" || { echo "$table" >&2; ta_fail "table header"; }
grep -Eq '^0 +tier0 +4\.0 MiB +4\.0 MiB ' <<<"$table" || { echo "$table" >&2; ta_fail "table row"; }
wide=$("$STAT" --wide --name "/$seg")
grep -Eq '^0 +tier0 +0 .* 4\.0 MiB +4\.0 MiB ' <<<"$wide" || { echo "$wide" >&2; ta_fail "wide row"; }
echo "table: ok"

# Two frames, however long a loaded machine takes to draw them (grep stops after the second, and
# the next frame's write ends the tool); the timeout is a guard against a hang.
t0=$SECONDS
frames=$({ timeout 120 "$STAT" --watch 1 --name "/$seg" || true; } | grep -m 2 'tier0' | wc -l)
[[ $frames -ge 2 ]] || ta_fail "--watch 1 drew $frames frame(s) before it ended"
echo "watch: ok ($frames frames in $((SECONDS - t0)) s)"

# SIGKILL: the next process that attaches takes the dead one's charges back. That probe exits
# without giving its own slot back (peers take it back later), so up to one dead slot and its
# stock (2 x 256 KiB per tier at most) may remain.
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
holder=
LD_PRELOAD=$TA_TEST_PRELOAD /bin/true
json=$("$STAT" --json --name "/$seg")
check "$json" 'seg["processes"] == 0 and seg["dead_slots"] <= 1'
check "$json" 't0["charged"] + t1["charged"] <= 1 << 20 and t0["reclaimed"] + t1["reclaimed"] >= 12 << 20'
echo "reclaim after SIGKILL: ok"

# Errors: a missing segment, bad options.
if out=$("$STAT" --name /tieralloc-test-missing-$$ 2>&1); then
	ta_fail "a missing segment should exit non-zero"
fi
grep -q unreadable <<<"$out" || ta_fail "a missing segment should say it is unreadable"
for bad in "--watch 0" "--watch x" "--bogus" "extra"; do
	# shellcheck disable=SC2086 # split on purpose
	if "$STAT" $bad >/dev/null 2>&1; then ta_fail "tieralloc-stat $bad should fail"; fi
done
echo "errors: ok"
