#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers of src/ (src/base/base.h says what each holds): every file of src/<layer>/ includes
# only the headers of its layer and of the layers below it; the allocator sees of the quotas only
# quota/charge.h; only the quota layer includes the segment's header (quota/shm.h) and the
# cgroup's (quota/cgroup.h); no core file includes internal.h (the tests' umbrella); the headers
# include one another without a circle; and no folder's local.mk compiles another folder's
# sources (the tests' aside). Fails with one line per breach.
src=${srcdir:-.}/src
[ -d "$src/base" ] || src=$(dirname "$0")/../src
status=0
breach() {
	echo "check-layers: $*"
	status=1
}

# allowed LAYER HEADER: 0 when a file of LAYER may include HEADER ("layer/name.h").
allowed() {
	case "$1:$2" in
	*:base/*) return 0 ;;
	quota:quota/*) return 0 ;;
	alloc:alloc/* | alloc:quota/charge.h) return 0 ;;
	enforce:enforce/* | enforce:alloc/* | enforce:quota/charge.h | enforce:quota/quota.h) return 0 ;;
	api:api/* | api:enforce/* | api:alloc/* | api:quota/charge.h | api:quota/quota.h) return 0 ;;
	esac
	return 1
}

for layer in base quota alloc enforce api; do
	[ -d "$src/$layer" ] || breach "no folder src/$layer"
	for f in "$src/$layer"/*.c "$src/$layer"/*.h; do
		[ -f "$f" ] || continue
		for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			case $h in
			internal.h) breach "${f#"$src"/} includes internal.h" ;;
			tieralloc.h | tieralloc/*) ;; # the installed headers
			*/*) allowed "$layer" "$h" ||
				breach "${f#"$src"/} (layer $layer) includes $h" ;;
			*) breach "${f#"$src"/} includes \"$h\" without its layer's folder" ;;
			esac
		done
	done
done
for f in "$src"/*.c; do
	[ -f "$f" ] && breach "${f#"$src"/} is in no layer's folder"
done

# Include circles among the core's headers: follow every header's includes depth first.
headers=$(cd "$src" && ls */*.h)
visit() { # visit HEADER PATH-SO-FAR
	case " $2 " in *" $1 "*) breach "include circle: $2 $1"; return ;; esac
	for h in $(sed -n 's/^#include "\([a-z]*\/[a-z_]*\.h\)".*/\1/p' "$src/$1"); do
		[ -f "$src/$h" ] && visit "$h" "$2 $1"
	done
}
for h in $headers; do
	visit "$h" ""
done
# No folder compiles another folder's sources (issue 32): what the agent and the tools share is
# the readers' library (common/), and what they need of the core comes in through
# src/libtareader.la. The tests are left out: a unit test builds the agent's files it tests.
top=$(dirname "$src")
for dir in src common agent tools preload bench bpf; do
	[ -f "$top/$dir/local.mk" ] || continue
	for c in $(awk -v d="$dir" '/_SOURCES *\+?=/ { on = 1 }
		on { for (i = 1; i <= NF; i++) if ($i ~ /\.c$/ && index($i, d "/") != 1) print $i
		     if ($NF != "\\") on = 0 }' "$top/$dir/local.mk"); do
		breach "$dir/local.mk compiles $c, another folder's source"
	done
done

[ $status = 0 ] && echo "check-layers: $(echo "$headers" | wc -w) headers, the include rule holds, no folder compiles another's sources"
exit $status
