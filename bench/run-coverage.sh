#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Driver of `make bench-coverage`: how much of a program's memory tieralloc sees (issue 30).
# Each program builds a few hundred MiB of small objects the way its runtime does, then holds
# them for a moment; it runs once without the preload and once under it, in the same run. Its
# peak resident anonymous memory (RssAnon of /proc/PID/status, sampled every 20 ms) is compared
# with tieralloc's peak charged bytes (TIERALLOC_SUMMARY; a segment of the run's own, so that the
# process's accounting is its own and its worker samples its mappings). Since step 2 of
# docs/runtimes.md the charge includes what the worker found resident in the program's own
# mappings (mmap); "of it mapped" is the peak of that part. Charged = peak charged / peak RssAnon
# under the preload; "cost" is the peak RssAnon under the preload less the one without it.
#
# Usage: run-coverage.sh BUILDDIR [PROGRAM...]   (default: every program below that is installed)
# Programs: python3 (pymalloc: 1 MiB arenas from mmap), python3-malloc (PYTHONMALLOC=malloc),
# node (V8: reserved, then committed mmap), java (G1: reserved at -Xmx, committed by region),
# perl and sqlite3 (malloc).
set -u
B=$(cd "$1" && pwd)
shift
PRELOAD=$B/preload/.libs/libtieralloc-preload.so
[ -f "$PRELOAD" ] || {
	echo "run-coverage: $PRELOAD missing: build first" >&2
	exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/Hold.java" <<'EOF'
import java.util.ArrayList;
public class Hold {
	public static void main(String[] args) throws Exception {
		ArrayList<String> held = new ArrayList<>();
		for (int i = 0; i < 3_000_000; i++)
			held.add("row " + i + " " + (i * 7919));
		Thread.sleep(2500);
		System.out.println(held.size());
	}
}
EOF
cat >"$work/hold.js" <<'EOF'
const held = [];
for (let i = 0; i < 3000000; i++) held.push("row " + i + " " + (i * 7919));
setTimeout(() => console.log(held.length), 2500);
EOF

py='import time
x = [str(i) * 3 for i in range(3000000)]
time.sleep(2.5)
print(len(x))'
pl='my @a = map { "x$_" x 3 } 1 .. 2000000; select(undef, undef, undef, 2.5); print scalar(@a), "\n";'
sql='create table t(a, b);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 1500000)
insert into t select i, hex(randomblob(32)) from n;
create index i on t(b);
select count(*) from t;'
# cmd_of NAME: the program's command line in the array cmd ("env VAR=value" first where it needs
# one: env execs it, so the pid is the program's).
cmd_of() {
	case $1 in
	python3) cmd=(/usr/bin/python3 -c "$py") ;;
	python3-malloc) cmd=(env PYTHONMALLOC=malloc /usr/bin/python3 -c "$py") ;;
	node) cmd=(node "$work/hold.js") ;;
	java) cmd=(java -Xmx1g -XX:+UseG1GC "$work/Hold.java") ;;
	perl) cmd=(perl -e "$pl") ;;
	sqlite3) cmd=(sqlite3 :memory: "$sql") ;;
	esac
}
needs() {
	case $1 in
	python3 | python3-malloc) echo /usr/bin/python3 ;;
	*) echo "$1" ;;
	esac
}

# run NAME PRELOAD(0|1): runs it, prints "peak_anon_kib charged_bytes mapped_bytes exit_status".
run() {
	local name=$1 pre=$2 env=() w pid peak=0 v
	cmd_of "$name"
	rm -f "$work/summary"
	if [ "$pre" = 1 ]; then
		env+=(LD_PRELOAD="$PRELOAD" TIERALLOC_SHM_NAME="/ta-coverage-$$"
			TIERALLOC_SUMMARY="$work/summary")
	fi
	env "${env[@]}" "${cmd[@]}" >"$work/out" 2>"$work/err" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		v=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v
		sleep 0.02
	done
	wait "$pid"
	w=$?
	rm -f "/dev/shm/ta-coverage-$$"
	local charged=0 mapped=0
	if [ "$pre" = 1 ] && [ -f "$work/summary" ]; then
		# The program's own process (the summary has a line per tier of each process).
		read -r charged mapped < <(awk -v pid="$pid" '$0 ~ "pid=" pid " " {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^peak=/) { sub("peak=", "", $i); c += $i }
				if ($i ~ /^mapped_peak=/) { sub("mapped_peak=", "", $i); m += $i }
			}
		} END {print c + 0, m + 0}' "$work/summary")
	fi
	echo "$peak $charged $mapped $w"
}

progs=("$@")
[ ${#progs[@]} -eq 0 ] && progs=(python3 python3-malloc node java perl sqlite3)
echo "coverage: tieralloc's peak charged bytes against the process's peak RssAnon, $(date +%F)," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-15s %12s %12s %12s %12s %8s %10s\n' program "anon, glibc" "anon, ta" \
	"ta charged" "of it mapped" charged "ta cost"
for p in "${progs[@]}"; do
	if ! command -v "$(needs "$p")" >/dev/null; then
		printf '%-15s %s\n' "$p" "not installed"
		continue
	fi
	read -r a0 _ _ s0 < <(run "$p" 0)
	read -r a1 c1 m1 s1 < <(run "$p" 1)
	if [ "$s0" != 0 ] || [ "$s1" != 0 ]; then
		printf '%-15s exit status %s without, %s with tieralloc: %s\n' "$p" "$s0" "$s1" \
			"$(head -c 300 "$work/err")"
		continue
	fi
	awk -v p="$p" -v a0="$a0" -v a1="$a1" -v c1="$c1" -v m1="$m1" 'BEGIN {
		printf "%-15s %8.1f MiB %8.1f MiB %8.1f MiB %8.1f MiB %7.0f%% %+6.1f MiB\n",
			p, a0 / 1024, a1 / 1024, c1 / 1048576, m1 / 1048576,
			a1 ? 100 * c1 / 1024 / a1 : 0, (a1 - a0) / 1024
	}'
done
