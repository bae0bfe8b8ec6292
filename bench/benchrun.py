# SPDX-License-Identifier: MIT
"""What the Python bench drivers share: the preloaded peers' libraries, an environment free of
tieralloc's own settings, and one timed run of a program (wall time, CPU time and max RSS from
wait4, so that the allocator's own threads count)."""
import os
import subprocess
import threading
import time

PEERS = (("jemalloc", "libjemalloc.so.2"), ("mimalloc", "libmimalloc.so.2"),
         ("tcmalloc", "libtcmalloc_minimal.so.4"))


def find_lib(name):
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/lib"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def peer_arms():
    """(name, extra environment) of each installed peer; a line for each missing one."""
    arms = []
    for name, so in PEERS:
        lib = find_lib(so)
        if lib:
            arms.append((name, {"LD_PRELOAD": lib}))
        else:
            print(f"# {so} not installed: no {name} arm")
    return arms


def clean_env():
    """The caller's environment less TIERALLOC_* and LD_PRELOAD: every arm starts the same."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("TIERALLOC_") and k != "LD_PRELOAD"}


def preload_of(builddir):
    return os.path.join(os.path.abspath(builddir), "preload/.libs/libtieralloc-preload.so")


# A child of this process starts with its high-water RSS (a fork's copy, or under vfork the
# parent's own memory, both kept across exec): a Python driver's 15 MiB would hide a small
# program's. GNU time, a small process, forks the program and reports its own max RSS.
TIME = "/usr/bin/time"


def run_once(cmd, env, work, cwd=None, stdin=None, timeout=None):
    """(seconds, max RSS KiB, exit code, stdout's path, CPU seconds). The output goes to
    work/out and work/err; a run past timeout seconds is killed."""
    out = os.path.join(work, "out")
    rusage = os.path.join(work, "rusage")
    if os.path.exists(rusage):
        os.unlink(rusage)
    timed = [TIME, "-f", "%M %U %S", "-o", rusage, "--"] + cmd if os.access(TIME, os.X_OK) \
        else cmd
    with open(out, "wb") as so, open(os.path.join(work, "err"), "wb") as se:
        t0 = time.monotonic()
        proc = subprocess.Popen(timed, env=env, stdout=so, stderr=se, cwd=cwd,
                                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                start_new_session=True)
        # The whole group: time's child with it.
        timer = threading.Timer(timeout, os.killpg, (proc.pid, 9)) if timeout else None
        if timer:
            timer.start()
        # Reaped here, not by Popen.wait(), so that its rusage is ours to read.
        _, status, ru = os.wait4(proc.pid, 0)
        elapsed = time.monotonic() - t0
        if timer:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    maxrss, cpu = ru.ru_maxrss, ru.ru_utime + ru.ru_stime
    try:
        # The last line: time puts "Command exited with non-zero status" before it.
        f = open(rusage).read().split("\n")
        last = [x for x in f if x.strip()][-1].split()
        maxrss, cpu = int(last[0]), float(last[1]) + float(last[2])
    except (OSError, IndexError, ValueError):
        pass  # no time, or it was killed: the rusage of what was waited for
    return elapsed, maxrss, proc.returncode, out, cpu
