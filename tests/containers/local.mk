# Containers (docs/containers.md): the recipes, run or checked.
#   test_podman.sh  two Podman containers from a rootfs directory, each with its own TIERALLOC_*
#                   values, seen by one tieralloc-stat on the host (root and podman: 77 without,
#                   a failure under CI=true). It runs quota_hog (tests/quota/) under the preload:
#                   not in a sanitized build.
EXTRA_DIST += tests/containers/test_podman.sh
if !SANITIZED
TESTS += tests/containers/test_podman.sh
endif
