#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The Podman recipe of docs/containers.md, run: two containers from a rootfs directory (no
# registry: the preload library, quota_hog and the C library copied into a directory), each with
# its own TIERALLOC_* values and its own private /dev/shm (podman's default), each holding
# memory; one tieralloc-stat on the host must find both segments in the containers' mount
# namespaces, each with the limits and charges its container was given and its live process.
#   a: --memory 256m, two tiers on node 0: each tier's max is half of the cgroup's 256M; the
#      default segment name (found by the namespace it was seen through)
#   b: TIERALLOC_TIER_LIMITS 0.max=1M: 3M of allocations, at most 1M in tier 0, the rest in
#      tier 1; a TIERALLOC_SHM_NAME of its own, which --name finds
# Needs root and podman (tests/install-deps.sh installs it with runc): skipped (77) without them,
# failed under CI=true, where install-deps.sh ran on a machine where podman works.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

missing()
{
	if [[ ${CI:-} == true ]]; then
		ta_fail "$* (CI=true: tests/install-deps.sh installs podman and runc as root)"
	fi
	ta_skip "$*"
}
[[ $(id -u) == 0 ]] || missing "needs root (a rootful podman with cgroup limits)"
command -v podman >/dev/null 2>&1 || missing "podman is not installed (Debian package: podman)"
command -v runc >/dev/null 2>&1 || missing "runc is not installed (Debian package: runc)"
command -v python3 >/dev/null 2>&1 || missing "python3 is not installed"

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
HOG=$TA_TEST_BUILDDIR/tests/quota/quota_hog
[[ -x $STAT ]] || ta_hard_error "tieralloc-stat not built: $STAT"
[[ -x $HOG ]] || ta_hard_error "quota_hog not built (run make check): $HOG"

# The rootfs: the programs, libnuma (the preload loads it at start for memkind; without it the
# preload passes every call to the C library) and every library ldd lists for them.
# awk reads to the end: an early exit would kill ldconfig with SIGPIPE, which pipefail and set -e
# turn into the script's end (status 141).
libnuma=$(ldconfig -p | awk '$1 == "libnuma.so.1" && !n++ { print $NF }')
[[ -n $libnuma ]] || missing "libnuma.so.1 is not installed (Debian package: libnuma1)"
root=$TA_WORK/rootfs
mkdir -p "$root"/{bin,dev/shm,proc,sys,tmp,etc,usr/lib/tieralloc}
cp "$HOG" "$root/bin/quota_hog"
cp "$TA_TEST_PRELOAD" "$root/usr/lib/tieralloc/libtieralloc-preload.so"
while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done < <(echo "$libnuma"; for f in "$HOG" "$TA_TEST_PRELOAD" "$libnuma"; do
	ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
done | sort -u)

