#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat as an operator's tool (issue 16, item 4), on segments of processes under the
# preload, each on a TIERALLOC_SHM_NAME of its own that does not start with "tieralloc-":
#   - custom-named segments are in the full listing (table and JSON): found by content;
#   - a segment whose process was killed is "gone" (no process, its slot dead, charges shown as
#     zero); --reap removes it and says so, while a segment whose process lives is kept, and so
#     is a gone segment that a process still maps;
#   - every line of the default table fits 100 columns, with a 110-character segment name too;
#   - one vocabulary and one unit style: tieralloc-run's summary and tieralloc-stat's table (and
#     the JSON and Prometheus names) call the same counter steered_away and give it the same
#     value for the same run (quota_hog: one process, no exec, nothing allocated after its
#     summary), and both print bytes as "4.0 MiB".
# --reap is only ever given with --name here: other segments on the machine are not this test's.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ta_require python3 python3

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
RUN=$TA_TEST_BUILDDIR/tools/tieralloc-run
HOG=$TA_TEST_BUILDDIR/tests/quota/quota_hog
[[ -x $STAT && -x $RUN && -x $HOG ]] || ta_hard_error "tieralloc-stat, tieralloc-run or quota_hog not built"

live=ta-op-live-$$
dead=ta-op-dead-$$
mapped=ta-op-mapped-$$
voc=ta-op-voc-$$
long=ta-op-long-$$-$(printf 'x%.0s' {1..110})
long=${long:0:110}
pids=()
cleanup()
{
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -f "/dev/shm/$live" "/dev/shm/$dead" "/dev/shm/$mapped" "/dev/shm/$voc" "/dev/shm/$long"
	ta_cleanup
}
trap cleanup EXIT
cd "$TA_WORK"

# hold NAME: a preloaded sleep on segment NAME (tier 0 limited to 4 MiB); its pid in $held once
# the segment is readable and its slot taken (the creator marks the segment ready first).
hold()
{
	LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME=$1 TIERALLOC_TIERS="0;0" \
		TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M" sleep 300 &
	held=$!
	pids+=("$held")
	for _ in $(seq 1 300); do
		"$STAT" --json --name "/$1" 2>/dev/null | grep -q '"processes":1,' && return 0
		sleep 0.1
	done
	ta_fail "the process on $1 made no readable segment"
}

# json_check NAME PYTHON-EXPRESSION MSG: over seg, the segment NAME in --json --name NAME.
json_check()
{
	"$STAT" --json --name "/$1" >"$1.json" || ta_fail "tieralloc-stat --json --name /$1 failed"
	python3 - "$1.json" "$2" <<'PY' || ta_fail "$3: $(cat "$1.json")"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
seg = doc["segments"][0]
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}

hold "$live"
hold "$long"
hold "$dead"
kill -9 "$held"
wait "$held" 2>/dev/null || true
hold "$mapped"
mapped_pid=$held

# --- custom names, found by content ---
"$STAT" --json >all.json || ta_fail "tieralloc-stat --json failed"
python3 - all.json "/$live" "/$dead" "/$long" <<'PY' || ta_fail "custom-named segments missing from the listing"
import json, sys
names = {s["name"] for s in json.load(open(sys.argv[1], encoding="utf-8"))["segments"]}
missing = [n for n in sys.argv[2:] if n not in names]
print("missing:", missing, "listed:", sorted(names), file=sys.stderr) if missing else None
sys.exit(1 if missing else 0)
PY
"$STAT" >all.txt || ta_fail "tieralloc-stat failed"
grep -q "^/$live  1 process(es)$" all.txt || ta_fail "the table misses /$live: $(cat all.txt)"
echo "custom names: ok"

# --- 100 columns ---
awk 'length($0) > 100 { print length($0) ": " $0; bad = 1 } END { exit bad }' all.txt >wide.txt ||
	ta_fail "lines of the default table wider than 100 columns: $(cat wide.txt)"
"$STAT" --name "/$long" >long.txt
awk 'length($0) > 100 { bad = 1 } END { exit bad }' long.txt ||
	ta_fail "the long name's table is wider than 100 columns: $(cat long.txt)"
grep -q '\.\.\.' long.txt || ta_fail "the long name was not elided: $(cat long.txt)"
"$STAT" --wide --name "/$long" | grep -qF "/$long  cgroup " || ta_fail "--wide does not print the whole name"
echo "100 columns: ok ($(wc -l <all.txt) lines, $(grep -c ' process(es)' all.txt) segment(s))"

