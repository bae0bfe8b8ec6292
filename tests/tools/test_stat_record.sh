#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat --record on a live segment: a python3 process under the preload (a segment of
# its own, tier 0 limited to 4 MiB) allocates 8 MiB each time the test asks, while a recorder
# samples it every 0.2 s. The CSV must have the documented header once, whole rows of the
# documented columns (python's csv module parses them), times that do not go back, and a total
# charge that grows with each step; SIGTERM must end the recorder with status 0. Then: a second
# recorder appends (no second header), a file of other content is refused and left alone, a
# symbolic link at the path is not followed (to create or to append), a file with two links, a
# FIFO and another user's file (root and nobody, each the other's) are refused and left alone,
# hostile strings in segments read back as written and run nothing as a shell script, a
# recorder killed with SIGKILL leaves rows that all parse, and option errors exit 2.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ta_require python3 python3
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
[[ -x $STAT ]] || ta_hard_error "tieralloc-stat not built: $STAT"
seg=tieralloc-v1-test-record-$$
csv=$TA_WORK/rec.csv
holder=''
recorder=
pub=
hostile=()
stop_all()
{
	for p in $recorder $holder; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	exec 3>&- 4<&- || true
	rm -f "/dev/shm/$seg"
	for name in "${hostile[@]}"; do
		rm -f "/dev/shm/$name"
	done
	[[ -z $pub ]] || rm -rf "$pub"
	ta_cleanup
}
trap stop_all EXIT

# The holder: one line on its stdin, 8 MiB more (kept), then "ok" on its stdout.
mkfifo "$TA_WORK/in" "$TA_WORK/out"
PYTHONMALLOC=malloc LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME=$seg TIERALLOC_TIERS="0;0" \
	TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M" "$PY" -c '
import sys
blocks = []
print("ready", flush=True)
for line in sys.stdin:
    blocks += [bytearray(65536) for _ in range(128)]
    print("ok", flush=True)
' <"$TA_WORK/in" >"$TA_WORK/out" &
holder=$!
exec 3>"$TA_WORK/in" 4<"$TA_WORK/out"
read -r word <&4
[[ $word == ready ]] || ta_fail "the holder did not start"

# rows FILE: the data rows of FILE (its lines but the header).
rows() { echo $(($(wc -l <"$1") - 1)); }
# wait_rows N: until the recording has N rows or more (the guard only catches a hang).
wait_rows()
{
	for _ in $(seq 1 6000); do
		[[ -s $csv && $(rows "$csv") -ge $1 ]] && return 0
		kill -0 "$recorder" 2>/dev/null || ta_fail "the recorder ended early"
		sleep 0.1
	done
	ta_fail "the recording did not reach $1 rows"
}

"$STAT" --record "$csv" --interval 0.2 --name "/$seg" &
recorder=$!
# Two samples (two tiers each) before the first step, two more after each: the rows there are
# when a step starts (the samples so far were taken before it) and after it ended (the last
# sample was taken after the holder said it was done). marks: those row counts.
wait_rows 4
marks=$(rows "$csv")
for _ in 1 2 3; do
	echo grow >&3
	read -r word <&4
	[[ $word == ok ]] || ta_fail "the holder did not allocate"
	wait_rows $(($(rows "$csv") + 4))
	marks="$marks $(rows "$csv")"
done
kill -TERM "$recorder"
rc=0
wait "$recorder" || rc=$?
recorder=
[[ $rc == 0 ]] || ta_fail "the recorder's exit status after SIGTERM is $rc, want 0"
echo "recorded $(rows "$csv") rows; rows between the steps: $marks"

# The file as a CSV reader sees it; MARKS: the row counts between the steps.
"$PY" - "$csv" "/$seg" "$marks" <<'PY' || ta_fail "the recording is not what was recorded"
import csv, sys
path, seg, marks = sys.argv[1], sys.argv[2], [int(m) for m in sys.argv[3].split()]
cols = ("time,segment,cgroup,processes,tier,tier_name,nodes,charged,observed,peak,min,low,"
        "high,max,demoted,reclaim_asked,steered_away,refused_max").split(",")
