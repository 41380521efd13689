/* test_ir_read_errors.c - ir_read on malformed text: each case must fail
 * cleanly (NULL graph, no crash) with the expected message at the expected
 * file:line:col, and a line's error must not cascade into later lines. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "irtest.h"

#define HEAD "graph g {\n  input %0 x : f32[N,3,4,4] NCHW\n  param @w : f32[3,3,1,1] KCRS\n"

static const struct Case {
  const char *text;
  const char *msg; /* the first message, in full */
  int count;       /* errors expected */
} CASES[] = {
    {"", "t.ir:1:1: error: expected 'graph NAME {'", 1},
    {"# only a comment\n\n", "t.ir:3:1: error: expected 'graph NAME {'", 1},
    {"input %0 x : f32[3]\n", "t.ir:1:1: error: expected 'graph NAME {'", 1},
    {"graph {\n}\n", "t.ir:1:7: error: expected the graph name, found '{'", 1},
    {"graph g\n}\n", "t.ir:1:8: error: expected '{' after the graph name, found end of line", 1},
    {HEAD, "t.ir:4:1: error: missing '}' at the end of the graph", 1},
    {HEAD "}\nrelu(%0)\n", "t.ir:5:1: error: unexpected 'r'", 1},
    {HEAD "  %1 = frob(%0) : f32[3]\n}\n", "t.ir:4:8: error: unknown op 'frob'", 1},
    {HEAD "  %1 = relu(%0) : f99[3]\n}\n", "t.ir:4:19: error: unknown dtype 'f99'", 1},
    {HEAD "  %1 = relu(%0) : f32[3] NCWH\n}\n", "t.ir:4:26: error: unknown layout 'NCWH'", 1},
    {HEAD "  %1 = relu(%0) : f32[3,\n}\n", "t.ir:4:25: error: expected an integer, found end of line", 1},
    {HEAD "  %1 = relu(%0) : f32[3 4]\n}\n", "t.ir:4:25: error: expected ']' to close the dims, found '4'", 1},
    {HEAD "  %1 = relu(%0) : f32[1,1,1,1,1,1,1]\n}\n", "t.ir:4:35: error: rank above 6", 1},
    {HEAD "  %1 = relu(%0) : f32[-3]\n}\n", "t.ir:4:23: error: negative dimension", 1},
    {HEAD "  %1 = relu(%0) : f32[99999999999999999999]\n}\n", "t.ir:4:23: error: integer out of range", 1},
    {HEAD "  %1 = relu(%5) : f32[3]\n}\n", "t.ir:4:13: error: value %5 is used before it is defined", 1},
    {HEAD "  %0 = relu(%0) : f32[3]\n}\n", "t.ir:4:3: error: value %0 is defined twice", 1},
    {HEAD "  %1, %1 = relu(%0) : f32[3], f32[3]\n}\n", "t.ir:4:7: error: value %1 is defined twice", 1},
    {HEAD "  %1 = relu(@v) : f32[3]\n}\n", "t.ir:4:13: error: undeclared parameter or state @v", 1},
    {HEAD "  state @w : f32[3]\n}\n", "t.ir:4:9: error: @w is declared twice", 1},
    {HEAD "  input %0 y : f32[3]\n}\n", "t.ir:4:9: error: value %0 is defined twice", 1},
    {HEAD "  %1 = relu(%0)\n}\n", "t.ir:4:16: error: expected ':' before the result types, found end of line", 1},
    {HEAD "  %1 = relu(%0) : f32[3], f32[3]\n}\n", "t.ir:4:25: error: more types than results", 1},
    {HEAD "  %1, %2 = relu(%0) : f32[3]\n}\n", "t.ir:4:29: error: expected ',' between result types, found end of line",
     1},
    {HEAD "  relu(%0) : f32[3]\n}\n", "t.ir:4:12: error: a node without results has no types", 1},
    {HEAD "  %1 relu(%0) : f32[3]\n}\n", "t.ir:4:6: error: expected '=' after the results, found 'r'", 1},
    {HEAD "  %1 = relu(%0 : f32[3]\n}\n", "t.ir:4:16: error: expected ')' after the inputs, found ':'", 1},
    {HEAD "  %1 = relu(%0) {k=3x3 : f32[3]\n}\n", "t.ir:4:24: error: expected an attribute name, found ':'", 1},
    {HEAD "  %1 = relu(%0) {k=3x3\n}\n", "t.ir:4:23: error: missing '}' after the attributes", 1},
    {HEAD "  %1 = relu(%0) {k=\"abc\n}\n", "t.ir:4:20: error: unterminated string", 1},
    {HEAD "  %1 = relu(%0) {k=\"abc} : f32[3]\n}\n", "t.ir:4:24: error: character 0x7d in string must be written \\x7d",
     1},
    {HEAD "  %1 = relu(%0) {k=\"a b\"} : f32[3]\n}\n",
     "t.ir:4:22: error: character 0x20 in string must be written \\x20", 1},
    {HEAD "  %1 = relu(%0) {k=\"a\\n\"} : f32[3]\n}\n", "t.ir:4:22: error: bad escape in string (only \\xHH)", 1},
    {HEAD "  %1 = relu(%0) {k=\"a\\x00\"} : f32[3]\n}\n", "t.ir:4:22: error: \\x00 in string", 1},
    {HEAD "  %1 = relu(%0) {act=relu} : f32[3]\n}\n",
     "t.ir:4:22: error: bad attribute value 'relu' (strings are quoted)", 1},
    {HEAD "  %1 = relu(%0) {k=3y} : f32[3]\n}\n", "t.ir:4:20: error: bad attribute value '3y' (strings are quoted)", 1},
    {HEAD "  %1 = relu(%0) {k=3x} : f32[3]\n}\n", "t.ir:4:22: error: expected an integer, found end of line", 1},
    {HEAD "  %1 = relu(%0) {k=1x2x3x4x5x6x7x8x9} : f32[3]\n}\n", "t.ir:4:36: error: more than 8 integers", 1},
    {HEAD "  %1 = relu(%0) {k=[3} : f32[3]\n}\n", "t.ir:4:22: error: expected ']' after a one-element list", 1},
    {HEAD "  %1 = relu(%0) {f=1.5.5} : f32[3]\n}\n", "t.ir:4:20: error: bad number '1.5.5'", 1},
    {HEAD "  %1 = relu(%0) {f=0x1p3} : f32[3]\n}\n", "t.ir:4:23: error: bad integer list '0x1p3'", 1},
    {HEAD "  %1 = relu(%0) {k=9223372036854775808} : f32[3]\n}\n", "t.ir:4:20: error: integer out of range", 1},
    {HEAD "  %1 = relu(%0) {k =3} : f32[3]\n}\n",
     "t.ir:4:19: error: expected '=' after the attribute name, found a space", 1},
    {HEAD "  %1 = relu (%0) : f32[3]\n}\n", "t.ir:4:12: error: expected '(' after the op name, found a space", 1},
    {HEAD "  %1 = relu(%0) : f32 [3]\n}\n", "t.ir:4:22: error: expected '[' after the dtype, found a space", 1},
    {HEAD "  %1 = relu(%0) {=3} : f32[3]\n}\n", "t.ir:4:18: error: expected an attribute name, found '='", 1},
    {HEAD "  %1 = relu(%0) : f32[3]  # a b\n}\n",
     "t.ir:4:31: error: expected '@ FILE:LINE:COL' or end of line, found 'b'", 1},
    {HEAD "  %1 = relu(%0) : f32[3]  # a @ f.net:x:3\n}\n", "t.ir:4:39: error: bad line number in the node comment", 1},
    {HEAD "  %1 = relu(%0) : f32[3]  # a @ f.net:3\n}\n", "t.ir:4:33: error: expected FILE:LINE:COL after '@'", 1},
    {HEAD "  %1 = relu(%0) : f32[3]  # @ :3:4\n}\n", "t.ir:4:31: error: expected FILE:LINE:COL after '@'", 1},
    {HEAD "  %1 = relu(%0) : f32[3] x\n}\n", "t.ir:4:26: error: unexpected 'x' after the node", 1},
    {HEAD "  %99999999 = relu(%0) : f32[3]\n}\n", "t.ir:4:4: error: value number 99999999 too large", 1},
    {HEAD "  %-1 = relu(%0) : f32[3]\n}\n", "t.ir:4:4: error: expected a value number", 1},
    {HEAD "  train a=1 a=2\n}\n", "t.ir:4:8: error: train key 'a' given twice", 1},
    {HEAD "  output %0 %0\n}\n", "t.ir:4:13: error: unexpected '%'", 1},
    {HEAD "  input %1 y f32[3]\n}\n", "t.ir:4:14: error: expected ':' before the type, found 'f'", 1},
    {HEAD "  param w : f32[3]\n}\n", "t.ir:4:9: error: expected '@' before the name, found 'w'", 1},
    {HEAD "  %1 = relu(%0) : f32[3]\xff\n}\n", "t.ir:4:25: error: unexpected byte 0xff after the node", 1},
    {HEAD "  optimizer:\n  optimizer:\n}\n", "t.ir:5:3: error: the optimizer section already started at line 4", 1},
    {HEAD "  optimizer\n}\n", "t.ir:4:12: error: expected ':' after 'optimizer', found end of line", 1},
    {HEAD "  optimizer :\n}\n", "t.ir:4:12: error: expected ':' after 'optimizer', found a space", 1},
    {HEAD "  optimizer: %1\n}\n", "t.ir:4:14: error: unexpected '%'", 1},
    /* A failed line's results are poisoned: later uses stay quiet. */
    {HEAD "  %1 = relu(%0) : f32[3\n  %2 = relu(%1) : f32[3]\n  output %2, %1\n}\n",
     "t.ir:4:24: error: expected ']' to close the dims, found end of line", 1},
    /* Errors in separate lines are all reported. */
    {HEAD "  %1 = relu(%0) : f33[3]\n  %2 = frob(%0) : f32[3]\n  bogus\n}\n", "t.ir:4:19: error: unknown dtype 'f33'",
     3},
};

