/* net.y - the parser of .net files: tokens from net.l -> the AST of ast.h.
 *
 * A pure bison parser with locations.  Every node gets the SrcLoc of its
 * first token (a binary expression: of its operator).  Lists are built
 * left-recursively with a tail pointer, so a file of millions of statements
 * needs no parser stack; only nesting (parentheses, operators, blocks)
 * deepens it, and nesting beyond YYMAXDEPTH is reported, not crashed on.
 *
 * Syntax errors are worded here (yyreport_syntax_error) from the exact set of
 * expected tokens (LAC), and the parser recovers at statement boundaries
 * (`stmt: error`), at the '{' of a broken header and at top-level items, so
 * one run reports every error in the file.  docs/language.md is the
 * reference for what is parsed. */

%require "3.6"
%define api.pure full
%define api.prefix {net_yy}
%define api.token.prefix {TOK_}
%define parse.error custom
%define parse.lac full
%locations
%param {ParseState *ps}

%code requires {
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "ast.h"

/* One token as the scanner saw it: where, how long, its value. */
typedef struct NetTok {
  int kind;
  size_t off, len;
  int line, col;
  int64_t ival;
  double fval;
  int dotted; /* NAME: contains a '.' */
} NetTok;

enum { NET_OPEN_MAX = 64 };

/* What the scanner and the parser share during one ast_parse. */
typedef struct ParseState {
  Arena *arena;
  Diag *d;
  const char *path; /* the arena's copy, put in every SrcLoc */
  const char *src;
  size_t len;
  void *scanner;
  jmp_buf jmp;      /* scanner failures (out of memory) jump back to ast_parse */
  const char *fatal;
  /* scanner position */
  size_t off;
  int line, col;
  int depth;        /* open ( and [: newlines inside do not end statements */
  int braces;       /* open { */
  size_t bad_end;   /* just past the last bad byte: a run is reported once */
  NetTok open[NET_OPEN_MAX], brace[NET_OPEN_MAX]; /* where the innermost ones opened */
  NetTok raw;       /* the token the scanner returned last */
  /* the token stream the grammar reads (see net_yylex) */
  NetTok cur;       /* the token handed to the parser last: the lookahead on an error */
  NetTok stash;
  int have_stash;
  int last_kind;
  AstFile *file;
  AstBlock *block_tail;
  int oom;
  union { AstExpr e; AstStmt s; AstArg a; AstParam p; AstBlock b; AstInput i; AstNetwork n;
          AstTrain t; AstScope sc; } scratch; /* what node() hands out once memory ran out */
} ParseState;

typedef struct NameVal { const char *s; int dotted; } NameVal;
typedef struct StmtList { AstStmt *head, *tail; } StmtList;
typedef struct ArgList { AstArg *head, *tail; int n, keyword; } ArgList;
typedef struct ParamList { AstParam *head, *tail; int n; } ParamList;
typedef struct NetBody { AstInput *ihead, *itail; AstStmt *shead, *stail; } NetBody;
typedef struct NetItem { AstInput *input; AstStmt *stmt; } NetItem;
}

