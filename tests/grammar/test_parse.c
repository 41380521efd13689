/* test_parse.c - the parser's tree for models/resnet50.net, operator
 * precedence, literals and statement forms, checked node by node.
 *
 *   test_grammar_parse PATH/TO/resnet50.net */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "check.h"
#include "ir.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static int count_stmts(const AstStmt *s) {
  int n = 0;
  for (; s; s = s->next) n++;
  return n;
}

static const AstStmt *nth_stmt(const AstStmt *s, int i) {
  while (s && i-- > 0) s = s->next;
  return s;
}

static const AstArg *nth_arg(const AstArg *a, int i) {
  while (a && i-- > 0) a = a->next;
  return a;
}

static const char *op_text(int op) {
  static char one[2];
  switch (op) {
  case AST_OP_EQ: return "==";
  case AST_OP_NE: return "!=";
  case AST_OP_LE: return "<=";
  case AST_OP_GE: return ">=";
  case AST_OP_AND: return "&&";
  case AST_OP_OR: return "||";
  default: one[0] = (char)op; return one;
  }
}

/* Writes e fully parenthesized: (1 + (2 * 3)). */
static void show(char *buf, size_t cap, const AstExpr *e) {
  size_t n = strlen(buf);
  char *p = buf + n;
  cap -= n;
  switch (e->kind) {
  case AST_INT: snprintf(p, cap, "%lld", (long long)e->ival); break;
  case AST_FLOAT: snprintf(p, cap, "%g", e->fval); break;
  case AST_BOOL: snprintf(p, cap, "%s", e->ival ? "true" : "false"); break;
  case AST_DTYPE: snprintf(p, cap, "dtype%lld", (long long)e->ival); break;
  case AST_NAME: snprintf(p, cap, "%s", e->name); break;
  case AST_UNARY:
    snprintf(p, cap, "(%s", op_text(e->op));
    show(buf, cap + n, e->a);
    strncat(buf, ")", cap + n - strlen(buf) - 1);
    break;
  case AST_BINARY:
    snprintf(p, cap, "(");
    show(buf, cap + n, e->a);
    snprintf(buf + strlen(buf), cap + n - strlen(buf), " %s ", op_text(e->op));
    show(buf, cap + n, e->b);
    strncat(buf, ")", cap + n - strlen(buf) - 1);
    break;
  case AST_COND:
    snprintf(p, cap, "(");
    show(buf, cap + n, e->a);
    strncat(buf, " ? ", cap + n - strlen(buf) - 1);
    show(buf, cap + n, e->b);
    strncat(buf, " : ", cap + n - strlen(buf) - 1);
    show(buf, cap + n, e->c);
    strncat(buf, ")", cap + n - strlen(buf) - 1);
    break;
  case AST_CALL:
  case AST_TUPLE:
    snprintf(p, cap, "%s(", e->kind == AST_CALL ? e->name : "tuple");
    for (const AstArg *a = e->args; a; a = a->next) {
      if (a != e->args) strncat(buf, ", ", cap + n - strlen(buf) - 1);
      if (a->key) snprintf(buf + strlen(buf), cap + n - strlen(buf), "%s=", a->key);
      show(buf, cap + n, a->value);
    }
    strncat(buf, ")", cap + n - strlen(buf) - 1);
    break;
  }
}

/* Parses `network t { v = EXPR }` and returns the expression, or NULL. */
static const AstExpr *parse_expr(Arena *a, Diag *d, const char *text) {
  char *src = arena_printf(a, "network t {\n  v = %s\n}\n", text);
  AstFile *f = ast_parse(a, d, "expr.net", src, strlen(src));
  if (!f || !f->network || !f->network->body) return NULL;
  return f->network->body->value;
}

static void check_expr(const char *text, const char *want) {
  Arena a;
  Diag d;
  arena_init(&a);
  diag_init(&d, stderr);
  const AstExpr *e = parse_expr(&a, &d, text);
  char got[512] = "";
  if (e) show(got, sizeof got, e);
  CHECK(d.nerrors == 0 && e && strcmp(got, want) == 0, "'%s': got '%s' want '%s' (%d errors)", text, got, want,
        d.nerrors);
  arena_free(&a);
}

/* Parses src and returns the number of errors (messages are discarded). */
static int count_errors(const char *src) {
  Arena a;
  Diag d;
  arena_init(&a);
  diag_init(&d, NULL);
  ast_parse(&a, &d, "bad.net", src, strlen(src));
  arena_free(&a);
  return d.nerrors;
}

