#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc against itself: bench-malloc's tieralloc cells of two builds (say, main and a change),
# interleaved in one run so that the host's load hits both alike, and the ratio of their medians.
# What a change to the allocator's paths costs, where run-bench.sh compares with the peers.
#
# Usage: run-compare.sh BASE_BUILDDIR NEW_BUILDDIR [REPS]   (REPS runs per cell, default 15)
# Environment: COMPARE_CELLS (default "small:1 small:2 medium:1 medium:2", BAND:THREADS).
# Each run prints bench-malloc's fastest segment (ns per free+malloc pair per thread); the two
# builds alternate which goes first. Prints per cell: base and new medians, new / base.
set -eu
if [ $# -lt 2 ] || [ "${1:-}" = --help ]; then
	sed -n '4,11s/^# \{0,1\}//p' "$0"
	exit 2
fi
base=$1/bench/bench-malloc
new=$2/bench/bench-malloc
reps=${3:-15}
cells=${COMPARE_CELLS:-small:1 small:2 medium:1 medium:2}
for b in "$base" "$new"; do
	[ -x "$b" ] || {
		echo "run-compare: no $b (make bench/bench-malloc in that build)" >&2
		exit 2
	}
done
for v in $(env | sed -n 's/^\(TIERALLOC_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

one() { # BIN BAND THREADS: the fastest segment's ns
	"$1" --alloc tieralloc --band "$2" --threads "$3" | sed -n 's/.* ns=\([0-9.]*\) .*/\1/p'
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "run-compare: $reps runs per cell, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$reps"); do
	for cell in $cells; do
		band=${cell%:*} threads=${cell#*:}
		if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
		for w in $order; do
			bin=$base
			[ "$w" = new ] && bin=$new
			echo "$w $band $threads $(one "$bin" "$band" "$threads")" >>"$raw"
		done
	done
done
printf '%-8s %-8s %10s %10s %8s\n' band threads "base ns" "new ns" new/base
for cell in $cells; do
	band=${cell%:*} threads=${cell#*:}
	b=$(awk -v w=base -v b="$band" -v t="$threads" '$1 == w && $2 == b && $3 == t {print $4}' "$raw" | median)
	n=$(awk -v w=new -v b="$band" -v t="$threads" '$1 == w && $2 == b && $3 == t {print $4}' "$raw" | median)
	printf '%-8s %-8s %10.2f %10.2f %8.3f\n' "$band" "$threads" "$b" "$n" "$(echo "$n / $b" | bc -l)"
done
echo "run-compare: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
