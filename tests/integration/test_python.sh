#!/bin/bash
# SPDX-License-Identifier: MIT
#
# CPython under the preload: a thread pool hashing and sorting (threads allocating and freeing
# each other's objects through the GIL hand-offs), then a fork-started multiprocessing pool (fork
# from a process whose other threads have used the allocator, children allocating and exiting),
# and a second pass over both with two tiers and a 1 MiB tier-0 limit, so that objects migrate
# between tiers' caches as well. The output must be the same as without the preload.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require python3 python3
# pyenv and similar install a shell shim as python3: run the interpreter itself.
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
export PYTHON

cat >"$TA_WORK/work.py" <<'EOF'
import hashlib
import multiprocessing
import random
from multiprocessing.pool import ThreadPool


def hash_chunk(seed):
    rng = random.Random(seed)
    blobs = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))) for _ in range(40)]
    h = hashlib.sha256()
    for b in sorted(blobs):
        h.update(hashlib.md5(b * 3).digest())
    return seed, h.hexdigest()


def sort_chunk(seed):
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
             for _ in range(20000)]
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return seed, len(counts), top, sorted(words)[len(words) // 2]


def proc_work(n):
    # Lists, dicts, big ints and bytes: every CPython allocator path (pymalloc arenas, and
    # malloc for objects over 512 bytes).
    rng = random.Random(n)
    table = {i: [rng.random() for _ in range(rng.randint(1, 50))] for i in range(2000)}
    total = sum(len(v) for v in table.values())
    big = 1
    for i in range(1, 300 + n):
        big *= i
    data = bytearray(rng.getrandbits(8) for _ in range(50000))
    return n, total, big % 1000003, hashlib.sha1(bytes(data)).hexdigest()


def main():
    with ThreadPool(4) as pool:
        for seed, digest in pool.map(hash_chunk, range(24)):
            print("hash", seed, digest)
        for seed, n, top, mid in pool.imap_unordered(sort_chunk, range(12)):
            pass
        results = sorted(pool.map(sort_chunk, range(12)))
        for r in results:
            print("sort", *r)
    ctx = multiprocessing.get_context("fork")
    for _ in range(2):
        with ctx.Pool(4) as pool:
            for r in pool.map(proc_work, range(16), chunksize=2):
                print("proc", *r)
    # A thread pool again after the fork pools, then a fork while threads are busy.
    with ThreadPool(3) as tpool:
        pending = tpool.map_async(hash_chunk, range(100, 112))
        with ctx.Pool(2) as pool:
            print("late", sum(t for _, t, _, _ in pool.map(proc_work, range(6))))
        for seed, digest in pending.get():
            print("hash2", seed, digest)


if __name__ == "__main__":
    main()
EOF

work()
{
	"$PYTHON" "$TA_WORK/work.py"
}
compare_runs python work
# shellcheck disable=SC2034 # read by compare_runs
TA_PRELOAD_ENV=(TIERALLOC_TIERS="0;0" TIERALLOC_PROCESS_LIMIT="0=1M" TIERALLOC_CHARGE_BATCH=4K)
TA_SUMMARY_MATCH="tier=1 .* steered_in=[1-9]" compare_runs python-two-tiers work
