#!/bin/sh
# SPDX-License-Identifier: MIT
#
# /init of the tieralloc test guest (run by busybox sh as PID 1).
#
# guest-run.sh packs this file into the initramfs as /init. It mounts the
# pseudo file systems the tests rely on, runs the test script once and powers
# the guest off. The guest talks to the host over three 8250 serial ports,
# which are built into Debian's kernel (no modules needed):
#   ttyS0  kernel console (diagnostics only; the host keeps it in a log file)
#   ttyS1  the script's stdout and stderr (the host copies it to its stdout)
#   ttyS2  status channel: "TIERALLOC-GUEST-START" once the guest is set up,
#          then "TIERALLOC-GUEST-EXIT=<n>" with the script's exit status.
# Nothing but this file writes to ttyS2, so script output can never fake a
# status, and kernel messages can never interleave with it.
#
# The run itself is described by files the host adds in a second archive:
#   /tieralloc-vm/script    the test script (POSIX sh)
#   /tieralloc-vm/run.conf  sourced here: positional args, env, GUEST_CWD
#   /tieralloc-vm/modules   optional: kernel modules to insmod, in order

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
export TA_VM_IN_GUEST=1
umask 022

OUT=/dev/ttyS1
STATUS=/dev/ttyS2

# Setup problems go to the console and, once it is usable, to the script's
# output too, so that a test that fails because of them says why.
out_ok=0
warn()
{
	echo "tieralloc-guest: warning: $*" >/dev/console
	[ "$out_ok" = 1 ] && echo "tieralloc-guest: warning: $*" >"$OUT"
}

# mnt TYPE DIR [OPTIONS]: mount one pseudo file system, creating DIR.
mnt()
{
	mkdir -p "$2" 2>/dev/null
	mount -t "$1" ${3:+-o "$3"} "$1" "$2" || warn "cannot mount $1 on $2"
}

mnt proc /proc
mnt sysfs /sys
mnt devtmpfs /dev
mkdir -p /run /var/tmp /root

# The script output port: raw, no echo, and in particular no ONLCR, so that
# lines reach the host without CR characters added by the tty layer.
if stty -F "$OUT" raw -echo 2>/dev/null; then
	out_ok=1
else
	warn "cannot configure $OUT; script output goes to the console"
	OUT=/dev/console
fi
stty -F "$STATUS" raw -echo 2>/dev/null

# mnt_tmpfs DIR: mount a tmpfs on DIR, keeping what the initramfs put there
# (guest-run.sh --include of something under /tmp).
mnt_tmpfs()
{
	mkdir -p "$1"
	if [ -z "$(ls -A "$1" 2>/dev/null)" ]; then
		mnt tmpfs "$1" mode=1777
		return
	fi
	mkdir -p /run/tmpfs.new
	if mount -t tmpfs -o mode=1777 tmpfs /run/tmpfs.new &&
		cp -a "$1"/. /run/tmpfs.new/ &&
		rm -rf "${1:?}"/* "$1"/.[!.]* "$1"/..?* &&
		mount --move /run/tmpfs.new "$1"; then
		rmdir /run/tmpfs.new
	else
		warn "cannot move $1 to a tmpfs; it stays on the initramfs"
	fi
}

mnt devpts /dev/pts
mnt_tmpfs /dev/shm
mnt_tmpfs /tmp
mnt cgroup2 /sys/fs/cgroup nsdelegate
# memory is required by the tests; cpuset and pids are harmless extras that
# let tests restrict a cgroup to nodes (cpuset.mems) or count its tasks.
echo +memory >/sys/fs/cgroup/cgroup.subtree_control ||
	warn "cannot enable the memory controller in /sys/fs/cgroup"
for c in cpuset pids; do
	echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
done
mnt tracefs /sys/kernel/tracing
mnt debugfs /sys/kernel/debug
mnt bpf /sys/fs/bpf
ip link set lo up 2>/dev/null
hostname tieralloc-guest 2>/dev/null

if [ -s /tieralloc-vm/modules ]; then
	while read -r ko; do
		insmod "$ko" || warn "cannot load module $ko"
	done </tieralloc-vm/modules
fi

set --
GUEST_CWD=/
if [ -f /tieralloc-vm/run.conf ]; then
	. /tieralloc-vm/run.conf
else
	warn "no /tieralloc-vm/run.conf in the initramfs"
fi
cd "$GUEST_CWD" 2>/dev/null || { warn "no directory $GUEST_CWD in the guest; running in /"; cd /; }

echo "TIERALLOC-GUEST-START" >"$STATUS"

if [ -f /tieralloc-vm/script ]; then
	sh /tieralloc-vm/script "$@" </dev/null >"$OUT" 2>&1
	rc=$?
else
	warn "no /tieralloc-vm/script in the initramfs"
	rc=127
fi

# Stop whatever the script left running (kill -1 spares PID 1 and kernel
# threads), then wait until everything written to ttyS1 has left the UART:
# busybox stty sets the mode with TCSETSW, which drains the port first.
# Without this, "poweroff -f" can cut the end of the output.
kill -9 -1 2>/dev/null
stty -F "$OUT" raw -echo 2>/dev/null
# The status port is opened and closed here only; the last close of a serial
# port also waits until its output is sent.
echo "TIERALLOC-GUEST-EXIT=$rc" >"$STATUS"
echo "TIERALLOC-GUEST-EXIT=$rc" >/dev/console

poweroff -f
# Should poweroff fail, the sysrq path, then returning from init (which
# panics, and panic=-1 plus QEMU's -no-reboot turn that into an exit too).
echo o >/proc/sysrq-trigger
sleep 5
exit "$rc"