static void check_resnet(const char *path) {
  size_t len;
  char *src = read_file(path, &len);
  CHECK(src != NULL, "cannot read %s", path);
  if (!src) return;
  Arena a;
  Diag d;
  arena_init(&a);
  diag_init(&d, stderr);
  AstFile *f = ast_parse(&a, &d, "resnet50.net", src, len);
  CHECK(f && d.nerrors == 0, "resnet50.net: %d errors", d.nerrors);
  if (!f || !f->blocks || !f->blocks->next || !f->network || !f->train) {
    CHECK(0, "resnet50.net: blocks, network or train missing");
    goto done;
  }

  /* block bottleneck(x, width, stride = 1) { 11 statements } */
  const AstBlock *bn = f->blocks, *st = f->blocks->next;
  CHECK(!st->next, "two blocks");
  CHECK(strcmp(bn->name, "bottleneck") == 0, "first block %s", bn->name);
  CHECK(bn->loc.line == 6 && bn->loc.col == 1 && strcmp(bn->loc.file, "resnet50.net") == 0, "bottleneck at %s:%d:%d",
        bn->loc.file, bn->loc.line, bn->loc.col);
  CHECK(bn->nparams == 3, "bottleneck has %d params", bn->nparams);
  const AstParam *stride = bn->params->next->next;
  CHECK(strcmp(stride->name, "stride") == 0 && stride->dflt && stride->dflt->kind == AST_INT &&
            stride->dflt->ival == 1 && !bn->params->dflt,
        "stride = 1");
  CHECK(stride->loc.line == 6 && stride->loc.col == 28, "stride at %d:%d", stride->loc.line, stride->loc.col);
  CHECK(count_stmts(bn->body) == 11, "bottleneck: %d statements", count_stmts(bn->body));

  /* conv1 = conv2d(x, width, k=1, bias=false) */
  const AstStmt *conv1 = bn->body;
  CHECK(conv1->kind == AST_ASSIGN && strcmp(conv1->target, "conv1") == 0 && !conv1->scope, "conv1");
  CHECK(conv1->loc.line == 7 && conv1->loc.col == 3, "conv1 at %d:%d", conv1->loc.line, conv1->loc.col);
  const AstExpr *call = conv1->value;
  CHECK(call->kind == AST_CALL && strcmp(call->name, "conv2d") == 0 && call->nargs == 4, "conv2d call with 4 args");
  CHECK(call->loc.line == 7 && call->loc.col == 11, "call at %d:%d", call->loc.line, call->loc.col);
  const AstArg *k = nth_arg(call->args, 2), *bias = nth_arg(call->args, 3);
  CHECK(!call->args->key && k->key && strcmp(k->key, "k") == 0 && k->value->ival == 1, "k=1");
  CHECK(k->loc.line == 7 && k->loc.col == 28, "k at %d:%d", k->loc.line, k->loc.col);
  CHECK(strcmp(bias->key, "bias") == 0 && bias->value->kind == AST_BOOL && bias->value->ival == 0, "bias=false");

  /* conv3 = conv2d(relu2, width * 4, ...): a binary node sits at its operator */
  const AstExpr *mul = nth_arg(nth_stmt(bn->body, 6)->value->args, 1)->value;
  CHECK(mul->kind == AST_BINARY && mul->op == AST_OP_MUL && mul->a->kind == AST_NAME && mul->b->ival == 4, "width * 4");
  CHECK(mul->loc.line == 13 && mul->loc.col == 31, "'*' at %d:%d", mul->loc.line, mul->loc.col);
  CHECK(nth_arg(nth_stmt(bn->body, 6)->value->args, 1)->loc.col == 25, "arg at its first token");

  /* if stride != 1 || channels(x) != width * 4 { 3 statements } */
  const AstStmt *ifs = nth_stmt(bn->body, 9);
  CHECK(ifs->kind == AST_IF && ifs->loc.line == 16 && ifs->loc.col == 3 && !ifs->orelse, "if");
  CHECK(ifs->value->op == AST_OP_OR && ifs->value->a->op == AST_OP_NE && ifs->value->b->op == AST_OP_NE &&
            ifs->value->b->a->kind == AST_CALL,
        "if condition shape");
  CHECK(count_stmts(ifs->body) == 3 && strcmp(ifs->body->target, "downsample.0") == 0 &&
            strcmp(ifs->body->next->value->args->value->name, "downsample.0") == 0,
        "downsample.0 statements");
  const AstStmt *ret = nth_stmt(bn->body, 10);
  CHECK(ret->kind == AST_RETURN && ret->value->kind == AST_CALL && strcmp(ret->value->name, "relu") == 0 &&
            ret->value->args->value->nargs == 2,
        "return relu(add(bn3, shortcut))");

  /* block stage: for i in 0..blocks { x = bottleneck(x, width, i == 0 ? stride : 1) as [i] } */
  CHECK(strcmp(st->name, "stage") == 0 && st->nparams == 4 && count_stmts(st->body) == 2, "stage");
  const AstStmt *loop = st->body;
  CHECK(loop->kind == AST_FOR && strcmp(loop->var, "i") == 0 && loop->lo->kind == AST_INT && loop->lo->ival == 0 &&
            loop->hi->kind == AST_NAME && strcmp(loop->hi->name, "blocks") == 0,
        "for i in 0..blocks");
  const AstStmt *x = loop->body;
  CHECK(x && x->kind == AST_ASSIGN && x->scope && !x->scope->literal && x->scope->expr &&
            x->scope->expr->kind == AST_NAME && strcmp(x->scope->expr->name, "i") == 0,
        "as [i]");
  const AstExpr *cond = nth_arg(x->value->args, 2)->value;
  CHECK(x->value->nargs == 3 && cond->kind == AST_COND && cond->a->op == AST_OP_EQ && cond->b->kind == AST_NAME &&
            cond->c->ival == 1,
        "i == 0 ? stride : 1");
  CHECK(cond->loc.line == 27 && cond->loc.col == 30, "?: at its first token, %d:%d", cond->loc.line, cond->loc.col);

  /* network resnet50 { 2 inputs, 12 statements } */
  const AstNetwork *net = f->network;
  CHECK(strcmp(net->name, "resnet50") == 0 && net->loc.line == 32, "network");
  const AstInput *image = net->inputs, *label = image ? image->next : NULL;
  CHECK(image && label && !label->next, "two inputs");
  if (image && label) {
    CHECK(strcmp(image->name, "image") == 0 && image->dtype == IR_DT_F32 && image->ndims == 3 &&
              nth_arg(image->dims, 2)->value->ival == 224,
          "image : f32[3, 224, 224]");
    CHECK(strcmp(label->name, "label") == 0 && label->dtype == IR_DT_I32 && label->ndims == 0 && !label->dims,
          "label : i32[]");
    CHECK(label->loc.line == 34 && label->loc.col == 3, "label at %d:%d", label->loc.line, label->loc.col);
  }
  CHECK(count_stmts(net->body) == 12, "network: %d statements", count_stmts(net->body));
  const AstStmt *loss = nth_stmt(net->body, 11);
  CHECK(loss && strcmp(loss->target, "loss") == 0 && strcmp(loss->value->name, "softmax_cross_entropy") == 0,
        "last statement is the loss");

  /* train { 6 settings } */
  int nitems = 0;
  for (const AstArg *i = f->train->items; i; i = i->next) nitems++;
  CHECK(nitems == 6, "train has %d settings", nitems);
  const AstArg *opt = nth_arg(f->train->items, 2);
  CHECK(opt && strcmp(opt->key, "optimizer") == 0 && opt->value->kind == AST_CALL && opt->value->nargs == 4,
        "optimizer = sgd(...)");
  if (opt && opt->value->nargs == 4) {
    const AstArg *wd = nth_arg(opt->value->args, 3);
    CHECK(strcmp(wd->key, "weight_decay") == 0 && wd->value->kind == AST_FLOAT, "weight_decay is a float");
    CHECK_CLOSE(wd->value->fval, 0.0001, 1e-15, "weight_decay");
    CHECK_CLOSE(opt->value->args->value->fval, 0.1, 1e-15, "lr");
  }
done:
  arena_free(&a);
  free(src);
}

