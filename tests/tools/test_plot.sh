#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-plot: a recording by tieralloc-stat --record of a python3 process under the preload
# (tier 0 limited to 4 MiB, so both tiers fill) becomes a real PNG (its signature, its size in
# pixels, more than a blank picture's bytes), kept as tests/tools/test_plot.png in the build
# directory. Hostile strings in the CSV reach no command, and a recording whose fields the
# recorder quoted and escaped is read whole; bad input (no file, an empty one, a header alone,
# another CSV, only broken rows, no gnuplot, a directory that is not there) gives exit status 1,
# one message, and no picture. Skipped only when gnuplot is not installed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ta_require gnuplot gnuplot-nox
ta_require python3 python3
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
PLOT=$TA_TEST_BUILDDIR/tools/tieralloc-plot
[[ -x $STAT && -x $PLOT ]] || ta_hard_error "tieralloc-stat or tieralloc-plot not built"
seg=tieralloc-v1-test-plot-$$
qseg="$seg-a;b #c,d\"e \$f\`g"$'\n'"h"
holder=
stop_holder()
{
	if [[ -n $holder ]]; then
		kill -9 "$holder" 2>/dev/null || true
		wait "$holder" 2>/dev/null || true
	fi
	rm -f "/dev/shm/$seg" "/dev/shm/$qseg"
	ta_cleanup
}
trap stop_holder EXIT

# The holder grows by 1 MiB a line of the test's, so that the picture has slopes.
mkfifo "$TA_WORK/in" "$TA_WORK/out"
PYTHONMALLOC=malloc LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME=$seg TIERALLOC_TIERS="0;0" \
	TIERALLOC_TIER_LIMITS="0.max=4M;0.high=4M" "$PY" -c '
import sys
blocks = []
print("ready", flush=True)
for line in sys.stdin:
    blocks += [bytearray(65536) for _ in range(16)]
    print("ok", flush=True)
' <"$TA_WORK/in" >"$TA_WORK/out" &
holder=$!
exec 3>"$TA_WORK/in" 4<"$TA_WORK/out"
read -r word <&4
[[ $word == ready ]] || ta_fail "the holder did not start"
csv=$TA_WORK/rec.csv
for _ in $(seq 1 12); do
	"$STAT" --record "$csv" --samples 1 --name "/$seg" || ta_fail "tieralloc-stat --record failed"
	echo grow >&3
	read -r word <&4
done
echo "recorded $(($(wc -l <"$csv") - 1)) rows"

