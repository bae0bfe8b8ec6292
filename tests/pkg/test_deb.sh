#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian packages (debian/): dpkg-buildpackage -b builds them from a copy of the source tree
# (it builds in the tree it is given; the source tree itself is left as it was), then each .deb
# is checked (dpkg-deb --info, --contents) and unpacked into a scratch root with dpkg -x, never
# into the system: every file each package should have is there, the libraries resolve, a
# program compiles against libtieralloc-dev and runs against libtieralloc0, tieralloc-run runs
# commands under the unpacked preload, and the unit names the unpacked agent and README.
# Lintian's findings, if lintian is installed, are shown, never judged. Takes a minute or two.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
src=$TA_TEST_SRCDIR
fail()
{
	echo "FAIL: $*" >&2
	exit 1
}
# Missing tools: skipped on a developer's machine, failed under CI (tests/install-deps.sh
# installs them).
missing()
{
	if [[ ${CI:-} == true ]]; then
		fail "$* (CI=true: tests/install-deps.sh installs it)"
	fi
	echo "SKIP: $* (tests/install-deps.sh installs it)"
	exit 77
}
for tool in dpkg-buildpackage dpkg-deb dpkg-architecture dpkg-parsechangelog dh; do
	command -v "$tool" >/dev/null || missing "no $tool"
done
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || {
	echo "SKIP: $src is not a git checkout: the tree to package is what git ls-files lists"
	exit 77
}
t0=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
before=$(git -C "$src" status --porcelain --untracked-files=all)

# The tree as git sees it: tracked files as they are in the work tree, and new files not ignored.
# No build outputs, wherever they are.
mkdir "$work/tieralloc"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$work/tieralloc" -xf -
[[ -x $work/tieralloc/debian/rules ]] || fail "no executable debian/rules in the copied tree"

version=$(cat "$src/VERSION")
changelog=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
[[ $changelog == "$version" ]] || fail "debian/changelog is at $changelog, VERSION says $version"
(cd "$work/tieralloc" && dpkg-checkbuilddeps) >"$work/deps.out" 2>&1 ||
	missing "build dependencies: $(cat "$work/deps.out")"

echo "dpkg-buildpackage -us -uc -b in a copy of the tree"
if ! (cd "$work/tieralloc" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
	dpkg-buildpackage -us -uc -b) >"$work/build.out" 2>&1 </dev/null; then
	tail -40 "$work/build.out" >&2
	fail "dpkg-buildpackage failed"
fi
echo "built in $(($(date +%s) - t0)) s"

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
packages="libtieralloc0 libtieralloc-dev tieralloc-preload tieralloc-tools"
# The agent's BPF program is written for x86-64 only (debian/control).
[[ $arch == amd64 ]] && packages="$packages tierallocd"

# Every file each package must have (symbolic links included).
expect()
{
	case $1 in
	libtieralloc0) echo "usr/lib/$ma/libtieralloc.so.0" ;;
	libtieralloc-dev)
		echo "usr/include/tieralloc.h usr/include/tieralloc/shm_abi.h usr/lib/$ma/libtieralloc.so"
		echo "usr/lib/$ma/pkgconfig/tieralloc.pc usr/share/man/man3/tieralloc.3.gz"
		;;
	tieralloc-preload) echo "usr/lib/$ma/libtieralloc-preload.so" ;;
	tieralloc-tools)
		echo "usr/bin/tieralloc-run usr/bin/tieralloc-stat usr/libexec/tieralloc/tieralloc-demo"
		echo "usr/bin/tieralloc-plot usr/share/man/man1/tieralloc-plot.1.gz"
		echo "usr/share/man/man1/tieralloc-run.1.gz usr/share/man/man1/tieralloc-stat.1.gz"
		echo "usr/share/man/man7/tieralloc.7.gz"
		echo "usr/share/doc/tieralloc/README.md usr/share/doc/tieralloc/DESIGN-NOTES.md"
		echo "usr/share/doc/tieralloc/runtimes.md"
		echo "usr/share/doc/tieralloc/security.md"
		echo "usr/share/doc/tieralloc/allocator.md"
		echo "usr/share/doc/tieralloc/observing.md"
		echo "usr/share/doc/tieralloc/agent.md"
		echo "usr/share/doc/tieralloc/policies/lending.md"
		echo "usr/share/doc/tieralloc/policies/reclaim-for-priority.md"
		echo "usr/share/doc/tieralloc/policies/protect.md"
		echo "usr/share/doc/tieralloc/packages.md"
		;;
	tierallocd)
		echo "usr/sbin/tierallocd usr/lib/systemd/system/tierallocd.service"
		echo "usr/share/man/man8/tierallocd.8.gz"
		;;
	esac
}

