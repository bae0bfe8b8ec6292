# SPDX-License-Identifier: MIT
# Seed 004's scenario in the guest (policy 2, tierallocd --protect), shared by
# tests/guest/protect.sh and bench/run-protect.sh; sourced after lib.sh, with B set.
# Under T (memory.max 160M, memory.low 64M, swap off): the victim A re-reads a 32 MiB file every
# 500 ms, the filler B reads a 256 MiB file over and over (a renewable flow of cold page cache
# that keeps T's reclaim busy), and C is a one-shot anonymous burst, unreclaimable without swap,
# that makes T reclaim from A and B. The files live on ext2 (4 KiB blocks, zram's sector size)
# on a zram disk: page cache that reclaim can drop (the initramfs' files cannot be), stored
# compressed outside the guest's cgroups. Stolen from A: the pgsteal of A's memory.stat, in pages, as the seed counts it.
PW=$B/bench/protect-work
PP=$B/bench/protect-poll
AGENT=$B/agent/tierallocd
FS=/mnt/protect
T=/sys/fs/cgroup/p004

# scen_setup: the filesystem and the two files; swap off (the seed's condition); MGLRU on, as
# 6.12 has it by default. (Debian's 6.1 has it built but off: with the classic LRU the victim's
# re-read pages stay on the active list, the filler's are reclaimed first, and the burst stole
# nothing from the victim without the agent, so there was nothing to compare.)
scen_setup() {
	swapoff -a 2>/dev/null
	if [ -w /sys/kernel/mm/lru_gen/enabled ] &&
		[ "$(cat /sys/kernel/mm/lru_gen/enabled)" = 0x0000 ]; then
		echo y >/sys/kernel/mm/lru_gen/enabled && echo "   MGLRU turned on"
	fi
	zram_fs $FS 400 || return 1
	[ -f $FS/victim ] || "$PW" write $FS/victim 32 || return 1
	[ -f $FS/filler ] || "$PW" write $FS/filler 256 || return 1
}

# scen_tree: a fresh T with children a, b, c; caches dropped.
scen_tree() {
	for c in a b c; do [ -d $T/$c ] && rmdir $T/$c; done
	[ -d $T ] && rmdir $T
	sync
	echo 3 >/proc/sys/vm/drop_caches
	mkdir $T && echo +memory >$T/cgroup.subtree_control && echo 160M >$T/memory.max &&
		echo 64M >$T/memory.low && mkdir $T/a $T/b $T/c
}

# in_cg CGROUP OUT CMD...: CMD in CGROUP, its output in OUT, its pid in $!.
in_cg() {
	_cg=$1
	_out=$2
	shift 2
	(echo 0 >"$_cg/cgroup.procs" && exec "$@") >"$_out" 2>&1 &
}

# scen_start DIR: the victim (pid $victim) and the filler (pid $filler) running, their output in
# DIR; 1 if the victim never read its file once.
scen_start() {
	in_cg $T/a "$1/victim.out" "$PW" read $FS/victim 500
	victim=$!
	until_true grep -q '^ready' "$1/victim.out" || return 1
	in_cg $T/b "$1/filler.out" "$PW" stream $FS/filler
	filler=$!
}

# scen_stop DIR: victim and filler stopped; the victim's "passes=N bad=N" in $victim_said.
scen_stop() {
	kill -TERM "$victim" "$filler" 2>/dev/null
	wait "$victim" 2>/dev/null
	wait "$filler" 2>/dev/null
	victim_said=$(tail -1 "$1/victim.out" 2>/dev/null)
}

stolen() { sed -n 's/^pgsteal \([0-9]*\)$/\1/p' $T/a/memory.stat; }
low_of() { cat $T/a/memory.low; }
# cpu_ticks PID...: their utime + stime, in clock ticks (1/100 s).
cpu_ticks() {
	_s=0
	for _p in "$@"; do
		_t=$(awk '{print $14 + $15}' /proc/"$_p"/stat 2>/dev/null)
		_s=$((_s + ${_t:-0}))
	done
	echo $_s
}
