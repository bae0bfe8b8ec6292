# SPDX-License-Identifier: MIT
# Helpers of the guest test scripts (quota.sh, enforce.sh), sourced by busybox sh. They use
# $failed, $M and, for peek_tier, $PEEK from the sourcing script.

pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1: $2"
	failed=1
}
mib() { echo "$(($1 / M))M"; }

# cg_new NAME MAX: a fresh cgroup with that memory.max.
cg_new() {
	cg=/sys/fs/cgroup/$1
	[ -d $cg ] && rmdir $cg
	mkdir $cg && echo "$2" >$cg/memory.max
}

# kv LINE KEY: the value of KEY in a "key=value ..." line.
kv() { echo "$1" | sed -n "s/^\(.* \)\{0,1\}$2=\([^ ]*\).*/\2/p"; }

# seg_of CGROUP: the name of the cgroup's segment in /dev/shm.
seg_of() {
	for f in /dev/shm/tieralloc-v1-cg"$(stat -c %i "$1")"-t*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
		return
	done
}

# anon CGROUP: "N0 N1", the cgroup's anon bytes on nodes 0 and 1.
anon() { sed -n 's/^anon N0=\([0-9]*\) N1=\([0-9]*\).*/\1 \2/p' "$1/memory.numa_stat"; }

# peek_tier SEG TIER KEY
peek_tier() { kv "$("$PEEK" "$1" | grep "^tier=$2 ")" "$3"; }

# within A B TOL: |A - B| <= TOL
within() { [ $(($1 > $2 ? $1 - $2 : $2 - $1)) -le "$3" ]; }
