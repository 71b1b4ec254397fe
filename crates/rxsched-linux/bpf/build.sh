#!/bin/sh
# Builds rxsched's XDP programs into obj/, which is committed: building
# rxsched itself needs no C toolchain. `build.sh check` rebuilds into a
# scratch directory and compares byte for byte (CI runs it).
# Needs Debian's clang and libbpf-dev (apt-get install clang libbpf-dev).
set -eu
cd "$(dirname "$0")"
# The build directory must not leak into the debug info, or two checkouts
# would build different objects.
CFLAGS="-O2 -g -target bpf -I/usr/include/$(uname -m)-linux-gnu -Wall -Werror \
 -fdebug-prefix-map=$(pwd)=. -fdebug-compilation-dir=."
build() {
	mkdir -p "$1"
	for f in *.bpf.c; do
		clang $CFLAGS -c "$f" -o "$1/${f%.bpf.c}.o"
	done
}
case "${1:-build}" in
build) build obj ;;
check)
	t=$(mktemp -d)
	build "$t"
	rc=0
	for f in *.bpf.c; do
		o="${f%.bpf.c}.o"
		cmp -s "obj/$o" "$t/$o" || { echo "bpf/obj/$o does not match bpf/$f: run bpf/build.sh"; rc=1; }
	done
	rm -rf "$t"
	[ $rc = 0 ] && echo "bpf: every object matches its source"
	exit $rc ;;
*) echo "usage: $0 [build|check]" >&2; exit 2 ;;
esac
