#!/bin/sh
# check_paths.sh ROOT - every repository path that docs/*.md and
# docs/passes/*.md name must exist under ROOT.
#
# A path is a word starting with one of the top folders below, not inside a
# longer path (build/tests/x is a build output, not tests/x).  Forms:
# runtime/gpu/rt_cuda.h/.c (both files), runtime/io/rt_weights.{h,c} and
# tests/onnx/onnx_read.[ch] (expanded), dir/*.cu (at least one match).  A
# path without a file but with PATH.c beside it names the program built
# from that source (tests/api/api_precompile).  Each missing path is
# printed as doc:line: path; the status is 1 when any is missing.
root=${1:-.}
cd "$root" || exit 2
tops='bench|runtime|compiler|tests|codegen_templates|dev|grammar|docs|models|cmake|tools|examples'
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT

exists() { # a path with no blanks, maybe a glob
  for f in $1; do
    [ -e "$f" ] && return 0
    [ -e "$f.c" ] && return 0
  done
  return 1
}

for doc in docs/*.md docs/passes/*.md; do
  grep -noE "(^|[^A-Za-z0-9_./-])($tops)/[][A-Za-z0-9_./*{},-]*" "$doc" |
  while IFS= read -r hit; do
    line=${hit%%:*}
    p=${hit#*:}
    case "$p" in [!A-Za-z]*) p=${p#?} ;; esac
    # trailing punctuation of the sentence
    while :; do
      case "$p" in *. | *, | *\) | */) p=${p%?} ;; *) break ;; esac
    done
    case "$p" in
    *.h/.c) set -- "${p%/.c}" "${p%.h/.c}.c" ;;
    *.c/.h) set -- "${p%/.h}" "${p%.c/.h}.h" ;;
    *'{'*'}'*)
      pre=${p%%\{*}; rest=${p#*\{}; alts=${rest%%\}*}; post=${rest#*\}}
      set --
      for a in $(echo "$alts" | tr ',' ' '); do set -- "$@" "$pre$a$post"; done ;;
    *) set -- "$p" ;;
    esac
    for q in "$@"; do
      exists "$q" || echo "$doc:$line: $q does not exist"
    done
  done
done >"$out"
if [ -s "$out" ]; then
  cat "$out" >&2
  echo "$(wc -l <"$out") path(s) in docs/ that do not exist" >&2
  exit 1
fi
echo "every path in docs/ exists"
