#!/bin/bash
# check_errors.sh NETC TEST_MODEL ROOT DIR - model.so's failure modes: a bad
# --arch is a usage error; an output netc cannot write, or a C compiler that
# fails or is missing, leaves no file behind; NVRTC that cannot be loaded
# gives a model with sources only; and rt_model_open (test_model --open)
# refuses, with a clear message and no crash, a library that is not a
# model, a file without netc's seal (truncated) or whose digest differs (a
# flipped byte), a blob with the wrong magic, version (older or newer) or size,
# sections outside the blob, kernel programs out of order, a sealed library
# with a constructor (which must not run), a missing file, a directory and a
# FIFO.  tests/io/model's model.fuzz damages a model.so in many more ways.
set -u
NETC=$1 OPEN="$2 --open" SEAL="$2 --seal" ROOT=$3 T=$4
NET=$ROOT/models/smallcnn.net
rm -rf "$T" && mkdir -p "$T" || exit 1
fails=0

# expect RC PATTERN CMD...: CMD exits RC and its stderr matches PATTERN
expect() {
  local rc=$1 pat=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ "$got" -ne "$rc" ] || ! grep -q -- "$pat" "$T/err"; then
    echo "FAIL: $* -> exit $got (want $rc), stderr:"
    sed 's/^/    /' "$T/err"
    echo "    (want a match of: $pat)"
    fails=$((fails + 1))
  else
    echo "ok: $* -> $(head -1 "$T/err")"
  fi
}

# nothing but what the test put there may remain in a directory
expect_empty() {
  local left
  left=$(ls -A "$1")
  if [ -n "$left" ]; then
    echo "FAIL: files left in $1: $left"
    fails=$((fails + 1))
  fi
}

# -- netc -o ----------------------------------------------------------------
expect 2 "arch must be one of" "$NETC" "$NET" -o "$T/m.so" --arch=sm_91
expect 2 "arch must be one of" "$NETC" "$NET" -o "$T/m.so" --arch=bogus
expect 2 "needs a value" "$NETC" "$NET" -o
expect 1 "cannot write '$T/no/such/dir/m.so" "$NETC" "$NET" -o "$T/no/such/dir/m.so"
touch "$T/afile"
expect 1 "cannot write" "$NETC" "$NET" -o "$T/afile/m.so"
mkdir "$T/ro"
if [ "$(id -u)" -ne 0 ]; then # root writes anywhere
  chmod 555 "$T/ro"
  expect 1 "cannot write" "$NETC" "$NET" -o "$T/ro/m.so"
  chmod 755 "$T/ro"
fi
expect_empty "$T/ro"
mkdir "$T/cc"
CC=false expect 1 "the C compiler 'false' failed" "$NETC" "$NET" -o "$T/cc/m.so"
expect_empty "$T/cc"
CC=/no/such/cc expect 1 "cannot run the C compiler '/no/such/cc'" "$NETC" "$NET" -o "$T/cc/m.so"
expect_empty "$T/cc"
# a library that is not NVRTC where NVRTC is looked for: sources only
ZLIB=$(ldconfig -p | awk '/libz\.so\.1 /{print $NF; exit}')
if [ -n "$ZLIB" ]; then
  NETC_NVRTC=$ZLIB expect 0 "warning: NVRTC cannot be loaded" "$NETC" "$NET" -o "$T/src_only.so"
  if ! $OPEN "$T/src_only.so" | grep -q "arch=- .*cubin=0$"; then
    echo "FAIL: the source-only model opens without cubins: $($OPEN "$T/src_only.so" 2>&1)"
    fails=$((fails + 1))
  fi
fi

# -- rt_model_open ----------------------------------------------------------
"$NETC" "$NET" -o "$T/good.so" || { echo "FAIL: netc -o"; exit 1; }
$OPEN "$T/good.so" || fails=$((fails + 1))
$OPEN "$NET" || fails=$((fails + 1))

# mkso NAME C-TEXT: a shared library made from C-TEXT; mksealed: sealed as netc seals
# a model.so (test_model --seal), so the checks after the seal's are reached
mkso() {
  printf '%s\n' "$2" >"$T/$1.c" && cc -shared -fPIC -o "$T/$1.so" "$T/$1.c"
}
mksealed() {
  mkso "$@" && $SEAL "$T/$1.so"
}
H='const unsigned long long netc_model_size = sizeof netc_model;'
mkso notmodel 'int answer = 42;'
expect 1 "notmodel.so: not a netc model, or a damaged one (no netc seal at its end" $OPEN "$T/notmodel.so"
mksealed magic "const unsigned char netc_model[136] = {'N','E','T','C','X','X','X','X', 1, [12] = 136}; $H"
expect 1 "not a netc model (the netc_model blob does not start with NETCMODL" $OPEN "$T/magic.so"
# the header is 1128 bytes (0x468): 40 + 68 sections of 16
HDR='[12] = 0x68, [13] = 0x04'
mksealed version "const unsigned char netc_model[1128] = {'N','E','T','C','M','O','D','L', 99, $HDR}; $H"
expect 1 "model format version 99, but this runtime reads version 4 (the model was written by a newer netc)" \
  $OPEN "$T/version.so"
