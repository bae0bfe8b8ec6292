#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Driver of `make bench-peers`: the allocator benchmarks of mimalloc-bench (cfrac, espresso,
larson, xmalloc-test, ...) under glibc, tieralloc's preload and the installed peers (jemalloc,
mimalloc, tcmalloc), every arm in the same run, for issue 33's table.

The programs are not ours and never enter this repository: check out mimalloc-bench elsewhere
and build its bench/ directory with CMake (docs: bench/README.md, "The peers' suite"). DIR is that
checkout: programs are looked for in DIR/out/bench (or --programs), inputs (espresso's, barnes's,
z3's) in DIR/bench; z3 and rocksdb's db_bench also on PATH. A test whose program is missing is
listed and left out.

Usage: run-peers.py BUILDDIR DIR [--rounds N] [--tests a,b,...] [--procs N] [--timeout S]
Each round runs every test under every arm, the arms' order rotating per round. A test's cost is
its wall time, or the time the program reports itself where it runs for a fixed span (larson:
"relative time", xmalloc-test: "rtime", glibc-thread: 1e9 / its iterations); its memory is the
max RSS (wait4). Prints one line per run, then per test the best cost and the median max RSS of
each arm as ratios to glibc, tieralloc's ratio to the best other arm, and the geometric means of
each round and of the best costs. Exit 1 when a run failed (its test is left out of the means).
"""
import argparse
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import benchrun

# name: (program, arguments, how the cost is read, stdin). {procs} and {src} are filled in.
TESTS = {
    "cfrac": ("cfrac", ["17545186520507317056371138836327483792789528"], "wall", None),
    "espresso": ("espresso", ["{src}/espresso/largest.espresso"], "wall", None),
    "barnes": ("barnes", [], "wall", "{src}/barnes/input"),
    "alloc-test1": ("alloc-test", ["1"], "wall", None),
    "alloc-testN": ("alloc-test", ["{procs}"], "wall", None),
    "larsonN": ("larson", ["5", "8", "1000", "5000", "100", "4141", "{procs}"], "larson", None),
    "larsonN-sized": ("larson-sized", ["5", "8", "1000", "5000", "100", "4141", "{procs}"],
                      "larson", None),
    "mstressN": ("mstress", ["{procs}", "50", "25"], "wall", None),
    "xmalloc-testN": ("xmalloc-test", ["-w", "{procs}", "-t", "5", "-s", "64"], "rtime", None),
    "cache-scratch1": ("cache-scratch", ["1", "1000", "1", "2000000", "{procs}"], "wall", None),
    "cache-scratchN": ("cache-scratch", ["{procs}", "1000", "1", "2000000", "{procs}"], "wall",
                       None),
    "glibc-simple": ("glibc-simple", [], "wall", None),
    "glibc-thread": ("glibc-thread", ["{procs}"], "iterations", None),
    "malloc-large": ("malloc-large", [], "wall", None),
    "mleak10": ("mleak", ["5"], "wall", None),
    "mleak100": ("mleak", ["50"], "wall", None),
    "z3": ("z3", ["-smt2", "{src}/z3/test1.smt2"], "wall", None),
    "rocksdb": ("db_bench", ["--benchmarks=fillrandom"], "wall", None),
}

REPORTED = {
    "larson": re.compile(rb"relative time: *([0-9.]+)"),
    "rtime": re.compile(rb"rtime: *([0-9.]+)"),
    "iterations": re.compile(rb"^\s*([0-9.]+)"),
}


def cost_of(kind, elapsed, out):
    """The run's cost in seconds, or None when its output does not say it."""
    if kind == "wall":
        return elapsed
    with open(out, "rb") as f:
        m = REPORTED[kind].search(f.read())
    if m is None:
        return None
    v = float(m.group(1))
    if kind == "iterations":
        return 1e9 / v if v > 0 else None
    return v


def find_program(name, progdir):
    p = os.path.join(progdir, name)
    if os.access(p, os.X_OK):
        return p
    return shutil.which(name)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builddir")
    ap.add_argument("benchdir")
    ap.add_argument("--programs", help="the built programs (default BENCHDIR/out/bench)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    preload = benchrun.preload_of(a.builddir)
    if not os.path.exists(preload):
        print(f"run-peers: {preload} missing: build first", file=sys.stderr)
        return 2
    src = os.path.join(os.path.abspath(a.benchdir), "bench")
    progdir = a.programs or os.path.join(os.path.abspath(a.benchdir), "out", "bench")
    if not os.path.isdir(progdir):
        print(f"run-peers: no programs in {progdir}: build mimalloc-bench's bench/ there "
              f"(bench/README.md)", file=sys.stderr)
        return 2

    tests = {}
    for name in a.tests.split(","):
        if name not in TESTS:
            print(f"run-peers: no test {name}; known: {', '.join(TESTS)}", file=sys.stderr)
            return 2
        prog, args, kind, stdin = TESTS[name]
        path = find_program(prog, progdir)
        if path is None:
            print(f"# {name}: no {prog} in {progdir} nor on PATH: left out")
            continue
        fill = {"procs": str(a.procs), "src": src}
        tests[name] = ([path] + [x.format(**fill) for x in args], kind,
                       stdin.format(**fill) if stdin else None)
    if not tests:
        print("run-peers: none of the tests' programs found", file=sys.stderr)
        return 2

    arms = [("glibc", {}), ("tieralloc", {"LD_PRELOAD": preload})] + benchrun.peer_arms()
    work = tempfile.mkdtemp(prefix="ta-peers.")
    try:
        return measure(a, tests, arms, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(a, tests, arms, work):
    base = benchrun.clean_env()
    names = [arm for arm, _ in arms]
    load0 = open("/proc/loadavg").read().split()[:3]
    print(f"peers' suite, {time.strftime('%F %H:%M')}, {a.rounds} rounds, {a.procs} threads "
          f"for N, load average {' '.join(load0)}")
    cost = {(t, arm, r): None for t in tests for arm in names for r in range(a.rounds)}
    rss = {(t, arm): [] for t in tests for arm in names}
    failed = 0
    for r in range(a.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for t, (cmd, kind, stdin) in tests.items():
            for arm, extra in order:
                with open(stdin, "rb") if stdin else open(os.devnull, "rb") as inp:
                    sec, kib, rc, out, cpu = benchrun.run_once(
                        cmd, dict(base, **extra), work, cwd=work, stdin=inp,
                        timeout=a.timeout)
                c = cost_of(kind, sec, out) if rc == 0 else None
                print(f"test={t} arm={arm} round={r + 1} s={sec:.3f} cost={c if c else 0:.3f} "
                      f"cpu_s={cpu:.3f} maxrss_kib={kib} status={rc}", flush=True)
                if c is None:
                    failed += 1
                    err = open(os.path.join(work, "err"), errors="replace").read(300).strip()
                    print(f"# {t} under {arm} failed (status {rc}"
                          f"{', no cost in its output' if rc == 0 else ''}): {err}")
                    continue
                cost[(t, arm, r)] = c
                rss[(t, arm)].append(kib)
    load1 = open("/proc/loadavg").read().split()[:3]
    report(a, tests, names, cost, rss, load1)
    return 1 if failed else 0


def report(a, tests, names, cost, rss, load1):
    complete = [t for t in tests
                if all(cost[(t, arm, r)] is not None for arm in names for r in range(a.rounds))]
    print(f"\nper test: the best cost of each arm (seconds for glibc, else the ratio to "
          f"glibc's), then the median max RSS likewise; vs best: tieralloc's ratio to the best "
          f"other arm (load average at the end {' '.join(load1)})")
    w = max(len(t) for t in tests) + 1
    head = " ".join(f"{n:>9}" for n in names)
    print(f"{'test':{w}} {'':4} {head} {'vs best':>8}")
    best_cost, med_rss = {}, {}
    for t in tests:
        for arm in names:
            v = [cost[(t, arm, r)] for r in range(a.rounds) if cost[(t, arm, r)] is not None]
            best_cost[(t, arm)] = min(v) if v else None
            med_rss[(t, arm)] = statistics.median(rss[(t, arm)]) if rss[(t, arm)] else None
        for what, val, unit in (("time", best_cost, 1.0), ("rss", med_rss, 1024.0)):
            g = val[(t, "glibc")]
            cells = []
            for arm in names:
                v = val[(t, arm)]
                if v is None or g is None:
                    cells.append(f"{'fail':>9}")
                elif arm == "glibc":
                    cells.append(f"{v / unit:9.3f}")
                else:
                    cells.append(f"{v / g:8.3f}x")
            others = [val[(t, n)] for n in names if n != "tieralloc" and val[(t, n)]]
            ta = val[(t, "tieralloc")]
            vs = f"{ta / min(others):7.2f}x" if ta and others else f"{'':>8}"
            print(f"{t if what == 'time' else '':{w}} {what:4} {' '.join(cells)} {vs}")
    print(f"\ngeometric means of the ratios to glibc over the {len(complete)} tests every arm "
          f"completed every round ({', '.join(t for t in tests if t not in complete) or 'none'}"
          f" left out)")
    print(f"{'':{w + 5}}" + head)
    rows = [(f"time, round {r + 1}",
             lambda t, arm, r=r: cost[(t, arm, r)] / cost[(t, "glibc", r)])
            for r in range(a.rounds)]
    rows.append(("time, best", lambda t, arm: best_cost[(t, arm)] / best_cost[(t, "glibc")]))
    rows.append(("max RSS", lambda t, arm: med_rss[(t, arm)] / med_rss[(t, "glibc")]))
    for label, ratio in rows:
        cells = [f"{geomean([ratio(t, arm) for t in complete]):9.3f}" for arm in names]
        print(f"{label:{w + 4}} {' '.join(cells)}")


if __name__ == "__main__":
    sys.exit(main())
