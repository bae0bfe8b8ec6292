#!/bin/bash
# SPDX-License-Identifier: MIT
#
# install-deps.sh: install the Debian packages tests/vm/guest-run.sh needs on
# the host (run as root, or through sudo). The guest kernel itself is not
# installed: guest-run.sh fetches Debian's kernel package into its cache the
# first time it runs (apt-get download + dpkg-deb -x, nothing is installed).
#
#   tests/vm/install-deps.sh [--prefetch]
#
# --prefetch also fetches the kernels (6.1 and 6.12) and builds the cached initramfs layers
# (guest-run.sh --prepare), so that the first test run does not pay for it.

set -euo pipefail

# What each package is for:
#   qemu-system-x86  qemu-system-x86_64 with TCG (its dependencies bring the
#                    SeaBIOS firmware and the PVH/linuxboot option ROMs)
#   busybox-static   the guest's userland (a static busybox, all applets) and
#                    the depmod that builds modules.dep for --module
#   cpio             packs the initramfs layers
#   xz-utils         decompresses Debian's bzImage (xz) into a vmlinux that
#                    QEMU boots directly (saves ~3.5 s per boot under TCG),
#                    and 6.12's modules (.ko.xz) for --module
#   perl-base        finds ELF files among --include'd files (Essential, but
#                    named here so that nothing is assumed)
#   util-linux       flock, to share the cache between parallel runs
#   coreutils        timeout, tail --pid, stat, sha256sum
#   apt, dpkg        apt-get download / dpkg-deb -x of the kernel package
#   libc-bin         ldd, for the shared libraries of included programs
packages=(qemu-system-x86 busybox-static cpio xz-utils perl-base util-linux
	coreutils apt dpkg libc-bin)

prefetch=0
case ${1:-} in
--prefetch) prefetch=1 ;;
'') ;;
*)
	echo "usage: $0 [--prefetch]" >&2
	exit 2
	;;
esac

if [[ $(id -u) == 0 ]]; then
	sudo=()
elif command -v sudo >/dev/null; then
	sudo=(sudo)
else
	echo "install-deps: need root (or sudo) to install: ${packages[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		missing+=("$p")
	fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
	echo "install-deps: installing ${missing[*]}" >&2
	"${sudo[@]}" apt-get update -q
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
	echo "install-deps: all packages present: ${packages[*]}" >&2
fi

# guest-run.sh resolves the kernels with apt-cache: it needs package lists (6.1 from bookworm,
# 6.12 from bookworm-security).
for meta in linux-image-amd64 linux-image-6.12-amd64; do
	if ! apt-cache depends "$meta" 2>/dev/null | grep -q 'Depends: linux-image-[0-9]'; then
		"${sudo[@]}" apt-get update -q
		break
	fi
done

if [[ $prefetch == 1 ]]; then
	for k in 6.1 6.12; do
		"$(dirname "${BASH_SOURCE[0]}")/guest-run.sh" --prepare --kernel "$k"
	done
fi
