#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Driver of `make bench`: runs bench-malloc once per (repetition, band, threads, allocator), each
# in a fresh process, and prints the median ns per free+malloc pair of every cell with the
# ratios of tieralloc to jemalloc, mimalloc and tcmalloc (and memkind/jemalloc), all measured in
# this run. Repetitions are
# interleaved (every allocator once, then again) and the allocator order rotates, so that a
# neighbour's burst on this shared machine hits all columns alike instead of one. Each run
# times its steps in 20 segments (a few milliseconds each) and reports the fastest (--stat best,
# the default: the segment least disturbed by other processes), or the median or mean segment.
#
# Allocators: glibc and the peers run the same malloc/free calls, the peers through LD_PRELOAD
# (jemalloc: libjemalloc.so.2, mimalloc: libmimalloc.so.2, tcmalloc: gperftools'
# libtcmalloc_minimal.so.4; bench-malloc refuses to run if that is not what serves malloc);
# tieralloc and memkind run without any preload, in the default configuration (TIERALLOC_*
# variables are removed from the environment). A peer that is not installed reads "missing".
#
# Usage: run-bench.sh [--bin PATH] [--reps N] [--ops-scale F] [--stat best|median|mean]
#                     [--bands "small mixed medium large"] [--threads "1 2"]
# Environment: BENCH_REPS (default 5); BENCH_JEMALLOC, BENCH_MIMALLOC, BENCH_TCMALLOC (paths of
# the peers' libraries, found by ldconfig otherwise); BENCH_ALLOCS (the columns to run, default
# all: jemalloc mimalloc tcmalloc glibc memkind memkind-detect tieralloc tieralloc-local).
# Exit: 0 when every run succeeded, 1 otherwise (failed cells print as "fail"). A failed run
# is retried once: on this shared machine a concurrent rebuild may briefly remove the library.

set -u

args="$*"
bin=./bench/bench-malloc
reps=${BENCH_REPS:-5}
scale=1
stat=best
bands="small mixed medium large"
threads_list="1 2"
# tieralloc-local: the same allocator with its per-cgroup quota segment turned off
# (TIERALLOC_SHM_NAME=off): the difference is what charging the shared quota costs.
allocs=${BENCH_ALLOCS:-jemalloc mimalloc tcmalloc glibc memkind memkind-detect tieralloc tieralloc-local}

while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--ops-scale) scale=$2; shift 2 ;;
	--stat) stat=$2; shift 2 ;;
	--bands) bands=$2; shift 2 ;;
	--threads) threads_list=$2; shift 2 ;;
	-h|--help) sed -n 's/^# \{0,1\}//; 4,27p' "$0"; exit 0 ;;
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

# A preloaded peer's library: an explicit path, else the dynamic linker's cache, else the usual
# places; empty when not installed.
find_lib() { # SONAME EXPLICIT_PATH
	l=$2
	if [ -z "$l" ]; then
		l=$( (/sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null) |
			awk -v so="$1" '$1 == so && /x86-64/ {print $NF; exit}')
	fi
	if [ -z "$l" ]; then
		for f in /usr/lib/*/"$1" /lib/*/"$1" /usr/lib/"$1" /usr/local/lib/"$1"; do
			[ -e "$f" ] && l=$f && break
		done
	fi
	[ -n "$l" ] && [ -e "$l" ] && echo "$l"
}
je=$(find_lib libjemalloc.so.2 "${BENCH_JEMALLOC:-}")
mi=$(find_lib libmimalloc.so.2 "${BENCH_MIMALLOC:-}")
tc=$(find_lib libtcmalloc_minimal.so.4 "${BENCH_TCMALLOC:-}")
missing=
lib_of() { # peer -> its library, empty for the allocators that need no preload
	case $1 in jemalloc) echo "$je" ;; mimalloc) echo "$mi" ;; tcmalloc) echo "$tc" ;; esac
}
for p in jemalloc mimalloc tcmalloc; do
	case " $allocs " in *" $p "*) ;; *) continue ;; esac
	if [ -z "$(lib_of $p)" ]; then
		case $p in
		jemalloc) pkg="libjemalloc2, or set BENCH_JEMALLOC" ;;
		mimalloc) pkg="libmimalloc2.0, or set BENCH_MIMALLOC" ;;
		tcmalloc) pkg="libtcmalloc-minimal4, or set BENCH_TCMALLOC" ;;
		esac
		echo "run-bench.sh: $p is not installed ($pkg; tests/install-deps.sh installs it): its column reads \"missing\"" >&2
		missing="$missing $p"
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-bench.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
results=$tmp/results
: >"$results"

ops_for() { # steps of a band (bench-malloc's defaults), times --ops-scale
	case $1 in small) n=2000000 ;; mixed) n=1000000 ;; medium) n=250000 ;; large) n=50000 ;; *) n=100000 ;; esac
	awk -v n="$n" -v s="$scale" 'BEGIN { v = int(n * s); if (v < 1000) v = 1000; print v }'
}

