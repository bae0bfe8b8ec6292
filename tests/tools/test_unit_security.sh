#!/bin/bash
# SPDX-License-Identifier: MIT
# The agent's systemd unit, as built:
# - lets the agent write where it writes (issue 31, item 9). `tierallocd --help` lists its own
#   directories ("Where it writes") and the kernel ones of options the unit does not give
#   ("Kernel files it writes"). Each of its own must be writable under the unit's sandboxing,
#   with the unit alone and with each drop-in its comments name ("a drop-in with KEY=VALUE");
#   each kernel one with one of those drop-ins. Static: the unit's settings are read and
#   applied as systemd.exec(5) describes them (ProtectSystem=, ProtectHome=, PrivateTmp=,
#   PrivateDevices=, ProtectKernelTunables=, ProtectControlGroups=, MountAPIVFS=, ReadWritePaths=
#   and the like, RuntimeDirectory= and the like; the most specific path wins). The agent is run
#   under the unit by test_unit_run.sh, in a booted systemd container;
# - parses cleanly (systemd-analyze verify, on a copy that starts the built agent);
# - is hardened: systemd-analyze security --offline rates its exposure at most 5.0
#   (agent/tierallocd.service.in says what each setting keeps and why).
# Skips without the agent (no unit); without a systemd-analyze that has --offline (systemd
# 250) it checks the directories and skips the rest.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
max=5.0
if [[ -z ${TA_TEST_UNITDIR:-} ]]; then
	echo "SKIP: the agent is not built (configure found no BPF toolchain): no unit"
	exit 77
fi
unit=$TA_TEST_BUILDDIR/agent/tierallocd.service
agent=$TA_TEST_BUILDDIR/agent/tierallocd
[[ -s $unit ]] || { echo "FAIL: $unit was not built" >&2; exit 1; }
[[ -x $agent ]] || { echo "FAIL: $agent was not built" >&2; exit 1; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- Where the agent writes ----

# on TEXT: "yes" when TEXT is one of systemd's true booleans.
on() { case ${1,,} in 1 | yes | true | on) echo yes ;; *) echo no ;; esac; }

