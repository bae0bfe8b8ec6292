#!/bin/bash
# SPDX-License-Identifier: MIT
#
# deploy/kubernetes/, checked offline (no cluster): kubectl decodes each manifest into the API's
# types (`kubectl set env --local`, which needs no server, unlike `apply --dry-run=client`) and
# check_manifests.py checks what the agent and the preload need, that no field was lost in that
# decoding, and the pod's TIERALLOC_* names; the built preload then accepts the pod's values
# under TIERALLOC_STRICT=1. Broken copies of the manifests must be refused, so the checks can
# fail. Needs python3-yaml and kubectl (tests/install-deps.sh): 77 without, a failure under CI=true.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

missing()
{
	if [[ ${CI:-} == true ]]; then
		ta_fail "$* (CI=true: tests/install-deps.sh installs it)"
	fi
	ta_skip "$*"
}
python3 -c 'import yaml' 2>/dev/null || missing "python3's yaml is missing (Debian package: python3-yaml)"
command -v kubectl >/dev/null 2>&1 || missing "kubectl is not installed (Debian package: kubernetes-client)"

dir=$TA_TEST_SRCDIR/deploy/kubernetes
ds=$dir/tierallocd-daemonset.yaml
pod=$dir/pod-example.yaml
check=$TA_TEST_SRCDIR/tests/containers/check_manifests.py
# No cluster: a configuration that names none, so that nothing is asked of a server.
export KUBECONFIG=$TA_WORK/no-kubeconfig

# verify DAEMONSET POD: kubectl's decoding of both, then the checks; prints the problems.
verify()
{
	local f n=0 rts=()
	for f in "$1" "$2"; do
		n=$((n + 1))
		kubectl set env --local -f "$f" --list >/dev/null 2>"$TA_WORK/kubectl.err" ||
			{ grep -v 'Config not found' "$TA_WORK/kubectl.err"; return 1; }
		# -o prints only a changed object: one more variable (appended, the rest unmoved).
		kubectl set env --local -f "$f" TA_DECODED=1 -o json >"$TA_WORK/rt$n.json" 2>/dev/null
		rts+=("$TA_WORK/rt$n.json")
	done
	python3 "$check" "$TA_TEST_SRCDIR/man/tieralloc.7" "$1" "$2" "${rts[@]}"
}

verify "$ds" "$pod" || ta_fail "deploy/kubernetes/ has problems (above)"
echo "manifests: ok ($(kubectl version --client 2>/dev/null | head -1))"

# The pod's TIERALLOC_* values as the preload reads them: a bad one ends a strict run.
vars=()
while read -r kv; do
	vars+=("$kv")
done < <(python3 -c '
import sys, yaml
for c in yaml.safe_load(open(sys.argv[1]))["spec"]["containers"]:
    for e in c.get("env", []):
        if e["name"].startswith("TIERALLOC_"):
            print(e["name"] + "=" + e["value"])' "$pod")
[[ ${#vars[@]} -gt 0 ]] || ta_fail "the pod sets no TIERALLOC_* variable"
# No segment: the limits must not reach the segment of the cgroup this test runs in.
strict=(TIERALLOC_SHM_NAME=off TIERALLOC_STRICT=1 LD_PRELOAD="$TA_TEST_PRELOAD")
env "${vars[@]}" "${strict[@]}" /bin/true 2>"$TA_WORK/strict.err" ||
	{ cat "$TA_WORK/strict.err" >&2; ta_fail "the preload refuses the pod's values: ${vars[*]}"; }
# ... and the same strict run refuses a broken value, so the line above can fail.
if env TIERALLOC_TIER_LIMITS="0.max=lots" "${strict[@]}" /bin/true 2>/dev/null; then
	ta_fail "TIERALLOC_STRICT=1 accepted a bad TIERALLOC_TIER_LIMITS"
fi
echo "the pod's TIERALLOC_* values: ok"

# Broken copies: each must be refused.
bad()
{
	local what=$1 file=$2 expr=$3
	sed -e "$expr" "$file" >"$TA_WORK/bad.yaml"
	cmp -s "$file" "$TA_WORK/bad.yaml" && ta_hard_error "the edit for '$what' changed nothing"
	local d=$ds p=$pod
	[[ $file == "$ds" ]] && d=$TA_WORK/bad.yaml || p=$TA_WORK/bad.yaml
	if verify "$d" "$p" >"$TA_WORK/bad.out" 2>&1; then
		ta_fail "a manifest with $what was accepted"
	fi
	echo "refused, $what: $(head -1 "$TA_WORK/bad.out")"
}
bad "no hostPID" "$ds" '/hostPID: true/d'
bad "hostPID not a boolean" "$ds" 's/hostPID: true/hostPID: "yes"/'
bad "a misspelled field" "$ds" 's/imagePullPolicy:/imagePullPolcy:/'
bad "a field at the wrong level" "$pod" 's/^  restartPolicy:/  metadata2:\n    restartPolicy:/'
bad "no /dev/shm of the host" "$ds" 's|path: /dev/shm|path: /run/shm|'
bad "a bad quantity" "$ds" 's/memory: 32Mi/memory: lots/'
bad "an unknown variable" "$pod" 's/TIERALLOC_SUMMARY/TIERALLOC_SUMARY/'
bad "no LD_PRELOAD" "$pod" 's/name: LD_PRELOAD/name: LD_PRELOADED/'
echo "PASS"
