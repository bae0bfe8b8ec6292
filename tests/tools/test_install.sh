#!/bin/bash
# SPDX-License-Identifier: MIT
# make install into a DESTDIR: the manual pages are where man looks for them, the README and the
# design notes are under docdir, and every file: and man: page the systemd unit's Documentation=
# names is installed (the unit is installed with the agent only); the README's linking example
# compiles and runs against what was installed. The directories come from
# tests/tools/local.mk, as configure set them.
set -euo pipefail
: "${TA_TEST_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${TA_TEST_BUILDDIR:=$TA_TEST_SRCDIR}"
fail()
{
	echo "FAIL: $*" >&2
	exit 1
}
[[ -n ${TA_TEST_MANDIR:-} && -n ${TA_TEST_DOCDIR:-} && -n ${TA_TEST_MANS:-} ]] ||
	{ echo "ERROR: run from make check (TA_TEST_MANDIR, TA_TEST_DOCDIR, TA_TEST_MANS unset)" >&2; exit 99; }

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
# The make check that runs this test passes its flags (-j, its jobserver, TESTS=) in MAKEFLAGS:
# the install is a make of its own.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${TA_TEST_MAKE:-make}" -s -C "$TA_TEST_BUILDDIR" \
	install DESTDIR="$dest" >"$dest.log" 2>&1 || { cat "$dest.log" >&2; rm -f "$dest.log"; fail "make install failed"; }
rm -f "$dest.log"

# man_installed NAME SECTION: the page is under mandir/manSECTION.
man_installed()
{
	[[ -s $dest$TA_TEST_MANDIR/man$2/$1.$2 ]] || fail "$1($2) is not installed in $TA_TEST_MANDIR/man$2"
}
n=0
for page in $TA_TEST_MANS; do
	page=${page##*/}
	man_installed "${page%.*}" "${page##*.}"
	n=$((n + 1))
done
echo "man pages installed: $n"
[[ $n -ge 4 ]] || fail "only $n man pages in the list ($TA_TEST_MANS)"
docs="README.md DESIGN-NOTES.md runtimes.md security.md allocator.md observing.md agent.md
	packages.md policies/lending.md policies/reclaim-for-priority.md policies/protect.md"
# shellcheck disable=SC2086 # the names are words
for doc in $docs; do
	[[ -s $dest$TA_TEST_DOCDIR/$doc ]] || fail "$doc is not installed in $TA_TEST_DOCDIR"
done
# shellcheck disable=SC2086 # one line, the names as words
echo "docs installed in $TA_TEST_DOCDIR:" $docs

# The README's example of linking libtieralloc, as written, against the installed header, library
# and pkg-config file (the build's sanitizer flags added: a sanitized library needs its runtime).
if command -v pkg-config >/dev/null && [[ -n ${TA_TEST_LIBDIR:-} ]]; then
	sed -n '/^## Linking libtieralloc directly/,/^## /p' "$TA_TEST_SRCDIR/README.md" |
		sed -n '/^```c$/,/^```$/p' | sed '1d;$d' >"$dest/app.c"
	grep -q 'int main' "$dest/app.c" || fail "no complete program in the README's linking example"
	pc=$dest$TA_TEST_LIBDIR/pkgconfig
	# shellcheck disable=SC2086 # the flags are words
	${TA_TEST_CC:-cc} ${TA_TEST_SAN_CFLAGS:-} "$dest/app.c" \
		$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$pc pkg-config --cflags --libs tieralloc) \
		-o "$dest/app" || fail "the README's linking example does not compile"
	out=$(LD_LIBRARY_PATH=$dest$TA_TEST_LIBDIR "$dest/app") || fail "the README's example failed"
	echo "README's example: $out"
	[[ $out == *" tier(s); 4 KiB in tier "[0-9]* ]] || fail "the README's example printed \"$out\""
else
	echo "no pkg-config: the README's linking example is not checked"
fi

if [[ -z ${TA_TEST_UNITDIR:-} ]]; then
	echo "the agent is not built: no systemd unit to check"
	exit 0
fi
unit=$dest$TA_TEST_UNITDIR/tierallocd.service
[[ -s $unit ]] || fail "tierallocd.service is not installed in $TA_TEST_UNITDIR"
docs=$(sed -n 's/^Documentation=//p' "$unit")
echo "Documentation=$docs"
[[ -n $docs ]] || fail "the unit has no Documentation="
files=0 mans=0
for ref in $docs; do
	case $ref in
	file://*)
		[[ -s $dest${ref#file://} ]] || fail "the unit's $ref is not installed"
		files=$((files + 1))
		;;
	man:*)
		# man:NAME(SECTION)
		name=${ref#man:}
		section=${name#*(}
		man_installed "${name%%(*}" "${section%)}"
		mans=$((mans + 1))
		;;
	*) fail "the unit's Documentation= has $ref, neither file: nor man:" ;;
	esac
done
[[ $files -ge 1 && $mans -ge 1 ]] || fail "the unit names $files files and $mans man pages, want both"
echo PASS