# --- gone, and --reap ---
json_check "$dead" 'seg["gone"] is True and seg["processes"] == 0 and seg["dead_slots"] == 1
	and all(t["charged"] == 0 for t in seg["tiers"])' "a killed process's segment is not gone"
json_check "$live" 'seg["gone"] is False and seg["processes"] == 1' "a live segment is gone"
"$STAT" --name "/$dead" | grep -q ': gone$' || ta_fail "the table does not say gone"
out=$("$STAT" --reap --name "/$live") || ta_fail "--reap on a live segment failed"
[[ -e /dev/shm/$live ]] || ta_fail "--reap removed a live segment"
grep -q removed <<<"$out" && ta_fail "--reap says it removed a live segment: $out"
out=$("$STAT" --reap --name "/$dead") || ta_fail "--reap on a gone segment failed"
[[ ! -e /dev/shm/$dead ]] || ta_fail "--reap left a gone segment: $out"
grep -q "^tieralloc-stat: /$dead: removed" <<<"$out" || ta_fail "--reap did not say what it removed: $out"
# Gone (its process killed), but mapped by another process: kept.
python3 -c 'import mmap, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print("mapped", flush=True)
time.sleep(300)' "/dev/shm/$mapped" >mapper.out &
pids+=("$!")
for _ in $(seq 1 300); do
	[[ -s mapper.out ]] && break
	sleep 0.1
done
[[ -s mapper.out ]] || ta_fail "the mapping process did not start"
kill -9 "$mapped_pid"
wait "$mapped_pid" 2>/dev/null || true
json_check "$mapped" 'seg["gone"] is True' "a killed process's segment is not gone"
out=$("$STAT" --reap --name "/$mapped")
[[ -e /dev/shm/$mapped ]] || ta_fail "--reap removed a segment a process maps"
grep -q "not removed: a process still maps it" <<<"$out" || ta_fail "--reap said: $out"
echo "gone and --reap: ok"

# --- one vocabulary, one unit style ---
printf 'alloc 12M 64K 1\nquit\n' | TIERALLOC_SHM_NAME=$voc TIERALLOC_TIERS="0;0" \
	TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M" "$RUN" -- "$HOG" >/dev/null 2>summary.txt ||
	ta_fail "tieralloc-run quota_hog failed: $(cat summary.txt)"
"$STAT" --name "/$voc" >voc.txt
"$STAT" --json --name "/$voc" >voc.json
"$STAT" --prometheus --name "/$voc" >voc.prom
python3 - summary.txt voc.txt voc.json voc.prom <<'PY' || ta_fail "the vocabulary or units differ"
import json, re, sys
summary, table = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines()

def column(lines, name, tier):
    """The value under a right-aligned column: the last word of the row up to the header's end."""
    head = next(l for l in lines if l.startswith("tier "))
    m = re.search(r" %s(?= |$)" % re.escape(name), head)
    if m is None:
        sys.exit("no column %s in: %s" % (name, head))
    row = next(l for l in lines if re.match(r"%d +" % tier, l))
    return row[: m.end()].split()[-1], head, row

s_val, s_head, s_row = column(summary, "steered_away", 0)
t_val, t_head, t_row = column(table, "steered_away", 0)
seg = json.load(open(sys.argv[3]))["segments"][0]
prom = re.search(r'^tieralloc_tier_steered_away_total\{.*tier="0".*\} (\d+)$',
                 open(sys.argv[4]).read(), re.M)
print("steered_away: summary %s, table %s, json %s, prometheus %s"
      % (s_val, t_val, seg["tiers"][0]["steered_away"], prom and prom.group(1)))
ok = int(s_val) > 0 and s_val == t_val == str(seg["tiers"][0]["steered_away"]) == prom.group(1)
# The old names of this counter are gone from both tables.
for head in (s_head, t_head):
    for old in (" exhausted", " steered ", " steered-in", " overflow "):
        if old in head + " ":
            print("old name %r in: %s" % (old, head))
            ok = False
# Bytes: "4.0 MiB" in both, never "4.0M" or "0B".
for row in (s_row, t_row):
    if re.search(r"\d(B|[KMGTPE])( |$)", row) or not re.search(r"\d\.\d [KMG]iB", row):
        print("not IEC with one decimal: %s" % row)
        ok = False
if not ok:
    print("\n".join(summary + table))
sys.exit(0 if ok else 1)
PY
echo "vocabulary and units: ok"
echo PASS
