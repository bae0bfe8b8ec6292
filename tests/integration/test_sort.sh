#!/bin/bash
# SPDX-License-Identifier: MIT
#
# GNU sort and awk under the preload: sort one million lines with four threads (sort
# --parallel), by several keys, numerically and uniquely, with a small buffer that forces
# temporary files and merges; then awk building associative arrays of 200,000 keys.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require sort coreutils
ta_require awk mawk

work()
{
	awk 'BEGIN {
		s = 1
		for (i = 0; i < 1000000; i++) {
			s = (s * 1103515245 + 12345) % 2147483648
			printf("%d %s%d %d\n", s % 100000, substr("abcdefghijklmnop", 1 + s % 16, 3),
			       i % 977, i)
		}
	}' >in.txt
	sort --parallel=4 -S 64M in.txt | sha1sum
	sort --parallel=4 -k2,2 -k1,1n -S 8M -T . in.txt | sha1sum
	sort -n -u -k1,1 in.txt | wc -l
	sort --parallel=2 -r in.txt | sed -n 1,3p
	awk '{ cnt[$2]++; sum[$1 % 200000] += $3 } END {
		n = 0; for (k in cnt) n++
		m = 0; t = 0; for (k in sum) { m++; t += sum[k] }
		print n, m, t
	}' in.txt
	awk '{ a[$4] = $2 } END { for (i = 0; i < 1000000; i += 99991) print i, a[i] }' in.txt
}
compare_runs sort work
