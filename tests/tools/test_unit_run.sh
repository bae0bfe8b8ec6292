#!/bin/bash
# SPDX-License-Identifier: MIT
# The agent's systemd unit, run (issue 31, item 9): test_unit_security.sh reads the unit's
# settings; this boots systemd and runs the built agent under the unit, with all its sandboxing.
#
# systemd 252 boots in a container of this host's own root: systemd-nspawn -D / --volatile=yes
# (a tmpfs for /, the host's /usr read-only, nothing written to the host), --private-network, its
# own /dev, /dev/shm and pids (so the agent sees no segment or process of the host). Into it,
# read-only: the built unit as /etc/systemd/system/tierallocd.service, unchanged but for a
# drop-in that sets only ExecStart= to the built agent (bound at /opt/tieralloc/tierallocd); a
# machine-id, and systemd-firstboot and systemd-machine-id-commit masked (with an empty /etc
# the first waits for answers on the console, the second fails on the read-only machine-id).
# The agent has no way to run without its BPF programs (it exits 1 when it cannot load them), so
# the container is given what a host's boot gives it: CAP_BPF and CAP_PERFMON (nspawn drops
# them), the bpf and perf_event_open system calls (nspawn's filter refuses them), and
# CAP_SYS_RAWIO, which sys-kernel-tracing.mount's condition asks before it mounts tracefs at boot
# (the unit forbids the agent's own mount of it). The unit's CapabilityBoundingSet= and
# SystemCallFilter= then narrow these as they would on a host.
# Then, through nsenter and the container's systemctl:
# 1. the unit as shipped: `systemctl start` reaches active/running and the agent says it
#    attached; /run/tierallocd/lock holds the agent's pid; it is still running, never restarted,
#    after a few intervals; in its mount namespace / and /run are read-only, /run/tierallocd and
#    /dev/shm writable; `systemctl stop` ends it cleanly (Result=success, the agent's "detached,
#    stopped") and /run/tierallocd stays (RuntimeDirectoryPreserve=yes);
# 2. with the drop-in the unit's comments name for the policies (ProtectControlGroups=no) and
#    --reclaim-for-priority: the same, and the status file /run/tierallocd/policies, readable
#    by another user (nobody: tieralloc-stat, run by any user, reads it), removed at the stop;
# and in neither does the journal hold "Read-only file system", "Permission denied" or
# "Operation not permitted". The old unit, ReadWritePaths=/dev/shm alone without
# RuntimeDirectory=, fails: with ReadOnlyPaths=/run the agent cannot make its lock and exits 1;
# without it (MountAPIVFS=, which ProtectKernelTunables= implies, leaves /run writable) the agent
# makes /run/tierallocd itself, mode 0700 under UMask=0077, and other users cannot read the
# status file.
# Needs root, systemd-nspawn (systemd-container), nsenter and a kernel with BTF: skipped (77)
# without them, failed under CI=true (tests/install-deps.sh installs them; CI runs as root).
# Not in a sanitized build (its runtime is not the shipped agent's). The container is shut down
# on any exit, killed if it does not stop within a minute; it mounts nothing on the host.
# Timeouts are generous (a loaded machine): 300 s for the boot, 120 s for each outcome.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
export LC_ALL=C
boot_timeout=300
timeout=120

fail() { echo "FAIL: $*" >&2; exit 1; }
missing()
{
	if [[ ${CI:-} == true ]]; then
		fail "$* (CI=true: tests/install-deps.sh installs it; CI runs as root)"
	fi
	echo "SKIP: $*; the unit was not run"
	exit 77
}
if [[ -z ${TA_TEST_UNITDIR:-} ]]; then
	echo "SKIP: the agent is not built (configure found no BPF toolchain): no unit"
	exit 77
