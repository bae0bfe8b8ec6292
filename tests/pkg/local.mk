# The Debian packages (debian/): built with dpkg-buildpackage from a copy of the source tree and
# unpacked into a scratch root (test_deb.sh, a minute or two). It builds the packages from
# source, whatever this build's configuration: not in the sanitized builds (tests/run-all.sh
# runs it in the default build and the --enable-debug one).
EXTRA_DIST += tests/pkg/test_deb.sh
if !SANITIZED
TESTS += tests/pkg/test_deb.sh
endif
