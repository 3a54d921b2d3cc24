#!/bin/sh
# installed_examples.sh BUILD_DIR EXAMPLES_DIR WORK_DIR
# Installs rowan's `lib` and `dev` components (librowan0, librowan-dev) into
# WORK_DIR/prefix, then builds the
# examples against that installation — through pkg-config (cmake and a plain
# cc command line) and through find_package(rowan) — and runs the ones that
# need no daemon.
set -eu
build=$1
examples=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" --component lib >"$work/install.log"
cmake --install "$build" --prefix "$prefix" --component dev >>"$work/install.log"

pcdir=$(dirname "$(find "$prefix" -name rowan.pc | head -n1)")
[ -f "$pcdir/rowan.pc" ] || { echo "rowan.pc not installed" >&2; exit 1; }
export PKG_CONFIG_PATH="$pcdir"
libdir=$(pkg-config --variable=libdir rowan)
export LD_LIBRARY_PATH="$libdir"
echo "installed: $(ls "$libdir"/librowan.so*)"
test -f "$prefix/include/rowan/rowan.h"
test -f "$prefix/include/rowan/rowan.hpp"
test -L "$libdir/librowan.so"

# 1. cmake + pkg-config.
cmake -S "$examples" -B "$work/pc" -G Ninja >"$work/pc.log"
cmake --build "$work/pc" >>"$work/pc.log"
# 2. cmake + find_package(rowan).
cmake -S "$examples" -B "$work/cmake" -G Ninja -DROWAN_EXAMPLES_USE_CMAKE_PACKAGE=ON \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log"
cmake --build "$work/cmake" >>"$work/cmake.log"
# 3. A plain compiler command line.
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Wpedantic -Werror -o "$work/qp_attrs_remote_cc" \
  "$examples/qp_attrs_remote.c" $(pkg-config --cflags --libs rowan)

# Run what needs no daemon: the QP attributes of a described path, the
# all-reduce step between two ranks on loopback, and the watcher's "no daemon".
out=$("$work/qp_attrs_remote_cc" --rtt 0.02 --rate 1e9 --mode passthrough 65536)
echo "$out"
echo "$out" | grep -q 'timeout=15 ' || { echo "unexpected QP attributes" >&2; exit 1; }
"$work/cmake/qp_attrs_remote" --rtt 0.08 --rate 1e10 --mode direct
"$work/pc/allreduce_step" --self-test 1048576
"$work/cmake/allreduce_step" --self-test 262144
rc=0
"$work/pc/telemetry_watch" -s "$work/no-daemon.sock" -n 0 2>/dev/null || rc=$?
[ "$rc" = 69 ] || { echo "telemetry_watch without a daemon: exit $rc, want 69" >&2; exit 1; }
echo "examples OK"