rows = list(csv.reader(open(path, newline="")))
assert rows[0] == cols, rows[0]
rows = [dict(zip(cols, r)) for r in rows[1:] if len(r) == len(cols) or sys.exit(f"row {r}")]
assert all(r["time"].count(".") == 1 for r in rows), "times without decimals"
times = [float(r["time"]) for r in rows]
assert times == sorted(times), "times go back"
assert all(r["segment"] == seg for r in rows), "another segment"
assert all(r["processes"] == "1" for r in rows), "not one process"
for r in rows:
    assert r["tier"] in ("0", "1") and r["tier_name"] == "tier" + r["tier"], r
    for k in ("charged", "peak", "min", "low", "steered_away", "refused_max"):
        assert r[k].isdigit(), (k, r)
    for k in ("high", "max"):
        assert r[k].isdigit() or r[k] == "max", (k, r)
    assert r["observed"] == "" or r["observed"].isdigit(), r
    if r["tier"] == "0":
        assert r["max"] == r["high"] == str(4 << 20), r
        assert int(r["charged"]) <= 4 << 20, r
# The total charge of each sample (rows sharing a time), and where the steps ended.
total, order = {}, []
for r in rows:
    if r["time"] not in total:
        order.append(r["time"])
        total[r["time"]] = 0
    total[r["time"]] += int(r["charged"])
assert all(sum(1 for r in rows if r["time"] == t) == 2 for t in order), "a sample without 2 tiers"
levels = [total[rows[m - 1]["time"]] for m in marks]
print("total charged before the steps, between them and after (MiB):",
      [round(v / 2**20, 2) for v in levels])
# A step of 8 MiB charged 7.8 to 8.1 MiB more where this was written (charges follow the
# allocator's spans and caches, not each block): half of it is the bar.
for a, b in zip(levels, levels[1:]):
    assert b >= a + (4 << 20), f"a step of 8 MiB charged {b - a} bytes more"
PY
echo "the recording: ok"

# Appending: no second header, and the rows of both recorders.
n=$(rows "$csv")
"$STAT" --record "$csv" --samples 2 --interval 0.1 --name "/$seg" ||
	ta_fail "a second recorder failed"
[[ $(grep -c '^time,' "$csv") == 1 ]] || ta_fail "the header was written twice"
[[ $(rows "$csv") == $((n + 4)) ]] || ta_fail "--samples 2 appended $(($(rows "$csv") - n)) rows, want 4"
echo "append: ok"

# A file that is not a recording is refused (exit 2) and left as it was.
printf 'name,value\nx,1\n' >"$TA_WORK/other.csv"
cp "$TA_WORK/other.csv" "$TA_WORK/other.orig"
rc=0
"$STAT" --record "$TA_WORK/other.csv" --samples 1 2>"$TA_WORK/err" || rc=$?
[[ $rc == 2 ]] || ta_fail "a file of other content: exit status $rc, want 2"
cmp -s "$TA_WORK/other.csv" "$TA_WORK/other.orig" || ta_fail "a file of other content was changed"
grep -q 'not appending' "$TA_WORK/err" || ta_fail "no message for a file of other content"
echo "refusal: ok"

