#!/bin/bash
# SPDX-License-Identifier: MIT
# Install everything needed to build tieralloc and run all of its tests, guest tests included,
# on Debian 12. Needs root (apt-get). Safe to run again.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (it uses apt-get)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# Debian starts prometheus' service when it installs the package; the tests start their own
# server, so a service this script brought in is stopped and disabled again (one that was
# installed before is left alone).
had_prometheus=no
dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q 'install ok installed' &&
	had_prometheus=yes
# build: toolchain, autotools, memkind and libnuma; peers for bench/ (preloaded, run-bench.sh):
# jemalloc, mimalloc (libmimalloc2.0) and gperftools' tcmalloc (libtcmalloc-minimal4); GNU time
# for a program's own max RSS (bench/benchrun.py)
# the agent (bpf/): clang for the BPF program, bpftool for vmlinux.h and the skeleton, libbpf;
# libcgroup for its reads and writes of other cgroups' control files (agent/cgctl.c)
# tests: the real programs the integration tests run (nodejs and openjdk-17-jdk-headless, whose
# javac and jlink build a Java program and a small runtime, for the runtimes' guest test),
# clang-format for the style check, groff and man-db to render the manual pages with warnings on
# (tests/man/); prometheus for promtool and a
# server that scrapes the agent (its service is not started: the tests run their own);
# packages: debhelper, dpkg-dev and devscripts build the .debs from debian/ (tests/pkg/), fakeroot
# for debian/rules binary; systemd's systemd-analyze rates the agent's unit and
# systemd-container's systemd-nspawn boots systemd to run the agent under it (tests/tools/);
# containers (tests/containers/): podman with runc (crun 1.8 refuses hosts with cgroup v1 and a
# v2 hierarchy that has controllers), python3-yaml for the Kubernetes manifests' check;
# gnuplot-nox for tieralloc-plot (tests/tools/test_plot.sh, the guest tests' pictures)
apt-get install -y -q --no-install-recommends \
	build-essential autoconf automake libtool pkg-config \
	libmemkind-dev libnuma-dev numactl libjemalloc-dev libjemalloc2 \
	libmimalloc2.0 libtcmalloc-minimal4 \
	clang bpftool libbpf-dev libcgroup-dev \
	git sqlite3 perl python3 nodejs g++ clang-format gdb ca-certificates groff-base man-db \
	debhelper dpkg-dev devscripts fakeroot systemd systemd-container prometheus gnuplot-nox \
	podman runc python3-yaml openjdk-17-jdk-headless time
# kubectl for the manifests' client-side dry run: Debian's kubernetes-client, unless a kubectl
# is installed already (another package's /usr/bin/kubectl would make dpkg refuse it)
command -v kubectl >/dev/null 2>&1 ||
	apt-get install -y -q --no-install-recommends kubernetes-client
if [ $had_prometheus = no ] && [ -d /run/systemd/system ]; then
	systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
# guest: QEMU (TCG), busybox for the initramfs, cpio; the Debian kernels (6.1 and 6.12) are fetched
# on first use
"$(dirname "${BASH_SOURCE[0]}")/vm/install-deps.sh"
