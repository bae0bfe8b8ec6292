#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest half of tests/vm/selftest.sh: runs inside the guest (busybox sh, as
# root) and prints one "PASS name" or "FAIL name: why" line per check.
#
#   selftest-guest.sh CPUS EXIT NODE_MIB... [-- ARG...]
#
# CPUS is the number of vCPUs asked for, EXIT the status to exit with after
# the checks (the host checks that it arrives), NODE_MIB the memory asked for
# each NUMA node. Arguments after "--" are compared against the fixed list
# the host passes, to check that arguments survive the trip.

cpus=$1
exit_with=$2
shift 2
nodes=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	nodes="$nodes $1"
	shift
done
[ "${1:-}" = -- ] && shift

pass()
{
	echo "PASS $1"
}

fail()
{
	name=$1
	shift
	echo "FAIL $name: $*"
}

# check NAME CMD...: PASS if CMD succeeds.
check()
{
	name=$1
	shift
	if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name" "'$*' failed"; fi
}

mounted()
{
	# mounted DIR TYPE
	grep -q "^[^ ]* $1 $2 " /proc/mounts
}

# --- NUMA topology ---
n=0
for want in $nodes; do
	d=/sys/devices/system/node/node$n
	if [ ! -d "$d" ]; then
		fail "node${n}_exists" "no $d"
		n=$((n + 1))
		continue
	fi
	pass "node${n}_exists"
	cpulist=$(cat "$d/cpulist")
	if [ "$n" = 0 ]; then
		want_cpus=0-$((cpus - 1))
		[ "$cpus" = 1 ] && want_cpus=0
		if [ "$cpulist" = "$want_cpus" ]; then
			pass node0_has_all_cpus
		else
			fail node0_has_all_cpus "cpulist '$cpulist', want '$want_cpus'"
		fi
	elif [ -z "$cpulist" ]; then
		pass "node${n}_cpuless"
	else
		fail "node${n}_cpuless" "cpulist '$cpulist'"
	fi
	# MemTotal excludes what the kernel reserves (its image, the struct
	# page array, ...): expect 85-100% of what was asked for.
	kb=$(awk '/MemTotal/ { print $4 }' "$d/meminfo")
	want_kb=$((want * 1024))
	if [ "$kb" -le "$want_kb" ] && [ "$kb" -ge $((want_kb * 85 / 100)) ]; then
		pass "node${n}_size"
	else
		fail "node${n}_size" "MemTotal $kb kB, asked for $want_kb kB"
	fi
	n=$((n + 1))
done
if [ -d /sys/devices/system/node/node$n ]; then
	fail node_count "node$n exists, asked for $n nodes"
else
	pass node_count
fi
check numa_balancing_knob test -f /proc/sys/kernel/numa_balancing

# --- cgroup v2 memory controller ---
check cgroup2_mounted mounted /sys/fs/cgroup cgroup2
check memory_controller grep -qw memory /sys/fs/cgroup/cgroup.subtree_control
cg=/sys/fs/cgroup/selftest
if mkdir "$cg" 2>/dev/null; then
	check cgroup_memory_reclaim test -f "$cg/memory.reclaim"
	check cgroup_memory_numa_stat test -f "$cg/memory.numa_stat"
	# Every node shows up in memory.numa_stat ("anon N0=... N1=...").
	line=$(grep '^anon ' "$cg/memory.numa_stat")
	i=0
	ok=1
	for want in $nodes; do
		case "$line" in *" N$i="*) ;; *) ok=0 ;; esac
		i=$((i + 1))
	done
	if [ "$ok" = 1 ]; then pass numa_stat_all_nodes; else fail numa_stat_all_nodes "'$line'"; fi
	# Charging works: a process in the cgroup that touches 8 MiB of tmpfs.
	sh -c "echo \$\$ >$cg/cgroup.procs; dd if=/dev/zero of=/dev/shm/selftest bs=1M count=8 2>/dev/null"
	cur=$(cat "$cg/memory.current")
	if [ "$cur" -ge $((8 * 1024 * 1024)) ]; then
		pass cgroup_charges_memory
	else
		fail cgroup_charges_memory "memory.current $cur after writing 8 MiB"
	fi
	rm -f /dev/shm/selftest
	rmdir "$cg" 2>/dev/null
else
	fail cgroup_child "cannot mkdir $cg"
fi

# --- BPF, tracing, other mounts ---
check btf_vmlinux test -s /sys/kernel/btf/vmlinux
check bpffs_mounted mounted /sys/fs/bpf bpf
check tracefs_mounted mounted /sys/kernel/tracing tracefs
check tracepoint_mm_migrate_pages test -d /sys/kernel/tracing/events/migrate/mm_migrate_pages
check debugfs_mounted mounted /sys/kernel/debug debugfs
check numa_balancing_debugfs test -f /sys/kernel/debug/sched/numa_balancing/scan_delay_ms
check tmp_tmpfs mounted /tmp tmpfs
check dev_shm_tmpfs mounted /dev/shm tmpfs
check proc_mounted mounted /proc proc
check dev_devtmpfs mounted /dev devtmpfs
check running_as_root test "$(id -u)" = 0

# --- the kernel and its modules ---
# SELFTEST_KERNEL: the --kernel the host asked for; 6.1 and 6.12 name a release.
case ${SELFTEST_KERNEL:-} in
6.1 | 6.12)
	case $(uname -r) in
	"$SELFTEST_KERNEL".*) pass "kernel_is_$SELFTEST_KERNEL" ;;
	*) fail "kernel_is_$SELFTEST_KERNEL" "booted $(uname -r)" ;;
	esac
	;;
esac
if [ -n "${SELFTEST_KERNEL:-}" ]; then
	# The host asked for --module zram: loaded (with its dependencies), device there.
	check module_zram_loaded test -e /sys/block/zram0
fi

# --- what the host passed in ---
if [ $# -gt 0 ]; then
	if [ "$#" = 3 ] && [ "$1" = "a b" ] && [ "$2" = "it's" ] && [ "$3" = '$HOME "*"' ]; then
		pass script_args
	else
		fail script_args "got $# args: [$1] [$2] [$3]"
	fi
fi
if [ -n "${SELFTEST_ENV+x}" ]; then
	if [ "$SELFTEST_ENV" = "x y'z" ]; then pass env_var; else fail env_var "[$SELFTEST_ENV]"; fi
fi
if [ -n "${SELFTEST_DIR:-}" ]; then
	if [ "$(pwd)" = "$SELFTEST_DIR" ]; then pass cwd; else fail cwd "pwd is $(pwd)"; fi
	if [ "$(cat "$SELFTEST_DIR/data.txt" 2>/dev/null)" = "included" ]; then
		pass include_file
	else
		fail include_file "no $SELFTEST_DIR/data.txt"
	fi
	# A dynamically linked host program: runs only if ldd's closure came.
	if out=$("$SELFTEST_DIR/host-ls" -d /proc 2>&1) && [ "$out" = /proc ]; then
		pass include_elf_with_libs
	else
		fail include_elf_with_libs "$out"
	fi
fi

exit "$exit_with"
