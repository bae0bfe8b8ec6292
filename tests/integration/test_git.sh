#!/bin/bash
# SPDX-License-Identifier: MIT
#
# git under the preload: init, add, commit (three commits over a few hundred files), log,
# cat-file, a branch and merge, then gc (pack-objects deltifies with several threads) and fsck.
# Author and committer dates are fixed, so commit and tree ids are the same in both runs and
# are compared too.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require git git

work()
{
	export HOME=$PWD GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
	export GIT_AUTHOR_NAME="Tier Alloc" GIT_AUTHOR_EMAIL=ta@example.org
	export GIT_COMMITTER_NAME="Tier Alloc" GIT_COMMITTER_EMAIL=ta@example.org
	export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
	git init -q -b main repo
	cd repo
	mkdir -p dir{1..12}/sub
	# 600 files from one awk process rather than 600 processes.
	awk 'BEGIN {
		for (d = 1; d <= 12; d++)
			for (f = 1; f <= 25; f++) {
				name = "dir" d "/file" f ".txt"
				for (v = d; v <= 4000; v += f)
					print v > name
				close(name)
				name = "dir" d "/sub/note" f
				print "line " f " of " d > name
				close(name)
			}
	}'
	git add .
	git -c user.name="Tier Alloc" -c user.email=ta@example.org commit -q -m "first: import"
	sed -i 's/^1/X/' dir*/file3.txt
	rm -r dir7
	git add -A
	git commit -q -m "second: edit and remove"
	git checkout -q -b side
	echo "side change" >>dir1/file1.txt
	git commit -q -am "third: on a branch"
	git checkout -q main
	echo "main change" >>dir2/file2.txt
	git commit -q -am "fourth: on main"
	git merge -q --no-edit side
	git log --format=%s
	git log --format='%H %T %P'
	git cat-file -p 'HEAD^{tree}'
	git cat-file -p 'HEAD~1:dir3' | sed -n 1,20p
	git diff --stat HEAD~2 HEAD
	git gc -q --aggressive
	git fsck --full --no-progress
	git rev-list --all --objects | sort | sha1sum
	git show HEAD~1:dir12/file25.txt | sha1sum
}
compare_runs git work
