#!/bin/bash
# SPDX-License-Identifier: MIT
#
# guest-run.sh: run a shell script as root inside a throw-away QEMU guest that
# has the memory topology tieralloc is about: NUMA node 0 with the CPUs and
# node 1 (and any further nodes) without CPUs, cgroup v2 with the memory
# controller, tracefs, debugfs, bpffs and BTF (docs/DESIGN-NOTES.md, "Tests").
#
#   tests/vm/guest-run.sh [options] -- SCRIPT [ARGS...]
#
# The script's stdout and stderr arrive on this script's stdout as they are
# produced; its exit status becomes this script's exit status. Run with
# --help for the options, and see tests/vm/README.md.
#
# How it works:
# - Kernel: Debian's own linux-image package (by default the one
#   linux-image-amd64 depends on, Debian 12's 6.1; --kernel 6.12 picks the
#   6.12 that linux-image-6.12-amd64 depends on, in its -unsigned build),
#   fetched once with apt-get download and unpacked with dpkg-deb into the
#   cache, one directory per package. The bzImage is decompressed once to a plain
#   vmlinux, which QEMU boots through its PVH entry point: decompressing the
#   kernel under TCG costs about 3.5 s of every boot otherwise.
# - initramfs: uncompressed cpio archives concatenated (the kernel unpacks
#   each in turn): /dev/console, a base layer (busybox-static, guest-init.sh
#   as /init, optional kernel modules), a layer with the --include'd files
#   plus the shared libraries their ELF files need, and a per-run layer with
#   the script and its arguments. The base and include layers are cached and
#   rebuilt only when their inputs change.
# - Guest <-> host: three serial ports written to files (see guest-init.sh):
#   kernel console, script output, and a status channel that only /init
#   writes. The host follows the output file, and after QEMU exits reads the
#   status from the status file; a missing status becomes a clear error.
#
# Exit status: the script's own; otherwise
#   2    the guest could not run or died: usage error, no QEMU, the kernel
#        could not be fetched, QEMU failed, the kernel panicked, or the guest
#        stopped without reporting a status; one line on stderr says which.
#   124  the script did not finish within --timeout seconds (guest killed).
# A script that itself exits 2 or 124 cannot be told apart by the status
# alone; the stderr line is there for that.

set -euo pipefail

readonly PROG=guest-run
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# Bump when the layout of the cached layers changes, so old ones are rebuilt.
readonly LAYER_VERSION=1
readonly QEMU=${TIERALLOC_VM_QEMU:-qemu-system-x86_64}
# Temporary files and directories in the cache, removed on exit.
TEMPS=()

usage()
{
	cat <<'EOF'
usage: tests/vm/guest-run.sh [options] -- SCRIPT [ARGS...]

Boots a QEMU/TCG guest with NUMA node 0 (all CPUs) and CPU-less node 1 (and
more), runs SCRIPT (POSIX sh, busybox, as root) with ARGS, prints its output
and exits with its exit status. SCRIPT "-" reads the script from stdin.

options:
  --include PATH      copy a host file or directory into the guest at the same
                      absolute path, with the shared libraries (ldd) of every
                      ELF file in it; repeatable
  --exclude GLOB      leave matching names out of included directories (a GLOB
                      with a "/" matches whole paths); repeatable; ".git" is
                      always left out
  --with-python3      include /usr/bin/python3 and its standard library
  --node-mem LIST     memory per NUMA node, comma-separated, node 0 first;
                      suffix M or G (default M); default 1G,1G. Nodes after
                      node 0 have no CPUs
  --cpus N            number of vCPUs, all on node 0 (default 2)
  --timeout SEC       kill the guest after SEC seconds (default 300)
  --env NAME=VALUE    export NAME=VALUE to the script; repeatable
  --cwd DIR           directory to run the script in (default: the current
                      directory if it exists in the guest, else /)
  --kernel K          the guest kernel: 6.1 (default: Debian 12's
                      linux-image-amd64), 6.12 (Debian 12's linux-image-6.12-
                      amd64, unsigned build), or a linux-image-* package name;
                      each is fetched once and cached apart
  --module NAME       load kernel module NAME (and its dependencies) before
                      the script; repeatable
  --append ARGS       extra kernel command line arguments
  --qemu-arg ARG      extra QEMU argument (one word); repeatable
  --console FILE      save the guest's kernel console log to FILE
  --bzimage           boot the compressed kernel instead of the PVH vmlinux
  --prepare           only fetch the kernel and build the cached layers
  -v, --verbose       show progress, timings and the kernel console (stderr)
  -h, --help          show this help

environment:
  TIERALLOC_VM_CACHE  cache directory (default $HOME/.cache/tieralloc-vm)
  TIERALLOC_VM_QEMU   QEMU binary (default qemu-system-x86_64)
  TIERALLOC_VM_KERNEL default for --kernel (default 6.1)
  TIERALLOC_VM_TCG    how QEMU's TCG runs the vCPUs: single (one host thread
                      for all, the default) or multi (a thread per vCPU)

exit status: the script's; 2 if the guest could not run or died (one line on
stderr says why); 124 if the script did not finish within --timeout.
EOF
}

# --- messages -----------------------------------------------------------------

