#!/bin/sh
# check_format.sh ROOT: every C source and header of the project is as
# clang-format makes it (ROOT/.clang-format), so the style stays one style.
# Skipped (77) where clang-format is not installed.
root=$1
fmt=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$fmt" ]; then
  echo "skipped: no clang-format (dev/setup_tests.sh installs it)"
  exit 77
fi
cd "$root" || exit 1
files=$(find compiler runtime tests dev docs -name '*.[ch]' -type f | sort)
bad=0
for f in $files; do
  if ! "$fmt" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted (run: clang-format -i $f)"
    bad=$((bad + 1))
  fi
done
echo "check_format: $(echo "$files" | wc -l) files, $bad not formatted ($("$fmt" --version))"
[ "$bad" -eq 0 ]
