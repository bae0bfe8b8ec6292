#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench`: runs bench-malloc once per (repetition, band, threads, allocator), each
# in a fresh process, and prints the median ns per free+malloc pair of every cell with the
# tieralloc/jemalloc and memkind/jemalloc ratios, all measured in this run. Repetitions are
# interleaved (every allocator once, then again) and the allocator order rotates, so that a
# neighbour's burst on this shared machine hits all columns alike instead of one. Each run
# times its steps in 20 segments (a few milliseconds each) and reports the fastest (--stat best,
# the default: the segment least disturbed by other processes), or the median or mean segment.
#
# Allocators: glibc and jemalloc run the same malloc/free calls, jemalloc through
# LD_PRELOAD=libjemalloc.so.2 (bench-malloc refuses to run if that is not what serves malloc);
# tieralloc and memkind run without any preload, in the default configuration (TIERALLOC_*
# variables are removed from the environment).
#
# Usage: run-bench.sh [--bin PATH] [--reps N] [--ops-scale F] [--stat best|median|mean]
#                     [--bands "small medium large"] [--threads "1 2"]
# Environment: BENCH_REPS (default 5), BENCH_JEMALLOC (path of libjemalloc.so.2).
# Exit: 0 when every run succeeded, 1 otherwise (failed cells print as "fail"). A failed run
# is retried once: on this shared machine a concurrent rebuild may briefly remove the library.

set -u

args="$*"
bin=./bench/bench-malloc
reps=${BENCH_REPS:-5}
scale=1
stat=best
bands="small medium large"
threads_list="1 2"
# tieralloc-local: the same allocator with its per-cgroup quota segment turned off
# (TIERALLOC_SHM_NAME=off): the difference is what charging the shared quota costs.
allocs="jemalloc glibc memkind memkind-detect tieralloc tieralloc-local"

while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--ops-scale) scale=$2; shift 2 ;;
	--stat) stat=$2; shift 2 ;;
	--bands) bands=$2; shift 2 ;;
	--threads) threads_list=$2; shift 2 ;;
	-h|--help) sed -n 's/^# \{0,1\}//; 4,23p' "$0"; exit 0 ;;
	*) echo "run-bench.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

case $stat in
best) key=ns ;;
median) key=ns_median ;;
mean) key=ns_mean ;;
*) echo "run-bench.sh: --stat must be best, median or mean" >&2; exit 2 ;;
esac
if [ ! -x "$bin" ]; then
	echo "run-bench.sh: $bin not built (make bench builds it)" >&2
	exit 2
fi

# The default configuration: no TIERALLOC_* from the caller's environment.
for v in $(env | sed -n 's/^\(TIERALLOC_[A-Za-z0-9_]*\)=.*/\1/p'); do
	echo "run-bench.sh: note: ignoring $v from the environment" >&2
	unset "$v"
done
unset LD_PRELOAD

# jemalloc: an explicit path, else the dynamic linker's cache, else the usual places.
je=${BENCH_JEMALLOC:-}
if [ -z "$je" ]; then
	je=$( (/sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null) |
		sed -n 's/.*libjemalloc\.so\.2 (.*x86-64.*) => //p; s/.*libjemalloc\.so\.2 ([^)]*) => //p' |
		head -n 1)
fi
if [ -z "$je" ]; then
	for f in /usr/lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2; do
		[ -e "$f" ] && je=$f && break
	done
fi
if [ -z "$je" ] || [ ! -e "$je" ]; then
	echo "run-bench.sh: libjemalloc.so.2 not found (set BENCH_JEMALLOC); jemalloc column is n/a" >&2
	je=
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-bench.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
results=$tmp/results
: >"$results"

ops_for() { # steps of a band (bench-malloc's defaults), times --ops-scale
	case $1 in small) n=2000000 ;; medium) n=250000 ;; large) n=50000 ;; *) n=100000 ;; esac
	awk -v n="$n" -v s="$scale" 'BEGIN { v = int(n * s); if (v < 1000) v = 1000; print v }'
}

attempt() { # alloc band threads ops -> stdout of bench-malloc, its exit status
	if [ "$1" = jemalloc ]; then
		LD_PRELOAD=$je "$bin" --alloc "$1" --band "$2" --threads "$3" --ops "$4" 2>"$tmp/err"
	elif [ "$1" = tieralloc-local ]; then
		TIERALLOC_SHM_NAME=off "$bin" --alloc tieralloc --band "$2" --threads "$3" --ops "$4" \
			2>"$tmp/err"
	else
		"$bin" --alloc "$1" --band "$2" --threads "$3" --ops "$4" 2>"$tmp/err"
	fi
}

run_one() { # alloc band threads -> appends "band threads alloc ns" or "... fail"
	a=$1 b=$2 t=$3
	if [ "$a" = jemalloc ] && [ -z "$je" ]; then
		return 0
	fi
	ops=$(ops_for "$b")
	for try in 1 2; do
		out=$(attempt "$a" "$b" "$t" "$ops")
		rc=$?
		ns=$(printf '%s\n' "$out" | sed -n "s/.* $key=\([0-9.]*\).*/\1/p")
		cpu=$(printf '%s\n' "$out" | sed -n "s/.* oncpu=\([0-9.]*\).*/\1/p")
		if [ $rc -eq 0 ] && [ -n "$ns" ]; then
			echo "$b $t $a $ns ${cpu:-1}" >>"$results"
			return 0
		fi
		echo "run-bench.sh: $a $b threads=$t failed (exit $rc, try $try): $(cat "$tmp/err")" >&2
		sleep 1
	done
	echo "$b $t $a fail" >>"$results"
}

