#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Smoke test of the benchmark (the only part of bench/ that `make check` runs): with a few steps
# per size band and thread count, every allocator the benchmark compares must hand out aligned,
# writable memory that keeps its contents until freed. No timing is checked. glibc, tieralloc
# and memkind run without any preload; jemalloc, mimalloc and tcmalloc, each when installed, run
# under LD_PRELOAD (skipped in sanitizer builds, whose runtime must come first).
# Exit: 0 pass, 1 fail, 77 skip (benchmark not built), 99 hard error.

set -u
bin=${BENCH_MALLOC:-./bench/bench-malloc}
if [ ! -x "$bin" ]; then
	echo "smoke: $bin not built; skipping" >&2
	exit 77
fi

# Default configuration, no allocator from the caller's environment.
for v in $(env | sed -n 's/^\(TIERALLOC_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done
unset LD_PRELOAD

"$bin" --smoke
rc=$?
case $rc in
0) ;;
1) exit 1 ;;
*) echo "smoke: $bin --smoke exited $rc" >&2; exit 99 ;;
esac

if "$bin" --info | grep -q 'sanitizer=yes'; then
	echo "smoke: sanitizer build; the preloaded peers not checked"
	exit 0
fi
# The preloaded peers, each when installed (BENCH_JEMALLOC, BENCH_MIMALLOC, BENCH_TCMALLOC: paths).
status=0
for peer in jemalloc:libjemalloc.so.2:${BENCH_JEMALLOC:-} mimalloc:libmimalloc.so.2:${BENCH_MIMALLOC:-} \
	tcmalloc:libtcmalloc_minimal.so.4:${BENCH_TCMALLOC:-}; do
	name=${peer%%:*} rest=${peer#*:}
	so=${rest%%:*} lib=${rest#*:}
	if [ -z "$lib" ]; then
		for f in /usr/lib/*/"$so" /lib/*/"$so" /usr/lib/"$so" /usr/local/lib/"$so"; do
			[ -e "$f" ] && lib=$f && break
		done
	fi
	if [ -z "$lib" ]; then
		echo "smoke: $so not installed; $name not checked"
		continue
	fi
	LD_PRELOAD=$lib "$bin" --smoke --alloc "$name"
	rc=$?
	case $rc in
	0) ;;
	1) status=1 ;;
	*) echo "smoke: $bin --smoke --alloc $name exited $rc" >&2; exit 99 ;;
	esac
done
exit $status
