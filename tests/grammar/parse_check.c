/* parse_check.c - parses one .net file and prints its syntax errors.
 *
 *   parse_check FILE     exit 0: no errors; 1: errors (on stderr); 2: usage or I/O
 *
 * The driver of the golden syntax-error tests (tests/golden.sh) and of the
 * robustness test: the file name is printed as given, so a test run from the
 * file's folder sees bare names in the messages. */
#include <stdio.h>
#include <stdlib.h>

#include "ast.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: parse_check FILE.net\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  size_t cap = 1 << 16, len = 0;
  char *src = malloc(cap);
  for (size_t got = 1; src && got > 0;) {
    if (len == cap) {
      char *bigger = realloc(src, cap *= 2);
      if (!bigger) free(src);
      src = bigger;
      if (!src) break;
    }
    got = fread(src + len, 1, cap - len, f);
    len += got;
  }
  fclose(f);
  if (!src) {
    fprintf(stderr, "%s: out of memory\n", argv[1]);
    return 2;
  }
  Arena arena;
  Diag d;
  arena_init(&arena);
  diag_init(&d, stderr);
  ast_parse(&arena, &d, argv[1], src, len);
  diag_finish(&d);
  int nerrors = d.nerrors;
  arena_free(&arena);
  free(src);
  return nerrors ? 1 : 0;
}