# The guest cannot run (or died): one line saying why, exit status 2.
cannot_run()
{
	echo "$PROG: error: $*" >&2
	exit 2
}

usage_error()
{
	echo "$PROG: usage error: $* (see --help)" >&2
	exit 2
}

verbose=0
note()
{
	if [[ $verbose == 1 ]]; then
		echo "$PROG: $*" >&2
	fi
	return 0
}

# Seconds since the epoch with milliseconds, for --verbose timings.
now()
{
	date +%s.%3N
}

elapsed()
{
	awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}

# Quote a string for POSIX sh: 'it'\''s'.
shquote()
{
	local s=${1//\'/\'\\\'\'}
	printf "'%s'" "$s"
}

# --- options ------------------------------------------------------------------

includes=()
excludes=(.git)
envs=()
modules=()
qemu_extra=()
node_mem=1G,1G
cpus=2
timeout_s=300
cwd=
append=
console_file=
with_python=0
use_bzimage=0
prepare_only=0
kernel_spec=${TIERALLOC_VM_KERNEL:-6.1}
tcg_thread=${TIERALLOC_VM_TCG:-single}

need_arg()
{
	[[ $2 -ge 2 ]] || usage_error "option $1 needs an argument"
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--include)
		need_arg "$1" $#
		includes+=("$2")
		shift 2
		;;
	--exclude)
		need_arg "$1" $#
		excludes+=("$2")
		shift 2
		;;
	--with-python3)
		with_python=1
		shift
		;;
	--node-mem)
		need_arg "$1" $#
		node_mem=$2
		shift 2
		;;
	--cpus)
		need_arg "$1" $#
		cpus=$2
		shift 2
		;;
	--timeout)
		need_arg "$1" $#
		timeout_s=$2
		shift 2
		;;
	--env)
		need_arg "$1" $#
		envs+=("$2")
		shift 2
		;;
	--cwd)
		need_arg "$1" $#
		cwd=$2
		shift 2
		;;
	--kernel)
		need_arg "$1" $#
		kernel_spec=$2
		shift 2
		;;
	--module)
		need_arg "$1" $#
		modules+=("$2")
		shift 2
		;;
	--append)
		need_arg "$1" $#
		append=$2
		shift 2
		;;
	--qemu-arg)
		need_arg "$1" $#
		qemu_extra+=("$2")
		shift 2
		;;
	--console)
		need_arg "$1" $#
		console_file=$2
		shift 2
		;;
	--bzimage)
		use_bzimage=1
		shift
		;;
	--prepare)
		prepare_only=1
		shift
		;;
	-v | --verbose)
		verbose=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		break
		;;
	-?*)
		usage_error "unknown option $1"
		;;
	*)
		break
		;;
	esac
done

script=
if [[ $prepare_only == 0 ]]; then
	[[ $# -ge 1 ]] || usage_error "no SCRIPT given"
	script=$1
	shift
	if [[ $script != - && ! -f $script ]]; then
		usage_error "no script file $script"
	fi
fi
script_args=("$@")

[[ $cpus =~ ^[1-9][0-9]*$ && $cpus -le 64 ]] || usage_error "--cpus wants 1..64, not '$cpus'"
[[ $tcg_thread == single || $tcg_thread == multi ]] ||
	usage_error "TIERALLOC_VM_TCG is single or multi, not '$tcg_thread'"
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout wants a number of seconds, not '$timeout_s'"
case $kernel_spec in
6.1 | 6.12 | linux-image-[0-9]*) ;;
*) usage_error "--kernel wants 6.1, 6.12 or a linux-image-<version>-* package name, not '$kernel_spec'" ;;
esac
for e in "${envs[@]}"; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage_error "--env wants NAME=VALUE, not '$e'"
done