%code {
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* bison has renamed yylex to net_yylex; the scanner's header must see its own name. */
#undef yylex
#include "net.lex.h"
#define yylex net_yylex

static int net_yylex(NET_YYSTYPE *lval, NET_YYLTYPE *lloc, ParseState *ps);
static void net_yyerror(NET_YYLTYPE *loc, ParseState *ps, const char *msg);

static SrcLoc at(const ParseState *ps, NET_YYLTYPE l) {
  return (SrcLoc){ps->path, l.first_line, l.first_column};
}

/* Zeroed memory from the arena.  When the arena fails, a scratch block keeps
 * the actions running; ast_parse then throws the tree away. */
static void *node(ParseState *ps, size_t size) {
  void *p = arena_alloc(ps->arena, size);
  if (p) return p;
  ps->oom = 1;
  memset(&ps->scratch, 0, sizeof ps->scratch);
  return &ps->scratch;
}

static AstExpr *expr_new(ParseState *ps, AstExprKind kind, NET_YYLTYPE l) {
  AstExpr *e = node(ps, sizeof *e);
  e->kind = kind;
  e->loc = at(ps, l);
  return e;
}

static AstExpr *expr_binary(ParseState *ps, int op, NET_YYLTYPE l, AstExpr *a, AstExpr *b) {
  AstExpr *e = expr_new(ps, AST_BINARY, l);
  e->op = op;
  e->a = a;
  e->b = b;
  return e;
}

static AstExpr *expr_unary(ParseState *ps, int op, NET_YYLTYPE l, AstExpr *a) {
  AstExpr *e = expr_new(ps, AST_UNARY, l);
  e->op = op;
  e->a = a;
  return e;
}

static AstStmt *stmt_new(ParseState *ps, AstStmtKind kind, NET_YYLTYPE l) {
  AstStmt *s = node(ps, sizeof *s);
  s->kind = kind;
  s->loc = at(ps, l);
  return s;
}

static StmtList stmts_add(StmtList l, AstStmt *s) {
  if (!s) return l;
  if (l.tail) l.tail->next = s;
  else l.head = s;
  l.tail = s;
  return l;
}

static ArgList args_add(ParseState *ps, ArgList l, NET_YYLTYPE loc, const char *key, AstExpr *v) {
  if (!key && l.keyword)
    diag_error(ps->d, at(ps, loc), "positional argument after a keyword argument");
  AstArg *a = node(ps, sizeof *a);
  a->loc = at(ps, loc);
  a->key = key;
  a->value = v;
  if (l.tail) l.tail->next = a;
  else l.head = a;
  l.tail = a;
  l.n++;
  l.keyword |= key != NULL;
  return l;
}

/* A NAME where the grammar wants a plain identifier (`what` says which). */
static const char *plain(ParseState *ps, NameVal n, NET_YYLTYPE l, const char *what) {
  if (n.dotted)
    diag_error(ps->d, at(ps, l), "%s '%s' cannot contain '.'; only layer names are dotted", what,
               n.s);
  return n.s;
}

static void add_network(ParseState *ps, AstNetwork *net) {
  AstFile *f = ps->file;
  if (f->network) {
    diag_error(ps->d, net->loc, "a second network '%s': a file holds one network", net->name);
    diag_note(ps->d, f->network->loc, "the first network '%s' is here", f->network->name);
    return;
  }
  f->network = net;
}

static void add_train(ParseState *ps, AstTrain *t) {
  AstFile *f = ps->file;
  if (f->train) {
    diag_error(ps->d, t->loc, "a second train section: a file holds one");
    diag_note(ps->d, f->train->loc, "the first train section is here");
    return;
  }
  f->train = t;
}

static NetBody netbody_add(NetBody b, NetItem it) {
  if (it.input) {
    if (b.itail) b.itail->next = it.input;
    else b.ihead = it.input;
    b.itail = it.input;
  }
  if (it.stmt) {
    StmtList l = stmts_add((StmtList){b.shead, b.stail}, it.stmt);
    b.shead = l.head;
    b.stail = l.tail;
  }
  return b;
}

static void add_block(ParseState *ps, AstBlock *b) {
  if (ps->block_tail) ps->block_tail->next = b;
  else ps->file->blocks = b;
  ps->block_tail = b;
}
}

%union {
  NameVal name;
  int64_t ival;
  double fval;
  int op;
  AstExpr *expr;
  AstStmt *stmt;
  AstScope *scope;
  AstParam *param;
  AstArg *arg;
  AstInput *input;
  StmtList stmts;
  ArgList args;
  ParamList params;
  NetBody netbody;
  NetItem netitem;
}

%token <name> NAME "name"
%token <ival> INT "integer"
%token <fval> FLOAT "floating-point number"
%token <ival> DTYPE "type"
%token BLOCK "block" NETWORK "network" INPUT "input" TRAIN "train"
%token IF "if" ELSE "else" FOR "for" IN "in" RETURN "return" AS "as"
%token TRUE "true" FALSE "false"
%token DOTDOT ".." EQ "==" NE "!=" LE "<=" GE ">=" AND "&&" OR "||"
%token EOS "end of line"

%nterm <expr> expr or_expr and_expr cmp_expr cmp_chain add_expr mul_expr unary primary
%nterm <op> cmp_op
%nterm <stmt> stmt if_stmt else_opt
%nterm <stmts> stmts stmt_seq body
%nterm <scope> scope_opt
%nterm <param> param
%nterm <params> params params_opt
%nterm <args> args args_opt exprs exprs_opt train_items train_seq
%nterm <arg> train_item
%nterm <input> input_decl
%nterm <netbody> net_items net_seq
%nterm <netitem> net_item