root=$work/root
mkdir "$root"
for p in $packages; do
	deb=$work/${p}_${version}_$arch.deb
	[[ -s $deb ]] || fail "$p: no ${deb##*/} (built: $(cd "$work" && echo *.deb))"
	info=$(dpkg-deb --info "$deb") || fail "$p: dpkg-deb --info failed"
	[[ $(dpkg-deb -f "$deb" Package) == "$p" ]] || fail "$p: the package in ${deb##*/} is $(dpkg-deb -f "$deb" Package)"
	[[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "$p: version $(dpkg-deb -f "$deb" Version), want $version"
	grep -q '^ Description: ' <<<"$info" || fail "$p: no Description"
	dpkg-deb --contents "$deb" | awk '{ print $6 }' | sed 's|^\./||' >"$work/$p.files" ||
		fail "$p: dpkg-deb --contents failed"
	n=0
	for f in $(expect "$p"); do
		grep -qxF "$f" "$work/$p.files" || fail "$p: $f is not in the package"
		n=$((n + 1))
	done
	dpkg -x "$deb" "$root" || fail "$p: dpkg -x failed"
	echo "$p: $n expected files of $(grep -vc '/$' "$work/$p.files"); Depends: $(dpkg-deb -f "$deb" Depends)"
done
# Unpacked, every package's files are there.
for p in $packages; do
	for f in $(expect "$p"); do
		[[ -e $root/$f ]] || fail "$p: $f is not in the unpacked root"
	done
done
[[ $(dpkg-deb -f "$work/tieralloc-tools_${version}_$arch.deb" Depends) == *tieralloc-preload* ]] ||
	fail "tieralloc-tools does not depend on tieralloc-preload (tieralloc-run loads it)"

# The libraries resolve.
lib=$root/usr/lib/$ma
for so in libtieralloc.so.0 libtieralloc-preload.so; do
	out=$(LD_LIBRARY_PATH=$lib ldd "$lib/$so") || fail "ldd $so failed"
	! grep -q 'not found' <<<"$out" || fail "$so: $(grep 'not found' <<<"$out")"
done
echo "libraries resolve: libtieralloc.so.0 libtieralloc-preload.so"

# The README's linking example against libtieralloc-dev's header and pkg-config file, run
# against libtieralloc0.
if command -v pkg-config >/dev/null && command -v cc >/dev/null; then
	sed -n '/^## Linking libtieralloc directly/,/^## /p' "$src/README.md" |
		sed -n '/^```c$/,/^```$/p' | sed '1d;$d' >"$work/app.c"
	grep -q 'int main' "$work/app.c" || fail "no complete program in the README's linking example"
	# shellcheck disable=SC2046 # the flags are words
	cc "$work/app.c" $(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$lib/pkgconfig \
		pkg-config --cflags --libs tieralloc) -o "$work/app" ||
		fail "the README's example does not compile against libtieralloc-dev"
	out=$(LD_LIBRARY_PATH=$lib "$work/app") || fail "the README's example failed against libtieralloc0"
	[[ $out == *" tier(s); 4 KiB in tier "[0-9]* ]] || fail "the README's example printed \"$out\""
	echo "README's example against the packages: $out"
fi

# The tools: built for the installed paths (where the packages put the preload library and the
# demo), and they run with the unpacked preload library.
bin=$root/usr/bin
for path in "/usr/lib/$ma" /usr/libexec; do
	grep -qaF "$path" "$bin/tieralloc-run" || fail "tieralloc-run does not look in $path"
done
progs="usr/bin/tieralloc-run usr/bin/tieralloc-stat usr/bin/tieralloc-plot"
[[ $packages == *tierallocd* ]] && progs="$progs usr/sbin/tierallocd"
for prog in $progs; do
	out=$("$root/$prog" --version) || fail "$prog --version failed"
	[[ $out == "${prog##*/} $version" ]] || fail "$prog --version printed \"$out\""
done
export TIERALLOC_PRELOAD_LIB=$lib/libtieralloc-preload.so
"$bin/tieralloc-run" -- true >"$work/run.out" 2>&1 || { cat "$work/run.out" >&2; fail "tieralloc-run -- true failed"; }
"$bin/tieralloc-run" -- "$root/usr/libexec/tieralloc/tieralloc-demo" >"$work/demo.out" 2>&1 ||
	{ cat "$work/demo.out" >&2; fail "tieralloc-run -- tieralloc-demo failed"; }
echo "tieralloc-run with the unpacked preload: true and tieralloc-demo ran"
unset TIERALLOC_PRELOAD_LIB

# The unit names the agent and the README where the packages put them (not compressed).
if [[ $packages == *tierallocd* ]]; then
	unit=$root/usr/lib/systemd/system/tierallocd.service
	exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
	[[ -x $root${exec_start%% *} ]] || fail "the unit's ExecStart=$exec_start is not in the packages"
	for ref in $(sed -n 's/^Documentation=//p' "$unit"); do
		case $ref in
		file://*) [[ -s $root${ref#file://} ]] || fail "the unit's $ref is not in the packages" ;;
		esac
	done
	echo "unit: ExecStart=$exec_start; its Documentation= files are in the packages"
fi

if command -v lintian >/dev/null; then
	echo "lintian (not judged):"
	lintian "$work"/*.changes 2>&1 | sed 's/^/  /' || true
else
	echo "no lintian: not run"
fi

after=$(git -C "$src" status --porcelain --untracked-files=all)
[[ $before == "$after" ]] || fail "the source tree changed: $(diff <(echo "$before") <(echo "$after") || true)"
echo "PASS: ${packages// /, } in $(($(date +%s) - t0)) s"