# --node-mem: sizes in MiB, one per node.
node_mib=()
IFS=, read -r -a _sizes <<<"$node_mem"
for s in "${_sizes[@]}"; do
	if [[ $s =~ ^([0-9]+)([MmGg]?)$ ]]; then
		n=$((10#${BASH_REMATCH[1]}))
		[[ ${BASH_REMATCH[2]} == [Gg] ]] && n=$((n * 1024))
	else
		usage_error "--node-mem: bad size '$s' (want e.g. 1G or 512M)"
	fi
	[[ $n -ge 16 ]] || usage_error "--node-mem: node size $s is below 16M"
	node_mib+=("$n")
done
[[ ${#node_mib[@]} -ge 1 ]] || usage_error "--node-mem: no sizes in '$node_mem'"
[[ ${node_mib[0]} -ge 128 ]] || usage_error "--node-mem: node 0 needs at least 128M to boot"

# --- cache --------------------------------------------------------------------

if [[ -n ${TIERALLOC_VM_CACHE:-} ]]; then
	CACHE=$TIERALLOC_VM_CACHE
elif [[ -n ${HOME:-} ]]; then
	CACHE=$HOME/.cache/tieralloc-vm
else
	CACHE=/tmp/tieralloc-vm-cache-$(id -u)
fi
mkdir -p "$CACHE/kernel" "$CACHE/layers" "$CACHE/logs" ||
	cannot_run "cannot create the cache directory $CACHE"
CACHE=$(cd "$CACHE" && pwd -P)
# The cache holds a 400 MB kernel tree and large archives: never in a repo.
if command -v git >/dev/null && git -C "$CACHE" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	cannot_run "cache directory $CACHE is inside a git work tree; set TIERALLOC_VM_CACHE elsewhere"
fi

# One lock for everything that fills the cache, so parallel runs (make -j
# check) build each piece once. It is released before the guest boots.
exec {lock_fd}>"$CACHE/lock"
lock_cache()
{
	flock "$lock_fd"
	# Temporary files in the cache are made only under the lock: any found
	# now are left over from a run that was killed.
	rm -rf "$CACHE"/kernel/.fetch.* "$CACHE"/layers/.stage.* "$CACHE"/layers/.list.* \
		"$CACHE"/layers/.elfs.* "$CACHE"/layers/*.tmp
}
unlock_cache()
{
	flock -u "$lock_fd"
}

# --- kernel -------------------------------------------------------------------

# decompress_kernel BZIMAGE OUT: write the vmlinux ELF inside a bzImage to
# OUT, trying each compressed-stream signature the way the kernel's
# scripts/extract-vmlinux does. Returns non-zero if none decompresses.
decompress_kernel()
{
	local in=$1 out=$2 magic tool sig off
	for magic in xz zstd gzip; do
		case $magic in
		xz) tool="xz -dc --single-stream" sig=$'\xfd7zXZ' ;;
		zstd) tool="zstd -dcq" sig=$'\x28\xb5\x2f\xfd' ;;
		gzip) tool="gzip -dc" sig=$'\x1f\x8b\x08' ;;
		esac
		command -v "${tool%% *}" >/dev/null || continue
		for off in $(LC_ALL=C grep -aboF "$sig" "$in" 2>/dev/null | cut -d: -f1 | head -n 4); do
			tail -c +$((off + 1)) "$in" | $tool >"$out" 2>/dev/null || true
			if [[ -s $out && $(head -c 4 "$out") == $'\x7fELF' ]]; then
				return 0
			fi
		done
	done
	rm -f "$out"
	return 1
}

# kernel_package: print the linux-image package that --kernel names (a
# local apt-cache lookup; run apt-get update when it finds nothing).
kernel_package()
{
	local meta suffix='' pkg
	case $kernel_spec in
	6.1) meta=linux-image-amd64 ;;
	# The signed package holds the same kernel with a signature
	# (and depends on the unsigned one's modules); the unsigned one
	# is the kernel alone.
	6.12) meta=linux-image-6.12-amd64 suffix=-unsigned ;;
	*)
		echo "$kernel_spec"
		return
		;;
	esac
	pkg=$(apt-cache depends "$meta" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
	[[ -n $pkg ]] ||
		cannot_run "cannot resolve kernel $kernel_spec: apt-cache depends $meta names no linux-image package (run apt-get update)"
	echo "$pkg$suffix"
}

# prepare_kernel: set KDIR to a cache directory holding vmlinuz, vmlinux (if
# it could be extracted), config, kver and modules/ (with modules.dep).
# $CACHE/kernel/current points at the default (6.1) kernel's directory,
# current-<spec> at another's, so that a cached kernel is used without asking
# apt; remove the link to pick up a newer Debian kernel.
prepare_kernel()
{
	local current=$CACHE/kernel/current pkg ver dest tmp deb vmlinuz kver moddir
	[[ $kernel_spec == 6.1 ]] || current=$CACHE/kernel/current-$kernel_spec
	if [[ -f $current/ok ]]; then
		KDIR=$(cd "$current" && pwd -P)
		return
	fi
	for tool in apt-cache apt-get dpkg-deb; do
		command -v "$tool" >/dev/null ||
			cannot_run "no $tool on this host: cannot fetch the Debian kernel"
	done
	pkg=$(kernel_package) || exit $?
	ver=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: //p')
	[[ -n $ver && $ver != '(none)' ]] ||
		cannot_run "kernel package $pkg has no candidate version (apt-cache policy $pkg; run apt-get update)"
	dest=$CACHE/kernel/${pkg}_${ver}
	if [[ ! -f $dest/ok ]]; then
		echo "$PROG: fetching kernel package $pkg $ver into $CACHE (once)" >&2
		rm -rf "$dest"
		tmp=$(mktemp -d "$CACHE/kernel/.fetch.XXXXXX")
		TEMPS+=("$tmp")
		if ! (cd "$tmp" && apt-get download "$pkg") >"$tmp/apt.log" 2>&1; then
			cannot_run "apt-get download $pkg failed: $(grep -m 1 '^E:' "$tmp/apt.log" || tail -n 1 "$tmp/apt.log")"
		fi
		deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
		[[ -n $deb ]] || cannot_run "apt-get download $pkg produced no .deb"
		dpkg-deb -x "$deb" "$tmp/x" || cannot_run "dpkg-deb -x $deb failed"
		vmlinuz=$(ls "$tmp"/x/boot/vmlinuz-* 2>/dev/null | head -n 1)
		[[ -n $vmlinuz ]] || cannot_run "package $pkg has no boot/vmlinuz-*"
		kver=${vmlinuz##*/vmlinuz-}
		mkdir "$tmp/k"
		mv "$vmlinuz" "$tmp/k/vmlinuz"
		mv "$tmp/x/boot/config-$kver" "$tmp/k/config" 2>/dev/null || true
		echo "$kver" >"$tmp/k/kver"
		echo "$pkg $ver" >"$tmp/k/package"
		for moddir in "$tmp/x/lib/modules/$kver" "$tmp/x/usr/lib/modules/$kver"; do
			if [[ -d $moddir ]]; then
				mv "$moddir" "$tmp/k/modules"
				break
			fi
		done
		# The package leaves modules.dep to its postinst; busybox has depmod.
		if [[ -d $tmp/k/modules ]]; then
			mkdir -p "$tmp/d/lib/modules"
			ln -s ../../../k/modules "$tmp/d/lib/modules/$kver"
			busybox depmod -b "$tmp/d" "$kver" 2>/dev/null ||
				echo "$PROG: warning: depmod failed; --module will not work" >&2
		fi
		if ! decompress_kernel "$tmp/k/vmlinuz" "$tmp/k/vmlinux"; then
			echo "$PROG: warning: cannot decompress $vmlinuz; booting the bzImage (slower)" >&2
		fi
		touch "$tmp/k/ok"
		mv -T "$tmp/k" "$dest"
		rm -rf "$tmp"
	fi
	ln -sfn "$(basename "$dest")" "$current.new"
	mv -T "$current.new" "$current"
	KDIR=$dest
}

# --- initramfs layers ---------------------------------------------------------

# newc_entry INO MODE NLINK RDEVMAJOR RDEVMINOR NAME: one data-less entry of a
# "newc" cpio archive (the kernel's initramfs format). GNU cpio only archives
# what exists, and making /dev/console with mknod would need root.
newc_entry()
{
	local name=$6 namesize=$((${#6} + 1))
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
		"$1" "$2" 0 0 "$3" 0 0 0 0 "$4" "$5" "$namesize" 0
	printf '%s\0' "$name"
	head -c $(((4 - (110 + namesize) % 4) % 4)) /dev/zero
}

# The first layer: /dev/console, which the kernel opens for /init before
# anything is mounted.
console_layer()
{
	local out=$CACHE/layers/console-v$LAYER_VERSION.cpio
	if [[ ! -f $out ]]; then
		TEMPS+=("$out.tmp")
		{
			newc_entry 1 $((040755)) 2 0 0 dev
			newc_entry 2 $((020600)) 1 5 1 dev/console
			newc_entry 3 0 1 0 0 'TRAILER!!!'
		} >"$out.tmp"
		# Pad to 512 bytes like GNU cpio, so the next archive is aligned.
		truncate -s %512 "$out.tmp"
		mv "$out.tmp" "$out"
	fi
	LAYERS+=("$out")
}

# archive_list LIST OUT: archive the absolute host paths in LIST (one a line,
# parents before children) as an initramfs layer, symlinks as symlinks.
archive_list()
{
	TEMPS+=("$2.tmp")
	(cd / && sed 's|^/||' "$1" | cpio -o -H newc --quiet) >"$2.tmp" ||
		cannot_run "cpio failed while building $2"
	mv "$2.tmp" "$2"
}

# resolve_modules: print the .ko files (relative to the modules dir) that
# loading ${modules[@]} takes, dependencies first.
resolve_modules()
{
	local dep=$KDIR/modules/modules.dep m
	declare -A done_ko=()
	[[ -f $dep ]] || cannot_run "no modules.dep for kernel $kver; cannot load modules"
	# load KO: print the dependencies of KO (from its modules.dep line,
	# recursively) and then KO itself, each once.
	load()
	{
		local ko=$1 d
		[[ -z ${done_ko[$ko]+x} ]] || return 0
		done_ko[$ko]=1
		for d in $(sed -n "s|^$ko: *||p" "$dep"); do
			load "$d"
		done
		echo "$ko"
	}
	for m in "${modules[@]}"; do
		local name=${m//-/_} ko
		ko=$(awk -F: -v n="$name" '{ b = $1; sub(/.*\//, "", b); sub(/\.ko(\.(xz|zst|gz))?$/, "", b);
			gsub(/-/, "_", b); if (b == n) { print $1; exit } }' "$dep")
		if [[ -z $ko ]]; then
			if grep -q "/${m//-/[-_]}\.ko\$" "$KDIR/modules/modules.builtin" 2>/dev/null; then
				note "module $m is built into kernel $kver"
				continue
			fi
			cannot_run "kernel $kver has no module $m"
		fi
		load "$ko"
	done
}

# The base layer: directory skeleton mirroring the host's merged-/usr links,
# busybox with all its applets, /init, a few /etc files, kernel modules.
base_layer()
{
	local busybox key out stage d m
	busybox=$(command -v busybox || true)
	[[ -n $busybox ]] || cannot_run "no busybox on this host (install busybox-static; see tests/vm/install-deps.sh)"
	busybox=$(readlink -f "$busybox")
	if ldd "$busybox" >/dev/null 2>&1; then
		cannot_run "$busybox is dynamically linked; install busybox-static"
	fi
	local mods=() mods_txt
	if [[ ${#modules[@]} -gt 0 ]]; then
		# (a command substitution, so that its cannot_run stops us too)
		mods_txt=$(resolve_modules) || exit $?
		[[ -z $mods_txt ]] || mapfile -t mods <<<"$mods_txt"
	fi
	key=$({
		echo "v$LAYER_VERSION $kver"
		stat -c '%n %s %Y' "$busybox"
		cat "$HERE/guest-init.sh"
		for d in bin sbin lib lib64; do echo "$d $(readlink "/$d" || true)"; done
		printf '%s\n' "${mods[@]}"
	} | sha256sum | cut -c 1-16)
	out=$CACHE/layers/base-$key.cpio
	if [[ ! -f $out ]]; then
		note "building base layer $out"
		stage=$(mktemp -d "$CACHE/layers/.stage.XXXXXX")
		TEMPS+=("$stage" "$out.tmp")
		mkdir -p "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/lib"
		# /bin -> usr/bin and friends as on the host, so that paths such as
		# /lib64/ld-linux-x86-64.so.2 resolve as they do there.
		for d in bin sbin lib lib64; do
			if [[ -L /$d ]]; then
				ln -s "$(readlink "/$d")" "$stage/$d"
			else
				mkdir -p "$stage/$d"
			fi
		done
		mkdir -p "$stage"/{proc,sys,dev,tmp,run,root,mnt,etc,var/tmp,tieralloc-vm}
		chmod 1777 "$stage/tmp" "$stage/var/tmp"
		chmod 700 "$stage/root"
		cp "$busybox" "$stage/usr/bin/busybox"
		"$busybox" --list-full | while read -r applet; do
			[[ -e $stage/$applet || -L $stage/$applet ]] ||
				ln -s /usr/bin/busybox "$stage/$applet"
		done
		cp "$HERE/guest-init.sh" "$stage/init"
		chmod 755 "$stage/init"
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
			>"$stage/etc/passwd"
		printf 'root:x:0:\nnogroup:x:65534:\n' >"$stage/etc/group"
		printf '127.0.0.1 localhost\n::1 localhost\n' >"$stage/etc/hosts"
		: >"$stage/tieralloc-vm/modules"
		# Modules go in uncompressed (6.12's are .ko.xz): busybox insmod
		# hands the file to the kernel as it is.
		for m in "${mods[@]}"; do
			local ko=${m%.xz} unzip=cat
			case $m in
			*.ko.xz) unzip="xz -dc" ;;
			*.ko.zst) unzip="zstd -dcq" ko=${m%.zst} ;;
			*.ko.gz) unzip="gzip -dc" ko=${m%.gz} ;;
			esac
			mkdir -p "$stage/lib/modules/$kver/$(dirname "$m")"
			$unzip <"$KDIR/modules/$m" >"$stage/lib/modules/$kver/$ko" ||
				cannot_run "cannot unpack module $m ($unzip)"
			echo "/lib/modules/$kver/$ko" >>"$stage/tieralloc-vm/modules"
		done
		(cd "$stage" && find . -mindepth 1 | sed 's|^\./||' |
			cpio -o -H newc -R 0:0 --quiet) >"$out.tmp" ||
			cannot_run "cpio failed while building the base layer"
		mv "$out.tmp" "$out"
		rm -rf "$stage"
		# Keep the 4 most recently used base layers.
		ls -t "$CACHE"/layers/base-*.cpio | tail -n +5 | xargs -r rm -f
	else
		touch "$out"
	fi
	LAYERS+=("$out")
}

# walk_path PATH: print every path the guest needs so that PATH resolves there
# as it does on the host: each directory on the way, each symlink met (and, in
# turn, what it points to), and PATH itself. Parents come before children.
walk_path()
{
	local path=$1 depth=${2:-0} cur="" comp next target rest i
	local -a comps
	[[ $depth -lt 40 ]] || return 0 # symlink loop
	IFS=/ read -r -a comps <<<"${path#/}"
	for ((i = 0; i < ${#comps[@]}; i++)); do
		comp=${comps[i]}
		case $comp in
		'' | .) continue ;;
		..)
			cur=${cur%/*}
			continue
			;;
		esac
		next=$cur/$comp
		if [[ -L $next ]]; then
			echo "$next"
			target=$(readlink "$next")
			[[ $target == /* ]] || target=$cur/$target
			rest=$(IFS=/ && echo "${comps[*]:i+1}")
			walk_path "$target${rest:+/$rest}" $((depth + 1))
			return 0
		fi
		[[ -e $next ]] || return 0
		echo "$next"
		cur=$next
	done
}

# The include layer: --include'd paths, python3 if asked for, and the ldd
# closure of every ELF executable or shared object among them.
include_layer()
{
	local roots=() prune=() r g py pylib key out list elfs
	for r in "${includes[@]}"; do
		[[ -e $r || -L $r ]] || cannot_run "--include $r: no such file or directory"
		r=$(realpath -s "$r")
		case $r/ in
		/proc/* | /sys/* | /dev/*) cannot_run "--include $r: cannot include pseudo file systems" ;;
		esac
		roots+=("$r")
	done
	if [[ $with_python == 1 ]]; then
		[[ -x /usr/bin/python3 ]] || cannot_run "--with-python3: no /usr/bin/python3 on this host"
		py=$(basename "$(readlink -f /usr/bin/python3)")
		pylib=/usr/lib/$py
		[[ -d $pylib ]] || cannot_run "--with-python3: no $pylib on this host"
		roots+=(/usr/bin/python3 "$pylib")
		# Big parts no test needs: the test suite, GUI and teaching
		# modules, and the static library for embedding.
		for g in test idlelib tkinter turtledemo ensurepip lib2to3 pydoc_data 'config-*'; do
			prune+=(-path "$pylib/$g" -o)
		done
	fi
	[[ ${#roots[@]} -gt 0 ]] || return 0
	for g in "${excludes[@]}"; do
		if [[ $g == */* ]]; then
			prune+=(-path "$g" -o)
		else
			prune+=(-name "$g" -o)
		fi
	done
	prune+=(-name $'*\n*') # names with a newline break our lists
	list=$(mktemp "$CACHE/layers/.list.XXXXXX")
	TEMPS+=("$list" "$list.all")
	# Paths first: what the roots lead through, then their contents.
	{
		for r in "${roots[@]}"; do
			walk_path "$r"
			r=$(readlink -f "$r")
			if [[ -d $r ]]; then
				find "$r" -mindepth 1 \( "${prune[@]}" \) -prune -o \
					\( -type f -o -type d -o -type l \) -print
			fi
		done
	} | awk '!seen[$0]++' >"$list"
	# The cache key: every path with its type and link target, and for
	# files their size and mtime (not for directories: /tmp's mtime, say,
	# changes all the time, and their entries are listed anyway); plus the
	# dpkg database's mtime (a package upgrade can change the libraries the
	# closure brings in) and the options that shape the layer.
	key=$({
		echo "v$LAYER_VERSION python=$with_python"
		printf '%s\n' "${excludes[@]}"
		tr '\n' '\0' <"$list" | xargs -0 -r stat -c '%F|%s|%.9Y|%N' -- |
			awk -F'|' '$1 == "directory" { print $1 "|" $4; next } { print }'
		stat -c '%Y' /var/lib/dpkg/status 2>/dev/null || true
	} | sha256sum | cut -c 1-16)
	out=$CACHE/layers/include-$key.cpio
	if [[ -f $out ]]; then
		touch "$out" # keep it among the most recent (see pruning below)
		rm -f "$list"
		LAYERS+=("$out")
		return 0
	fi
	note "building include layer $out ($(wc -l <"$list") paths)"
	# ELF executables and shared objects (e_type 2 or 3; not .o files).
	elfs=$(mktemp "$CACHE/layers/.elfs.XXXXXX")
	TEMPS+=("$elfs")
	while IFS= read -r r; do
		if [[ -f $r && ! -L $r ]]; then
			printf '%s\0' "$r"
		fi
	done <"$list" |
		xargs -0 -r perl -e 'for my $f (@ARGV) {
			open(my $h, "<", $f) or next; my $b = "";
			next unless read($h, $b, 18) == 18 && substr($b, 0, 4) eq "\x7fELF";
			my $t = unpack("v", substr($b, 16, 2));
			print "$f\0" if $t == 2 || $t == 3; }' >"$elfs"
	# Their shared libraries, as ldd lists them (the full closure, with the
	# dynamic loader), each with the path that leads to it.
	{
		cat "$list"
		xargs -0 -r ldd <"$elfs" 2>/dev/null |
			sed -n -e 's/^.* => \(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p' \
				-e 's/^[[:space:]]*\(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p' |
			sort -u | while IFS= read -r r; do walk_path "$r"; done
		# Loaded with dlopen, which ldd does not see: libnuma, which tieralloc's preload
		# loads when memkind starts (src/alloc/memkind_link.c).
		ldconfig -p 2>/dev/null |
			sed -n 's/^[[:space:]]*libnuma\.so\.1 (libc6,x86-64) => \(\/.*\)$/\1/p' |
			while IFS= read -r r; do walk_path "$r"; done
	} | awk '!seen[$0]++' >"$list.all"
	if [[ $verbose == 1 ]]; then
		xargs -0 -r ldd <"$elfs" 2>/dev/null | grep 'not found' | sort -u |
			sed "s/^[[:space:]]*/$PROG: note: ldd: /" >&2 || true
	fi
	archive_list "$list.all" "$out"
	rm -f "$list" "$list.all" "$elfs"
	# Keep the 6 most recently used include layers.
	ls -t "$CACHE"/layers/include-*.cpio 2>/dev/null | tail -n +7 | xargs -r rm -f
	LAYERS+=("$out")
}

# The per-run layer: the script and run.conf (arguments, environment, cwd).
run_layer()
{
	local stage=$RUN/stage a e dir
	mkdir -p "$stage/tieralloc-vm"
	if [[ $script == - ]]; then
		cat >"$stage/tieralloc-vm/script"
	else
		cp "$script" "$stage/tieralloc-vm/script"
	fi
	dir=$cwd
	if [[ -z $dir ]]; then
		# The caller's directory if it is in the guest (an included
		# tree), so that relative paths work as they do on the host.
		dir=/
		for r in "${includes[@]}"; do
			r=$(realpath -s "$r")
			if [[ $PWD == "$r" || $PWD == "$r"/* ]]; then
				dir=$PWD
			fi
		done
	fi
	{
		echo "# generated by guest-run.sh"
		printf 'GUEST_CWD=%s\n' "$(shquote "$dir")"
		printf 'set --'
		for a in "${script_args[@]}"; do
			printf ' %s' "$(shquote "$a")"
		done
		printf '\n'
		for e in "${envs[@]}"; do
			printf 'export %s=%s\n' "${e%%=*}" "$(shquote "${e#*=}")"
		done
	} >"$stage/tieralloc-vm/run.conf"
	(cd "$stage" && find . -mindepth 1 | sed 's|^\./||' |
		cpio -o -H newc -R 0:0 --quiet) >"$RUN/run.cpio"
}

# --- run ----------------------------------------------------------------------

t_start=$(now)
command -v "$QEMU" >/dev/null ||
	cannot_run "no $QEMU on this host (run tests/vm/install-deps.sh)"
for tool in cpio perl flock timeout; do
	command -v "$tool" >/dev/null ||
		cannot_run "no $tool on this host (run tests/vm/install-deps.sh)"
done

RUN=
qemu_pid=
tail_pids=()
cleanup()
{
	local p
	for p in "${TEMPS[@]}"; do
		rm -rf "$p"
	done
	if [[ -n $qemu_pid ]] && kill -0 "$qemu_pid" 2>/dev/null; then
		kill -TERM "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	for p in "${tail_pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	[[ -z $RUN ]] || rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

LAYERS=()
if [[ $prepare_only == 0 ]]; then
	# Run directories carry the PID of their guest-run.sh: remove those whose
	# owner died without cleaning up (killed with SIGKILL), then make ours.
	for d in "${TMPDIR:-/tmp}"/tieralloc-vm.[0-9]*.*; do
		p=${d##*/tieralloc-vm.}
		p=${p%%.*}
		if [[ -d $d && -O $d ]] && ! kill -0 "$p" 2>/dev/null; then
			rm -rf "$d"
		fi
	done
	RUN=$(mktemp -d "${TMPDIR:-/tmp}/tieralloc-vm.$$.XXXXXX")
	run_layer
fi
lock_cache
prepare_kernel
kver=$(cat "$KDIR/kver")
console_layer
base_layer
include_layer
[[ $prepare_only == 1 ]] || LAYERS+=("$RUN/run.cpio")
note "kernel $(cat "$KDIR/package"), layers ready after $(elapsed "$t_start") s"
if [[ $prepare_only == 1 ]]; then
	note "prepared: ${LAYERS[*]}"
	exit 0
fi

# Still under the lock: another run could otherwise prune a cached layer
# between our choosing it and reading it.
cat "${LAYERS[@]}" >"$RUN/initrd.cpio"
unlock_cache
exec {lock_fd}>&-
note "initramfs $(($(stat -c %s "$RUN/initrd.cpio") / 1024)) KiB"

kernel=$KDIR/vmlinux
if [[ $use_bzimage == 1 || ! -f $kernel ]]; then
	kernel=$KDIR/vmlinuz
fi

# Memory: one RAM backend per node; node 0 gets all CPUs.
total=0
numa=()
for i in "${!node_mib[@]}"; do
	total=$((total + node_mib[i]))
	numa+=(-object "memory-backend-ram,id=m$i,size=${node_mib[i]}M")
	if [[ $i == 0 ]]; then
		numa+=(-numa "node,nodeid=0,cpus=0-$((cpus - 1)),memdev=m0")
	else
		numa+=(-numa "node,nodeid=$i,memdev=m$i")
	fi
done

# TCG, not KVM: a KVM guest hangs at boot on the development host.
# thread=single: one host thread runs every vCPU in turn. With a thread per vCPU (QEMU 7.2's
# default), Debian's 6.12 died now and then of "Oops: int3" at kernel text being patched while the
# other vCPU ran it (text_poke), in boot or in the middle of a test; one thread also leaves the
# host's other core to a second guest (tests/run-all.sh runs both kernels' suites side by side).
# oops=panic: an oops ends the guest at once (panic=-1, -no-reboot) instead of leaving a test to
# wait on a task that died holding a lock, until the guest's timeout.
# no_timer_check: the kernel checks at boot that the timer interrupt arrives through the IO-APIC
# within a few busy-wait loops; on a loaded host the emulated CPU is too slow for that, and the
# guest panicked ("IO-APIC + timer doesn't work!") at a load average of 15.
# -nodefaults: no NIC (its option ROM costs boot time), VGA or monitor; the
# three serial ports are all the I/O there is. QEMU's stdin is /dev/null, so
# the caller's terminal is never touched.
qemu_cmd=(
	"$QEMU" -accel "tcg,thread=$tcg_thread" -cpu max -smp "$cpus" -m "${total}M" "${numa[@]}"
	-kernel "$kernel" -initrd "$RUN/initrd.cpio"
	-append "console=ttyS0 quiet panic=-1 oops=panic no_timer_check rdinit=/init $append"
	-nographic -nodefaults -no-reboot -monitor none
	-chardev "file,id=s0,path=$RUN/console.log" -serial chardev:s0
	-chardev "file,id=s1,path=$RUN/output.log" -serial chardev:s1
	-chardev "file,id=s2,path=$RUN/status.log" -serial chardev:s2
	"${qemu_extra[@]}"
)

# boot_once: one boot of the guest, to the end of QEMU; sets qemu_rc, status, started, and
# console.txt.
boot_once()
{
	: >"$RUN/console.log"
	: >"$RUN/output.log"
	: >"$RUN/status.log"
	note "running: ${qemu_cmd[*]}"
	# Should this script be killed outright (no trap runs), QEMU must not live
	# on: setpriv gives timeout, and timeout's child QEMU, a parent-death signal.
	reaper=()
	if command -v setpriv >/dev/null; then
		reaper=(setpriv --pdeathsig KILL --)
	fi
	t_boot=$(now)
	"${reaper[@]}" timeout -k 5 "$timeout_s" "${reaper[@]}" "${qemu_cmd[@]}" \
		</dev/null >"$RUN/qemu.log" 2>&1 &
	qemu_pid=$!

	# Follow the script's output while the guest runs; tail --pid reads what is
	# left after QEMU exits, then stops. CRs are stripped in case a tty added them.
	tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$RUN/output.log" | sed -u 's/\r$//' &
	tail_pids+=($!)
	if [[ $verbose == 1 ]]; then
		tail -n +1 -s 0.2 -f --pid="$qemu_pid" "$RUN/console.log" | sed -u 's/\r$//; s/^/console: /' >&2 &
		tail_pids+=($!)
	fi

	qemu_rc=0
	wait "$qemu_pid" || qemu_rc=$?
	qemu_pid=
	for p in "${tail_pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	tail_pids=()
	note "guest ran for $(elapsed "$t_boot") s (qemu exit $qemu_rc); total $(elapsed "$t_start") s"

	tr -d '\r' <"$RUN/console.log" >"$RUN/console.txt"
	if [[ -n $console_file ]]; then
		cp "$RUN/console.txt" "$console_file"
	fi
	status=$(tr -d '\r' <"$RUN/status.log" | sed -n 's/^TIERALLOC-GUEST-EXIT=\([0-9][0-9]*\)$/\1/p' | tail -n 1)
	started=$(tr -d '\r' <"$RUN/status.log" | grep -c '^TIERALLOC-GUEST-START$' || true)
}

# A kernel that panics, or a boot that ends, before /init said TIERALLOC-GUEST-START ran no test:
# it is booted again, up to twice, each time said with its console log kept. Under TCG on a loaded
# host the 6.12 kernel once died 6 s into its boot with "Oops: int3" in patched kernel text (QEMU's
# cross-modifying code), and the whole suite with it. A panic after the start is the test's.
for boot in 1 2 3; do
	boot_once
	[[ -z $status && $started == 0 && $qemu_rc == 0 && $boot -lt 3 ]] || break
	keep=$CACHE/logs/console-$(date +%Y%m%d-%H%M%S)-$$-boot$boot.log
	cp "$RUN/console.txt" "$keep"
	why=$(grep -m 1 -o 'Kernel panic.*' "$RUN/console.txt" || echo "it stopped before /init ran")
	echo "$PROG: warning: boot $boot failed before any test ran ($why); booting again" \
		"(kernel console: $keep)" >&2
done

# guest_failed WHY: keep the console log for diagnosis and say why, exit 2
# (or the given status).
guest_failed()
{
	local why=$1 rc=${2:-2} keep
	keep=$CACHE/logs/console-$(date +%Y%m%d-%H%M%S)-$$.log
	cp "$RUN/console.txt" "$keep"
	ls -t "$CACHE"/logs/console-*.log 2>/dev/null | tail -n +21 | xargs -r rm -f
	echo "$PROG: error: $why (kernel console: $keep)" >&2
	exit "$rc"
}

if [[ -n $status ]]; then
	# The script finished; still say so if the kernel complained meanwhile
	# (a WARN_ON or oops is worth knowing about in a memory-policy test).
	oops=$(grep -m 1 -o -E '(BUG:|Oops|WARNING:|general protection fault|INFO: task .* blocked).*' \
		"$RUN/console.txt" || true)
	if [[ -n $oops ]]; then
		keep=$CACHE/logs/console-$(date +%Y%m%d-%H%M%S)-$$.log
		cp "$RUN/console.txt" "$keep"
		echo "$PROG: warning: guest kernel reported: $oops (kernel console: $keep)" >&2
	fi
	exit "$status"
fi
panic=$(grep -m 1 -o 'Kernel panic.*' "$RUN/console.txt" || true)
if [[ -n $panic ]]; then
	guest_failed "guest kernel panicked: $panic"
fi
if [[ $qemu_rc == 124 || $qemu_rc == 137 ]]; then
	if [[ $started -gt 0 ]]; then
		guest_failed "script did not finish within $timeout_s s; guest killed" 124
	fi
	guest_failed "guest did not finish booting within $timeout_s s"
fi
if [[ $qemu_rc != 0 ]]; then
	guest_failed "$QEMU failed (exit $qemu_rc): $(grep -m 1 . "$RUN/qemu.log" || echo 'no message')"
fi
if [[ $started -gt 0 ]]; then
	guest_failed "guest powered off without reporting the script's exit status"
fi
guest_failed "guest stopped before running the script (boot failed)"
