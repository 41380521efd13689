#!/usr/bin/env bash
# check_install.sh BUILD SOURCE_DIR WORKDIR VERSION CC CMAKE GENERATOR MAKE_PROGRAM
# Installs BUILD into WORKDIR/prefix and checks what a user of the C API
# gets there: netc and netrun, net.h alone under include/netc/, libnetc.so
# and libnetc.a exporting net.h's functions and nothing else, and
# docs/examples/train_steps.c built with `pkg-config --cflags --libs netc`,
# with netc-static, and with find_package(netc) (shared and static), each
# training two steps on the CPU with no CUDA library linked; a program with
# its own arena_init and pass_fuse links with both libraries.
# Exit 77 (skipped) without pkg-config.
set -uo pipefail
build=$1 src=$2 work=$3 version=$4 cc=$5 cmake=$6 generator=$7 make_program=$8
if ! command -v pkg-config >/dev/null; then
  echo "skipped: pkg-config is not installed (Debian: pkgconf or pkg-config)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../expect.sh"
prefix=$work/prefix
model=$src/models/smallcnn.net
example=$src/docs/examples
trained="^step 2 on the cpu: loss [0-9.]+$" # after step 1's line

check() { # check WHAT COMMAND...: passes when COMMAND succeeds
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}

# --- the installed tree ----------------------------------------------------
if ! "$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
  echo "FAIL: cmake --install:"; tail -5 "$work/install.log"; exit 1
fi
so=$(find "$prefix" -name libnetc.so | head -1)
libdir=$(dirname "${so:-$prefix/lib/libnetc.so}")
for f in bin/netc bin/netrun include/netc/net.h; do
  check "installed $f" test -f "$prefix/$f"
done
for f in libnetc.so libnetc.a pkgconfig/netc.pc pkgconfig/netc-static.pc cmake/netc/netcConfig.cmake \
  cmake/netc/netcConfigVersion.cmake; do
  check "installed $f in $libdir" test -e "$libdir/$f"
done
headers=$(cd "$prefix" && find include -type f | sort | tr '\n' ' ')
check "the only header is include/netc/net.h, not: $headers" test "$headers" = "include/netc/net.h "
inc=$(grep -oE '^#include [<"][^>"]+' "$prefix/include/netc/net.h" | sed 's/^#include .//' | grep -vE '^std(def|int)\.h$')
check "net.h includes nothing but stddef.h and stdint.h: $inc" test -z "$inc"
expect 0 "^netrun $version$" "$prefix/bin/netrun" --version
expect 0 "^netc $version$" "$prefix/bin/netc" --version

# --- exported symbols: net.h's functions, nothing else ----------------------
grep -oE '^[A-Za-z].*[ *]net_[a-z0-9_]+\(' "$prefix/include/netc/net.h" | grep -oE 'net_[a-z0-9_]+' | sort -u \
  >"$work/api.txt"
nm -D --defined-only "$libdir/libnetc.so" | awk '{print $NF}' | sort -u >"$work/so.txt"
nm -g --defined-only "$libdir/libnetc.a" | awk 'NF == 3 {print $3}' | sort -u >"$work/a.txt"
for lib in so a; do
  check "libnetc.$lib exports exactly net.h's $(wc -l <"$work/api.txt") functions; differences:
$(diff "$work/api.txt" "$work/$lib.txt" | grep '^[<>]' | head -10)" cmp -s "$work/api.txt" "$work/$lib.txt"
done
# (each tool's output captured first: under pipefail, grep -q leaving early
# would make the writer's SIGPIPE the pipeline's status)
no_undefined_cuda() { local s; s=$(nm -D --undefined-only "$1") && ! grep -qE ' (net_|cu[A-Z]|nvrtc|cudnn)' <<<"$s"; }
no_cuda_needed() { local s; s=$(readelf -d "$1") && ! grep NEEDED <<<"$s" | grep -qiE 'cuda|nvrtc|cudnn|nvidia'; }
needs_libnetc() { local s; s=$(readelf -d "$1") && grep NEEDED <<<"$s" | grep -q libnetc; }
lacks_libnetc() { ! needs_libnetc "$1"; }
check "libnetc.so leaves net_ or CUDA symbols undefined" no_undefined_cuda "$libdir/libnetc.so"
check "libnetc.so needs a CUDA library" no_cuda_needed "$libdir/libnetc.so"