static void check_statements(void) {
  const char *src = "block f(x, n = 2) {\n"
                    "  if n > 1 { x = a(x) } else if n == 1 { x = b(x) } else { x = c(x) }\n"
                    "  y = g(x) as blk.0; z = g(y) as [n + 1]\n"
                    "  return (x, y)\n"
                    "}\n"
                    "network t\n"
                    "{\n"
                    "  input s : i64[]\n"
                    "}\n";
  Arena a;
  Diag d;
  arena_init(&a);
  diag_init(&d, stderr);
  AstFile *f = ast_parse(&a, &d, "stmts.net", src, strlen(src));
  CHECK(f && d.nerrors == 0 && f->blocks && f->network, "statement forms parse");
  if (f && f->blocks && f->network) {
    const AstStmt *s = f->blocks->body;
    CHECK(count_stmts(s) == 4, "4 statements, got %d", count_stmts(s));
    const AstStmt *elif = s->orelse;
    CHECK(elif && elif->kind == AST_IF && elif->orelse && elif->orelse->kind == AST_ASSIGN && elif->loc.col == 30,
          "else if nests");
    const AstStmt *y = s->next, *z = y->next;
    CHECK(y->scope && y->scope->literal && strcmp(y->scope->literal, "blk.0") == 0, "as blk.0");
    CHECK(z->loc.line == 3 && z->loc.col == 22 && z->scope->expr->op == AST_OP_ADD, "as [n + 1]");
    const AstExpr *tuple = z->next->value;
    CHECK(tuple->kind == AST_TUPLE && tuple->nargs == 2 && tuple->loc.col == 10, "tuple");
    CHECK(f->network->inputs->dtype == IR_DT_I64, "i64 input");
  }
  arena_free(&a);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_grammar_parse resnet50.net\n");
    return 2;
  }
  check_resnet(argv[1]);
  check_statements();

  check_expr("1 + 2 * 3", "(1 + (2 * 3))");
  check_expr("1 - 2 - 3", "((1 - 2) - 3)");
  check_expr("8 / 4 % 3 * 2", "(((8 / 4) % 3) * 2)");
  check_expr("-a * b", "((-a) * b)");
  check_expr("- -a", "(-(-a))");
  check_expr("!a || b && c", "((!a) || (b && c))");
  check_expr("a == b && c < d", "((a == b) && (c < d))");
  check_expr("1 + 2 <= 3 * 4", "((1 + 2) <= (3 * 4))");
  check_expr("a != b || c >= d", "((a != b) || (c >= d))");
  check_expr("a ? b : c ? d : e", "(a ? b : (c ? d : e))");
  check_expr("a || b ? c + 1 : d", "((a || b) ? (c + 1) : d)");
  check_expr("(1 + 2) * 3", "((1 + 2) * 3)");
  check_expr("f(a, k=(3, 1), s=-1)", "f(a, k=tuple(3, 1), s=(-1))");
  check_expr("cast(x, bf16)", "cast(x, dtype2)");
  check_expr("layer1.0.conv1", "layer1.0.conv1");
  check_expr("layer1.0_relu_Relu.2x", "layer1.0_relu_Relu.2x"); /* a part after '.' may start with a digit */
  check_expr("true && !false", "(true && (!false))");
  check_expr("f(\n  a,\n  b\n)", "f(a, b)");
  check_expr("9223372036854775807", "9223372036854775807");

  Arena a;
  Diag d;
  arena_init(&a);
  diag_init(&d, stderr);
  const AstExpr *e = parse_expr(&a, &d, "1e-4 + 2.5e+3 * 1.5");
  CHECK(e && e->a->kind == AST_FLOAT && e->b->b->kind == AST_FLOAT, "floats");
  if (e) {
    CHECK_CLOSE(e->a->fval, 1e-4, 1e-15, "1e-4");
    CHECK_CLOSE(e->b->a->fval, 2500.0, 1e-15, "2.5e+3");
  }
  arena_free(&a);

  CHECK(count_errors("network t {\n  v = a < b < c\n}\n") == 1, "chained comparison");
  CHECK(count_errors("network t {\n  v = f(k=1, 2)\n}\n") == 1, "positional after keyword");
  CHECK(count_errors("network t {\n  v = 9223372036854775808\n}\n") == 1, "int overflow");
  CHECK(count_errors("network t {\n  v = )\n  w = 1 2\n  u = 1 +\n}\n") == 3, "three errors");
  CHECK(count_errors("") == 0, "empty file");
  CHECK(count_errors("network a {}\nnetwork b {}\n") == 1, "second network");
  CHECK(count_errors("network a {}\ntrain {}\ntrain {}\n") == 1, "second train");
  CHECK(count_errors("block a.b() {}\n") == 1, "dotted block name");
  return check_report();
}
