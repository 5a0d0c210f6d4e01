#!/bin/sh
# Generate configure and Makefile.in (needs autoconf, automake, libtool,
# pkg-config).  Nothing generated here is committed.
set -e
cd "$(dirname "$0")"
autoreconf -fi
