/* test_robust.c - hostile inputs for the front end: each is generated into
 * the current folder (the build tree), parsed by parse_check in a child
 * process, and must end with the right exit status, the file name in the
 * message, the expected words, bounded output and no crash, within
 * TIME_LIMIT seconds (a plain build takes well under one for each).
 *
 *   test_grammar_robust PATH/TO/parse_check */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* Seconds per input; sanitizer builds run several times slower. */
#ifndef TIME_LIMIT
#define TIME_LIMIT 5
#endif

typedef struct Buf {
  char *p;
  size_t n, cap;
} Buf;

static void put(Buf *b, const void *s, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) {
      fprintf(stderr, "out of memory\n");
      exit(2);
    }
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

static void repeat(Buf *b, const char *s, size_t times) {
  for (size_t i = 0; i < times; i++) puts_(b, s);
}

static const char *parse_check;

/* Writes b to name, runs parse_check on it and checks the outcome.  want_rc
 * 0 means no output at all; otherwise the output must name the file and
 * contain `want` (and `want2` when not NULL), in at most max_out bytes. */
static void run_case(const char *name, Buf *b, int want_rc, const char *want, const char *want2, size_t max_out) {
  FILE *f = fopen(name, "wb");
  CHECK(f && fwrite(b->p ? b->p : "", 1, b->n, f) == b->n, "%s: cannot write", name);
  if (f) fclose(f);
  free(b->p);
  *b = (Buf){0};

  char errname[256];
  snprintf(errname, sizeof errname, "%s.stderr", name);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(errname, "w", stderr)) _exit(127);
    execl(parse_check, parse_check, name, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);

  FILE *e = fopen(errname, "rb");
  static char out[1 << 16];
  size_t nout = e ? fread(out, 1, sizeof out - 1, e) : 0;
  int more = e && fgetc(e) != EOF;
  if (e) fclose(e);
  out[nout] = 0;

  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("%-16s exit %d  %6.2f s  %5zu bytes of messages\n", name, rc, secs, nout);
  CHECK(rc == want_rc, "%s: exit status %d, want %d\n%s", name, rc, want_rc, out);
  CHECK(!strstr(out, "Sanitizer") && !strstr(out, "runtime error"), "%s: crashed\n%s", name, out);
  CHECK(secs < TIME_LIMIT, "%s: took %.1f s", name, secs);
  if (want_rc == 0) {
    CHECK(nout == 0, "%s: unexpected messages\n%s", name, out);
    return;
  }
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s:", name);
  CHECK(strncmp(out, prefix, strlen(prefix)) == 0, "%s: message without the file name\n%s", name, out);
  CHECK(strstr(out, want) != NULL, "%s: no '%s' in\n%s", name, want, out);
  CHECK(!want2 || strstr(out, want2) != NULL, "%s: no '%s' in\n%s", name, want2, out);
  CHECK(!more && nout <= max_out, "%s: %zu bytes of messages, at most %zu expected", name, nout + more, max_out);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_grammar_robust PATH/TO/parse_check\n");
    return 2;
  }
  parse_check = argv[1];
  Buf b = {0};

  run_case("empty.net", &b, 0, NULL, NULL, 0);

  for (int i = 0; i < 100000; i++) {
    unsigned char c[3] = {'#', (unsigned char)(i % 256), '\n'};
    put(&b, c, c[1] == '\n' ? 1 : 3);
    if (i % 7 == 0) puts_(&b, "\n\n");
  }
  run_case("comments.net", &b, 0, NULL, NULL, 0);

  puts_(&b, "# ");
  for (int i = 0; i < 1000000; i++) put(&b, "", 1);
  puts_(&b, "\nnetwork n {}  # \xff\x01\n");
  run_case("nul_comment.net", &b, 0, NULL, NULL, 0);

  uint32_t seed = 12345;
  for (int i = 0; i < 1 << 20; i++) {
    seed = seed * 1664525u + 1013904223u;
    unsigned char c = (unsigned char)(seed >> 24);
    put(&b, &c, 1);
  }
  run_case("garbage.net", &b, 1, "error:", "errors generated", 12000);

  put(&b, "network n {\n  x = ", 18);
  for (int i = 0; i < 100000; i++) put(&b, "", 1);
  puts_(&b, "\n}\n");
  run_case("nul.net", &b, 1, "nul.net:2:7: error: unexpected byte 0x00", NULL, 400);

  puts_(&b, "network n {\n  x\xff\xfe\xc3\x28 = 1\n  y = caf\xc3\xa9  # caf\xc3\xa9\n}\n");
  run_case("utf8.net", &b, 1, "utf8.net:2:4: error: unexpected byte 0xff", "utf8.net:3:10: error: unexpected byte 0xc3",
           800);

  puts_(&b, "network n {\n  x = ");
  repeat(&b, "(", 200000);
  puts_(&b, "1");
  repeat(&b, ")", 200000);
  puts_(&b, "\n}\n");
  run_case("deep_parens.net", &b, 1, "nested too deeply", NULL, 600);

  puts_(&b, "network n {\n  x = ");
  repeat(&b, "-", 200000);
  puts_(&b, "1\n}\n");
  run_case("deep_unary.net", &b, 1, "nested too deeply", NULL, 600);

  puts_(&b, "block f(x) {\n");
  repeat(&b, "if x {\n", 100000);
  run_case("deep_blocks.net", &b, 1, "nested too deeply", NULL, 600);

  puts_(&b, "network n { x = a");
  repeat(&b, " + a", 5000000 / 4);
  puts_(&b, " + ) }\n");
  run_case("long_line.net", &b, 1, "long_line.net:1:5000021: error: unexpected ')'", "...", 600);

  puts_(&b, "network n { x = ");
  repeat(&b, "a", 5000000);
  puts_(&b, " }\n");
  run_case("long_name.net", &b, 1, "is too long (5000000 bytes", NULL, 800);

  puts_(&b, "network n {\n");
  for (int i = 0; i < 2000000; i++) puts_(&b, i % 4 == 0 ? "  x = 1\n" : i % 4 == 1 ? "  # c\n" : "\n");
  puts_(&b, "  y = )\n}\n");
  run_case("many_lines.net", &b, 1, "many_lines.net:2000002:7: error: unexpected ')'", NULL, 400);

  puts_(&b, "network n {\n");
  repeat(&b, "  x = )\n", 300000);
  puts_(&b, "}\n");
  run_case("many_errors.net", &b, 1, "300000 errors generated", NULL, 4000);

  puts_(&b, "network n {\n  x = ");
  repeat(&b, "9", 1000000);
  puts_(&b, "\n}\n");
  run_case("huge_int.net", &b, 1, "integer literal too large", NULL, 600);

  puts_(&b, "network n {\n  x = 1.");
  repeat(&b, "5", 1000000);
  puts_(&b, "e5\n  y = 1e99999999999999999999\n}\n");
  run_case("huge_float.net", &b, 1, "huge_float.net:3:7: error: floating-point literal too large", NULL, 600);

  return check_report();
}