%%

file:
    %empty
  | file item
  | file EOS
  | file error
  ;

item: block_def | network_def | train_def ;

/* block NAME ( [param {, param}] ) { stmts } */
block_def:
    BLOCK NAME '(' params_opt ')' body {
      AstBlock *b = node(ps, sizeof *b);
      b->loc = at(ps, @1);
      b->name = plain(ps, $2, @2, "block name");
      b->params = $4.head;
      b->nparams = $4.n;
      b->body = $6.head;
      add_block(ps, b);
    }
  | BLOCK error body
  ;

params_opt: %empty { $$ = (ParamList){0}; } | params ;

params:
    param                { $$ = (ParamList){$1, $1, 1}; }
  | params ',' param     { $$ = $1; $$.tail->next = $3; $$.tail = $3; $$.n++; }
  ;

/* param := NAME ['=' expr] */
param:
    NAME {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @1);
      $$->name = plain(ps, $1, @1, "parameter name");
    }
  | NAME '=' expr {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @1);
      $$->name = plain(ps, $1, @1, "parameter name");
      $$->dflt = $3;
    }
  ;

/* network NAME { {input | stmt} } */
network_def:
    NETWORK NAME '{' net_items '}' {
      AstNetwork *n = node(ps, sizeof *n);
      n->loc = at(ps, @1);
      n->name = plain(ps, $2, @2, "network name");
      n->inputs = $4.ihead;
      n->body = $4.shead;
      add_network(ps, n);
    }
  | NETWORK error '{' net_items '}'
  ;

net_items: %empty { $$ = (NetBody){0}; } | net_seq | net_seq EOS ;

net_seq:
    net_item             { $$ = netbody_add((NetBody){0}, $1); }
  | net_seq EOS { yyerrok; } net_item { $$ = netbody_add($1, $4); }
  ;

net_item:
    input_decl { $$ = (NetItem){$1, NULL}; }
  | stmt       { $$ = (NetItem){NULL, $1}; }
  ;

/* input NAME : DTYPE [ [expr {, expr}] ] */
input_decl:
    INPUT NAME ':' DTYPE '[' exprs_opt ']' {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @1);
      $$->name = plain(ps, $2, @2, "input name");
      $$->dtype = (int)$4;
      $$->dims = $6.head;
      $$->ndims = $6.n;
    }
  ;

/* train { {NAME = expr} } */
train_def:
    TRAIN '{' train_items '}' {
      AstTrain *t = node(ps, sizeof *t);
      t->loc = at(ps, @1);
      t->items = $3.head;
      add_train(ps, t);
    }
  | TRAIN error '{' train_items '}'
  ;

train_items: %empty { $$ = (ArgList){0}; } | train_seq | train_seq EOS ;

train_seq:
    train_item                { $$ = (ArgList){0}; if ($1) $$ = (ArgList){$1, $1, 1, 1}; }
  | train_seq EOS { yyerrok; } train_item {
      $$ = $1;
      if ($4) {
        if ($$.tail) $$.tail->next = $4;
        else $$.head = $4;
        $$.tail = $4;
        $$.n++;
      }
    }
  ;

train_item:
    NAME '=' expr {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @1);
      $$->key = plain(ps, $1, @1, "train setting");
      $$->value = $3;
    }
  | error { $$ = NULL; }
  ;

body: '{' stmts '}' { $$ = $2; } ;

stmts: %empty { $$ = (StmtList){0}; } | stmt_seq | stmt_seq EOS ;

stmt_seq:
    stmt              { $$ = stmts_add((StmtList){0}, $1); }
  | stmt_seq EOS { yyerrok; } stmt { $$ = stmts_add($1, $4); }
  ;

stmt:
    NAME '=' expr scope_opt {
      $$ = stmt_new(ps, AST_ASSIGN, @1);
      $$->target = $1.s;
      $$->value = $3;
      $$->scope = $4;
    }
  | if_stmt
  | FOR NAME IN expr DOTDOT expr body {
      $$ = stmt_new(ps, AST_FOR, @1);
      $$->var = plain(ps, $2, @2, "loop variable");
      $$->lo = $4;
      $$->hi = $6;
      $$->body = $7.head;
    }
  | FOR error body { $$ = NULL; }
  | RETURN expr {
      $$ = stmt_new(ps, AST_RETURN, @1);
      $$->value = $2;
    }
  | error { $$ = NULL; }
  ;