png=$TA_WORK/rec.png
"$PLOT" "$csv" "$png" 2>"$TA_WORK/err" || { cat "$TA_WORK/err" >&2; ta_fail "tieralloc-plot failed"; }
[[ ! -s $TA_WORK/err ]] || { cat "$TA_WORK/err" >&2; ta_fail "tieralloc-plot wrote to stderr"; }
[[ $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
	ta_fail "the picture does not start with PNG's signature"
if command -v file >/dev/null; then
	file "$png" | grep -q 'PNG image data, 960 x 600' || ta_fail "file(1) says: $(file "$png")"
fi
# A picture of the axes and titles alone (one flat sample) for comparison: lines add to it.
head -n 3 "$csv" >"$TA_WORK/flat.csv"
"$PLOT" "$TA_WORK/flat.csv" "$TA_WORK/flat.png" || ta_fail "tieralloc-plot of one sample failed"
size=$(stat -c %s "$png") flat=$(stat -c %s "$TA_WORK/flat.png")
echo "the picture: $size bytes (one sample's: $flat)"
[[ $size -gt 10000 && $size -gt $flat ]] || ta_fail "the picture is $size bytes: nothing drawn?"
for left in "$TA_WORK"/.tieralloc-plot*; do
	[[ ! -e $left ]] || ta_fail "a temporary picture was left behind: $left"
done
cp "$png" "$TA_TEST_BUILDDIR/tests/tools/test_plot.png"
echo "the picture: ok (kept as tests/tools/test_plot.png)"

# Hostile strings: a cgroup path and segment name with quotes, a backtick command, a gnuplot
# macro and a shell expansion become titles that run nothing.
hostile=$TA_WORK/hostile.csv
head -n 1 "$csv" >"$hostile"
for t in 1 2; do
	echo "$t.5,\"/s\`touch $TA_WORK/ran\`\",\"/sys/fs/cgroup/a,\"\"b'@c \$(touch $TA_WORK/ran)\",1,0,x,0,${t}048576,,0,0,0,max,max,,,0,0" >>"$hostile"
done
"$PLOT" "$hostile" "$TA_WORK/hostile.png" || ta_fail "tieralloc-plot failed on hostile strings"
[[ ! -e $TA_WORK/ran ]] || ta_fail "a string from the CSV ran a command"
[[ -s $TA_WORK/hostile.png ]] || ta_fail "no picture of the hostile CSV"
# A broken row among good ones is skipped, and said.
{
	cat "$csv"
	echo '99,"unclosed'
} >"$TA_WORK/broken.csv"
"$PLOT" "$TA_WORK/broken.csv" "$TA_WORK/broken.png" 2>"$TA_WORK/err" ||
	ta_fail "a broken row among good ones failed the plot"
grep -q '1 row(s) skipped' "$TA_WORK/err" || ta_fail "the skipped row was not said"
echo "hostile and broken rows: ok"
# The recorder's own quoting and escapes (tools/record.c): a copy of the holder's segment named
# with ';', '#', ',', '"', spaces, '$', '`' and a newline, recorded by tieralloc-stat, is drawn
# with every row read.
cp "/dev/shm/$seg" "/dev/shm/$qseg"
for _ in 1 2 3; do
	"$STAT" --record "$TA_WORK/quoted.csv" --samples 1 --name "$qseg" ||
		ta_fail "tieralloc-stat --record of $qseg failed"
done
rm -f "/dev/shm/$qseg" # other tests list every segment: not longer than needed
grep -q '^[0-9.]*,"/' "$TA_WORK/quoted.csv" || ta_fail "the recording has no quoted segment name"
"$PLOT" "$TA_WORK/quoted.csv" "$TA_WORK/quoted.png" 2>"$TA_WORK/err" ||
	{ cat "$TA_WORK/err" >&2; ta_fail "tieralloc-plot failed on a recording with quoted fields"; }
[[ ! -s $TA_WORK/err ]] || { cat "$TA_WORK/err" >&2; ta_fail "rows of quoted fields were skipped"; }
[[ -s $TA_WORK/quoted.png ]] || ta_fail "no picture of the recording with quoted fields"
echo "a recording with quoted fields: ok"

# The output path (issue 31): tieralloc-plot is often run as root on paths in directories others
# can write. An output beginning with '|' (gnuplot's pipe) or holding a control character is
# refused with exit status 2 before anything is done, even where such a directory exists.
# refused_path WHY PNG MESSAGE: run in $TA_WORK/cwd, exit status 2, the message, nothing made.
mkdir "$TA_WORK/cwd" "$TA_WORK/cwd/|touch ran;:"
refused_path()
{
	local rc=0
	(cd "$TA_WORK/cwd" && "$PLOT" "$csv" "$2") 2>"$TA_WORK/err" || rc=$?
	[[ $rc == 2 ]] || { cat "$TA_WORK/err" >&2; ta_fail "$1: exit status $rc, want 2"; }
	grep -q "^tieralloc-plot: .*$3" "$TA_WORK/err" || { cat "$TA_WORK/err" >&2; ta_fail "$1: message"; }
	[[ $(find "$TA_WORK/cwd" -mindepth 1 | wc -l) == 1 ]] ||
		ta_fail "$1: something was made: $(find "$TA_WORK/cwd" -mindepth 1)"
	echo "$1: $(cat "$TA_WORK/err")"
}
refused_path "an output beginning with |" '|touch ran;:/x.png' "beginning with '|'"
refused_path "an output with a newline" "$TA_WORK/cwd/a"$'\n'"b.png" "control character"
refused_path "an output with a tab" "$TA_WORK/cwd/a"$'\t'"b.png" "control character"
refused_path "an output with an escape" "$TA_WORK/cwd/a"$'\e'"[2Jb.png" "control character"
# Quotes, backslashes, '$(...)', backquotes and gnuplot's '@' are only characters of a file name.
odd=$TA_WORK/cwd/"o'q\"b\\s \$(touch ran) \`touch ran\` @ARG1;x.png"
"$PLOT" "$csv" "$odd" || ta_fail "an output path with quotes and the like failed"
[[ $(head -c 4 "$odd" | od -An -tx1 | tr -d ' \n') == 89504e47 ]] || ta_fail "no PNG at $odd"
[[ ! -e $TA_WORK/cwd/ran && ! -e ran ]] || ta_fail "an output path ran a command"
echo "odd characters in the output path: ok"
# The temporary picture's name is not the predictable .tieralloc-plot.PID.png any more: a link
# planted there (the script runs with the pid of the shell that execs it) is left alone.
printf 'root-owned, keep\n' >"$TA_WORK/victim"
bash -c 'ln -s "$1" "$2/.tieralloc-plot.$$.png" && exec "$3" "$4" "$2/pid.png"' _ \
	"$TA_WORK/victim" "$TA_WORK/cwd" "$PLOT" "$csv" || ta_fail "a link at the old temporary name failed the plot"
[[ $(cat "$TA_WORK/victim") == "root-owned, keep" ]] ||
	ta_fail "the picture went through a link planted at the old temporary name"
[[ -f $TA_WORK/cwd/pid.png && ! -L $TA_WORK/cwd/pid.png ]] || ta_fail "no picture beside the planted link"
echo "a link at the old temporary name: ok"
# At the output path itself, a link is replaced by the picture, never followed: not to a file,
# not to a directory (which would take the picture in). A directory there is an error.
printf 'root-owned, keep\n' >"$TA_WORK/victim2"
ln -s "$TA_WORK/victim2" "$TA_WORK/cwd/to-file.png"
mkdir "$TA_WORK/victim-dir"
ln -s "$TA_WORK/victim-dir" "$TA_WORK/cwd/to-dir.png"
for link in to-file to-dir; do
	"$PLOT" "$csv" "$TA_WORK/cwd/$link.png" || ta_fail "a link at the output path ($link) failed the plot"
	[[ -f $TA_WORK/cwd/$link.png && ! -L $TA_WORK/cwd/$link.png ]] ||
		ta_fail "the link at the output path ($link) is not replaced by the picture"
done
[[ $(cat "$TA_WORK/victim2") == "root-owned, keep" ]] || ta_fail "a link at the output path was followed"
[[ -z $(ls -A "$TA_WORK/victim-dir") ]] || ta_fail "the picture was moved into a linked directory"
mkdir "$TA_WORK/cwd/dir.png"
rc=0
"$PLOT" "$csv" "$TA_WORK/cwd/dir.png" 2>"$TA_WORK/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "cannot write it" "$TA_WORK/err"; then
	cat "$TA_WORK/err" >&2
	ta_fail "a directory at the output path: exit status $rc, or not the message"
fi
[[ -z $(ls -A "$TA_WORK/cwd/dir.png") ]] || ta_fail "the picture was moved into a directory at the output path"
echo "links and a directory at the output path: ok"
# The picture has a new file's mode (mktemp makes its file 0600), and nothing is left behind.
[[ $(stat -c %a "$png") == "$(printf '%o' $((0666 & ~$(umask))))" ]] ||
	ta_fail "the picture's mode is $(stat -c %a "$png"), not a new file's"
for left in "$TA_WORK"/.tieralloc-plot* "$TA_WORK"/cwd/.tieralloc-plot*; do
	[[ ! -e $left || -L $left ]] || ta_fail "a temporary picture was left behind: $left"
done
echo "mode and temporaries: ok"

# bad_input WHY WANT-IN-MESSAGE CSV [PNG]: exit status 1, the message, no picture.
bad_input()
{
	local out=${4:-$TA_WORK/bad.png} rc=0
	"$PLOT" "$3" "$out" 2>"$TA_WORK/err" || rc=$?
	[[ $rc == 1 ]] || ta_fail "$1: exit status $rc, want 1"
	[[ $(wc -l <"$TA_WORK/err") == 1 ]] || { cat "$TA_WORK/err" >&2; ta_fail "$1: not one line"; }
	grep -q "^tieralloc-plot: .*$2" "$TA_WORK/err" || { cat "$TA_WORK/err" >&2; ta_fail "$1: message"; }
	[[ ! -e $out ]] || ta_fail "$1: a picture was written"
	echo "$1: $(cat "$TA_WORK/err")"
}
bad_input "no file" "no such file" "$TA_WORK/missing.csv"
: >"$TA_WORK/empty.csv"
bad_input "an empty file" "empty" "$TA_WORK/empty.csv"
head -n 1 "$csv" >"$TA_WORK/header.csv"
bad_input "a header alone" "no samples" "$TA_WORK/header.csv"
printf 'name,value\nx,1\n' >"$TA_WORK/other.csv"
bad_input "another CSV" "not a tieralloc-stat --record file" "$TA_WORK/other.csv"
printf 'x\x00\x01\n\xff\n' >"$TA_WORK/binary.csv"
bad_input "a binary file" "not a tieralloc-stat --record file" "$TA_WORK/binary.csv"
bad_input "a directory that is not there" "cannot write" "$csv" "$TA_WORK/nodir/x.png"
# Without gnuplot: a PATH of the tools the script needs, all but gnuplot.
mkdir "$TA_WORK/bin"
for tool in awk cat dirname mktemp mv rm; do
	ln -s "$(command -v $tool)" "$TA_WORK/bin/$tool"
done
rc=0
PATH=$TA_WORK/bin "$PLOT" "$csv" "$TA_WORK/bad.png" 2>"$TA_WORK/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q 'gnuplot is not installed (Debian package: gnuplot-nox)' "$TA_WORK/err"; then
	cat "$TA_WORK/err" >&2
	ta_fail "without gnuplot: exit status $rc, or not the message"
fi
echo "no gnuplot: $(cat "$TA_WORK/err")"
rc=0
"$PLOT" "$csv" >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || ta_fail "one argument: exit status $rc, want 2"
echo PASS