attempt() { # alloc band threads ops -> stdout of bench-malloc, its exit status
	case $1 in
	jemalloc | mimalloc | tcmalloc)
		LD_PRELOAD=$(lib_of "$1") "$bin" --alloc "$1" --band "$2" --threads "$3" --ops "$4" \
			2>"$tmp/err"
		return
		;;
	esac
	if [ "$1" = tieralloc-local ]; then
		TIERALLOC_SHM_NAME=off "$bin" --alloc tieralloc --band "$2" --threads "$3" --ops "$4" \
			2>"$tmp/err"
	else
		"$bin" --alloc "$1" --band "$2" --threads "$3" --ops "$4" 2>"$tmp/err"
	fi
}

run_one() { # alloc band threads -> appends "band threads alloc ns" or "... fail"
	a=$1 b=$2 t=$3
	case " $missing " in *" $a "*) return 0 ;; esac
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
for p in jemalloc mimalloc tcmalloc; do
	l=$(lib_of $p)
	if [ -n "$l" ]; then
		v=$(LD_PRELOAD=$l "$bin" --info | sed -n "s/.* $p=\([^ ]*\) .*/\1/p")
		versions=$(printf '%s\n' "$versions" | sed "s|$p=[^ ]*|$p=$v ($l)|")
	else
		versions=$(printf '%s\n' "$versions" | sed "s|$p=[^ ]*|$p=missing|")
	fi
done
echo "versions: $versions"
[ -z "$missing" ] || echo "missing peers (not installed, not measured):$missing"
echo "workload: ring of 256 live slots per thread, random slot replaced each step (free, malloc,"
echo "          write first byte); sizes uniform: small 16-512 B, mixed 16 B-16 KiB, medium 1-64 KiB,"
echo "          large 1 MiB; steps per thread: small $(ops_for small), mixed $(ops_for mixed)," \
	"medium $(ops_for medium), large $(ops_for large), after a warm-up"
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
awk -v bands="$bands" -v threads="$threads_list" -v allocs="$allocs" -v missing="$missing" '
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
	na = split("jemalloc mimalloc tcmalloc glibc memkind memkind-detect tieralloc tieralloc-local", A, " ")
	nb = split(bands, B, " "); nt = split(threads, T, " ")
	for (k = 1; k <= na; k++) {
		run[A[k]] = index(" " allocs " ", " " A[k] " ") > 0
		miss[A[k]] = index(" " missing " ", " " A[k] " ") > 0
	}
	fmt_hdr = "%-7s %-7s %8s %8s %8s %7s %7s %15s %9s %9s %7s %7s %7s %7s %7s\n"
	printf(fmt_hdr, "band", "threads", "jemalloc", "mimalloc", "tcmalloc", "glibc", "memkind",
		"memkind(detect)", "tieralloc", "ta(local)", "ta/je", "ta/mi", "ta/tc", "mk/je",
		"quota")
	for (i = 1; i <= nb; i++) for (j = 1; j <= nt; j++) {
		for (k = 1; k <= na; k++) {
			key = B[i] " " T[j] " " A[k]
			m[A[k]] = (key in failed || !run[A[k]]) ? "" : median(vals[key])
			cell[A[k]] = miss[A[k]] ? "missing" : !run[A[k]] ? "-" : (key in failed) ? "fail" : fmt(m[A[k]])
		}
		printf(fmt_hdr, B[i], T[j], cell["jemalloc"], cell["mimalloc"], cell["tcmalloc"],
			cell["glibc"], cell["memkind"], cell["memkind-detect"], cell["tieralloc"],
			cell["tieralloc-local"], ratio(m["tieralloc"], m["jemalloc"]),
			ratio(m["tieralloc"], m["mimalloc"]), ratio(m["tieralloc"], m["tcmalloc"]),
			ratio(m["memkind"], m["jemalloc"]), ratio(m["tieralloc"], m["tieralloc-local"]))
	}
	print "(ns per pair per thread, median of the runs; ta/je, ta/mi, ta/tc: tieralloc over jemalloc,"
	print "mimalloc, tcmalloc; mk/je: memkind over jemalloc; quota: tieralloc over ta(local))"
	print ""
	print "spread of the runs, (max - min) / median, in percent:"
	fmt_sp = "%-7s %-7s %8s %8s %8s %7s %7s %15s %9s %9s\n"
	printf(fmt_sp, "band", "threads", "jemalloc", "mimalloc", "tcmalloc", "glibc", "memkind",
		"memkind(detect)", "tieralloc", "ta(local)")
	for (i = 1; i <= nb; i++) for (j = 1; j <= nt; j++) {
		for (k = 1; k <= na; k++) {
			s = spread(vals[B[i] " " T[j] " " A[k]])
			sp[A[k]] = s == "" ? "n/a" : sprintf("%.0f", s)
		}
		printf(fmt_sp, B[i], T[j], sp["jemalloc"], sp["mimalloc"], sp["tcmalloc"], sp["glibc"],
			sp["memkind"], sp["memkind-detect"], sp["tieralloc"], sp["tieralloc-local"])
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
