#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc against itself: bench-malloc's tieralloc cells of two builds (say, main and a change),
# interleaved in one run so that the host's load hits both alike, and the ratio of their medians;
# beside them, in the same run, the peers (glibc, and jemalloc, mimalloc, tcmalloc preloaded).
# What a change to the allocator's paths costs, and where it stands against the peers.
#
# Usage: run-compare.sh BASE_BUILDDIR NEW_BUILDDIR [REPS]   (REPS runs per cell, default 15)
# Environment: COMPARE_CELLS (default "small:1 small:2 medium:1 medium:2", BAND:THREADS);
# COMPARE_PEERS (default "glibc jemalloc mimalloc tcmalloc"; "" for none), run with the base
# build's bench-malloc; BENCH_JEMALLOC, BENCH_MIMALLOC, BENCH_TCMALLOC as for run-bench.sh.
# Each run prints bench-malloc's fastest segment (ns per free+malloc pair per thread); the order
# of the runs within a repetition rotates. Prints per cell: base and new medians, new / base,
# each peer's median and new / peer. A peer that is not installed reads "missing".
set -eu
if [ $# -lt 2 ] || [ "${1:-}" = --help ]; then
	sed -n '4,15s/^# \{0,1\}//p' "$0"
	exit 2
fi
base=$1/bench/bench-malloc
new=$2/bench/bench-malloc
reps=${3:-15}
cells=${COMPARE_CELLS:-small:1 small:2 medium:1 medium:2}
peers=${COMPARE_PEERS-glibc jemalloc mimalloc tcmalloc}
for b in "$base" "$new"; do
	[ -x "$b" ] || {
		echo "run-compare: no $b (make bench/bench-malloc in that build)" >&2
		exit 2
	}
done
for v in $(env | sed -n 's/^\(TIERALLOC_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

find_lib() { # SONAME EXPLICIT_PATH
	local l=$2 f
	if [ -z "$l" ]; then
		for f in /usr/lib/*/"$1" /lib/*/"$1" /usr/lib/"$1" /usr/local/lib/"$1"; do
			[ -e "$f" ] && l=$f && break
		done
	fi
	[ -n "$l" ] && [ -e "$l" ] && echo "$l" || true
}
declare -A lib=([glibc]=none)
lib[jemalloc]=$(find_lib libjemalloc.so.2 "${BENCH_JEMALLOC:-}")
lib[mimalloc]=$(find_lib libmimalloc.so.2 "${BENCH_MIMALLOC:-}")
lib[tcmalloc]=$(find_lib libtcmalloc_minimal.so.4 "${BENCH_TCMALLOC:-}")
runners="base new"
missing=
for p in $peers; do
	case $p in glibc | jemalloc | mimalloc | tcmalloc) ;; *)
		echo "run-compare: unknown peer $p" >&2
		exit 2
		;;
	esac
	if [ -z "${lib[$p]}" ]; then
		echo "run-compare: $p is not installed (tests/install-deps.sh installs it): missing" >&2
		missing="$missing $p"
	else
		runners="$runners $p"
	fi
done

one() { # WHO BAND THREADS: the fastest segment's ns
	local bin=$base pre=
	case $1 in
	new) bin=$new ;;
	base | glibc) ;;
	*) pre=${lib[$1]} ;;
	esac
	local alloc=tieralloc
	case $1 in base | new) ;; *) alloc=$1 ;; esac
	LD_PRELOAD=$pre "$bin" --alloc "$alloc" --band "$2" --threads "$3" |
		sed -n 's/.* ns=\([0-9.]*\) .*/\1/p'
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "run-compare: $reps runs per cell, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run-compare: base $1, new $2; peers:${peers:+ $peers}${missing:+ (missing:$missing)}"
read -r -a order <<<"$runners"
for r in $(seq "$reps"); do
	for cell in $cells; do
		band=${cell%:*} threads=${cell#*:}
		# Rotate the order by one each repetition, so that no runner always goes first.
		n=${#order[@]}
		for ((i = 0; i < n; i++)); do
			w=${order[$(((i + r) % n))]}
			echo "$w $band $threads $(one "$w" "$band" "$threads")" >>"$raw"
		done
	done
done
printf '%-8s %-8s %10s %10s %8s' band threads "base ns" "new ns" new/base
for p in $peers; do printf ' %9s %8s' "$p" "new/${p:0:2}"; done
echo
for cell in $cells; do
	band=${cell%:*} threads=${cell#*:}
	med() { awk -v w="$1" -v b="$band" -v t="$threads" '$1 == w && $2 == b && $3 == t && $4 != "" {print $4}' "$raw" | median; }
	b=$(med base)
	n=$(med new)
	printf '%-8s %-8s %10.2f %10.2f %8.3f' "$band" "$threads" "$b" "$n" "$(echo "$n / $b" | bc -l)"
	for p in $peers; do
		case " $missing " in *" $p "*)
			printf ' %9s %8s' missing n/a
			continue
			;;
		esac
		v=$(med "$p")
		printf ' %9.2f %8.3f' "$v" "$(echo "$n / $v" | bc -l)"
	done
	echo
done
echo "run-compare: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
