#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Driver of `make bench-runtime-cost`: what the preload costs programs whose heaps are not
malloc's (issue 30 item 5). A Python, a Node.js and a Java workload of allocation and garbage
collection (objects and strings built and dropped in rounds; node also churns Buffers, whose
backing stores come from malloc) run without a preload (glibc), under tieralloc in its default
configuration (it charges the cgroup's quota segment, shared with whatever else runs in the
cgroup, and its worker samples the program's own mappings), under tieralloc with a segment of
the run's own (`ta+quota`: the run alone in its books, as coverage measures it), and under the
preloaded peers that are installed (jemalloc, mimalloc, tcmalloc). Arms are interleaved, their
order rotating every round; each run's wall time and max RSS (wait4) are kept and every run's
output (a checksum) must be the same for every arm of a program.

Usage: run-runtime-cost.py BUILDDIR [--reps N] [--scale F] [--programs python,node,java]
  --scale multiplies the rounds of each workload (default 1: about 1-3 s each on a 2-core host);
  --smoke: one round at scale 0.05, and exit 1 when any run failed or a checksum differed.
Prints one line per run, then per program the fastest and the median wall time, the least CPU
time (every thread's: the JVM's collector and compiler run beside the program) and the median max
RSS of each arm, and their ratios to glibc's; the issue's bar is tieralloc's time within 1.03x.
On a shared host one run can take 1.5x another of the same arm: compare the fastest runs, and
ratios within one output only.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchrun

PY = """
import sys
rounds = int(sys.argv[1])
t = 0
for r in range(rounds):
    x = [{'k': i, 'v': str(i) * 3} for i in range(60000)]
    y = [d['v'] + str(r) for d in x if d['k'] % 3]
    t = (t * 31 + len(y) + len(y[-1])) % 1000000007
    del x, y
print(t)
"""

JS = """
const rounds = Number(process.argv[process.argv.length - 1]);
let t = 0;
for (let r = 0; r < rounds; r++) {
	const x = [];
	for (let i = 0; i < 120000; i++) x.push({ k: i, v: 's' + i + ':' + r });
	const y = x.filter((o) => o.k % 3).map((o) => o.v + o.v);
	const bufs = [];
	for (let i = 0; i < 400; i++) bufs.push(Buffer.alloc(16384 + (i % 7) * 4096, i & 255));
	t = (t * 31 + y.length + y[y.length - 1].length + bufs[399][5]) % 1000000007;
}
console.log(t);
"""

JAVA = """
import java.util.ArrayList;
import java.util.HashMap;

public final class Churn {
	public static void main(String[] args) {
		int rounds = Integer.parseInt(args[0]);
		long t = 0;
		for (int r = 0; r < rounds; r++) {
			HashMap<Integer, String> x = new HashMap<>();
			for (int i = 0; i < 150000; i++)
				x.put(i, "s" + i + ":" + r);
			ArrayList<String> y = new ArrayList<>();
			for (int i = 0; i < 150000; i += 2)
				y.add(x.get(i) + x.get(i + 1));
			t = (t * 31 + y.size() + y.get(y.size() - 1).length()) % 1000000007L;
		}
		System.out.println(t);
	}
}
"""

# Rounds per workload at --scale 1.
ROUNDS = {"python": 40, "node": 40, "java": 60}


def run_once(cmd, env, work):
    """(seconds, max RSS KiB, status, first line of stdout, CPU seconds)."""
    sec, rss, rc, out, cpu = benchrun.run_once(cmd, env, work)
    with open(out, "rb") as f:
        line = f.readline().decode(errors="replace").strip()
    return sec, rss, rc, line, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builddir")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--programs", default="python,node,java")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.reps, a.scale = 1, 0.05
    preload = benchrun.preload_of(a.builddir)
    if not os.path.exists(preload):
        print(f"run-runtime-cost: {preload} missing: build first", file=sys.stderr)
        return 2

    work = tempfile.mkdtemp(prefix="ta-rtcost.")
    try:
        return measure(a, preload, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        try:
            os.unlink(f"/dev/shm/ta-rtcost-{os.getpid()}")
        except FileNotFoundError:
            pass


def measure(a, preload, work):
    base = benchrun.clean_env()
    arms = [("glibc", {}), ("tieralloc", {"LD_PRELOAD": preload}),
            ("ta+quota", {"LD_PRELOAD": preload,
                          "TIERALLOC_SHM_NAME": f"/ta-rtcost-{os.getpid()}"})]
    arms += benchrun.peer_arms()

    progs = {}
    for p in a.programs.split(","):
        rounds = str(max(1, round(ROUNDS[p] * a.scale)))
        if p == "python" and shutil.which("python3"):
            progs[p] = ["python3", "-c", PY, rounds]
        elif p == "node" and shutil.which("node"):
            progs[p] = ["node", "-e", JS, "--", rounds]
        elif p == "java" and shutil.which("java") and shutil.which("javac"):
            with open(os.path.join(work, "Churn.java"), "w") as f:
                f.write(JAVA)
            subprocess.run(["javac", "-d", work, os.path.join(work, "Churn.java")], check=True)
            progs[p] = ["java", "-XX:+UseG1GC", "-Xmx1g", "-cp", work, "Churn", rounds]
        else:
            print(f"# {p}: its runtime is not installed: not measured")
    if not progs:
        print("run-runtime-cost: nothing to measure", file=sys.stderr)
        return 2 if a.smoke else 0

    load0 = open("/proc/loadavg").read().split()[:3]
    print(f"runtime cost, {time.strftime('%F %H:%M')}, {a.reps} rounds, scale {a.scale}, "
          f"load average {' '.join(load0)}")
    res = {(p, arm): [] for p in progs for arm, _ in arms}
    outputs = {p: set() for p in progs}
    failed = 0
    for rep in range(a.reps):
        order = arms[rep % len(arms):] + arms[:rep % len(arms)]
        for p, cmd in progs.items():
            for arm, extra in order:
                env = dict(base, **extra)
                sec, rss, rc, line, cpu = run_once(cmd, env, work)
                print(f"program={p} arm={arm} round={rep + 1} s={sec:.3f} cpu_s={cpu:.3f} "
                      f"maxrss_kib={rss} status={rc} out={line}")
                if rc != 0:
                    failed += 1
                    err = open(os.path.join(work, "err"), errors="replace").read(300)
                    print(f"# {p} under {arm} failed: {err.strip()}")
                    continue
                if not line:
                    failed += 1
                    print(f"# {p} under {arm} printed no checksum")
                    continue
                outputs[p].add(line)
                res[(p, arm)].append((sec, rss, cpu))
    load1 = open("/proc/loadavg").read().split()[:3]

    print(f"\nper arm: the fastest run's wall time (best), the median one (time), the least CPU "
          f"time, user + system (cpu), the median max RSS (rss); ratios to glibc in the same run "
          f"(load average at the end {' '.join(load1)})")
    names = [arm for arm, _ in arms]
    print(f"{'program':8} {'':5} " + " ".join(f"{n:>10}" for n in names))
    for p in progs:
        med = {}
        for arm in names:
            v = res[(p, arm)]
            med[arm] = (min(x[0] for x in v), statistics.median(x[0] for x in v),
                        min(x[2] for x in v), statistics.median(x[1] for x in v)) if v else None
        g = med["glibc"]
        for i, what in ((0, "best"), (1, "time"), (2, "cpu"), (3, "rss")):
            cells = []
            for arm in names:
                m = med[arm]
                if m is None:
                    cells.append(f"{'-':>10}")
                elif arm == "glibc" or g is None:
                    cells.append(f"{m[i]:10.3f}" if i < 3 else f"{m[i] / 1024:10.1f}")
                else:
                    cells.append(f"{m[i] / g[i]:9.3f}x")
            print(f"{p:8} {what:5} " + " ".join(cells))
        if len(outputs[p]) > 1:
            failed += 1
            print(f"# {p}: outputs differ between arms: {sorted(outputs[p])}")
    print("(glibc's column: seconds and MiB; the others: ratio to glibc's)")
    if failed:
        print(f"run-runtime-cost: {failed} failed runs or differing outputs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
