#!/bin/bash
# check_errors.sh NETC TEST_MODEL ROOT DIR - model.so's failure modes: a bad
# --arch is a usage error; an output netc cannot write, or a C compiler that
# fails or is missing, leaves no file behind; NVRTC that cannot be loaded
# gives a model with sources only; and rt_model_open (test_model --open)
# refuses, with a clear message and no crash, a library that is not a
# model, a blob with the wrong magic, version (older or newer) or size,
# sections outside the blob, kernel programs out of order, a truncated file
# and a missing one.
set -u
NETC=$1 OPEN="$2 --open" ROOT=$3 T=$4
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

# mkso NAME C-TEXT: a shared library made from C-TEXT
mkso() {
  printf '%s\n' "$2" >"$T/$1.c" && cc -shared -fPIC -o "$T/$1.so" "$T/$1.c"
}
H='const unsigned long long netc_model_size = sizeof netc_model;'
mkso notmodel 'int answer = 42;'
expect 1 "not a netc model (no netc_model symbol" $OPEN "$T/notmodel.so"
mkso magic "const unsigned char netc_model[136] = {'N','E','T','C','X','X','X','X', 1, [12] = 136}; $H"
expect 1 "not a netc model (the netc_model blob does not start with NETCMODL" $OPEN "$T/magic.so"
# the header is 1112 bytes (0x458): 40 + 67 sections of 16
HDR='[12] = 0x58, [13] = 0x04'
mkso version "const unsigned char netc_model[1112] = {'N','E','T','C','M','O','D','L', 99, $HDR}; $H"
expect 1 "model format version 99, but this runtime reads version 3 (the model was written by a newer netc)" \
  $OPEN "$T/version.so"
mkso version1 "const unsigned char netc_model[136] = {'N','E','T','C','M','O','D','L', 1, [12] = 136}; $H"
expect 1 "model format version 1, but this runtime reads version 3 (the model was written by an older netc): recompile" \
  $OPEN "$T/version1.so"
mkso short "const unsigned char netc_model[8] = {'N','E','T','C','M','O','D','L'};
const unsigned long long netc_model_size = 4096;"
expect 1 "corrupt model (netc_model_size says 4096 bytes but the symbol holds 8)" $OPEN "$T/short.so"
mkso header "const unsigned char netc_model[40] = {'N','E','T','C','M','O','D','L', 3, $HDR}; $H"
expect 1 "corrupt model (header of 1112 bytes in a 40-byte blob)" $OPEN "$T/header.so"
mkso section "const unsigned char netc_model[1112] = {'N','E','T','C','M','O','D','L', 3, $HDR,
  [40] = 0xe8, 0x03, [48] = 10}; $H"
expect 1 "corrupt model (section 0: 10 bytes at 1000 of a 1112-byte blob)" $OPEN "$T/section.so"
mkso noir "const unsigned char netc_model[1112] = {'N','E','T','C','M','O','D','L', 3, $HDR}; $H"
expect 1 "corrupt model (no IR for the training graph)" $OPEN "$T/noir.so"
# section 34 (training cubin 0) at 1152 without section 2 (its source)
mkso cubinonly "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 3, $HDR,
  [584] = 0x80, 0x04, [592] = 20, [1152] = 0x7f, 'E', 'L', 'F'}; $H"
expect 1 "corrupt model (the training graph's kernel program 0 is a cubin without source)" $OPEN "$T/cubinonly.so"
# section 3 (training program 1) without section 2 (program 0)
mkso gap "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 3, $HDR,
  [88] = 0x80, 0x04, [96] = 9, [1152] = 'n','o','t',' ','a','n',' ','I','R'}; $H"
expect 1 "corrupt model (the training graph's kernel program 1 is after a missing one)" $OPEN "$T/gap.so"
mkso badir "const unsigned char netc_model[1216] = {'N','E','T','C','M','O','D','L', 3, $HDR,
  [40] = 0x80, 0x04, [48] = 9, [56] = 0x80, 0x04, [64] = 9, [1152] = 'n','o','t',' ','a','n',' ','I','R'}; $H"
expect 1 "the training graph does not read back" $OPEN "$T/badir.so"
head -c 20000 "$T/good.so" >"$T/truncated.so"
expect 1 "truncated.so: truncated" $OPEN "$T/truncated.so"
expect 1 "missing.so: cannot load" $OPEN "$T/missing.so"
printf 'not an ELF file' >"$T/text.so"
expect 1 "text.so: cannot load" $OPEN "$T/text.so"

echo "$fails failed"
[ "$fails" -eq 0 ]