# Where the file goes (issue 31): --record is often run as root in a directory others can write.
# A symbolic link at the path is never followed, neither to create a file nor to append to one;
# an existing file is appended to only if it is a regular file of the caller's with one link.
# refused WHY FILE [MESSAGE]: tieralloc-stat --record FILE exits 2 with MESSAGE, and writes nothing.
refused()
{
	local rc=0
	"${as_user[@]}" "$STAT" --record "$2" --samples 1 --name "/$seg" >/dev/null 2>"$TA_WORK/err" ||
		rc=$?
	[[ $rc == 2 ]] || { cat "$TA_WORK/err" >&2; ta_fail "$1: exit status $rc, want 2"; }
	grep -q -- "${3:-not appending}" "$TA_WORK/err" || { cat "$TA_WORK/err" >&2; ta_fail "$1: message"; }
	echo "$1: $(cat "$TA_WORK/err")"
}
as_user=()
digest() { sha256sum <"$1"; }
before=$(digest "$csv")
ln -s "$TA_WORK/created-through-link" "$TA_WORK/link-new.csv"
refused "a link to a file that is not there" "$TA_WORK/link-new.csv" "symbolic link"
[[ ! -e $TA_WORK/created-through-link ]] || ta_fail "a file was created through a planted link"
ln -s "$csv" "$TA_WORK/link-old.csv"
refused "a link to a recording" "$TA_WORK/link-old.csv" "symbolic link"
[[ $(digest "$csv") == "$before" ]] || ta_fail "a recording was appended to through a link"
ln "$csv" "$TA_WORK/hardlink.csv"
refused "a recording with two links" "$TA_WORK/hardlink.csv" "2 links"
[[ $(digest "$csv") == "$before" ]] || ta_fail "a recording with two links was appended to"
rm "$TA_WORK/hardlink.csv"
mkfifo "$TA_WORK/fifo.csv"
as_user=(timeout 20)
refused "a FIFO" "$TA_WORK/fifo.csv" "not a regular file"
as_user=()
: >"$TA_WORK/empty.csv"
"$STAT" --record "$TA_WORK/empty.csv" --samples 1 --name "/$seg" || ta_fail "an empty file of ours was refused"
[[ $(head -n 1 "$TA_WORK/empty.csv") == time,* ]] || ta_fail "no header in an empty file of ours"
# Another user's file: root appending to nobody's, and nobody to root's (writable by all, in a
# directory nobody can reach). Needs root to make them.
nobody=$(id -u nobody 2>/dev/null || true)
if [[ $(id -u) != 0 || -z $nobody ]] || ! command -v setpriv >/dev/null; then
	echo "another user's file: not checked (needs root, a user nobody and setpriv)"
else
	pub=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-record.XXXXXX")
	chmod 755 "$pub"
	cp "$csv" "$pub/nobodys.csv"
	chown "$nobody" "$pub/nobodys.csv"
	before=$(digest "$pub/nobodys.csv")
	refused "a recording of nobody's, as root" "$pub/nobodys.csv" "owned by uid $nobody"
	[[ $(digest "$pub/nobodys.csv") == "$before" ]] || ta_fail "root appended to nobody's recording"
	cp "$STAT" "$pub/tieralloc-stat"
	cp "$csv" "$pub/roots.csv"
	chmod 666 "$pub/roots.csv"
	before=$(digest "$pub/roots.csv")
	STAT=$pub/tieralloc-stat
	as_user=(setpriv --reuid="$nobody" --regid="$(id -g nobody)" --clear-groups)
	refused "a recording of root's, as nobody" "$pub/roots.csv" "owned by uid 0"
	as_user=()
	STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
	[[ $(digest "$pub/roots.csv") == "$before" ]] || ta_fail "nobody appended to root's recording"
	rm -rf "$pub"
fi
echo "where the file goes: ok"

# The strings any user writes into a segment (issue 31): copies of the holder's segment under
# names with ';', '#', ',', '"', a newline, '$(...)' and '`...`', one with a cgroup path and a tier
# name of its own (spaces, a formula's '='). The recording must read back as those strings
# (python's csv module, then the \xNN escapes undone), each row one line, every field with more
# than plain characters quoted, a formula's first character escaped; and run as a shell script,
# it must run nothing.
hostile=("$seg-a;touch ran1;#" "$seg-b,c\"d" "$seg-e\$(touch ran2)" "$seg-f\`touch ran3\`"
	"$seg-g"$'\n'"h #i")
for name in "${hostile[@]}"; do
	cp "/dev/shm/$seg" "/dev/shm/$name"
done
"$PY" - "/dev/shm/${hostile[0]}" <<'PY'
import sys
seg = bytearray(open(sys.argv[1], "rb").read())
cg = b"/sys/fs/cgroup/x y;z #w"
seg[88:88 + 256] = cg + bytes(256 - len(cg))  # struct ta_shm_header.cgroup_path
at = seg.index(b"tier1\0")
name = b"=1+2 x"
seg[at:at + 32] = name + bytes(32 - len(name))  # struct ta_shm_tier.name
open(sys.argv[1], "wb").write(seg)
PY
hcsv=$TA_WORK/hostile.csv
for name in "${hostile[@]}"; do
	"$STAT" --record "$hcsv" --samples 1 --name "$name" || ta_fail "recording $name failed"
	rm -f "/dev/shm/$name" # other tests list every segment: not longer than needed
