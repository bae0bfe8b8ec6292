#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat (often run as root) against segments forged by their owner (issue 12, item 6).
# Each run is under `timeout`, so that a hang fails the test instead of stopping the suite:
#   - a segment without a NUL from its cgroup path to its end (five whole pages): the path
#     printed is the field's 256 bytes, never what lies past it;
#   - terminal escapes, newlines, C1 controls and bytes that are not UTF-8 in the cgroup path
#     and tier names: the table carries no control character and its lines stay where they
#     are; the JSON parses and gives the strings back (invalid bytes as U+FFFD); --record writes
#     each row as one line of ASCII that a CSV reader splits into the escaped strings, and a
#     cgroup path with commas and quotes is quoted;
#   - a FIFO named like a segment: reported as not a regular file when named, left out of the
#     listing (which shows segments by their content, not their name);
#   - the default table stays within 100 columns whatever the strings' length (--wide prints
#     them whole);
#   - a cgroup v2 segment whose cgroup path leads outside /sys/fs/cgroup (a directory with a
#     readable memory.numa_stat, one where it is a FIFO, a path with ".."), or to a FIFO under
#     /sys/fs/cgroup where that is a tmpfs the test can write: memory.numa_stat is not read
#     ("observed" is null), memory.reclaim is not looked for there ("reclaim_available" is
#     false), and the tool finishes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

FORGE=$TA_TEST_BUILDDIR/tests/quota/shm_forge
STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
[[ -x $FORGE && -x $STAT ]] || ta_hard_error "shm_forge or tieralloc-stat not built"
# q_cleanup removes $SEG_PREFIX* only.
PFX=tieralloc-v1-test-hostile-$$-
cg_dir=
cleanup_hostile()
{
	rm -f /dev/shm/"$PFX"*
	if [[ -n $cg_dir ]]; then
		rm -f "$cg_dir/memory.numa_stat"
		rmdir "$cg_dir" 2>/dev/null || true
	fi
	q_cleanup
}
trap cleanup_hostile EXIT
cd "$TA_WORK"

# stat_run NAME ARGS...: tieralloc-stat ARGS into NAME.out; a run that does not end within 60 s
# (a hang: it takes milliseconds) fails the test.
stat_run()
{
	local name=$1 rc=0
	shift
	timeout 60 "$STAT" "$@" >"$name.out" 2>"$name.err" || rc=$?
	[[ $rc -ne 124 ]] || ta_fail "tieralloc-stat $* hung (killed after 60 s)"
	[[ $rc -lt 128 ]] || ta_fail "tieralloc-stat $* died of signal $((rc - 128))"
	return 0
}

# json_check FILE PYTHON-EXPRESSION MSG: the expression over seg (the first segment) holds.
json_check()
{
	python3 - "$1" "$2" <<'PY' || ta_fail "$3: $(head -c 2000 "$1")"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
seg = doc["segments"][0]
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}

# no_controls FILE: no byte below 0x20 but newline, no DEL, no 0x80-0xff byte at all (the table
# is ASCII).
no_controls()
{
	if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f\x80-\xff]' "$1"; then
		ta_fail "control or non-ASCII bytes in $1: $(od -c "$1" | head -20)"
	fi
}

ta_require python3 python3

# --- no NUL in the strings or anywhere after them ---
"$FORGE" /dev/shm/"${PFX}nonul" nonul
stat_run nonul --wide --name "/${PFX}nonul"
a256=$(printf 'A%.0s' {1..256})
grep -q "^/${PFX}nonul  cgroup $a256 (v" nonul.out ||
	ta_fail "the path of a NUL-less segment is not its field's 256 bytes: $(head -c 600 nonul.out)"
no_controls nonul.out
stat_run nonul-narrow --name "/${PFX}nonul"
no_controls nonul-narrow.out
awk 'length($0) > 100 { bad = 1 } END { exit bad }' nonul-narrow.out ||
	ta_fail "a line of the default table is wider than 100 columns: $(cat nonul-narrow.out)"
stat_run nonul-json --json --name "/${PFX}nonul"
json_check nonul-json.out "seg['cgroup']['path'] == 'A' * 256 and
	all(t['name'] == 'A' * 32 for t in seg['tiers'])" "NUL-less strings in the JSON"
echo "no NUL: ok"

# --- control characters ---
"$FORGE" /dev/shm/"${PFX}ctrl" ctrl
stat_run ctrl --wide --name "/${PFX}ctrl"
no_controls ctrl.out
# Header, memory.reclaim's note (v1), tier heading, two tiers, migrations, the access table's
# two headings and two tiers, the lending table's two headings and two tiers, blank: fifteen
# lines (no newline got through).
[[ $(wc -l <ctrl.out) -eq 15 ]] || ta_fail "the table's lines moved: $(cat -A ctrl.out)"
grep -qF '/sys/fs/cgroup/\x1b[2J\x1b]0;owned\x07\x0afake line\x0d\xc2\x9b31m\xff\xfe\x7f\\end' \
	ctrl.out || ta_fail "the escaped path is not as expected: $(cat -A ctrl.out)"
