# expect.sh - sourced by the command-line test scripts (tests/netc,
# tests/cli/netrun, tests/data).  `expect WANT PATTERN CMD...` runs CMD (at most
# $EXPECT_TIMEOUT seconds, default 300) and passes when it exits WANT and its
# output, stdout and stderr together, matches the extended regexp PATTERN.
# It counts in pass and fail and shows the last lines of a failure's output;
# `ok` counts a pass of a check of the script's own, `bad WHAT` a failure.
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect() {
  local want=$1 pat=$2
  shift 2
  local out
  out=$(timeout "${EXPECT_TIMEOUT:-300}" "$@" 2>&1)
  local got=$?
  if [ "$got" != "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
    echo "FAIL: $* -> exit $got (want $want), output:"; echo "$out" | tail -5; fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