# --- pkg-config ------------------------------------------------------------
export PKG_CONFIG_PATH=$libdir/pkgconfig
expect 0 "^$version$" pkg-config --modversion netc
expect 0 "-I$prefix/.*include.*-Wl,-rpath,$prefix.*-lnetc" pkg-config --cflags --libs netc
expect 0 "-lnetc .*-lopenblas.*-lcjson.*-lnettle.*-ljpeg.*-lz" pkg-config --static --libs netc
# Each binary runs without LD_LIBRARY_PATH: netc.pc's rpath or CMake's finds libnetc.so.
run_example() { # run_example NAME shared|static BUILD-COMMAND...: builds $work/NAME, checks its link, trains
  local name=$1 linked=$2 exe=$work/$1
  shift 2
  if ! "$@" >"$work/$name.log" 2>&1; then
    fail=$((fail + 1)); echo "FAIL: $name: $*:"; tail -5 "$work/$name.log"; return
  fi
  check "$name needs a CUDA library" no_cuda_needed "$exe"
  if [ "$linked" = static ]; then
    check "$name needs libnetc.so" lacks_libnetc "$exe"
  else
    check "$name does not need libnetc.so" needs_libnetc "$exe"
  fi
  expect 0 "$trained" env -u LD_LIBRARY_PATH "$exe" "$model"
}
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
run_example pc_shared shared "$cc" "$example/train_steps.c" $(pkg-config --cflags --libs netc) -o "$work/pc_shared"
# shellcheck disable=SC2046
run_example pc_static static "$cc" "$example/train_steps.c" $(pkg-config --cflags --libs netc-static) \
  -o "$work/pc_static"

# A program with its own arena_init, diag_error, compile_file and pass_fuse
# (names netc uses inside): it links with either library, and net_load, which
# compiles the .net through netc's own, never calls the program's.
cat >"$work/collide.c" <<'C'
#include <stdio.h>
#include <stdlib.h>

#include <netc/net.h>

void arena_init(void) { abort(); }
void diag_error(void) { abort(); }
int compile_file = 1, pass_fuse = 2;

int main(int argc, char **argv) {
  NetModel *m = NULL;
  NetLoadOpts o = {.device = "cpu", .batch = 2};
  if (argc != 2 || net_load(argv[1], &o, &m) != NET_OK) return 1;
  printf("loaded beside the program's own arena_init: %lld classes\n", (long long)net_classes(m));
  net_free(m);
  return compile_file + pass_fuse == 3 ? 0 : 1;
}
C
for lib in netc netc-static; do
  # shellcheck disable=SC2046
  if "$cc" "$work/collide.c" $(pkg-config --cflags --libs $lib) -o "$work/collide-$lib" >"$work/collide-$lib.log" 2>&1
  then
    expect 0 "beside the program's own arena_init: 10 classes" "$work/collide-$lib" "$model"
  else
    fail=$((fail + 1)); echo "FAIL: a program's own arena_init does not link with $lib:"; tail -5 "$work/collide-$lib.log"
  fi
done

# --- find_package(netc): the example's CMakeLists, then netc::netc_static --
cmake_example() { # cmake_example NAME SOURCE-DIR: configures and builds, the binary as $work/NAME
  "$cmake" -S "$2" -B "$work/$1.build" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release &&
    "$cmake" --build "$work/$1.build" && cp "$work/$1.build/train_steps" "$work/$1"
}
run_example cmake_shared shared cmake_example cmake_shared "$example"
mkdir -p "$work/static-src"
cp "$example/train_steps.c" "$work/static-src/"
sed 's/netc::netc)/netc::netc_static)/' "$example/CMakeLists.txt" >"$work/static-src/CMakeLists.txt"
run_example cmake_static static cmake_example cmake_static "$work/static-src"
# the version file: a version newer than the installed one is refused
mkdir -p "$work/too-new"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(p C)\nfind_package(netc 99.0 REQUIRED)\n' \
  >"$work/too-new/CMakeLists.txt"
expect 1 "netc" "$cmake" -S "$work/too-new" -B "$work/too-new/build" -G "$generator" \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_PREFIX_PATH="$prefix"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