start=$(date +%s)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "tieralloc allocator benchmark: ns per free+malloc pair per thread, median of $reps runs"
echo "(each run: $stat of 20 timed segments, wall time from the first thread's start to the"
echo "last one's end)"
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: nproc=$(nproc), cpu=\"$cpu\", kernel=$(uname -r), load at start: $load"
if [ -n "${MAKELEVEL:-}" ]; then
	echo "command: make bench  (sh bench/run-bench.sh $args; BENCH_REPS=$reps)"
else
	echo "command: $0 $args  (BENCH_REPS=$reps)"
fi
versions=$("$bin" --info | sed 's/^malloc=[^ ]* //')
if [ -n "$je" ]; then
	jv=$(LD_PRELOAD=$je "$bin" --info | sed -n 's/.* jemalloc=\([^ ]*\) .*/\1/p')
	versions=$(printf '%s\n' "$versions" | sed "s|jemalloc=[^ ]*|jemalloc=$jv ($je)|")
fi
echo "versions: $versions"
echo "workload: ring of 256 live slots per thread, random slot replaced each step (free, malloc,"
echo "          write first byte); sizes uniform: small 16-512 B, medium 1-64 KiB, large 1 MiB;"
echo "          steps per thread: small $(ops_for small), medium $(ops_for medium)," \
	"large $(ops_for large), after a warm-up"
echo

r=0
while [ $r -lt "$reps" ]; do
	# Rotate the allocator order by one each repetition.
	set -- $allocs
	i=0
	while [ $i -lt $((r % $#)) ]; do
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	order="$*"
	for b in $bands; do
		for t in $threads_list; do
			for a in $order; do
				run_one "$a" "$b" "$t"
			done
		done
	done
	r=$((r + 1))
done

# Medians and spreads per cell, then the table.
awk -v bands="$bands" -v threads="$threads_list" -v allocs="$allocs" '
function median(list,    n, v, i, j, tmp) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++) {
		tmp = v[i] + 0
		for (j = i - 1; j >= 1 && v[j] + 0 > tmp; j--)
			v[j + 1] = v[j]
		v[j + 1] = tmp
	}
	if (n == 0) return ""
	return (n % 2) ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
}
function spread(list,    n, v, i, lo, hi, m) {
	n = split(list, v, " ")
	if (n < 2) return ""
	lo = hi = v[1] + 0
	for (i = 2; i <= n; i++) { if (v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 }
	m = median(list)
	return m > 0 ? 100 * (hi - lo) / m : ""
}
function fmt(x) { return x == "" ? "n/a" : (x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x)) }
function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "n/a" : sprintf("%.2f", a / b) }
{
	key = $1 " " $2 " " $3
	if ($4 == "fail") failed[key] = 1
	else { vals[key] = vals[key] " " $4; oncpu[$2] = oncpu[$2] " " $5 }
}
END {
	na = split(allocs, A, " "); nb = split(bands, B, " "); nt = split(threads, T, " ")
	hdr = sprintf("%-7s %-8s %9s %9s %9s %16s %10s %10s %19s %17s %12s", "band", "threads",
		"jemalloc", "glibc", "memkind", "memkind(detect)", "tieralloc", "ta(local)",
		"tieralloc/jemalloc", "memkind/jemalloc", "quota cost")
	print hdr
	for (i = 1; i <= nb; i++) for (j = 1; j <= nt; j++) {
		for (k = 1; k <= na; k++) {
			key = B[i] " " T[j] " " A[k]
			m[A[k]] = (key in failed) ? "" : median(vals[key])
			cell[A[k]] = (key in failed) ? "fail" : fmt(m[A[k]])
		}
		printf("%-7s %-8s %9s %9s %9s %16s %10s %10s %19s %17s %12s\n", B[i], T[j],
			cell["jemalloc"], cell["glibc"], cell["memkind"], cell["memkind-detect"],
			cell["tieralloc"], cell["tieralloc-local"],
			ratio(m["tieralloc"], m["jemalloc"]), ratio(m["memkind"], m["jemalloc"]),
			ratio(m["tieralloc"], m["tieralloc-local"]))
	}
	print ""
	print "spread of the runs, (max - min) / median, in percent:"
	printf("%-7s %-8s %9s %9s %9s %16s %10s\n", "band", "threads", "jemalloc", "glibc",
		"memkind", "memkind(detect)", "tieralloc")
	for (i = 1; i <= nb; i++) for (j = 1; j <= nt; j++) {
		for (k = 1; k <= na; k++) {
			s = spread(vals[B[i] " " T[j] " " A[k]])
			sp[A[k]] = s == "" ? "n/a" : sprintf("%.0f", s)
		}
		printf("%-7s %-8s %9s %9s %9s %16s %10s\n", B[i], T[j], sp["jemalloc"], sp["glibc"],
			sp["memkind"], sp["memkind-detect"], sp["tieralloc"])
	}
	line = ""
	for (j = 1; j <= nt; j++)
		line = line sprintf("%s%s thread(s) %.2f", j > 1 ? ", " : "", T[j],
			median(oncpu[T[j]]))
	print ""
	print "share of the timed time the threads actually ran (median over runs; 1.00 = nothing else"
	print "wanted these CPUs; well below 1 means the numbers measure time-sharing too): " line
}' "$results"

echo
echo "elapsed: $(($(date +%s) - start)) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if grep -q ' fail$' "$results"; then
	echo "run-bench.sh: some runs failed (see above)" >&2
	exit 1
fi
exit 0
