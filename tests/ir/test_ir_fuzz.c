/* test_ir_fuzz.c - ir_read, ir_verify and ir_print on thousands of random
 * mutations of a valid dump (fixed seed, so a failure reproduces).  Nothing
 * may crash or trip ASan/UBSan; every mutant that reads back and verifies
 * must also round-trip: print(read(print(g))) == print(g).
 * Usage: test_ir_fuzz [ITERATIONS [SEED]] */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "irtest.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state << 13; /* xorshift64 */
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return n ? (uint32_t)(rng_state % n) : 0;
}

/* Pieces of the text form that make mutants get further into the reader. */
static const char *const TOKENS[] = {
    ",",
    "%",
    "@",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "N",
    "x",
    "=",
    ":",
    "#",
    "\n",
    "\"",
    "\\x41",
    " ",
    "-",
    "0",
    "7",
    "99999999999999999999",
    "2147483648",
    "1e-05",
    "0.1",
    "inf",
    "nan",
    "conv2d",
    "relu",
    "add",
    "f16",
    "i32",
    "NHWC",
    "KRSC",
    "%2",
    "%12",
    "@fc.weight",
    "@bn1.weight",
    "input %40 z : f32[N]\n",
    "  %50 = relu(%2) : f32[N,8,8,8] NCHW\n",
    "param @p : f32[3]\n",
    "precision=f16",
    " @ f:1:2",
    "{k=3x3}",
    "[3]",
    "\0",
    "\xff",
    "\t",
    "\r",
    "  optimizer:\n",
    "nonfinite_check",
};

/* One random edit of buf (length *len, capacity cap). */
static void mutate(char *buf, size_t *len, size_t cap) {
  size_t n = *len;
  switch (rnd(6)) {
  case 0: /* replace a byte */
    if (n) buf[rnd((uint32_t)n)] = (char)rnd(256);
    break;
  case 1: /* replace a byte by a printable one */
    if (n) buf[rnd((uint32_t)n)] = (char)(32 + rnd(95));
    break;
  case 2: { /* delete a span */
    if (!n) break;
    size_t at = rnd((uint32_t)n), k = 1 + rnd(rnd(2) ? 4 : 40);
    if (k > n - at) k = n - at;
    memmove(buf + at, buf + at + k, n - at - k);
    *len = n - k;
    break;
  }
  case 3: { /* insert a token */
    const char *t = TOKENS[rnd(sizeof TOKENS / sizeof TOKENS[0])];
    size_t k = t[0] ? strlen(t) : 1, at = rnd((uint32_t)n + 1);
    if (n + k > cap) break;
    memmove(buf + at + k, buf + at, n - at);
    memcpy(buf + at, t, k);
    *len = n + k;
    break;
  }
  case 4: { /* duplicate a span */
    if (!n) break;
    size_t at = rnd((uint32_t)n), k = 1 + rnd(60), to = rnd((uint32_t)n + 1);
    if (k > n - at) k = n - at;
    if (n + k > cap) break;
    char tmp[64];
    memcpy(tmp, buf + at, k);
    memmove(buf + to + k, buf + to, n - to);
    memcpy(buf + to, tmp, k);
    *len = n + k;
    break;
  }
  default: /* truncate */ *len = rnd((uint32_t)n + 1);
  }
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 4000;
  if (argc > 2 && strtoull(argv[2], NULL, 0)) rng_state = strtoull(argv[2], NULL, 0);
  Arena a;
  arena_init(&a);
  IrGraph *g = irtest_small_net(&a);
  char *base = irtest_print(g, &(IrPrintOpts){.pass = "parse"});
  size_t base_len = strlen(base), cap = base_len + 4096;
  char *buf = malloc(cap);
  int nread = 0, nverified = 0, nrejected = 0;
  for (int it = 0; it < iters; it++) {
    size_t len = base_len;
    memcpy(buf, base, len);
    int edits = 1 + (int)rnd(4);
    for (int e = 0; e < edits; e++) mutate(buf, &len, cap);
    Arena fa;
    arena_init(&fa);
    IrtestDiag cap_d;
    irtest_diag_begin(&cap_d);
    IrGraph *m = ir_read(&fa, &cap_d.d, "m.ir", buf, len);
    if (!m) {
      nrejected++;
      CHECK(cap_d.d.nerrors > 0, "iteration %d: NULL without an error", it);
    } else {
      nread++;
      if (ir_verify(m, &cap_d.d, "fuzz") == 0) {
        nverified++;
        char *t1 = irtest_print(m, NULL);
        IrGraph *m2 = ir_read(&fa, &cap_d.d, "t1.ir", t1, strlen(t1));
        CHECK(m2 != NULL, "iteration %d: a verified graph's dump does not read:\n%s", it, t1);
        if (m2) {
          char *t2 = irtest_print(m2, NULL), why[200];
          CHECK(strcmp(t1, t2) == 0, "iteration %d: reprint differs:\n%s---\n%s", it, t1, t2);
          CHECK(irtest_equal(m, m2, why, sizeof why), "iteration %d: %s\n%s", it, why, t1);
          free(t2);
        }
        free(t1);
      } else {
        free(irtest_print(m, NULL)); /* broken graphs print too */
      }
    }
    free(irtest_diag_end(&cap_d));
    arena_free(&fa);
  }
  printf("%d mutants: %d rejected by the reader, %d read, %d of those verified\n", iters, nrejected, nread, nverified);
  CHECK(nrejected > iters / 4, "most mutants are malformed");
  CHECK(nread > iters / 50, "some mutants still read (%d)", nread);
  CHECK(nverified > 0, "some mutants still verify");
  CHECK(nread > nverified, "the verifier rejects some read mutants");
  free(buf);
  free(base);
  arena_free(&a);
  return check_report();
}