stat_run ctrl-json --json --name "/${PFX}ctrl"
# Valid JSON: the escapes decode to the bytes forged, the invalid ones to U+FFFD.
json_check ctrl-json.out "seg['cgroup']['path'] == '/sys/fs/cgroup/\x1b[2J\x1b]0;owned\x07\nfake line\r\x9b31m\ufffd\ufffd\x7f\\\\end'
	and seg['tiers'][0]['name'] == '\x1b[31mred\n' and seg['tiers'][1]['name'] == '\x1b' * 32" \
	"control characters in the JSON"
LC_ALL=C grep -q $'[\x01-\x1f\x7f]' ctrl-json.out && ta_fail "a raw control character in the JSON"
echo "control characters: ok"

# --- --record: one line of ASCII per row; the CSV gives the escaped strings back, and a comma or
# quote in a string is quoted as CSV asks ---
stat_run ctrl-rec --record ctrl.csv --samples 1 --name "/${PFX}ctrl"
no_controls ctrl.csv
[[ $(wc -l <ctrl.csv) -eq 3 ]] || ta_fail "--record: a row is not one line: $(cat -A ctrl.csv)"
"$FORGE" /dev/shm/"${PFX}comma" cgroup2 '/sys/fs/cgroup/a,"b",c'
stat_run comma-rec --record comma.csv --samples 1 --name "/${PFX}comma"
grep -qF ',"/sys/fs/cgroup/a,""b"",c",' comma.csv || ta_fail "--record: not quoted: $(cat comma.csv)"
python3 - ctrl.csv comma.csv <<'PY' || ta_fail "--record: the CSV does not give the strings back"
import csv, sys
ctrl, comma = ([r for r in csv.reader(open(p, newline=""))] for p in sys.argv[1:3])
assert all(len(r) == 18 for r in ctrl + comma) and len(ctrl) == len(comma) == 3
want = r"/sys/fs/cgroup/\x1b[2J\x1b]0;owned\x07\x0afake line\x0d\xc2\x9b31m\xff\xfe\x7f\\end"
assert ctrl[1][2] == want, ctrl[1][2]
assert ctrl[1][5] == r"\x1b[31mred\x0a" and ctrl[2][5] == r"\x1b" * 32, ctrl
assert comma[1][2] == '/sys/fs/cgroup/a,"b",c', comma[1][2]
PY
echo "--record: ok"

# --- a FIFO named like a segment ---
mkfifo /dev/shm/"${PFX}fifo"
stat_run fifo --name "/${PFX}fifo"
grep -q "^/${PFX}fifo: unreadable: not a regular file" fifo.out ||
	ta_fail "a FIFO segment: $(cat fifo.out)"
stat_run all --json
python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' all.out ||
	ta_fail "the listing with hostile segments is not JSON"
grep -q "${PFX}fifo" all.out && ta_fail "the listing shows the FIFO, which is no segment"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding="utf-8"))
sys.exit(0 if any(s["name"] == "/" + sys.argv[2] for s in d["segments"]) else 1)' all.out \
	"${PFX}nonul" || ta_fail "the listing misses a valid forged segment"
stat_run all-table
awk 'length($0) > 100 { bad = 1 } END { exit bad }' all-table.out ||
	ta_fail "a line of the full table is wider than 100 columns: $(awk 'length($0) > 100' all-table.out)"
echo "FIFO segment: ok"

# --- the cgroup's files: only regular files of cgroup2 under /sys/fs/cgroup ---
mkdir -p outside fifodir
printf 'anon N0=4096\nfile N0=8192\n' >outside/memory.numa_stat
mkfifo fifodir/memory.numa_stat
cases=("$TA_WORK/outside" "$TA_WORK/fifodir" "/sys/fs/cgroup/../..$TA_WORK/outside"
	"/sys/fs/cgroup/../..$TA_WORK/fifodir")
# A FIFO under the mount, where /sys/fs/cgroup is a tmpfs (a cgroup v1 host): never on a
# cgroup2 mount, where mkdir would make a cgroup.
if [[ $(stat -f -c %T /sys/fs/cgroup 2>/dev/null) == tmpfs ]] &&
	mkdir "/sys/fs/cgroup/ta-test-hostile-$$" 2>/dev/null; then
	cg_dir=/sys/fs/cgroup/ta-test-hostile-$$
	mkfifo "$cg_dir/memory.numa_stat"
	cases+=("$cg_dir")
else
	echo "(no FIFO under /sys/fs/cgroup: not a tmpfs this test can write)"
fi
i=0
for dir in "${cases[@]}"; do
	i=$((i + 1))
	"$FORGE" /dev/shm/"${PFX}cg$i" cgroup2 "$dir"
	stat_run "cg$i" --json --name "/${PFX}cg$i"
	json_check "cg$i.out" "seg['cgroup']['version'] == 2 and seg['reclaim_available'] is False
		and all(t['observed'] is None for t in seg['tiers'])" "cgroup path $dir"
	stat_run "cg$i-table" --name "/${PFX}cg$i"
	grep -Eq '^0 +forged0 .* n/a ' "cg$i-table.out" || ta_fail "cgroup path $dir: $(cat "cg$i-table.out")"
done
echo "cgroup paths: ok (${#cases[@]} cases)"
