#!/bin/sh
# Generate configure and Makefile.in (nothing generated is committed).
set -e
cd "$(dirname "$0")"
mkdir -p m4
exec autoreconf -fi
