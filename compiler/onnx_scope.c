/* onnx_scope.c - the module path of each exported ONNX node (onnx_scope.h). */
#include "onnx_scope.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_PATH = 1024, MAX_SCOPES = 64 };

/* "/a/a.0/relu_1/Relu": each part but the last a module, named relative to
 * the one before it ("relu_1") or in full ("a.0" under "a"). */
static int from_name(Arena *a, const char *name, OnnxScope *s) {
  if (!name || name[0] != '/') return 0;
  const char *last = strrchr(name, '/');
  char path[MAX_PATH];
  size_t n = 0;
  for (const char *p = name + 1; p <= last;) {
    const char *e = strchr(p, '/');
    size_t len = (size_t)(e - p);
    if (len == 0) return 0;
    if (n && len > n && strncmp(p, path, n) == 0 && p[n] == '.') {
      if (len >= sizeof path) return 0;
      memcpy(path, p, len); /* in full */
      n = len;
    } else {
      if (n + !!n + len >= sizeof path) return 0;
      if (n) path[n++] = '.';
      memcpy(path + n, p, len);
      n += len;
    }
    p = e + 1;
  }
  if (!(s->path = arena_strndup(a, path, n))) return -1;
  if (last[1] && !(s->op = arena_strdup(a, last + 1))) return -1;
  return 0;
}

/* "['', 'a', 'a.0', 'a.0.relu', 'relu_1']": modules in full, then the
 * graph node's own name. */
static int from_scopes(Arena *a, const char *scopes, OnnxScope *s) {
  const char *item[MAX_SCOPES];
  size_t len[MAX_SCOPES];
  int k = 0;
  const char *p = scopes;
  while (*p == ' ') p++;
  if (*p++ != '[') return 0;
  while (*p == ' ') p++;
  while (*p && *p != ']') {
    char q = *p;
    const char *e = q == '\'' || q == '"' ? strchr(p + 1, q) : NULL;
    if (!e || k == MAX_SCOPES) return 0;
    item[k] = p + 1, len[k] = (size_t)(e - p - 1), k++;
    p = e + 1;
    while (*p == ',' || *p == ' ') p++;
  }
  if (*p != ']' || k < 2) return 0;
  return (s->path = arena_strndup(a, item[k - 2], len[k - 2])) ? 0 : -1;
}

int onnx_scope_of(Arena *a, const char *name, const char *name_scopes, const char *op_type, OnnxScope *s) {
  *s = (OnnxScope){.op = op_type, .type = op_type};
  if (!op_type || !*op_type) return 0;
  int r = name_scopes ? from_scopes(a, name_scopes, s) : 0;
  if (r == 0 && !s->path) r = from_name(a, name, s);
  return r;
}

/* Whether the last dotted part of s is only digits (layer1.0). */
static int ends_in_number(const char *s) {
  size_t n = strlen(s), i = n;
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
  return i < n && (i == 0 || s[i - 1] == '.');
}

typedef struct Ref {
  const OnnxScope *s;
  int i;
} Ref;

static int by_path(const void *x, const void *y) {
  const Ref *p = x, *q = y;
  int c = strcmp(p->s->path, q->s->path);
  return c ? c : (p->i > q->i) - (p->i < q->i);
}

static const char *layer(Arena *a, const OnnxScope *s, int container) {
  size_t n = strlen(s->path);
  char *r = container ? arena_printf(a, "%s%s%s", s->path, n ? "." : "", s->op) : arena_strdup(a, s->path);
  if (!r) return NULL;
  for (char *p = r + (container ? n : 0); *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  for (char *p = r; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
      *p = '_';
  return r;
}

int onnx_scope_names(Arena *a, const OnnxScope *s, int n, const char **name) {
  Ref *r = malloc(sizeof *r * (size_t)(n ? n : 1));
  if (!r) return -1;
  int k = 0;
  for (int i = 0; i < n; i++) {
    name[i] = NULL;
    if (s[i].path) r[k++] = (Ref){&s[i], i};
  }
  qsort(r, (size_t)k, sizeof *r, by_path);
  int oom = 0;
  for (int lo = 0, hi; lo < k; lo = hi) {
    const char *path = r[lo].s->path;
    int mixed = 0;
    for (hi = lo + 1; hi < k && strcmp(r[hi].s->path, path) == 0; hi++)
      mixed |= strcmp(r[hi].s->type, r[lo].s->type) != 0;
    /* a module with modules under it: P.x follows P and P-x, P,x ... */
    size_t pl = strlen(path);
    int parent = 0;
    for (int j = hi; j < k && !parent && strncmp(r[j].s->path, path, pl) == 0 && r[j].s->path[pl] <= '.'; j++)
      parent = r[j].s->path[pl] == '.';
    int container = !*path || ends_in_number(path) || mixed || parent;
    for (int j = lo; j < hi; j++) oom |= !(name[r[j].i] = layer(a, r[j].s, container));
  }
  free(r);
  return oom ? -1 : 0;
}