fi
unit=$TA_TEST_BUILDDIR/agent/tierallocd.service
agent=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -s $unit ]] || fail "$unit was not built"
[[ -x $agent ]] || fail "$agent was not built"
[[ $(id -u) == 0 ]] || missing "needs root (systemd-nspawn boots a container)"
command -v systemd-nspawn >/dev/null || missing "no systemd-nspawn (Debian package: systemd-container)"
command -v nsenter >/dev/null || missing "no nsenter (Debian package: util-linux)"
[[ -x /lib/systemd/systemd ]] || missing "no /lib/systemd/systemd to boot (Debian package: systemd)"
[[ -r /sys/kernel/btf/vmlinux ]] || missing "no kernel BTF: the agent cannot load its programs anywhere"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-unit-run.XXXXXX")
machine=ta-unit-$$
nspawn='' leader=''
cleanup()
{
	local i
	if [[ -n $nspawn ]] && kill -0 "$nspawn" 2>/dev/null; then
		# SIGTERM: nspawn asks the container's systemd to power off.
		kill -TERM "$nspawn" 2>/dev/null || true
		for ((i = 0; i < 60; i++)); do
			kill -0 "$nspawn" 2>/dev/null || break
			sleep 1
		done
		if kill -0 "$nspawn" 2>/dev/null; then
			echo "the container did not stop within 60 s: killed" >&2
			# Its pid 1 first: the kernel then kills every process of the container.
			[[ -z $leader ]] || kill -KILL "$leader" 2>/dev/null || true
			kill -KILL "$nspawn" 2>/dev/null || true
		fi
		wait "$nspawn" 2>/dev/null || true
	fi
	# nspawn's per-machine directory on the host (removed by nspawn when /run is a tmpfs).
	rmdir "/run/systemd/nspawn/propagate/$machine" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- The container's /etc/systemd/system ----

mkdir -p "$tmp/system/tierallocd.service.d"
cp "$unit" "$tmp/system/tierallocd.service"
cat >"$tmp/system/tierallocd.service.d/10-built-agent.conf" <<'EOF'
# The built agent instead of the installed path; every other setting is the unit's.
[Service]
ExecStart=
ExecStart=/opt/tieralloc/tierallocd
EOF
ln -s /dev/null "$tmp/system/systemd-firstboot.service"
ln -s /dev/null "$tmp/system/systemd-machine-id-commit.service"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/machine-id"
echo >>"$tmp/machine-id"
# The drop-in the unit's comments name for the policies ("a drop-in with KEY=VALUE").
policy_dropin=$(sed -n 's/^#//p' "$unit" | tr -s ' \n' '  ' |
	grep -o 'drop-in with ProtectControlGroups=[^ ,;)]*' | sed 's/^drop-in with //; s/\.$//' |
	head -n 1) || true
[[ $policy_dropin == ProtectControlGroups=no ]] ||
	fail "the unit's comments no longer name the policies' drop-in (ProtectControlGroups=no)"

# ---- Boot ----

# Where the host's systemd runs, nspawn makes a scope for the container; without one (this
# host's pid 1 may be another init) it stays in the test's own cgroup.
keep=()
[[ -d /run/systemd/system ]] || keep=(--keep-unit)
t0=$(date +%s) t0s=$SECONDS
timeout -k 10 1800 systemd-nspawn -D / --volatile=yes --register=no "${keep[@]}" \
	--private-network -M "$machine" --console=passive \
	--capability=CAP_BPF,CAP_PERFMON,CAP_SYS_RAWIO --system-call-filter='bpf perf_event_open' \
	--bind-ro="$tmp/system:/etc/systemd/system" --bind-ro="$tmp/machine-id:/etc/machine-id" \
	--bind-ro="$agent:/opt/tieralloc/tierallocd" \
	-b -- systemd.firstboot=off </dev/null >"$tmp/console.log" 2>&1 &
nspawn=$!

# The container's pid 1 (timeout, then systemd-nspawn, then the container's systemd).
console()
{
	echo "--- the container's console (last lines):" >&2
	tail -n 40 "$tmp/console.log" >&2
}
for ((i = 0; i < boot_timeout; i++)); do
	n=$(pgrep -P "$nspawn" -x systemd-nspawn || true)
	[[ -z $n ]] || leader=$(pgrep -P "$n" -x systemd || true)
	[[ -z $leader ]] || break
	kill -0 "$nspawn" 2>/dev/null || { console; fail "systemd-nspawn exited"; }
	sleep 1
done
[[ -n $leader ]] || { console; fail "no systemd in the container after $boot_timeout s"; }
ct() { timeout "$timeout" nsenter -t "$leader" -a "$@"; }
# is-system-running --wait fails at once until systemd listens on its private socket.
state=
while [[ -z $state ]] && ((SECONDS - t0s < boot_timeout)); do
	state=$(timeout $((boot_timeout - (SECONDS - t0s) + 1)) nsenter -t "$leader" -a \
		systemctl is-system-running --wait 2>/dev/null) || true
	[[ -n $state ]] || sleep 1
done
case $state in
running) ;;
degraded)
	echo "the container booted degraded (not the agent's doing; the failed units):"
	ct systemctl --failed --no-pager --plain --no-legend || true
	;;
*) console; fail "the container's systemd did not finish booting in $boot_timeout s: \"$state\"" ;;
esac
echo "the container booted in $(($(date +%s) - t0)) s: $(ct systemctl --version | head -n 1)"

# ---- The agent under the unit ----

