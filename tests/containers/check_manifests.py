#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Offline check of deploy/kubernetes/ (test_kube_manifests.sh runs it): what the agent and the
preload need is in the manifests, and every field survived kubectl's typed decoding.

  check_manifests.py MANPAGE DAEMONSET POD [ROUNDTRIP.json...]

MANPAGE, man/tieralloc.7, gives the TIERALLOC_* names (its ENVIRONMENT entries, `.TP` then
`.B NAME`). A ROUNDTRIP file is kubectl's JSON of
one manifest after decoding it into the API's Go types (`kubectl set env --local X=1 -o json`):
a field that is missing there is one the API does not know (a typo, a wrong level). Prints one
line per problem and exits 1 if there was any."""
import json
import re
import sys

import yaml

problems = []


def need(cond, what):
    if not cond:
        problems.append(what)
    return cond


def paths(node, prefix=""):
    """Every key path of a document; list items by index."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + "." + k
            yield from paths(v, prefix + "." + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, "%s[%d]" % (prefix, i))


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    need(len(docs) == 1, "%s: one document expected, found %d" % (path, len(docs)))
    return docs[0]


def pod_spec_common(spec, where):
    containers = spec.get("containers") or []
    need(len(containers) >= 1, where + ": no containers")
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for c in containers:
        need(c.get("name") and c.get("image"), where + ": a container needs a name and an image")
        for m in c.get("volumeMounts") or []:
            need(m.get("name") in volumes, "%s: mount of undefined volume %r" % (where, m.get("name")))
    return containers, volumes


def check_daemonset(ds):
    need(ds.get("apiVersion") == "apps/v1" and ds.get("kind") == "DaemonSet", "daemonset: kind")
    need((ds.get("metadata") or {}).get("name"), "daemonset: metadata.name")
    spec = ds.get("spec") or {}
    tmpl = spec.get("template") or {}
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    need(sel and all(labels.get(k) == v for k, v in sel.items()),
         "daemonset: selector.matchLabels must match the template's labels")
    pod = tmpl.get("spec") or {}
    need(pod.get("hostPID") is True, "daemonset: hostPID: true (the pods' /proc/<pid>/root)")
    containers, volumes = pod_spec_common(pod, "daemonset")
    agent = [c for c in containers if "tierallocd" in " ".join(c.get("command") or [])]
    if not need(len(agent) == 1, "daemonset: one container must run tierallocd"):
        return
    agent = agent[0]
    sc = agent.get("securityContext") or {}
    need(sc.get("privileged") is True, "daemonset: privileged (bpf, perf_event_open, ptrace)")
    need(sc.get("runAsUser") in (None, 0), "daemonset: tierallocd runs as root")
    mounts = {m.get("mountPath"): m for m in agent.get("volumeMounts") or []}
    for path, ro in (("/dev/shm", False), ("/sys/kernel/btf", True),
                     ("/sys/kernel/tracing", True), ("/sys/fs/cgroup", True)):
        m = mounts.get(path)
        if not need(m is not None, "daemonset: %s is not mounted" % path):
            continue
        host = (volumes.get(m.get("name")) or {}).get("hostPath") or {}
        need(host.get("path") == path, "daemonset: %s must be the host's %s" % (path, path))
        need(bool(m.get("readOnly")) == ro,
             "daemonset: %s %s" % (path, "read only" if ro else "writable (it writes segments)"))


def check_pod(pod, known):
    need(pod.get("apiVersion") == "v1" and pod.get("kind") == "Pod", "pod: kind")
    need((pod.get("metadata") or {}).get("name"), "pod: metadata.name")
    containers, _ = pod_spec_common(pod.get("spec") or {}, "pod")
    for c in containers:
        env = {e.get("name"): e.get("value") for e in c.get("env") or []}
        need(re.fullmatch(r"/usr/lib/[a-z0-9_]+-linux-gnu[a-z0-9_]*/libtieralloc-preload\.so",
                          env.get("LD_PRELOAD") or ""),
             "pod: LD_PRELOAD must name the library where Debian's tieralloc-preload puts it")
        ta = [n for n in env if n.startswith("TIERALLOC_")]
        need(ta, "pod: no TIERALLOC_* variable")
        for n in ta:
            need(n in known, "pod: %s is not a tieralloc variable (tieralloc(7))" % n)
            need(isinstance(env[n], str), "pod: %s needs a string value" % n)
        limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        need(limit, "pod: a memory limit (what the tiers' shares split)")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        known = set(re.findall(r"^\.TP\n\.B (TIERALLOC_[A-Z_]+)$", f.read(), re.M))
    need(len(known) > 5, "tieralloc(7): the ENVIRONMENT entries were not found")
    ds, pod = load(sys.argv[2]), load(sys.argv[3])
    check_daemonset(ds)
    check_pod(pod, known)
    for rt in sys.argv[4:]:
        with open(rt) as f:
            out = json.load(f)
        src = ds if out.get("kind") == ds.get("kind") else pod
        lost = sorted(set(paths(src)) - set(paths(out)))
        need(not lost, "%s: fields the API does not know: %s" % (src.get("kind"), ", ".join(lost)))
    for p in problems:
        print("manifest:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
