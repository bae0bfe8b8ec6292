#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bash itself under the preload: 200 iterations of command substitution, indexed and associative
# arrays, string operations, subshells, here-strings and pipelines through sort, uniq and awk.
# bash forks for every substitution and subshell, so this is also a fork storm in a preloaded
# process, and every external command in it starts under the preload.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

cat >"$TA_WORK/loop.sh" <<'EOF'
set -u
declare -A seen
list=()
acc=""
# The loop writes to a file, not a pipe: a piped loop would run in a subshell and lose seen[].
for ((i = 0; i < 200; i++)); do
	tail=abcdefghij
	word=$(printf 'w%03d-%s' $((i * 37 % 101)) "$(echo "${tail:i % 10}")")
	list+=("$word")
	seen[$word]=$((${seen[$word]:-0} + 1))
	upper=${word^^}
	acc+="${upper:0:3}${word//[aeiou]/_}|"
	(( ${#acc} > 4000 )) && acc=${acc:2000}
	n=$( (for ((j = 0; j < i % 7 + 1; j++)); do echo "$word$((j % 3))"; done) | wc -l)
	if ((i % 5 == 0)); then
		# External programs (each one preloaded) every fifth round: exec is what costs.
		n=$( (for ((j = 0; j < i % 7 + 1; j++)); do echo "$word$((j % 3))"; done) |
			sort -r | uniq | wc -l)
	fi
	sub=$(
		x=$i
		x=$((x * x % 97))
		echo "$x"
	)
	if ((i % 10 == 0)); then
		read -r a b <<<"$(echo "$word $n" | awk '{ print length($1), $2 * 2 }')"
	else
		read -r a b <<<"$(echo "${#word} $((n * 2))")"
	fi
	printf '%d %s %s %s %s %s\n' "$i" "$word" "$n" "$sub" "$a" "$b"
done >lines.txt
awk '{ s += $3 + $4 + $5 + $6 } END { print NR, s }' lines.txt
tail -n 2 lines.txt
printf '%s\n' "${list[@]}" | sort | uniq -c | sort -k1,1nr -k2 | head -n 5
echo "keys ${#seen[@]}"
for k in $(printf '%s\n' "${!seen[@]}" | sort | head -n 3); do
	echo "$k ${seen[$k]}"
done
big=$(seq 1 20000 | awk '{ a[$1 % 1000] += $1 } END { for (k in a) s += a[k]; print s }')
echo "big $big"
str=$(printf '%0.sx' $(seq 1 5000))
echo "str ${#str} ${str:4990}"
EOF

work()
{
	bash "$TA_WORK/loop.sh"
}
compare_runs bash work