# verdict DIR SETTING...: "rw WHY", "ro WHY" or "none WHY" for DIR, under the [Service] settings
# given (KEY=VALUE, in order; a later one overrides, a list setting adds, an empty one resets).
# A rule's mode: rw, ro, none (a private mount: paths under it may be bound again) or hidden
# (inaccessible, and all below it).
verdict()
{
	local dir=$1 line key val p best=-1 bestlen=-1 i mode why
	shift
	declare -A one=() list=()
	for line in "$@"; do
		key=${line%%=*} val=${line#*=}
		case $key in
		ReadWritePaths | ReadOnlyPaths | InaccessiblePaths | RuntimeDirectory | StateDirectory | \
			CacheDirectory | LogsDirectory)
			if [[ -z $val ]]; then list[$key]=; else list[$key]+=" $val"; fi
			;;
		*) one[$key]=$val ;;
		esac
	done
	# The rules in the order systemd applies them: "PATH MODE WHY".
	local rules=()
	case ${one[ProtectSystem]:-no} in
	strict)
		rules+=("/ ro ProtectSystem=strict")
		for p in /dev /proc /sys /home /root /run/user; do
			rules+=("$p rw ProtectSystem=strict leaves $p to other settings")
		done
		;;
	full) for p in /usr /boot /efi /etc; do rules+=("$p ro ProtectSystem=full"); done ;;
	*)
		if [[ $(on "${one[ProtectSystem]:-no}") == yes ]]; then
			for p in /usr /boot /efi; do rules+=("$p ro ProtectSystem=yes"); done
		fi
		;;
	esac
	case ${one[ProtectHome]:-no} in
	read-only | tmpfs) for p in /home /root /run/user; do rules+=("$p ro ProtectHome=${one[ProtectHome]}"); done ;;
	*)
		if [[ $(on "${one[ProtectHome]:-no}") == yes ]]; then
			for p in /home /root /run/user; do rules+=("$p hidden ProtectHome=yes"); done
		fi
		;;
	esac
	if [[ $(on "${one[PrivateTmp]:-no}") == yes ]]; then
		rules+=("/tmp rw PrivateTmp=yes" "/var/tmp rw PrivateTmp=yes")
	fi
	if [[ $(on "${one[PrivateDevices]:-no}") == yes ]]; then
		rules+=("/dev none PrivateDevices=yes (a /dev of pseudo-devices)"
			"/dev/shm rw PrivateDevices=yes binds the host's /dev/shm")
	fi
	if [[ $(on "${one[ProtectKernelTunables]:-no}") == yes ]]; then
		for p in /sys /proc/sys /proc/sysrq-trigger /proc/fs /proc/irq /proc/acpi; do
			rules+=("$p ro ProtectKernelTunables=yes")
		done
		rules+=("/sys/fs/cgroup rw ProtectKernelTunables=yes leaves it to ProtectControlGroups=")
	fi
	if [[ $(on "${one[ProtectControlGroups]:-no}") == yes ]]; then
		rules+=("/sys/fs/cgroup ro ProtectControlGroups=yes")
	fi
	# Either implies MountAPIVFS=yes (unless set), and systemd then leaves /run as it is, writable:
	# ProtectSystem=strict does not reach it (systemd 252, seen by test_unit_run.sh).
	local apivfs=${one[MountAPIVFS]:-}
	if [[ -z $apivfs && ($(on "${one[ProtectKernelTunables]:-no}") == yes ||
		$(on "${one[ProtectControlGroups]:-no}") == yes) ]]; then
		apivfs=yes
	fi
	if [[ $(on "${apivfs:-no}") == yes ]]; then
		rules+=("/run rw MountAPIVFS=yes (ProtectKernelTunables= or ProtectControlGroups= imply it) leaves /run writable")
	fi
	for p in ${list[ReadOnlyPaths]:-}; do rules+=("${p#[-+]} ro ReadOnlyPaths=$p"); done
	for p in ${list[ReadWritePaths]:-}; do
		local path=${p#[-+]}
		path=${path#[-+]}
		# /run is an empty tmpfs at boot and read-only under ProtectSystem=strict: systemd
		# cannot bind a directory there that is not made before the start (the unit fails
		# to start, or with "-" the path stays read-only), and the agent cannot make it.
		if [[ $path == /run/* ]]; then
			rules+=("$path ro ReadWritePaths=$p is not there when the service starts (RuntimeDirectory= makes it)")
		else
			rules+=("$path rw ReadWritePaths=$p")
		fi
	done
	for p in ${list[InaccessiblePaths]:-}; do rules+=("${p#[-+]} hidden InaccessiblePaths=$p"); done
	for p in ${list[RuntimeDirectory]:-}; do rules+=("/run/$p rw RuntimeDirectory=$p"); done
	for p in ${list[StateDirectory]:-}; do rules+=("/var/lib/$p rw StateDirectory=$p"); done
	for p in ${list[CacheDirectory]:-}; do rules+=("/var/cache/$p rw CacheDirectory=$p"); done
	for p in ${list[LogsDirectory]:-}; do rules+=("/var/log/$p rw LogsDirectory=$p"); done
	# The most specific path wins (a later rule of the same path), but nothing is mounted inside
	# an inaccessible one ("hidden").
	for i in "${!rules[@]}"; do
		p=${rules[i]%% *}
		p=${p%/}
		[[ -z $p || $dir == "$p" || $dir == "$p"/* ]] || continue
		read -r _ mode why <<<"${rules[i]}"
		if [[ $mode == hidden ]]; then
			echo "none $why"
			return
		fi
		if ((${#p} >= bestlen)); then
			best=$i bestlen=${#p}
		fi
	done
	if ((best < 0)); then
		echo "rw no setting protects it"
	else
		echo "${rules[best]#* }"
	fi
}

help=$("$agent" --help)
# dirs SECTION: the paths listed in that section of --help (two spaces, then a path).
dirs()
{
	awk -v want="$1" '/^Where it writes/ { s = 1 } /^Kernel files it writes/ { s = 2 }
		s == want && /^  \// { print $1 }' <<<"$help"
}
mapfile -t own < <(dirs 1)
mapfile -t kernel < <(dirs 2)
((${#own[@]} > 0)) || fail "tierallocd --help lists no directory under \"Where it writes\""
mapfile -t service < <(awk '/^\[/ { s = $0; next } s == "[Service]" && /^[A-Za-z]+=/' "$unit")
# The drop-ins the unit's comments name, "a drop-in with KEY=VALUE" (the comment's lines joined).
mapfile -t dropins < <(sed -n 's/^#//p' "$unit" | tr -s ' \n' '  ' |
	grep -o 'drop-in with [A-Za-z]*=[^ ,;)]*' | sed 's/^drop-in with //; s/\.$//')
echo "the agent writes: ${own[*]}; with options the unit does not give: ${kernel[*]:-nothing}"
echo "drop-ins the unit names: ${dropins[*]:-none}"

state=$(systemctl is-system-running 2>/dev/null) || true
if [[ -z $state ]] && ! command -v systemctl >/dev/null; then
	state="no systemctl"
fi
echo "systemd on this host: ${state:-unknown} (systemctl is-system-running); this is a static" \
	"check of the unit's settings against its directories (test_unit_run.sh runs the agent under it)"

bad=0
for d in "${own[@]}"; do
	read -r mode why <<<"$(verdict "$d" "${service[@]}")"
	if [[ $mode == rw ]]; then
		echo "writable: $d ($why)"
	else
		echo "FAIL: the agent writes $d, $mode under the unit: $why" >&2
		bad=1
	fi
	for extra in "${dropins[@]}"; do
		read -r mode why <<<"$(verdict "$d" "${service[@]}" "$extra")"
		if [[ $mode != rw ]]; then
			echo "FAIL: the agent writes $d, $mode under the unit with $extra: $why" >&2
			bad=1
		fi
	done
done
for d in "${kernel[@]}"; do
	by=
	for extra in "${dropins[@]}"; do
		read -r mode why <<<"$(verdict "$d" "${service[@]}" "$extra")"
		if [[ $mode == rw ]]; then
			by=$extra
			break
		fi
	done
	if [[ -n $by ]]; then
		echo "writable with a drop-in: $d ($by)"
	else
		echo "FAIL: the agent writes $d with an option; no drop-in the unit names makes it writable" >&2
		bad=1
	fi
done
# The state files must outlive the service: the next start restores what an agent that died
# (with its keeper, which a stop kills too) left changed.
preserve=$(awk -F= '$1 == "RuntimeDirectoryPreserve" { v = $2 } END { print v }' "$unit")
if [[ -n $(awk -F= '$1 == "RuntimeDirectory" && $2 != ""' "$unit") && $(on "${preserve:-no}") != yes ]]; then
	echo "FAIL: RuntimeDirectoryPreserve=${preserve:-no}: a stop would remove the state files" \
		"that the next start restores from" >&2
	bad=1
fi
((bad == 0)) || exit 1
echo "PASS: the agent can write where it writes"

# ---- The unit parses, and its exposure ----

if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: no systemd-analyze (systemd is not installed): the directories were checked, not" \
		"the unit's syntax or exposure"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-unit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The installed path of ExecStart= is not there yet: the built agent instead.
sed "s|^ExecStart=[^ ]*|ExecStart=$agent|" "$unit" >"$tmp/tierallocd.service"
out=$(systemd-analyze verify --man=no "$tmp/tierallocd.service" 2>&1) || true
[[ -z $out ]] || { echo "$out" >&2; fail "systemd-analyze verify has something to say"; }
echo "PASS: systemd-analyze verify"
out=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) || {
	if grep -q -e 'unrecognized option' -e 'Unknown option' <<<"$out"; then
		echo "SKIP: systemd-analyze $(systemd-analyze --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') has no --offline (250 and later)"
		exit 77
	fi
	echo "$out" >&2
	echo "FAIL: systemd-analyze security failed" >&2
	exit 1
}
# What is left exposed, then the score.
grep '✗' <<<"$out" | sed 's/  */ /g' || true
line=$(grep 'Overall exposure level' <<<"$out") || { echo "$out" >&2; echo "FAIL: no exposure level" >&2; exit 1; }
echo "$line"
score=$(sed -n 's/.*: \([0-9][0-9]*\.[0-9]\).*/\1/p' <<<"$line")
[[ -n $score ]] || { echo "FAIL: no score in \"$line\"" >&2; exit 1; }
if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s <= m) }'; then
	echo "PASS: exposure $score, at most $max"
else
	echo "FAIL: exposure $score, above $max" >&2
	exit 1
fi
