#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tar and gzip under the preload: archive a generated tree of about 1,500 files (reproducibly:
# sorted names, fixed times and owners), compress, list, extract and compare with the original;
# then find | xargs over the tree. The archive's checksum must match the one made without the
# preload.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require tar tar
ta_require gzip gzip
ta_require find findutils
ta_require xargs findutils

work()
{
	mkdir src
	awk 'BEGIN {
		for (d = 0; d < 30; d++) {
			dir = sprintf("src/d%02d/e%d", d, d % 4)
			system("mkdir -p " dir)
			for (f = 0; f < 50; f++) {
				name = sprintf("%s/f%03d.dat", dir, f)
				for (i = 0; i < (d * 50 + f) % 300; i++)
					printf("%d %d %s\n", d, f, substr("the quick brown fox jumps", 1 + i % 20)) > name
				close(name)
			}
		}
	}'
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf src.tar src
	gzip -9 -n -k src.tar
	sha1sum src.tar src.tar.gz
	tar -tzvf src.tar.gz | tail -n 3
	tar -tzf src.tar.gz | wc -l
	mkdir out
	tar -xzf src.tar.gz -C out
	diff -r src out/src
	find src -type f -name '*.dat' -print0 | xargs -0 -n 40 cat | sha1sum
	find src -type f -size +8k | sort | sed -n 1,5p
	gzip -dc src.tar.gz | cmp - src.tar
}
compare_runs tar work
