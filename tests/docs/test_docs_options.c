/* test_docs_options.c - docs/runtime_gpu.md's options table against
 * compiler/opts.c's opts_table(), both ways.
 *
 * The table is the one under the heading "## Options"; each row reads
 *
 *   | `cuda_graph` | `NETC_CUDA_GRAPH` | `0`, `1` | `1` | no | meaning |
 *
 * (option, variable, values, default, code?, meaning; an empty default is
 * written `""`).  Every row of opts_table() must be there with the same
 * option name, default and code flag, and every NETC_ name in the doc's
 * table must be a variable of opts_table().  Each disagreement is printed
 * as file:line: what; the exit status is the number of them (capped). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"

enum { MAX_ROWS = 128, MAX_CELLS = 8, CELL = 512 };

typedef struct DocRow {
  int line;
  int ncell;
  char cell[MAX_CELLS][CELL]; /* trimmed, backticks removed */
  int seen;                   /* matched by a row of opts_table() */
} DocRow;

static DocRow rows[MAX_ROWS];
static int nrows, nbad;
static const char *doc;

static void bad(int line, const char *fmt, const char *a, const char *b, const char *c) {
  fprintf(stderr, "%s:%d: ", doc, line);
  fprintf(stderr, fmt, a, b, c);
  fputc('\n', stderr);
  nbad++;
}

/* Copies s[0..n) into out with backticks dropped and blanks trimmed. */
static void cell_copy(char *out, const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < CELL; i++)
    if (s[i] != '`') out[k++] = s[i];
  out[k] = 0;
  char *p = out;
  while (isspace((unsigned char)*p)) p++;
  memmove(out, p, strlen(p) + 1);
  k = strlen(out);
  while (k && isspace((unsigned char)out[k - 1])) out[--k] = 0;
}

/* The table rows under "## Options" (up to the next "## " heading). */
static int read_doc(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return -1;
  }
  char buf[4096];
  int line = 0, in = 0, found = 0;
  while (fgets(buf, sizeof buf, f)) {
    line++;
    if (strncmp(buf, "## ", 3) == 0) {
      in = strncmp(buf, "## Options", 10) == 0;
      found |= in;
      continue;
    }
    if (!in || buf[0] != '|' || strstr(buf, "NETC_") == NULL) continue;
    if (nrows == MAX_ROWS) break;
    DocRow *r = &rows[nrows++];
    r->line = line;
    const char *s = buf + 1;
    while (r->ncell < MAX_CELLS) {
      const char *bar = strchr(s, '|');
      if (!bar) break;
      cell_copy(r->cell[r->ncell++], s, (size_t)(bar - s));
      s = bar + 1;
    }
  }
  fclose(f);
  if (!found) fprintf(stderr, "%s: no '## Options' section\n", path);
  return found ? 0 : -1;
}

/* Every NETC_[A-Z0-9_]+ in a doc row must be a variable of the table. */
static void check_names(const DocRow *r, const OptsInfo *t, int n) {
  for (int c = 0; c < r->ncell; c++)
    for (const char *p = strstr(r->cell[c], "NETC_"); p; p = strstr(p + 1, "NETC_")) {
      char name[128];
      size_t k = 0;
      while (k + 1 < sizeof name && (isupper((unsigned char)p[k]) || isdigit((unsigned char)p[k]) || p[k] == '_'))
        name[k] = p[k], k++;
      name[k] = 0;
      int ok = 0;
      for (int i = 0; i < n && !ok; i++) ok = strcmp(t[i].env, name) == 0;
      if (!ok)
        bad(r->line,
            "%s is in the doc's table but not in opts_table() "
            "(compiler/opts.c)%s%s",
            name, "", "");
    }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s docs/runtime_gpu.md\n", argv[0]);
    return 2;
  }
  doc = argv[1];
  if (read_doc(doc)) return 1;
  int n = 0;
  const OptsInfo *t = opts_table(&n);
  for (int i = 0; i < n; i++) {
    DocRow *r = NULL;
    for (int j = 0; j < nrows && !r; j++)
      if (rows[j].ncell >= 5 && strcmp(rows[j].cell[1], t[i].env) == 0) r = &rows[j];
    if (!r) {
      bad(0, "opts_table() row %s (%s) is missing from the '## Options' table%s", t[i].name, t[i].env, "");
      continue;
    }
    r->seen = 1;
    const char *def = strcmp(r->cell[3], "\"\"") == 0 ? "" : r->cell[3];
    if (strcmp(r->cell[0], t[i].name) != 0)
      bad(r->line, "%s: option name '%s', opts.c says '%s'", t[i].env, r->cell[0], t[i].name);
    if (strcmp(def, t[i].def) != 0) bad(r->line, "%s: default '%s', opts.c says '%s'", t[i].env, def, t[i].def);
    const char *code = t[i].code ? "yes" : "no";
    if (strcmp(r->cell[4], code) != 0) bad(r->line, "%s: code '%s', opts.c says '%s'", t[i].env, r->cell[4], code);
  }
  for (int j = 0; j < nrows; j++) {
    check_names(&rows[j], t, n);
    if (!rows[j].seen && rows[j].ncell >= 2 && strncmp(rows[j].cell[1], "NETC_", 5) != 0)
      bad(rows[j].line, "a row whose variable column is '%s', not a NETC_ variable%s%s", rows[j].cell[1], "", "");
  }
  if (nbad)
    fprintf(stderr, "%d disagreement(s) between %s and compiler/opts.c\n", nbad, doc);
  else
    printf("%d options, doc and opts_table() agree\n", n);
  return nbad > 100 ? 100 : nbad;
}
