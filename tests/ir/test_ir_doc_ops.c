/* test_ir_doc_ops.c - docs/ir.md's "Ops" table agrees with the op table in
 * compiler/ir_ops.c: every op has a row with its input count ("2..3" or
 * "5"), output count ("any" for a variable count) and attribute keys, and
 * every row names an op.  Usage: test_ir_doc_ops PATH/docs/ir.md */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "docs/ir.md";
  char *doc = slurp(path);
  if (!doc) return check_skip("docs/ir.md not found");
  char *ops = strstr(doc, "\n## Ops\n");
  CHECK(ops != NULL, "%s has a '## Ops' section", path);
  if (!ops) return check_report();
  for (int i = 0; i < IR_OP_COUNT; i++) {
    const IrOpInfo *o = ir_op_info((IrOp)i);
    char in[32], out[16], want[256];
    if (o->min_in == o->max_in)
      snprintf(in, sizeof in, "%d", o->min_in);
    else
      snprintf(in, sizeof in, "%d..%d", o->min_in, o->max_in);
    if (o->nout < 0)
      snprintf(out, sizeof out, "any");
    else
      snprintf(out, sizeof out, "%d", o->nout);
    if (o->attrs[0])
      snprintf(want, sizeof want, "\n| `%s` | %s | %s | `%s` |", o->name, in, out, o->attrs);
    else
      snprintf(want, sizeof want, "\n| `%s` | %s | %s | |", o->name, in, out);
    CHECK(strstr(ops, want) != NULL, "%s: row should start with: %s", path, want + 1);
  }
  /* No row for an op that is gone. */
  for (char *row = strstr(ops, "\n| `"); row; row = strstr(row + 1, "\n| `")) {
    char name[64];
    size_t n = strcspn(row + 4, "`");
    snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), row + 4);
    CHECK(ir_op_parse(name) >= 0, "%s lists '%s', which is not in the op table", path, name);
  }
  free(doc);
  return check_report();
}