done
"$PY" - "$hcsv" "$seg" <<'PY' || ta_fail "the hostile strings were not recorded as they are"
import csv, re, sys
path, seg = sys.argv[1], sys.argv[2]
unescape = lambda s: re.sub(r"\\(\\|x[0-9a-f]{2})",
                            lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), s)
lines = open(path, newline="").read().split("\n")
assert lines[-1] == "" and len(lines) == 1 + 5 * 2 + 1, f"{len(lines)} lines, want 12"
rows = list(csv.reader(lines[1:-1]))
assert all(len(r) == 18 for r in rows), [r for r in rows if len(r) != 18]
want = ["a;touch ran1;#", 'b,c"d', "e$(touch ran2)", "f`touch ran3`", "g\nh #i"]
assert [unescape(r[1]) for r in rows] == ["/" + seg + "-" + w for w in want for _ in (0, 1)], rows
assert unescape(rows[0][2]) == "/sys/fs/cgroup/x y;z #w" and unescape(rows[1][5]) == "=1+2 x"
assert rows[1][5] == r"\x3d1+2 x", f"a formula in a spreadsheet: {rows[1][5]}"
plain = re.compile(r"[A-Za-z0-9/._:+=@%-]*$")
for line in lines[1:-1]:
    fields = re.findall(r'("(?:[^"]|"")*"|[^,]*)(?:,|$)', line)[:18]
    for f in fields:
        assert plain.match(f) or (f[0] == f[-1] == '"' and len(f) > 1), f"not quoted: {f}"
        assert "$" not in f and "`" not in f, f"a shell would expand: {f}"
print("the hostile strings read back as written")
PY
mkdir "$TA_WORK/sh"
(cd "$TA_WORK/sh" && PATH=/usr/bin:/bin sh "$hcsv" >/dev/null 2>&1) || true
ran=$(ls -A "$TA_WORK/sh")
[[ -z $ran ]] || ta_fail "the recording, run as a shell script, ran commands: it made $ran"
echo "hostile strings: ok"

# SIGKILL at any moment leaves whole rows: every row parses.
kcsv=$TA_WORK/killed.csv
"$STAT" --record "$kcsv" --interval 0.05 --name "/$seg" &
recorder=$!
for _ in $(seq 1 6000); do
	[[ -s $kcsv && $(rows "$kcsv") -ge 6 ]] && break
	sleep 0.1
done
kill -9 "$recorder"
wait "$recorder" 2>/dev/null || true
recorder=
"$PY" - "$kcsv" <<'PY' || ta_fail "a killed recorder left rows that do not parse"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert len(rows) >= 7 and all(len(r) == len(rows[0]) == 18 for r in rows), rows[-1]
PY
echo "SIGKILL: ok ($(rows "$kcsv") rows)"

# Usage errors: exit 2.
for args in "--samples 3" "--record $TA_WORK/x.csv --json" "--record $TA_WORK/x.csv --watch 1" \
	"--record $TA_WORK/x.csv --interval 0" "--record $TA_WORK/x.csv --samples 0" \
	"--record $TA_WORK/x.csv --duration abc" "--record $TA_WORK/x.csv --reap"; do
	rc=0
	# shellcheck disable=SC2086 # the options are words
	"$STAT" $args >/dev/null 2>&1 || rc=$?
	[[ $rc == 2 ]] || ta_fail "tieralloc-stat $args: exit status $rc, want 2"
done
[[ ! -e $TA_WORK/x.csv ]] || ta_fail "a usage error created the file"
# --duration ends a recording by itself.
"$STAT" --record "$TA_WORK/d.csv" --duration 0.3 --interval 0.1 --name "/$seg" ||
	ta_fail "--duration: the recorder failed"
[[ $(rows "$TA_WORK/d.csv") -ge 2 ]] || ta_fail "--duration: no samples"
echo "options: ok"
echo PASS
