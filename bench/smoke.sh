#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Smoke test of the benchmark (the only part of bench/ that `make check` runs): with a few steps
# per size band and thread count, every allocator the benchmark compares must hand out aligned,
# writable memory that keeps its contents until freed. No timing is checked. glibc, tieralloc
# and memkind run without any preload; jemalloc, when libjemalloc.so.2 is installed, runs under
# LD_PRELOAD (skipped in sanitizer builds, whose runtime must come first).
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

je=${BENCH_JEMALLOC:-}
if [ -z "$je" ]; then
	for f in /usr/lib/*/libjemalloc.so.2 /lib/*/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 \
		/usr/local/lib/libjemalloc.so.2; do
		[ -e "$f" ] && je=$f && break
	done
fi
if [ -z "$je" ]; then
	echo "smoke: libjemalloc.so.2 not installed; jemalloc not checked"
	exit 0
fi
if "$bin" --info | grep -q 'sanitizer=yes'; then
	echo "smoke: sanitizer build; jemalloc not checked"
	exit 0
fi
LD_PRELOAD=$je "$bin" --smoke --alloc jemalloc
rc=$?
case $rc in
0) exit 0 ;;
1) exit 1 ;;
*) echo "smoke: $bin --smoke --alloc jemalloc exited $rc" >&2; exit 99 ;;
esac
