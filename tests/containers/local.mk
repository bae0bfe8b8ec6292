# Containers (docs/containers.md): the recipes, run or checked.
#   test_podman.sh  two Podman containers from a rootfs directory, each with its own TIERALLOC_*
#                   values and private /dev/shm, seen in their mount namespaces by one
#                   tieralloc-stat on the host (root and podman: 77 without,
#                   a failure under CI=true). It runs quota_hog (tests/quota/) under the preload:
#                   not in a sanitized build.
EXTRA_DIST += tests/containers/test_podman.sh
if !SANITIZED
TESTS += tests/containers/test_podman.sh
endif
#   test_kube_manifests.sh  deploy/kubernetes/ checked offline: kubectl's decoding into the API's
#                   types (no server), check_manifests.py (what the agent and the preload need,
#                   no field lost in decoding, known TIERALLOC_* names), the pod's values under
#                   TIERALLOC_STRICT=1 with the built preload (so not in a sanitized build), and
#                   broken copies refused (python3-yaml and kubectl: 77 without, a failure under
#                   CI=true).
EXTRA_DIST += tests/containers/test_kube_manifests.sh tests/containers/check_manifests.py \
	deploy/kubernetes/tierallocd-daemonset.yaml deploy/kubernetes/pod-example.yaml \
	docs/containers.md
if !SANITIZED
TESTS += tests/containers/test_kube_manifests.sh
endif