/* if expr { stmts } [else ({ stmts } | if ...)] */
if_stmt:
    IF expr body else_opt {
      $$ = stmt_new(ps, AST_IF, @1);
      $$->value = $2;
      $$->body = $3.head;
      $$->orelse = $4;
    }
  | IF error body else_opt { $$ = NULL; }
  ;

else_opt:
    %empty       { $$ = NULL; }
  | ELSE body    { $$ = $2.head; }
  | ELSE if_stmt { $$ = $2; }
  ;

/* as NAME | as [ expr ] */
scope_opt:
    %empty { $$ = NULL; }
  | AS NAME {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @2);
      $$->literal = $2.s;
    }
  | AS '[' expr ']' {
      $$ = node(ps, sizeof *$$);
      $$->loc = at(ps, @2);
      $$->expr = $3;
    }
  ;

/* Expressions, loosest first: ?: (right), ||, &&, comparisons (no chains),
 * + -, * / %, unary - !. */
expr:
    or_expr
  | or_expr '?' expr ':' expr {
      $$ = expr_new(ps, AST_COND, @1);
      $$->a = $1;
      $$->b = $3;
      $$->c = $5;
    }
  ;

or_expr:
    and_expr
  | or_expr OR and_expr { $$ = expr_binary(ps, AST_OP_OR, @2, $1, $3); }
  ;

and_expr:
    cmp_expr
  | and_expr AND cmp_expr { $$ = expr_binary(ps, AST_OP_AND, @2, $1, $3); }
  ;

cmp_expr:
    add_expr
  | add_expr cmp_op add_expr { $$ = expr_binary(ps, $2, @2, $1, $3); }
  | cmp_chain
  ;

/* a < b < c: parsed so that the message can say what is wrong. */
cmp_chain:
    add_expr cmp_op add_expr cmp_op add_expr {
      diag_error(ps->d, at(ps, @4), "comparisons cannot be chained; join them with && instead");
      $$ = expr_binary(ps, $4, @4, expr_binary(ps, $2, @2, $1, $3), $5);
    }
  | cmp_chain cmp_op add_expr { $$ = expr_binary(ps, $2, @2, $1, $3); }
  ;

cmp_op:
    EQ  { $$ = AST_OP_EQ; }
  | NE  { $$ = AST_OP_NE; }
  | '<' { $$ = AST_OP_LT; }
  | LE  { $$ = AST_OP_LE; }
  | '>' { $$ = AST_OP_GT; }
  | GE  { $$ = AST_OP_GE; }
  ;

add_expr:
    mul_expr
  | add_expr '+' mul_expr { $$ = expr_binary(ps, AST_OP_ADD, @2, $1, $3); }
  | add_expr '-' mul_expr { $$ = expr_binary(ps, AST_OP_SUB, @2, $1, $3); }
  ;

mul_expr:
    unary
  | mul_expr '*' unary { $$ = expr_binary(ps, AST_OP_MUL, @2, $1, $3); }
  | mul_expr '/' unary { $$ = expr_binary(ps, AST_OP_DIV, @2, $1, $3); }
  | mul_expr '%' unary { $$ = expr_binary(ps, AST_OP_MOD, @2, $1, $3); }
  ;

unary:
    primary
  | '-' unary { $$ = expr_unary(ps, AST_OP_SUB, @1, $2); }
  | '!' unary { $$ = expr_unary(ps, AST_OP_NOT, @1, $2); }
  ;

primary:
    INT   { $$ = expr_new(ps, AST_INT, @1); $$->ival = $1; }
  | FLOAT { $$ = expr_new(ps, AST_FLOAT, @1); $$->fval = $1; }
  | TRUE  { $$ = expr_new(ps, AST_BOOL, @1); $$->ival = 1; }
  | FALSE { $$ = expr_new(ps, AST_BOOL, @1); $$->ival = 0; }
  | DTYPE { $$ = expr_new(ps, AST_DTYPE, @1); $$->ival = $1; }
  | NAME  { $$ = expr_new(ps, AST_NAME, @1); $$->name = $1.s; }
  | NAME '(' args_opt ')' {
      $$ = expr_new(ps, AST_CALL, @1);
      $$->name = $1.s;
      $$->args = $3.head;
      $$->nargs = $3.n;
    }
  | '(' expr ')' { $$ = $2; }
  | '(' expr ',' exprs ')' {
      ArgList l = args_add(ps, (ArgList){0}, @2, NULL, $2);
      l.tail->next = $4.head;
      $$ = expr_new(ps, AST_TUPLE, @1);
      $$->args = l.head;
      $$->nargs = 1 + $4.n;
    }
  ;