# prop NAME: the unit's property.
prop() { ct systemctl show -P "$1" tierallocd.service; }
journal()
{
	echo "--- journalctl -u tierallocd:" >&2
	ct journalctl -u tierallocd.service --no-pager -o short-monotonic | tail -n 40 >&2 || true
}
bad() { journal; fail "$*"; }
# started WHAT: start it, and wait until it runs and says it attached.
started()
{
	local i pid inv
	ct systemctl start tierallocd.service || bad "$1: systemctl start failed"
	for ((i = 0; i < timeout; i++)); do
		inv=$(prop InvocationID)
		if [[ $(prop ActiveState)/$(prop SubState) == active/running ]] &&
			ct journalctl _SYSTEMD_INVOCATION_ID="$inv" -o cat --no-pager |
			grep -q '^tierallocd: attached'; then
			break
		fi
		sleep 1
	done
	((i < timeout)) || bad "$1: not active/running and attached after $timeout s" \
		"($(prop ActiveState)/$(prop SubState), $(prop NRestarts) restarts)"
	pid=$(prop MainPID)
	echo "$1: active/running, attached, main pid $pid"
	# A few of its intervals (0.25 s) and a rescan (2 s): still the same process.
	sleep 5
	[[ $(prop ActiveState)/$(prop SubState) == active/running && $(prop MainPID) == "$pid" &&
		$(prop NRestarts) == 0 ]] || bad "$1: did not keep running" \
		"($(prop ActiveState)/$(prop SubState), pid $(prop MainPID), $(prop NRestarts) restarts)"
	[[ $(ct cat /run/tierallocd/lock 2>/dev/null) == "$pid" ]] ||
		bad "$1: /run/tierallocd/lock does not hold the agent's pid $pid"
	echo "$1: still running after 5 s; /run/tierallocd/lock holds its pid"
	# The agent's own mounts: / and /run read-only, /run/tierallocd and /dev/shm writable.
	ct cat "/proc/$pid/mountinfo" >"$tmp/mountinfo" || bad "$1: no mountinfo of pid $pid"
	local dir want got
	for dir in / /run /run/tierallocd /dev/shm; do
		want=ro
		[[ $dir != /run/tierallocd && $dir != /dev/shm ]] || want=rw
		got=$(awk -v d="$dir" '$5 == d { o = substr($6, 1, 2) } END { print o }' "$tmp/mountinfo")
		[[ $got == "$want" ]] || bad "$1: $dir is ${got:-not a mount point} for the agent, not $want"
	done
	echo "$1: for the agent / and /run are read-only, /run/tierallocd and /dev/shm writable"
}
# stopped WHAT: stop it; it must end cleanly.
stopped()
{
	local inv
	inv=$(prop InvocationID)
	ct systemctl stop tierallocd.service || bad "$1: systemctl stop failed"
	[[ $(prop ActiveState) == inactive && $(prop Result) == success ]] ||
		bad "$1: after the stop, $(prop ActiveState) with result $(prop Result)"
	ct journalctl _SYSTEMD_INVOCATION_ID="$inv" -o cat --no-pager |
		grep -q '^tierallocd: detached, stopped' || bad "$1: the agent did not say it stopped"
	ct test -d /run/tierallocd || bad "$1: /run/tierallocd was removed at the stop"
	echo "$1: stopped cleanly (result success, \"detached, stopped\"), /run/tierallocd kept"
}

started "the unit as shipped"
stopped "the unit as shipped"

# The policies' drop-in, at run time (/run beside the read-only /etc); sorted after the first.
ct sh -c "mkdir -p /run/systemd/system/tierallocd.service.d && cat >/run/systemd/system/tierallocd.service.d/20-policy.conf" <<EOF
[Service]
$policy_dropin
ExecStart=
ExecStart=/opt/tieralloc/tierallocd --reclaim-for-priority
EOF
ct systemctl daemon-reload
started "with $policy_dropin and --reclaim-for-priority"
for ((i = 0; i < timeout; i++)); do
	ct test -s /run/tierallocd/policies && break
	sleep 1
done
((i < timeout)) || bad "no status file /run/tierallocd/policies after $timeout s"
head=$(ct head -n 1 /run/tierallocd/policies)
[[ $head == "tierallocd-policies "* ]] || bad "/run/tierallocd/policies begins \"$head\""
# tieralloc-stat, run by any user, reads it: so must nobody (uid 65534).
mode=$(ct stat -c %a /run/tierallocd /run/tierallocd/policies | paste -sd ' ')
ct setpriv --reuid=65534 --regid=65534 --clear-groups head -c 0 /run/tierallocd/policies ||
	bad "other users cannot read /run/tierallocd/policies (modes of the directory, the file: $mode)"
echo "the status file /run/tierallocd/policies: \"$head\", readable by other users (modes $mode)"
stopped "with $policy_dropin"
! ct test -e /run/tierallocd/policies || bad "the status file was left after the stop"
echo "the status file was removed at the stop"

# Nothing the sandbox refused.
if ct journalctl -u tierallocd.service -o cat --no-pager |
	grep -i -e 'read-only file system' -e 'permission denied' -e 'operation not permitted'; then
	bad "the journal says the sandbox refused the agent something (above)"
fi
echo "PASS: the agent runs, writes its state and stops under the unit (booted in a container)"