static void run_case(const struct Case *c) {
  Arena a;
  arena_init(&a);
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  IrGraph *g = ir_read(&a, &cap.d, "t.ir", c->text, strlen(c->text));
  char *msgs = irtest_diag_end(&cap);
  CHECK(g == NULL, "no graph for:\n%s", c->text);
  CHECK(strncmp(msgs, c->msg, strlen(c->msg)) == 0 && msgs[strlen(c->msg)] == '\n', "want: %s\ngot:  %s\nfor:\n%s",
        c->msg, msgs, c->text);
  CHECK(cap.d.nerrors == c->count, "%d errors, want %d:\n%s", cap.d.nerrors, c->count, msgs);
  CHECK(cap.d.file == NULL && cap.d.src == NULL, "the caller's Diag source is restored");
  free(msgs);
  arena_free(&a);
}

/* A NUL byte inside the text (not at the end) is an error like any other. */
static void test_nul(void) {
  static const char text[] = "graph g {\n  input %0 x\0y : f32[3]\n}\n";
  Arena a;
  arena_init(&a);
  IrtestDiag cap;
  irtest_diag_begin(&cap);
  IrGraph *g = ir_read(&a, &cap.d, "t.ir", text, sizeof text - 1);
  char *msgs = irtest_diag_end(&cap);
  CHECK(g == NULL, "NUL rejected");
  CHECK(strncmp(msgs, "t.ir:2:13: error: expected ':' before the type, found byte 0x00\n", 64) == 0, "got %s", msgs);
  free(msgs);
  arena_free(&a);
}

int main(void) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
  test_nul();
  return check_report();
}
