#!/bin/sh
# SPDX-License-Identifier: MIT
# Host side of the guest suite's recordings (make check-guest): LOG is what the guest printed;
# each recording between "TIERALLOC-CSV-BEGIN NAME" and "TIERALLOC-CSV-END NAME" (record_emit,
# tests/guest/lib.sh) is written to OUTDIR/NAMESUFFIX.csv and drawn by tieralloc-plot into
# OUTDIR/NAMESUFFIX.png (SUFFIX: the guest kernel's, "-6.1"). Exit 1 when a recording cannot be
# drawn; without gnuplot, the CSV files are kept and that is said.
# Usage: plots.sh LOG OUTDIR SUFFIX TIERALLOC-PLOT
log=$1
out=$2
suffix=$3
plot=$4
names=$(sed -n 's/^TIERALLOC-CSV-BEGIN \([A-Za-z0-9_-]*\)$/\1/p' "$log")
if [ -z "$names" ]; then
	echo "guest recordings: none in $log"
	exit 0
fi
status=0
for name in $names; do
	sed -n "/^TIERALLOC-CSV-BEGIN $name\$/,/^TIERALLOC-CSV-END $name\$/p" "$log" |
		sed '1d;$d' >"$out/$name$suffix.csv"
	if ! command -v gnuplot >/dev/null 2>&1; then
		echo "guest recording: $out/$name$suffix.csv (not drawn: gnuplot is not installed)"
	elif "$plot" "$out/$name$suffix.csv" "$out/$name$suffix.png"; then
		echo "guest recording: $out/$name$suffix.csv, drawn in $out/$name$suffix.png"
	else
		echo "guest recording: $out/$name$suffix.csv could not be drawn"
		status=1
	fi
done
exit $status