/* arg := [NAME '='] expr; keyword arguments come last */
args_opt: %empty { $$ = (ArgList){0}; } | args ;

args:
    expr                   { $$ = args_add(ps, (ArgList){0}, @1, NULL, $1); }
  | NAME '=' expr          { $$ = args_add(ps, (ArgList){0}, @1, plain(ps, $1, @1, "keyword argument"), $3); }
  | args ',' expr          { $$ = args_add(ps, $1, @3, NULL, $3); }
  | args ',' NAME '=' expr { $$ = args_add(ps, $1, @3, plain(ps, $3, @3, "keyword argument"), $5); }
  ;

exprs_opt: %empty { $$ = (ArgList){0}; } | exprs ;

exprs:
    expr           { $$ = args_add(ps, (ArgList){0}, @1, NULL, $1); }
  | exprs ',' expr { $$ = args_add(ps, $1, @3, NULL, $3); }
  ;

%%

/* ---- the token stream ----------------------------------------------------
 * The grammar sees EOS only where it separates two things: runs of newlines
 * and ';' become one EOS, and an EOS is dropped at the start of the file,
 * after '{', and before '{', 'else' and the end of the file.  So blank lines,
 * `} else {` across lines and a brace on the next line need no grammar
 * rules; an EOS before '}' is kept so that `x =` then `}` is reported at the
 * end of its own line. */

static int raw_next(ParseState *ps) {
  ps->raw.kind = net_scan_lex(ps->scanner);
  return ps->raw.kind;
}

static int net_yylex(NET_YYSTYPE *lval, NET_YYLTYPE *lloc, ParseState *ps) {
  NetTok t;
  if (ps->have_stash) {
    t = ps->stash;
    ps->have_stash = 0;
  } else {
    raw_next(ps);
    t = ps->raw;
    if (t.kind == TOK_EOS) {
      NetTok eos = t;
      while (raw_next(ps) == TOK_EOS) {}
      t = ps->raw;
      int after = ps->last_kind, before = t.kind;
      int keep = after != -1 && after != TOK_EOS && after != '{' && before != '{' &&
                 before != TOK_ELSE && before != TOK_YYEOF;
      if (keep) {
        ps->stash = t;
        ps->have_stash = 1;
        t = eos;
      }
    }
  }
  if (ps->oom) t.kind = TOK_YYEOF;
  ps->cur = t;
  ps->last_kind = t.kind;
  lloc->first_line = lloc->last_line = t.line;
  lloc->first_column = t.col;
  lloc->last_column = t.col + (int)t.len;
  switch (t.kind) {
  case TOK_NAME:
    lval->name.s = arena_strndup(ps->arena, ps->src + t.off, t.len);
    lval->name.dotted = t.dotted;
    if (!lval->name.s) {
      ps->oom = 1;
      lval->name.s = "";
    }
    break;
  case TOK_INT:
  case TOK_DTYPE: lval->ival = t.ival; break;
  case TOK_FLOAT: lval->fval = t.fval; break;
  default: break;
  }
  return t.kind;
}

/* ---- messages ------------------------------------------------------------ */

enum { SHOWN_TEXT_MAX = 40 };

typedef struct Msg {
  char buf[512];
  size_t n;
} Msg;

