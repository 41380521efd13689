/* ast.h - the syntax tree of a .net file, as the parser builds it.
 *
 * The tree is plain data in the compile's Arena; every node has a SrcLoc.
 * Lists are singly linked through `next` in source order.  Nothing here is
 * evaluated: blocks, loops, conditions and arithmetic are elaborated by
 * lower.c into the IR.  docs/language.md is the reference for the syntax. */
#ifndef NETC_AST_H
#define NETC_AST_H

#include <stdint.h>

#include "arena.h"
#include "diag.h"

typedef enum AstExprKind {
  AST_INT,    /* ival */
  AST_FLOAT,  /* fval */
  AST_BOOL,   /* ival: 0 or 1 */
  AST_DTYPE,  /* ival: an IrDtype (f32, f16, bf16, i8, i32, i64) */
  AST_NAME,   /* name: a variable, possibly dotted ("downsample.0") */
  AST_CALL,   /* name(args): an op, a block or a builtin */
  AST_TUPLE,  /* (a, b, ...): args (positional only), at least 2 items */
  AST_UNARY,  /* op a: '-' or '!' */
  AST_BINARY, /* a op b: + - * / % == != < <= > >= && || */
  AST_COND,   /* a ? b : c */
} AstExprKind;

/* Binary and unary operator codes (AstExpr.op). */
enum {
  AST_OP_ADD = '+',
  AST_OP_SUB = '-',
  AST_OP_MUL = '*',
  AST_OP_DIV = '/',
  AST_OP_MOD = '%',
  AST_OP_LT = '<',
  AST_OP_GT = '>',
  AST_OP_NOT = '!',
  AST_OP_EQ = 256,
  AST_OP_NE,
  AST_OP_LE,
  AST_OP_GE,
  AST_OP_AND,
  AST_OP_OR,
};

typedef struct AstExpr AstExpr;
typedef struct AstArg AstArg;

/* One argument of a call: positional (key NULL) or keyword (k=3). */
struct AstArg {
  SrcLoc loc;
  const char *key;
  AstExpr *value;
  AstArg *next;
};

struct AstExpr {
  AstExprKind kind;
  SrcLoc loc; /* of the first token; for AST_BINARY, of the operator */
  int64_t ival;
  double fval;
  const char *name;
  int op;
  AstExpr *a, *b, *c;
  AstArg *args; /* AST_CALL, AST_TUPLE */
  int nargs;
};

typedef enum AstStmtKind {
  AST_ASSIGN, /* target = value [as scope] */
  AST_IF,     /* if cond { body } [else { orelse }]  ("else if" nests) */
  AST_FOR,    /* for var in lo..hi { body }  (hi exclusive) */
  AST_RETURN, /* return value */
} AstStmtKind;

/* The layer name a call is given with `as`: a literal dotted name
 * (`as downsample.0`) or an evaluated one (`as [i]`, an int). */
typedef struct AstScope {
  SrcLoc loc;
  const char *literal; /* NULL when expr is used */
  AstExpr *expr;
} AstScope;

typedef struct AstStmt AstStmt;
struct AstStmt {
  AstStmtKind kind;
  SrcLoc loc;
  const char *target; /* AST_ASSIGN: the variable (and default layer name) */
  AstExpr *value;     /* AST_ASSIGN, AST_RETURN; AST_IF: the condition */
  AstScope *scope;    /* AST_ASSIGN: `as ...`, or NULL */
  const char *var;    /* AST_FOR */
  AstExpr *lo, *hi;   /* AST_FOR */
  AstStmt *body;      /* AST_IF, AST_FOR */
  AstStmt *orelse;    /* AST_IF: else branch, or NULL */
  AstStmt *next;
};

typedef struct AstParam AstParam;
struct AstParam {
  SrcLoc loc;
  const char *name;
  AstExpr *dflt; /* default value, or NULL when the argument is required */
  AstParam *next;
};

/* block NAME(params) { body } */
typedef struct AstBlock AstBlock;
struct AstBlock {
  SrcLoc loc;
  const char *name;
  AstParam *params;
  int nparams;
  AstStmt *body;
  AstBlock *next;
};

/* input NAME : DTYPE[dims]  -- per-sample shape; the batch dimension is implicit. */
typedef struct AstInput AstInput;
struct AstInput {
  SrcLoc loc;
  const char *name;
  int dtype;    /* IrDtype */
  AstArg *dims; /* positional expressions; NULL for a scalar per sample: i32[] */
  int ndims;
  AstInput *next;
};

/* network NAME { inputs and statements } */
typedef struct AstNetwork {
  SrcLoc loc;
  const char *name;
  AstInput *inputs;
  AstStmt *body;
} AstNetwork;

/* train { key = value ... }: each item an AstArg with a key. */
typedef struct AstTrain {
  SrcLoc loc;
  AstArg *items;
} AstTrain;

typedef struct AstFile {
  const char *path;
  AstBlock *blocks;
  AstNetwork *network; /* NULL when the file has none (an error reported by lower) */
  AstTrain *train;     /* NULL when absent */
} AstFile;

/* Parses src (len bytes, may contain NULs) into an AstFile in arena.  Syntax
 * errors go to d, all of them (the parser recovers at statement boundaries).
 * Returns NULL only when nothing could be built; check d->nerrors. */
AstFile *ast_parse(Arena *arena, Diag *d, const char *path, const char *src, size_t len);

#endif
