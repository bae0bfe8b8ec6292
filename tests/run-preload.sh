#!/bin/sh
# SPDX-License-Identifier: MIT
#
# LOG_COMPILER of `make check`: runs one test. automake passes every test of the tree through
# here, so only tests/integration/ is treated specially:
#   - tests/integration/*.sh: scripts that compare runs with and without the preload themselves
#     (tests/integration/lib.sh); they are started with bash, not under the preload;
#   - any other tests/integration/ program: runs with LD_PRELOAD set to the built preload
#     library, after reading the sibling <test>.env (VAR=value lines, e.g. TIERALLOC_TIERS) if
#     there is one;
#   - every other test (unit tests link the core directly) runs as is.
# The paths come from AM_TESTS_ENVIRONMENT (tests/integration/local.mk): TA_TEST_PRELOAD, the
# library, and TA_TEST_SRCDIR, the source tree. They are not named TIERALLOC_*: the preload warns
# about TIERALLOC_* variables it does not know.

test_path=$1

case $test_path in
*tests/integration/*.sh)
	exec bash "$@"
	;;
*tests/integration/*) ;;
*)
	exec "$@"
	;;
esac

if [ -z "${TA_TEST_PRELOAD:-}" ] || [ ! -f "$TA_TEST_PRELOAD" ]; then
	echo "run-preload.sh: preload library not found: '${TA_TEST_PRELOAD:-}' (TA_TEST_PRELOAD)" >&2
	exit 99
fi

# The .env file sits in the source tree next to the program's sources.
name=${test_path##*/}
env_file=${TA_TEST_SRCDIR:-.}/tests/integration/$name.env
if [ -f "$env_file" ]; then
	set -a
	# shellcheck disable=SC1090 # the file depends on the test
	. "$env_file"
	set +a
fi

# TA_TEST_UNDER_PRELOAD tells the program to check that its malloc really is tieralloc's.
TA_TEST_UNDER_PRELOAD=1
export TA_TEST_UNDER_PRELOAD
LD_PRELOAD=$TA_TEST_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}
export LD_PRELOAD
exec "$@"