static void msg_add(Msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_add(Msg *m, const char *fmt, ...) {
  if (m->n >= sizeof m->buf) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(m->buf + m->n, sizeof m->buf - m->n, fmt, ap);
  va_end(ap);
  if (k > 0) m->n += (size_t)k;
}

/* "unexpected name 'x'", "unexpected ')'", "unexpected end of line". */
static void describe_unexpected(Msg *m, const ParseState *ps, yysymbol_kind_t sym) {
  const NetTok *t = &ps->cur;
  int len = t->len > SHOWN_TEXT_MAX ? SHOWN_TEXT_MAX : (int)t->len;
  const char *more = t->len > SHOWN_TEXT_MAX ? "..." : "";
  const char *text = ps->src + t->off;
  switch (sym) {
  case YYSYMBOL_YYEMPTY: msg_add(m, "syntax error"); return;
  case YYSYMBOL_YYEOF: msg_add(m, "unexpected end of file"); return;
  case YYSYMBOL_EOS:
    msg_add(m, "unexpected %s", text[0] == ';' ? "';'" : "end of line");
    return;
  case YYSYMBOL_NAME: msg_add(m, "unexpected name '%.*s%s'", len, text, more); return;
  case YYSYMBOL_INT:
  case YYSYMBOL_FLOAT: msg_add(m, "unexpected number %.*s%s", len, text, more); return;
  default: msg_add(m, "unexpected '%.*s'", len, text); return;
  }
}

/* How a token is named in an "expected ..." list: 'block', ')', a name. */
static void add_expected(Msg *m, yysymbol_kind_t sym) {
  switch (sym) {
  case YYSYMBOL_YYEOF: msg_add(m, "end of file"); return;
  case YYSYMBOL_EOS: msg_add(m, "end of line"); return;
  case YYSYMBOL_NAME: msg_add(m, "a name"); return;
  case YYSYMBOL_INT: msg_add(m, "an integer"); return;
  case YYSYMBOL_FLOAT: msg_add(m, "a number"); return;
  case YYSYMBOL_DTYPE: msg_add(m, "a type (f32, f16, bf16, i8, i32 or i64)"); return;
  default: break;
  }
  const char *name = yysymbol_name(sym);
  msg_add(m, name[0] == '\'' ? "%s" : "'%s'", name);
}

enum { EXPECTED_SHOWN_MAX = 5 };

/* Tokens named as one: when a group's first token (and `also`) can come
 * next, the group's name replaces all its members in the list. */
typedef struct TokGroup {
  const char *name;
  int tokens[16]; /* token codes, ended by -1 */
  int also;       /* a second token that must be expected too, or 0 */
} TokGroup;

static const TokGroup GROUPS[] = {
    {"'block', 'network' or 'train'", {TOK_BLOCK, TOK_NETWORK, TOK_TRAIN, TOK_EOS, TOK_YYEOF, -1}, 0},
    {"an expression",
     {TOK_INT, TOK_FLOAT, TOK_TRUE, TOK_FALSE, TOK_DTYPE, TOK_NAME, '(', '-', '!', -1},
     TOK_NAME},
    {"a statement", {TOK_RETURN, TOK_IF, TOK_FOR, TOK_NAME, -1}, TOK_IF},
    {"an operator",
     {'+', '-', '*', '/', '%', '<', '>', TOK_LE, TOK_GE, TOK_EQ, TOK_NE, TOK_AND, TOK_OR, '?', '(', -1},
     0},
};

/* ", expected A, B or C" from the set of tokens the parser can take (exact,
 * thanks to LAC); nothing when the list would be long. */
static void add_expected_list(Msg *m, int *want, yysymbol_kind_t unexpected) {
  const char *groups[sizeof GROUPS / sizeof *GROUPS];
  int ngroups = 0;
  if (unexpected == YYSYMBOL_YYEOF && want[YYTRANSLATE('}')]) { /* say what is missing */
    memset(want, 0, YYNTOKENS * sizeof *want);
    want[YYTRANSLATE('}')] = 1;
  }
  for (size_t g = 0; g < sizeof GROUPS / sizeof *GROUPS; g++) {
    const TokGroup *G = &GROUPS[g];
    if (!want[YYTRANSLATE(G->tokens[0])] || (G->also && !want[YYTRANSLATE(G->also)])) continue;
    groups[ngroups++] = G->name;
    for (const int *t = G->tokens; *t != -1; t++) want[YYTRANSLATE(*t)] = 0;
  }
  int eos = want[YYSYMBOL_EOS];
  if (eos) want[YYTRANSLATE('}')] = 0; /* a statement ends at a newline or at '}': say the first */
  want[YYSYMBOL_EOS] = 0;
  int nitems = ngroups + eos;
  for (int s = 0; s < YYNTOKENS; s++) nitems += want[s];
  if (nitems == 0 || nitems > EXPECTED_SHOWN_MAX) return;
  msg_add(m, ", expected ");
  int k = 0;
  for (int g = 0; g < ngroups; g++, k++)
    msg_add(m, "%s%s", k == 0 ? "" : k == nitems - 1 ? " or " : ", ", groups[g]);
  for (int s = 0; s < YYNTOKENS; s++) {
    if (!want[s]) continue;
    msg_add(m, "%s", k == 0 ? "" : k == nitems - 1 ? " or " : ", ");
    add_expected(m, (yysymbol_kind_t)s);
    k++;
  }
  if (eos) msg_add(m, "%send of line", k == 0 ? "" : " or ");
}

/* "unexpected X, expected A, B or C", and a note on an unclosed bracket. */
static int yyreport_syntax_error(const yypcontext_t *ctx, ParseState *ps) {
  if (ps->oom) return 0;
  if (ps->d->nerrors >= DIAG_MAX_ERRORS) { /* only counted from here on */
    diag_error(ps->d, at(ps, *yypcontext_location(ctx)), "syntax error");
    return 0;
  }
  Msg m = {.n = 0};
  yysymbol_kind_t sym = yypcontext_token(ctx);
  describe_unexpected(&m, ps, sym);
  yysymbol_kind_t exp[YYNTOKENS];
  int n = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
  int want[YYNTOKENS] = {0};
  for (int i = 0; i < n; i++) want[exp[i]] = 1;
  add_expected_list(&m, want, sym);
  diag_error(ps->d, at(ps, *yypcontext_location(ctx)), "%s", m.buf);
  const NetTok *open = NULL;
  if (ps->depth > 0 && ps->depth <= NET_OPEN_MAX &&
      (ps->open[ps->depth - 1].line < ps->cur.line || sym == YYSYMBOL_YYEOF))
    open = &ps->open[ps->depth - 1];
  else if ((sym == YYSYMBOL_YYEOF || sym == YYSYMBOL_BLOCK || sym == YYSYMBOL_NETWORK ||
            sym == YYSYMBOL_TRAIN) &&
           ps->braces > 0 && ps->braces <= NET_OPEN_MAX)
    open = &ps->brace[ps->braces - 1];
  if (open)
    diag_note(ps->d, (SrcLoc){ps->path, open->line, open->col}, "to match this '%c'",
              ps->src[open->off]);
  return 0;
}

/* Bison calls this only when its stack is full: nesting beyond YYMAXDEPTH. */
static void net_yyerror(NET_YYLTYPE *loc, ParseState *ps, const char *msg) {
  if (ps->oom) return;
  if (strstr(msg, "exhausted"))
    diag_error(ps->d, at(ps, *loc), "nested too deeply (the parser stops at %d levels)",
               YYMAXDEPTH);
  else
    diag_error(ps->d, at(ps, *loc), "%s", msg);
}

/* Runs the scanner and the parser over ps->src; 0 when the scanner failed
 * (out of memory), with ps->fatal saying why. */
static int run_parser(ParseState *ps) {
  yyscan_t scanner;
  if (net_scan_lex_init_extra(ps, &scanner)) {
    ps->fatal = "out of memory";
    return 0;
  }
  ps->scanner = scanner;
  if (setjmp(ps->jmp)) {
    net_scan_lex_destroy(ps->scanner);
    return 0;
  }
  net_scan__scan_bytes(ps->src, (int)ps->len, scanner);
  net_yyparse(ps);
  net_scan_lex_destroy(scanner);
  return 1;
}

AstFile *ast_parse(Arena *arena, Diag *d, const char *path, const char *src, size_t len) {
  SrcLoc none = {0};
  ParseState *ps = arena_alloc(arena, sizeof *ps);
  AstFile *f = arena_alloc(arena, sizeof *f);
  const char *file = arena_strdup(arena, path ? path : "<input>");
  if (!ps || !f || !file) {
    diag_error(d, none, "out of memory");
    return NULL;
  }
  ps->arena = arena;
  ps->d = d;
  ps->path = f->path = file;
  ps->src = src ? src : "";
  ps->len = src ? len : 0;
  ps->line = ps->col = 1;
  ps->last_kind = -1;
  ps->file = f;
  diag_set_source(d, path ? path : file, ps->src, ps->len);
  if (ps->len > (size_t)INT_MAX - 2) {
    diag_error(d, (SrcLoc){file, 0, 0}, "file is too large to parse (%zu bytes)", ps->len);
    return f;
  }
  if (!run_parser(ps)) {
    diag_error(d, none, "cannot parse '%s': %s", file, ps->fatal);
    return NULL;
  }
  if (ps->oom || arena->oom) {
    diag_error(d, none, "out of memory while parsing '%s'", file);
    return NULL;
  }
  return f;
}
