/* rt_folder.c - scanning an ImageFolder tree with opendir/readdir.
 *
 * Names are collected into one growing string pool (offsets while it
 * grows, pointers once it is done), then sorted, so a tree of a million
 * files costs one allocation per kind of thing rather than one per file. */
#include "rt_folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct Names {
  size_t *at; /* offsets into the pool */
  size_t n, cap;
} Names;

static int pool_add(RtFolder *f, const char *s, size_t *at) {
  size_t len = strlen(s) + 1;
  if (f->pool_len + len > f->pool_cap) {
    size_t cap = f->pool_cap ? f->pool_cap : 4096;
    while (cap < f->pool_len + len) cap *= 2;
    char *p = realloc(f->pool, cap);
    if (!p) return -1;
    f->pool = p, f->pool_cap = cap;
  }
  memcpy(f->pool + f->pool_len, s, len);
  *at = f->pool_len;
  f->pool_len += len;
  return 0;
}

static int names_add(Names *ns, size_t at) {
  if (ns->n == ns->cap) {
    size_t cap = ns->cap ? 2 * ns->cap : 64;
    size_t *p = realloc(ns->at, cap * sizeof *p);
    if (!p) return -1;
    ns->at = p, ns->cap = cap;
  }
  ns->at[ns->n++] = at;
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorts n offsets into the pool by the names they point at (through
 * pointers: qsort has no context argument, and no global may hold one). */
static int sort_names(const RtFolder *f, size_t *at, size_t n) {
  char **p = malloc((n ? n : 1) * sizeof *p);
  if (!p) return -1;
  for (size_t i = 0; i < n; i++) p[i] = f->pool + at[i];
  qsort(p, n, sizeof *p, by_name);
  for (size_t i = 0; i < n; i++) at[i] = (size_t)(p[i] - f->pool);
  free(p);
  return 0;
}

static int is_image(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot) return 0;
  static const char *const EXT[] = {".jpg", ".jpeg", ".JPEG", ".JPG"};
  for (size_t i = 0; i < sizeof EXT / sizeof EXT[0]; i++)
    if (strcmp(dot, EXT[i]) == 0) return 1;
  return 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Adds dir's class folders (their names) or image files (as dir/name);
 * *others counts the visible entries left out, *other names the first. */
static RtFolderStatus list(RtFolder *f, const char *dir, int want_dirs, Names *out, size_t *others, char *other,
                           size_t other_cap, char *err, size_t errmax) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, errmax, "%s: %s", dir, errno == ENOENT ? "no such folder" : strerror(errno));
    return RT_FOLDER_ERR_IO;
  }
  struct dirent *e;
  char path[4096];
  RtFolderStatus s = RT_FOLDER_OK;
  while (!s && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof path) continue;
    int keep = want_dirs ? (e->d_type == DT_DIR || ((e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) && is_dir(path)))
                         : is_image(e->d_name) && e->d_type != DT_DIR;
    if (!keep) {
      if (!(*others)++) snprintf(other, other_cap, "%s", e->d_name);
      continue;
    }
    size_t at;
    if (pool_add(f, want_dirs ? e->d_name : path, &at) || names_add(out, at)) s = RT_FOLDER_ERR_NOMEM;
  }
  closedir(d);
  if (s) snprintf(err, errmax, "%s: out of memory", dir);
  return s;
}

static RtFolderStatus scan(const char *root, int max_classes, RtFolder *f, Names *cls, Names *files, int32_t **labels,
                           char *err, size_t errmax) {
  if (!is_dir(root)) {
    snprintf(err, errmax, "%s: no such folder", root);
    return RT_FOLDER_ERR_IO;
  }
  size_t others = 0;
  char other[256] = "";
  RtFolderStatus s = list(f, root, 1, cls, &others, other, sizeof other, err, errmax);
  if (s) return s;
  if (cls->n == 0) {
    if (others)
      snprintf(err, errmax, "%s: no class folders (expected ROOT/<class>/<image>.jpg); %zu other entr%s, such as '%s'",
               root, others, others == 1 ? "y" : "ies", other);
    else
      snprintf(err, errmax, "%s: no class folders (expected ROOT/<class>/<image>.jpg): it is empty", root);
    return RT_FOLDER_ERR_LAYOUT;
  }
  if (max_classes > 0 && cls->n > (size_t)max_classes) {
    snprintf(err, errmax, "%s: %zu class folders, but the model has %d classes", root, cls->n, max_classes);
    return RT_FOLDER_ERR_LAYOUT;
  }
  if (sort_names(f, cls->at, cls->n)) {
    snprintf(err, errmax, "%s: out of memory", root);
    return RT_FOLDER_ERR_NOMEM;
  }
  for (size_t c = 0; c < cls->n; c++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, f->pool + cls->at[c]);
    size_t first = files->n;
    others = 0;
    if ((s = list(f, dir, 0, files, &others, other, sizeof other, err, errmax))) return s;
    if (files->n == first && others)
      snprintf(err, errmax,
               "%s: no images in the class folder (.jpg, .jpeg, .JPEG, .JPG); %zu other entr%s, such as '%s'", dir,
               others, others == 1 ? "y" : "ies", other);
    else if (files->n == first)
      snprintf(err, errmax, "%s: no images in the class folder (.jpg, .jpeg, .JPEG, .JPG): it is empty", dir);
    if (files->n == first) return RT_FOLDER_ERR_LAYOUT;
    int32_t *l = realloc(*labels, files->n * sizeof **labels);
    if (l) *labels = l;
    if (!l || sort_names(f, files->at + first, files->n - first)) {
      snprintf(err, errmax, "%s: out of memory", root);
      return RT_FOLDER_ERR_NOMEM;
    }
    for (size_t i = first; i < files->n; i++) (*labels)[i] = (int32_t)c;
  }
  return RT_FOLDER_OK;
}

RtFolderStatus rt_folder_scan(const char *root, int max_classes, RtFolder *out, char *err, size_t errmax) {
  memset(out, 0, sizeof *out);
  Names cls = {0}, files = {0};
  int32_t *labels = NULL;
  RtFolderStatus s = scan(root, max_classes, out, &cls, &files, &labels, err, errmax);
  if (!s) {
    out->classes = malloc(cls.n * sizeof *out->classes);
    out->paths = malloc(files.n * sizeof *out->paths);
    if (!out->classes || !out->paths) {
      snprintf(err, errmax, "%s: out of memory", root);
      s = RT_FOLDER_ERR_NOMEM;
    }
  }
  if (!s) {
    for (size_t c = 0; c < cls.n; c++) out->classes[c] = out->pool + cls.at[c];
    for (size_t i = 0; i < files.n; i++) out->paths[i] = out->pool + files.at[i];
    out->nclass = (int)cls.n, out->n = (int64_t)files.n, out->labels = labels;
    labels = NULL;
  }
  free(cls.at), free(files.at), free(labels);
  if (s) rt_folder_free(out);
  return s;
}

void rt_folder_free(RtFolder *f) {
  if (!f) return;
  free(f->classes), free(f->paths), free(f->labels), free(f->pool);
  memset(f, 0, sizeof *f);
}