# runc: crun 1.8 refuses hosts with cgroup v1 and a cgroup v2 hierarchy that has controllers
# ("cgroups in hybrid mode not supported"); runc runs everywhere. cgroupfs: no systemd needed.
# The limits: podman asks for nofile and nproc of 1048576 by default, and lowers its own nproc to
# 32768 before it starts the runtime; without CAP_SYS_RESOURCE (a sandboxed root) the runtime
# cannot raise either ("setrlimit RLIMIT_NOFILE: Operation not permitted"), so ask no more than
# that.
pm() { podman --runtime runc --cgroup-manager=cgroupfs --events-backend=file "$@"; }
nofile=$(ulimit -Hn)
[[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
nproc=$(ulimit -Hu)
[[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768

# Container names; b's segment is named after its container (tierallocd looks only at names
# starting with "tieralloc-"; tieralloc-stat at every segment, whatever its name).
tag=tieralloc-v1-test-podman-$$
names=()
cleanup()
{
	local n
	for n in "${names[@]}"; do
		pm rm -f "$tag-$n" >/dev/null 2>&1 || true
		rm -f "/dev/shm/$tag-$n"
	done
	ta_cleanup
}
trap cleanup EXIT

# start NAME PODMAN-OPTIONS...: a container running quota_hog, its commands from the FIFO
# $TA_WORK/NAME.in (kept open on fd 3x), its replies in $TA_WORK/NAME.out.
declare -A cmd_fd
start()
{
	local n=$1
	shift
	names+=("$n")
	mkfifo "$TA_WORK/$n.in"
	exec {fd}<>"$TA_WORK/$n.in"
	cmd_fd[$n]=$fd
	pm run --rm -i --name "$tag-$n" --network none \
		--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
		-e LD_PRELOAD=/usr/lib/tieralloc/libtieralloc-preload.so \
		"$@" --rootfs "$root" /bin/quota_hog \
		<"$TA_WORK/$n.in" >"$TA_WORK/$n.out" 2>"$TA_WORK/$n.err" &
}
# ask NAME COMMAND: send one command, print its reply (quota_hog answers every command with one
# line). The limit only guards against a hang: a loaded machine may take long to start podman.
ask()
{
	local n=$1 lines
	lines=$(wc -l <"$TA_WORK/$n.out")
	echo "$2" >&"${cmd_fd[$n]}"
	local t
	for ((t = 0; t < 3000; t++)); do
		if [[ $(wc -l <"$TA_WORK/$n.out") -gt $lines ]]; then
			sed -n "$((lines + 1))p" "$TA_WORK/$n.out"
			return 0
		fi
		if ! pm container exists "$tag-$n" && [[ $t -gt 50 ]]; then
			break
		fi
		sleep 0.1
	done
	cat "$TA_WORK/$n.err" >&2
	ta_fail "container $n did not answer '$2'"
}

# Can podman run a container here at all? Said precisely when not.
start probe
if ! reply=$(ask probe pid 2>"$TA_WORK/probe.why"); then
	missing "podman cannot run a container here: $(tail -3 "$TA_WORK/probe.err" | tr '\n' ' ')"
fi
[[ $reply == pid=1 ]] || ta_fail "probe: $reply"
echo quit >&"${cmd_fd[probe]}"
wait
echo "podman runs containers: ok"

start a --memory 256m -e TIERALLOC_TIERS="0;0"
start b -e TIERALLOC_TIERS="0;0" -e TIERALLOC_TIER_LIMITS="0.max=1M;0.high=1M" \
	-e TIERALLOC_SHM_NAME="$tag-b"
ra=$(ask a "alloc 3M 64K 1")
rb=$(ask b "alloc 3M 64K 1")
echo "a: $ra"
echo "b: $rb"
# The preload started in full (memkind with libnuma), with nothing to say.
for n in a b; do
	if [[ -s $TA_WORK/$n.err ]]; then
		cat "$TA_WORK/$n.err" >&2
		ta_fail "container $n: the preload warned"
	fi
done
# Both containers' processes run in cgroups of their own, which the host sees, and in mount
# namespaces of their own, whose /dev/shm is not the host's.
declare -A cpid
for n in a b; do
	cpid[$n]=$(pm inspect -f '{{.State.Pid}}' "$tag-$n")
	grep -q "libpod-" "/proc/${cpid[$n]}/cgroup" ||
		ta_fail "container $n: not in a cgroup of its own"
done
[[ ! -e /dev/shm/$tag-b ]] || ta_fail "b's segment is in the host's /dev/shm: not a private one"

# One tieralloc-stat on the host: both segments, each with its container's values.
all=$("$STAT" --json)
jb=$("$STAT" --json --name "/$tag-b")
args=("$all" "$jb" "$tag" "${cpid[a]}" "${cpid[b]}" "$TA_WORK/a.name")
python3 - "${args[@]}" <<'PY' || ta_fail "tieralloc-stat --json: see above"
import json, os, sys
all_doc, tag = json.loads(sys.argv[1]), sys.argv[3]
ok = True
def check(what, cond, doc):
    global ok
    if not cond:
        ok = False
        print("FAIL:", what, json.dumps(doc, indent=1), file=sys.stderr)
# A segment belongs to a container when it was seen through a process of the container's mount
# namespace. Other tests' segments (make check -j) are listed too, through processes that may have
# exited since: theirs is no namespace.
def mntns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except FileNotFoundError:
        return None
def of(pid):
    mine = mntns(pid)
    return [s for s in all_doc["segments"] if s["namespace_pid"] is not None
            and mine is not None and mntns(s["namespace_pid"]) == mine]
seg_a, seg_b = of(sys.argv[4]), of(sys.argv[5])
check("one segment in each container's namespace", len(seg_a) == len(seg_b) == 1,
      [(s["name"], s["namespace_pid"]) for s in all_doc["segments"]])
if not ok:
    sys.exit(1)
a, b = seg_a[0], json.loads(sys.argv[2])["segments"][0]
open(sys.argv[6], "w").write(a["name"])
check("b: its TIERALLOC_SHM_NAME, by --name",
      b["name"] == "/" + tag + "-b" and seg_b[0]["name"] == b["name"], b)
M = 1 << 20
for name, s in (("a", a), ("b", b)):
    check(name + ": one live process, two tiers",
          s["processes"] == 1 and not s["gone"] and len(s["tiers"]) == 2, s)
a0, a1 = a["tiers"]
b0, b1 = b["tiers"]
# a: the container's memory limit (256M), split between the two tiers on one node.
check("a: max from --memory", a0["max"] == 128 * M and a1["max"] == 128 * M, a)
check("a: 3M charged to tier 0", a0["charged"] >= 3 * M and a1["charged"] == 0, a)
# b: its own tier-0 limit; what did not fit went to tier 1.
check("b: TIERALLOC_TIER_LIMITS", b0["max"] == M and b0["high"] == M, b)
check("b: tier 0 within 1M, the rest in tier 1",
      b0["charged"] <= M and b1["charged"] >= 2 * M and b0["steered_away"] > 0, b)
check("b: no limit from a's cgroup", b1["max"] != 128 * M, b)
sys.exit(0 if ok else 1)
PY
echo "tieralloc-stat on the host: both containers' segments (own namespaces), own values: ok"
# The table, in the log, as docs/containers.md shows it (a's default name is shared by every
# container on cgroup v1: --name lists it in each namespace that has it).
"$STAT" --name "$(cat "$TA_WORK/a.name")"
"$STAT" --name "/$tag-b"

for n in a b; do
	echo quit >&"${cmd_fd[$n]}"
done
wait
echo "PASS"