# an older model has no seal: its version is still found and named
mkso version3 "const unsigned char netc_model[1112] = {'N','E','T','C','M','O','D','L', 3, [12] = 0x58, 0x04}; $H"
expect 1 "model format version 3, but this runtime reads version 4 (the model was written by an older netc): recompile" \
  $OPEN "$T/version3.so"
mkso version1 "const unsigned char netc_model[136] = {'N','E','T','C','M','O','D','L', 1, [12] = 136}; $H"
expect 1 "model format version 1, but this runtime reads version 4 (the model was written by an older netc): recompile" \
  $OPEN "$T/version1.so"
mksealed header "const unsigned char netc_model[40] = {'N','E','T','C','M','O','D','L', 4, $HDR}; $H"
expect 1 "corrupt model (header of 1128 bytes in a 40-byte blob)" $OPEN "$T/header.so"
mksealed section "const unsigned char netc_model[1128] = {'N','E','T','C','M','O','D','L', 4, $HDR,
  [40] = 0xe8, 0x03, [48] = 10}; $H"
expect 1 "corrupt model (section 0: 10 bytes at 1000 of a 1128-byte blob)" $OPEN "$T/section.so"
mksealed noir "const unsigned char netc_model[1128] = {'N','E','T','C','M','O','D','L', 4, $HDR}; $H"
expect 1 "corrupt model (no IR for the training graph)" $OPEN "$T/noir.so"
# section 34 (training cubin 0) at 1152 without section 2 (its source)
mksealed cubinonly "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 4, $HDR,
  [584] = 0x80, 0x04, [592] = 20, [1152] = 0x7f, 'E', 'L', 'F'}; $H"
expect 1 "corrupt model (the training graph's kernel program 0 is a cubin without source)" $OPEN "$T/cubinonly.so"
# section 3 (training program 1) without section 2 (program 0)
mksealed gap "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 4, $HDR,
  [88] = 0x80, 0x04, [96] = 9, [1152] = 'n','o','t',' ','a','n',' ','I','R'}; $H"
expect 1 "corrupt model (the training graph's kernel program 1 is after a missing one)" $OPEN "$T/gap.so"
mksealed badir "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 4, $HDR,
  [40] = 0x80, 0x04, [48] = 9, [56] = 0x80, 0x04, [64] = 9, [1152] = 'n','o','t',' ','a','n',' ','I','R'}; $H"
expect 1 "the training graph does not read back" $OPEN "$T/badir.so"
# nothing in a model.so runs: a constructor that would leave a file behind, in a sealed library
mksealed ctor "#include <stdio.h>
__attribute__((constructor)) static void ran(void) { fclose(fopen(\"$T/ctor-ran\", \"w\")); }
const unsigned char netc_model[1128] = {'N','E','T','C','M','O','D','L', 4, $HDR}; $H"
rm -f "$T/ctor-ran" # --seal dlopens it, so the constructor ran there
expect 1 "ctor.so: corrupt model (no IR for the training graph)" $OPEN "$T/ctor.so"
if [ -e "$T/ctor-ran" ]; then
  echo "FAIL: rt_model_open ran the library's constructor"
  fails=$((fails + 1))
fi
head -c 20000 "$T/good.so" >"$T/truncated.so"
expect 1 "truncated.so: not a netc model, or a damaged one (no netc seal at its end: truncated" $OPEN "$T/truncated.so"
cp "$T/good.so" "$T/flipped.so"
printf '\377' | dd of="$T/flipped.so" bs=1 seek=40000 conv=notrunc status=none
expect 1 "flipped.so: damaged model (its SHA-256 differs from the digest netc sealed it with" $OPEN "$T/flipped.so"
expect 1 "missing.so: cannot open" $OPEN "$T/missing.so"
printf 'not an ELF file' >"$T/text.so"
expect 1 "text.so: not a netc model (not an ELF shared library" $OPEN "$T/text.so"
mkdir "$T/dir.so"
expect 1 "dir.so: not a regular file" $OPEN "$T/dir.so"
mkfifo "$T/fifo.so"
expect 1 "fifo.so: not a regular file" timeout 10 $OPEN "$T/fifo.so"

echo "$fails failed"
[ "$fails" -eq 0 ]
