#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tieralloc-stat finds segments in other mount namespaces (issue 16, item 4), as a container's
# /dev/shm is: `unshare --mount` (util-linux) starts a namespace with a tmpfs of its own on
# /dev/shm, in which a preloaded sleep makes a segment and a plain sleep keeps the namespace:
#   - the segment is listed (named and in the full listing), labelled with the pid it was seen
#     through, with its live process counted (liveness read in that namespace's /proc);
#   - --record --name samples it there (its rows, its live process);
#   - the host's /dev/shm, seen again through a second namespace that shares it, is listed once;
#   - once the preloaded process is killed, the segment is gone, and --reap --name removes it
#     from the namespace's tmpfs.
# Needs root (mount namespaces and tmpfs mounts): where that cannot work, the test says why and
# is skipped.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
ta_require python3 python3
ta_require unshare util-linux

STAT=$TA_TEST_BUILDDIR/tools/tieralloc-stat
[[ -x $STAT ]] || ta_hard_error "tieralloc-stat not built: $STAT"
[[ $(id -u) == 0 ]] ||
	ta_skip "cannot test the mount-namespace walk here: it needs root (unshare --mount and a tmpfs mount)"

nsseg=ta-ns-$$
hostseg=ta-ns-host-$$
pids=()
cleanup()
{
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -f "/dev/shm/$hostseg" "/dev/shm/$nsseg"
	ta_cleanup
}
trap cleanup EXIT
cd "$TA_WORK"

# A namespace with its own /dev/shm: the keeper ($! here: unshare execs sh, which execs sleep)
# and a preloaded holder, whose pid the namespace reports (same pid namespace as ours).
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount --propagation private sh -c '
	mount -t tmpfs -o mode=1777 tmpfs /dev/shm || { echo "mount failed"; exit 1; }
	LD_PRELOAD=$1 TIERALLOC_SHM_NAME=$2 TIERALLOC_TIERS="0;0" sleep 300 &
	echo "held $!"
	exec sleep 300' sh "$TA_TEST_PRELOAD" "$nsseg" >ns.out 2>ns.err &
keeper=$!
pids+=("$keeper")
for _ in $(seq 1 300); do
	[[ -s ns.out ]] && break
	kill -0 "$keeper" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q '^held ' ns.out; then
	ta_skip "cannot test the mount-namespace walk here: unshare --mount with a tmpfs on /dev/shm failed: $(cat ns.out ns.err)"
fi
holder=$(awk '/^held / { print $2 }' ns.out)
pids+=("$holder")
[[ ! -e /dev/shm/$nsseg ]] || ta_fail "the namespace's segment is in the host's /dev/shm: no tmpfs of its own"
for _ in $(seq 1 300); do
	# Readable, and the holder's slot taken (the creator marks the segment ready first).
	[[ -s /proc/$keeper/root/dev/shm/$nsseg ]] &&
		"$STAT" --json --name "/$nsseg" 2>/dev/null | grep -q '"processes":1,' && break
	sleep 0.1
done

# json_check FILE PYTHON-EXPRESSION MSG: over doc (and seg, the segment named nsseg).
json_check()
{
	python3 - "$1" "$2" "/$nsseg" <<'PY' || ta_fail "$3: $(cat "$1")"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
found = [s for s in doc["segments"] if s["name"] == sys.argv[3]]
seg = found[0] if found else None
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}
"$STAT" --json --name "/$nsseg" >named.json || ta_fail "--name /$nsseg: not found in the namespace"
json_check named.json "seg is not None and seg['namespace_pid'] in ($keeper, $holder)
	and seg['processes'] == 1 and seg['gone'] is False" "the namespace's segment, named"
"$STAT" --name "/$nsseg" >named.txt
grep -Eq "^/$nsseg \\(mount ns of pid ($keeper|$holder)\\)  1 process\\(es\\)$" named.txt ||
	ta_fail "the table does not label the namespace: $(cat named.txt)"
echo "segment in another mount namespace: ok (seen through $(grep -o "pid [0-9]*" named.txt))"
# --record samples it there too: one row per tier, its segment, its live process.
"$STAT" --record ns.csv --samples 1 --name "/$nsseg" || ta_fail "--record --name /$nsseg failed"
python3 - ns.csv "/$nsseg" <<'PY' || ta_fail "--record of the namespace's segment: $(cat ns.csv)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 2 and all(r["segment"] == sys.argv[2] and r["processes"] == "1" for r in rows)
assert sorted(r["tier"] for r in rows) == ["0", "1"]
PY
echo "recorded in another mount namespace: ok"

# The host's /dev/shm through a second namespace that shares it: one entry, ours.
LD_PRELOAD=$TA_TEST_PRELOAD TIERALLOC_SHM_NAME=$hostseg TIERALLOC_TIERS="0;0" sleep 300 &
pids+=("$!")
unshare --mount --propagation private sleep 300 &
pids+=("$!")
for _ in $(seq 1 300); do
	"$STAT" --name "/$hostseg" >/dev/null 2>&1 && break
	sleep 0.1
done
"$STAT" --json >all.json || ta_fail "tieralloc-stat --json failed"
json_check all.json "seg is not None and
	[s['name'] for s in doc['segments']].count('/$hostseg') == 1 and
	[s for s in doc['segments'] if s['name'] == '/$hostseg'][0]['namespace_pid'] is None" \
	"the full listing: the namespace's segment, and the host's once"
echo "full listing: ok (host segment once, namespace segment found)"

# The holder dies: gone; --reap removes it from the namespace's tmpfs.
kill -9 "$holder"
for _ in $(seq 1 300); do
	[[ -e /proc/$holder ]] || break
	sleep 0.1
done
"$STAT" --json --name "/$nsseg" >dead.json || ta_fail "--name /$nsseg after the kill"
json_check dead.json "seg['gone'] is True and seg['processes'] == 0 and seg['namespace_pid'] == $keeper" \
	"the namespace's segment after its process died"
out=$("$STAT" --reap --name "/$nsseg") || ta_fail "--reap failed: $out"
grep -q "^tieralloc-stat: /$nsseg (in another mount namespace): removed" <<<"$out" ||
	ta_fail "--reap said: $out"
[[ ! -e /proc/$keeper/root/dev/shm/$nsseg ]] || ta_fail "--reap left the namespace's segment"
echo "gone in another namespace, reaped: ok"
echo PASS
