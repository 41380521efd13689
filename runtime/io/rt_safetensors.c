/* rt_safetensors.c - the safetensors reader and its atomic writer.
 *
 * The reader trusts nothing in the file: the header length is checked
 * against the file size and RT_ST_MAX_HEADER before the JSON is parsed
 * (by cJSON), every entry must have exactly dtype, shape and data_offsets,
 * sizes are computed with overflow checks, and the tensors must tile the
 * data section exactly -- sorted by offset they start at 0, follow each
 * other with no gap or overlap and end at the end of the file, which is
 * what the reference implementation demands.  Only then is a handle
 * returned, so a caller never sees a tensor whose bytes are out of range.
 *
 * The writer lays the data out largest element size first, so with the
 * header padded (by spaces) to a multiple of 8 every tensor sits on a
 * multiple of its own element size, and writes the header keys in the
 * order tensors were added.  Integers go into the JSON as raw digits:
 * cJSON's double printer may round values beyond 2^53's neighbourhood. */
#include "rt_safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_file.h"

static const struct {
  const char *name;
  size_t size;
} DTYPES[RT_ST_DTYPE_COUNT] = {
    [RT_ST_BOOL] = {"BOOL", 1},       [RT_ST_U8] = {"U8", 1},           [RT_ST_I8] = {"I8", 1},
    [RT_ST_F8_E5M2] = {"F8_E5M2", 1}, [RT_ST_F8_E4M3] = {"F8_E4M3", 1}, [RT_ST_I16] = {"I16", 2},
    [RT_ST_U16] = {"U16", 2},         [RT_ST_F16] = {"F16", 2},         [RT_ST_BF16] = {"BF16", 2},
    [RT_ST_I32] = {"I32", 4},         [RT_ST_U32] = {"U32", 4},         [RT_ST_F32] = {"F32", 4},
    [RT_ST_F64] = {"F64", 8},         [RT_ST_I64] = {"I64", 8},         [RT_ST_U64] = {"U64", 8},
};

static const char METADATA_KEY[] = "__metadata__";
/* The largest integer a JSON number (a double in cJSON) holds exactly. */
static const double MAX_EXACT_INT = 9007199254740992.0;

const char *rt_st_dtype_name(RtStDtype dt) { return (unsigned)dt < RT_ST_DTYPE_COUNT ? DTYPES[dt].name : "?"; }

size_t rt_st_dtype_size(RtStDtype dt) { return (unsigned)dt < RT_ST_DTYPE_COUNT ? DTYPES[dt].size : 0; }

RtStStatus rt_st_dtype_parse(const char *name, RtStDtype *out) {
  for (int i = 0; i < RT_ST_DTYPE_COUNT; i++) {
    if (strcmp(name, DTYPES[i].name) == 0) {
      *out = (RtStDtype)i;
      return RT_ST_OK;
    }
  }
  return RT_ST_ERR_ARG;
}

/* Writes "label: message" into err (when there is room) and returns st. */
static RtStStatus fail(char *err, size_t errcap, RtStStatus st, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static RtStStatus fail(char *err, size_t errcap, RtStStatus st, const char *label, const char *fmt, ...) {
  if (!err || errcap == 0) return st;
  int n = snprintf(err, errcap, "%s: ", label);
  if (n >= 0 && (size_t)n < errcap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errcap - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return st;
}

/* a * b into *out; false when it would pass 2^64. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* ------------------------------------------------------------------ reader */

struct RtStFile {
  const uint8_t *bytes;
  size_t size;
  void *map; /* munmap'ed on close when set */
  size_t maplen;
  uint8_t *owned; /* freed on close when set */
  RtStTensor *tensors;
  size_t ntensors;
  const RtStTensor **by_name; /* sorted by name, for rt_st_find */
  char **meta;                /* key, value, key, value, ... */
  size_t nmeta;
};

void rt_st_close(RtStFile *f) {
  if (!f) return;
  for (size_t i = 0; i < f->ntensors; i++) {
    free((char *)f->tensors[i].name);
    free((int64_t *)f->tensors[i].shape);
  }
  free(f->tensors);
  free(f->by_name);
  for (size_t i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
  free(f->meta);
  if (f->map) munmap(f->map, f->maplen);
  free(f->owned);
  free(f);
}

size_t rt_st_count(const RtStFile *f) { return f->ntensors; }

const RtStTensor *rt_st_tensor(const RtStFile *f, size_t i) { return i < f->ntensors ? &f->tensors[i] : NULL; }

const RtStTensor *rt_st_find(const RtStFile *f, const char *name) {
  size_t lo = 0, hi = f->ntensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const RtStTensor *t = f->by_name[mid];
    int c = strcmp(name, t->name);
    if (c == 0) return t;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

size_t rt_st_meta_count(const RtStFile *f) { return f->nmeta; }

void rt_st_meta_at(const RtStFile *f, size_t i, const char **key, const char **value) {
  *key = i < f->nmeta ? f->meta[2 * i] : NULL;
  *value = i < f->nmeta ? f->meta[2 * i + 1] : NULL;
}

const char *rt_st_meta_get(const RtStFile *f, const char *key) {
  for (size_t i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
  return NULL;
}

/* Where each tensor's bytes are in the data section, for the tiling check. */
typedef struct Span {
  uint64_t begin, end;
  size_t index;
} Span;

typedef struct Parse {
  RtStFile *f;
  const char *label;
  char *err;
  size_t errcap;
  Span *spans;
} Parse;

static int cmp_span(const void *a, const void *b) {
  const Span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int cmp_by_name(const void *a, const void *b) {
  const RtStTensor *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

/* A JSON number that is a whole count in [0, 2^53]. */
static int json_count(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= MAX_EXACT_INT) || d != (double)(uint64_t)d) return 0;
  *out = (uint64_t)d;
  return 1;
}

static RtStStatus parse_metadata(Parse *p, const cJSON *m) {
  RtStFile *f = p->f;
  if (f->meta)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "\"%s\" appears twice in the header", METADATA_KEY);
  if (!cJSON_IsObject(m))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "\"%s\" is not a JSON object", METADATA_KEY);
  size_t n = (size_t)cJSON_GetArraySize(m);
  f->meta = calloc(2 * n + 1, sizeof *f->meta);
  if (!f->meta) return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  for (const cJSON *e = m->child; e; e = e->next) {
    if (!cJSON_IsString(e))
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "metadata value for '%.200s' is not a string",
                  e->string);
    f->meta[2 * f->nmeta] = strdup(e->string);
    f->meta[2 * f->nmeta + 1] = strdup(e->valuestring);
    f->nmeta++;
    if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1])
      return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  }
  /* Duplicate keys, found by sorting (a hostile header may hold millions). */
  const char **keys = malloc((f->nmeta + 1) * sizeof *keys);
  if (!keys) return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  for (size_t i = 0; i < f->nmeta; i++) keys[i] = f->meta[2 * i];
  qsort(keys, f->nmeta, sizeof *keys, cmp_str);
  RtStStatus st = RT_ST_OK;
  for (size_t i = 1; i < f->nmeta && st == RT_ST_OK; i++)
    if (strcmp(keys[i], keys[i - 1]) == 0)
      st = fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "duplicate metadata key '%.200s'", keys[i]);
  free(keys);
  return st;
}

/* Reads one "name": {"dtype", "shape", "data_offsets"} entry into the
 * next tensor slot; the offsets are checked against data_size here and
 * against the other tensors later. */
static RtStStatus parse_tensor(Parse *p, const cJSON *e, uint64_t data_size) {
  RtStFile *f = p->f;
  const char *name = e->string;
  size_t idx = f->ntensors;
  RtStTensor *t = &f->tensors[idx];
  if (!cJSON_IsObject(e))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': entry is not a JSON object", name);
  if (name[0] == '\0') return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "a tensor has an empty name");
  t->name = strdup(name);
  if (!t->name) return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  f->ntensors++;

  const cJSON *jdtype = NULL, *jshape = NULL, *joffs = NULL;
  for (const cJSON *k = e->child; k; k = k->next) {
    const cJSON **slot = strcmp(k->string, "dtype") == 0          ? &jdtype
                         : strcmp(k->string, "shape") == 0        ? &jshape
                         : strcmp(k->string, "data_offsets") == 0 ? &joffs
                                                                  : NULL;
    if (!slot)
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': unknown key '%.100s'", name,
                  k->string);
    if (*slot)
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': key '%s' given twice", name,
                  k->string);
    *slot = k;
  }
  if (!jdtype || !jshape || !joffs)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': missing \"%s\"", name,
                !jdtype   ? "dtype"
                : !jshape ? "shape"
                          : "data_offsets");

  if (!cJSON_IsString(jdtype))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': dtype is not a string", name);
  if (rt_st_dtype_parse(jdtype->valuestring, &t->dtype) != RT_ST_OK)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': unknown dtype '%.40s'", name,
                jdtype->valuestring);

  if (!cJSON_IsArray(jshape))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': shape is not a JSON array", name);
  int ndim = cJSON_GetArraySize(jshape);
  int64_t *shape = malloc(((size_t)ndim + 1) * sizeof *shape);
  if (!shape) return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  t->shape = shape;
  t->ndim = ndim;
  uint64_t numel = 1, nbytes = 0;
  int overflow = 0, d = 0;
  for (const cJSON *j = jshape->child; j; j = j->next, d++) {
    uint64_t dim;
    if (!json_count(j, &dim))
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                  "tensor '%.200s': shape entry %d is not a non-negative integer", name, d);
    shape[d] = (int64_t)dim;
    overflow |= !mul_u64(numel, dim, &numel);
  }
  /* A zero dim makes the tensor empty even if other dims overflowed. */
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) numel = 0, overflow = 0;
  if (overflow || numel > INT64_MAX || !mul_u64(numel, rt_st_dtype_size(t->dtype), &nbytes))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "tensor '%.200s': shape product overflows", name);
  t->numel = (int64_t)numel;

  uint64_t begin, end;
  if (!cJSON_IsArray(joffs) || cJSON_GetArraySize(joffs) != 2 || !json_count(joffs->child, &begin) ||
      !json_count(joffs->child->next, &end))
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                "tensor '%.200s': data_offsets is not a pair of non-negative integers", name);
  if (begin > end || end > data_size)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] out of range (data section is %" PRIu64
                " bytes)",
                name, begin, end, data_size);
  if (end - begin != nbytes)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                " bytes but its shape and dtype %s need %" PRIu64,
                name, begin, end, end - begin, DTYPES[t->dtype].name, nbytes);
  t->nbytes = (size_t)nbytes;
  p->spans[idx] = (Span){begin, end, idx};
  return RT_ST_OK;
}

/* Names are unique, and sorted by offset the tensors tile the data
 * section: the first starts at 0, each starts where the previous ended,
 * the last ends at the end of the file. */
static RtStStatus check_layout(Parse *p, uint64_t data_size) {
  RtStFile *f = p->f;
  size_t n = f->ntensors;
  f->by_name = malloc((n + 1) * sizeof *f->by_name);
  if (!f->by_name) return fail(p->err, p->errcap, RT_ST_ERR_NOMEM, p->label, "out of memory");
  for (size_t i = 0; i < n; i++) f->by_name[i] = &f->tensors[i];
  qsort(f->by_name, n, sizeof *f->by_name, cmp_by_name);
  for (size_t i = 1; i < n; i++)
    if (strcmp(f->by_name[i]->name, f->by_name[i - 1]->name) == 0)
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label, "duplicate tensor name '%.200s'", f->by_name[i]->name);

  qsort(p->spans, n, sizeof *p->spans, cmp_span);
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const Span *s = &p->spans[i];
    if (s->begin < at)
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                  "tensors '%.200s' [%" PRIu64 ", %" PRIu64 "] and '%.200s' [%" PRIu64 ", %" PRIu64 "] overlap",
                  f->tensors[p->spans[i - 1].index].name, p->spans[i - 1].begin, p->spans[i - 1].end,
                  f->tensors[s->index].name, s->begin, s->end);
    if (s->begin > at)
      return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                  "gap of %" PRIu64 " unused bytes before tensor '%.200s' (data must be contiguous)", s->begin - at,
                  f->tensors[s->index].name);
    at = s->end;
  }
  if (at < data_size)
    return fail(p->err, p->errcap, RT_ST_ERR_FORMAT, p->label,
                "trailing garbage: %" PRIu64 " bytes after the last tensor's data", data_size - at);
  return RT_ST_OK;
}

static RtStStatus parse_file(RtStFile *f, const char *label, char *err, size_t errcap) {
  if (f->size < 8)
    return fail(err, errcap, RT_ST_ERR_FORMAT, label,
                "file too short (%zu bytes; a safetensors file starts with an 8-byte header length)", f->size);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->bytes[i];
  if (hlen > RT_ST_MAX_HEADER)
    return fail(err, errcap, RT_ST_ERR_FORMAT, label, "header length %" PRIu64 " is over the limit of %d bytes", hlen,
                RT_ST_MAX_HEADER);
  if (hlen > f->size - 8)
    return fail(err, errcap, RT_ST_ERR_FORMAT, label,
                "header length %" PRIu64 " runs past the end of the file (%zu bytes follow it)", hlen, f->size - 8);
  const char *hdr = (const char *)f->bytes + 8;
  const uint8_t *data = f->bytes + 8 + hlen;
  uint64_t data_size = f->size - 8 - hlen;

  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
  if (!root) {
    size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
    return fail(err, errcap, RT_ST_ERR_FORMAT, label, "header is not valid JSON (parse error at header byte %zu)", at);
  }
  Parse p = {f, label, err, errcap, NULL};
  RtStStatus st = RT_ST_OK;
  /* The reference writer pads the header with spaces; anything else after
   * the JSON object is not a header. */
  for (const char *c = end; c < hdr + hlen; c++) {
    if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') {
      st = fail(err, errcap, RT_ST_ERR_FORMAT, label, "header has junk after its JSON object (at header byte %zu)",
                (size_t)(c - hdr));
      goto done;
    }
  }
  if (!cJSON_IsObject(root)) {
    st = fail(err, errcap, RT_ST_ERR_FORMAT, label, "header is not a JSON object");
    goto done;
  }
  size_t n = (size_t)cJSON_GetArraySize(root);
  f->tensors = calloc(n + 1, sizeof *f->tensors);
  p.spans = calloc(n + 1, sizeof *p.spans);
  if (!f->tensors || !p.spans) {
    st = fail(err, errcap, RT_ST_ERR_NOMEM, label, "out of memory");
    goto done;
  }
  for (const cJSON *e = root->child; e && st == RT_ST_OK; e = e->next)
    st = strcmp(e->string, METADATA_KEY) == 0 ? parse_metadata(&p, e) : parse_tensor(&p, e, data_size);
  if (st == RT_ST_OK) st = check_layout(&p, data_size);
  if (st == RT_ST_OK)
    for (size_t i = 0; i < f->ntensors; i++) f->tensors[p.spans[i].index].data = data + p.spans[i].begin;
done:
  free(p.spans);
  cJSON_Delete(root);
  return st;
}

RtStStatus rt_st_open_memory(const void *buf, size_t len, const char *label, RtStFile **out, char *err, size_t errcap) {
  *out = NULL;
  if (err && errcap) err[0] = '\0';
  RtStFile *f = calloc(1, sizeof *f);
  if (!f) return fail(err, errcap, RT_ST_ERR_NOMEM, label, "out of memory");
  f->bytes = buf;
  f->size = len;
  RtStStatus st = parse_file(f, label, err, errcap);
  if (st != RT_ST_OK) {
    rt_st_close(f);
    return st;
  }
  *out = f;
  return RT_ST_OK;
}

/* Reads at most size bytes of fd (its size from fstat: a file that grew
 * since is read no further) into a malloc'ed buffer, for what cannot be
 * mapped. */
static int read_whole(int fd, size_t size, uint8_t **out, size_t *len) {
  size_t n = 0;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return ENOMEM;
  while (n < size) {
    ssize_t r = read(fd, buf + n, size - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      return e;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  *out = buf;
  *len = n;
  return 0;
}

RtStStatus rt_st_open(const char *path, RtStFile **out, char *err, size_t errcap) {
  *out = NULL;
  if (err && errcap) err[0] = '\0';
  /* only a regular file, opened without blocking (rt_file.h): never a FIFO, a device or a directory */
  struct stat sb;
  char why[256];
  int fd = rt_file_open_regular(path, &sb, why, sizeof why);
  if (fd < 0) return fail(err, errcap, RT_ST_ERR_IO, path, "%s", why);
  RtStFile *f = calloc(1, sizeof *f);
  if (!f) {
    close(fd);
    return fail(err, errcap, RT_ST_ERR_NOMEM, path, "out of memory");
  }
  if (sb.st_size > 0) {
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      f->map = m;
      f->maplen = (size_t)sb.st_size;
      f->bytes = m;
      f->size = (size_t)sb.st_size;
    }
  }
  if (!f->map) {
    int e = read_whole(fd, (size_t)sb.st_size, &f->owned, &f->size);
    if (e != 0) {
      close(fd);
      rt_st_close(f);
      return fail(err, errcap, e == ENOMEM ? RT_ST_ERR_NOMEM : RT_ST_ERR_IO, path, "cannot read: %s", strerror(e));
    }
    f->bytes = f->owned;
  }
  close(fd);
  RtStStatus st = parse_file(f, path, err, errcap);
  if (st != RT_ST_OK) {
    rt_st_close(f);
    return st;
  }
  *out = f;
  return RT_ST_OK;
}

/* ------------------------------------------------------------------ writer */

typedef struct WTensor {
  char *name;
  RtStDtype dtype;
  int ndim;
  int64_t *shape;
  const void *data;
  void *owned; /* the copy, under RT_ST_COPY */
  size_t nbytes;
  uint64_t offset; /* assigned by the layout at write time */
} WTensor;

struct RtStWriter {
  WTensor *t;
  size_t n, cap;
  char **meta; /* key, value, ... */
  size_t nmeta, metacap;
  char err[RT_ST_ERRMAX];
};

RtStWriter *rt_st_writer_new(void) { return calloc(1, sizeof(RtStWriter)); }

void rt_st_writer_free(RtStWriter *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) {
    free(w->t[i].name);
    free(w->t[i].shape);
    free(w->t[i].owned);
  }
  free(w->t);
  for (size_t i = 0; i < 2 * w->nmeta; i++) free(w->meta[i]);
  free(w->meta);
  free(w);
}

const char *rt_st_writer_error(const RtStWriter *w) { return w->err; }

RtStStatus rt_st_writer_add(RtStWriter *w, const char *name, RtStDtype dt, int ndim, const int64_t *shape,
                            const void *data, size_t nbytes, RtStHold hold) {
  w->err[0] = '\0';
  if (!name || name[0] == '\0' || strcmp(name, METADATA_KEY) == 0)
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "invalid tensor name '%.200s'",
                name ? name : "(null)");
  if ((unsigned)dt >= RT_ST_DTYPE_COUNT)
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "tensor '%.200s': invalid dtype %d", name,
                (int)dt);
  if (ndim < 0 || (ndim > 0 && !shape))
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "tensor '%.200s': invalid rank %d", name,
                ndim);
  uint64_t numel = 1, want;
  int overflow = 0, empty = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (double)shape[i] > MAX_EXACT_INT)
      return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "tensor '%.200s': dim %d is %" PRId64,
                  name, i, shape[i]);
    empty |= shape[i] == 0;
    overflow |= !mul_u64(numel, (uint64_t)shape[i], &numel);
  }
  if (empty) numel = 0, overflow = 0;
  if (overflow || !mul_u64(numel, DTYPES[dt].size, &want) || want != nbytes)
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer",
                "tensor '%.200s': %zu bytes given but its shape and dtype %s need %s%" PRIu64, name, nbytes,
                DTYPES[dt].name, overflow ? "more than " : "", overflow ? UINT64_MAX : want);
  if (!data && nbytes > 0)
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "tensor '%.200s': no data", name);
  for (size_t i = 0; i < w->n; i++)
    if (strcmp(w->t[i].name, name) == 0)
      return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "duplicate tensor name '%.200s'", name);

  if (w->n == w->cap) {
    size_t ncap = w->cap ? 2 * w->cap : 16;
    WTensor *nt = realloc(w->t, ncap * sizeof *nt);
    if (!nt) return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, "safetensors writer", "out of memory");
    w->t = nt;
    w->cap = ncap;
  }
  WTensor t = {.dtype = dt, .ndim = ndim, .data = data, .nbytes = nbytes};
  t.name = strdup(name);
  t.shape = malloc(((size_t)ndim + 1) * sizeof *t.shape);
  if (hold == RT_ST_COPY && nbytes > 0) {
    t.owned = malloc(nbytes);
    if (t.owned) memcpy(t.owned, data, nbytes);
    t.data = t.owned;
  }
  if (!t.name || !t.shape || (hold == RT_ST_COPY && nbytes > 0 && !t.owned)) {
    free(t.name);
    free(t.shape);
    free(t.owned);
    return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, "safetensors writer", "out of memory");
  }
  if (ndim > 0) memcpy(t.shape, shape, (size_t)ndim * sizeof *t.shape);
  w->t[w->n++] = t;
  return RT_ST_OK;
}

RtStStatus rt_st_writer_set_meta(RtStWriter *w, const char *key, const char *value) {
  w->err[0] = '\0';
  if (!key || !value)
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, "safetensors writer", "metadata key and value must not be NULL");
  char *v = strdup(value);
  if (!v) return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, "safetensors writer", "out of memory");
  for (size_t i = 0; i < w->nmeta; i++) {
    if (strcmp(w->meta[2 * i], key) == 0) {
      free(w->meta[2 * i + 1]);
      w->meta[2 * i + 1] = v;
      return RT_ST_OK;
    }
  }
  if (w->nmeta == w->metacap) {
    size_t ncap = w->metacap ? 2 * w->metacap : 8;
    char **nm = realloc(w->meta, 2 * ncap * sizeof *nm);
    if (!nm) {
      free(v);
      return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, "safetensors writer", "out of memory");
    }
    w->meta = nm;
    w->metacap = ncap;
  }
  char *k = strdup(key);
  if (!k) {
    free(v);
    return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, "safetensors writer", "out of memory");
  }
  w->meta[2 * w->nmeta] = k;
  w->meta[2 * w->nmeta + 1] = v;
  w->nmeta++;
  return RT_ST_OK;
}

static cJSON *json_uint(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%" PRIu64, v);
  return cJSON_CreateRaw(buf);
}

/* Adds item to parent (an array when key is NULL); false, with item
 * freed, when item is NULL or cJSON is out of memory. */
static int json_add(cJSON *parent, const char *key, cJSON *item) {
  if (!item) return 0;
  if (key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item)) return 1;
  cJSON_Delete(item);
  return 0;
}

/* Gives every tensor its offset, largest element size first (stable), so
 * each starts on a multiple of its element size. */
static void writer_layout(RtStWriter *w) {
  uint64_t at = 0;
  for (size_t esize = 8; esize >= 1; esize /= 2)
    for (size_t i = 0; i < w->n; i++)
      if (DTYPES[w->t[i].dtype].size == esize) {
        w->t[i].offset = at;
        at += w->t[i].nbytes;
      }
}

/* The JSON header, padded with spaces to a multiple of 8; NULL when out
 * of memory. */
static char *writer_header(const RtStWriter *w, size_t *len) {
  cJSON *root = cJSON_CreateObject();
  int ok = root != NULL;
  if (ok && w->nmeta > 0) {
    cJSON *m = cJSON_CreateObject();
    ok = json_add(root, METADATA_KEY, m);
    for (size_t i = 0; ok && i < w->nmeta; i++)
      ok = json_add(m, w->meta[2 * i], cJSON_CreateString(w->meta[2 * i + 1]));
  }
  for (size_t i = 0; ok && i < w->n; i++) {
    const WTensor *t = &w->t[i];
    cJSON *e = cJSON_CreateObject();
    ok = json_add(root, t->name, e);
    cJSON *shape = ok ? cJSON_CreateArray() : NULL;
    cJSON *offs = ok ? cJSON_CreateArray() : NULL;
    ok = ok && json_add(e, "dtype", cJSON_CreateString(DTYPES[t->dtype].name));
    ok = json_add(e, "shape", shape) && ok;
    ok = json_add(e, "data_offsets", offs) && ok;
    for (int d = 0; ok && d < t->ndim; d++) ok = json_add(shape, NULL, json_uint((uint64_t)t->shape[d]));
    ok = ok && json_add(offs, NULL, json_uint(t->offset));
    ok = ok && json_add(offs, NULL, json_uint(t->offset + t->nbytes));
  }
  char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return NULL;
  size_t n = strlen(text), padded = (n + 7) / 8 * 8;
  char *out = malloc(padded + 1);
  if (out) {
    memcpy(out, text, n);
    memset(out + n, ' ', padded - n);
    out[padded] = '\0';
    *len = padded;
  }
  cJSON_free(text);
  return out;
}

static int write_all(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t r = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

/* Flushes the directory entry of a completed rename; best effort, since
 * the new file is already in place when this runs. */
static void sync_parent_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  free(dir);
}

/* The target a dangling symlink names (joined to the link's folder when
 * relative), malloc'ed; NULL when it cannot be read. */
static char *link_target(const char *link) {
  char buf[4096];
  ssize_t n = readlink(link, buf, sizeof buf - 1);
  if (n < 0 || (size_t)n >= sizeof buf - 1) return NULL;
  buf[n] = '\0';
  const char *slash = strrchr(link, '/');
  if (buf[0] == '/' || !slash) return strdup(buf);
  size_t dlen = (size_t)(slash - link) + 1;
  char *out = malloc(dlen + (size_t)n + 1);
  if (out) memcpy(out, link, dlen), memcpy(out + dlen, buf, (size_t)n + 1);
  return out;
}

RtStStatus rt_st_writer_write(RtStWriter *w, const char *path) {
  w->err[0] = '\0';
  writer_layout(w);
  size_t hlen = 0;
  char *header = writer_header(w, &hlen);
  if (!header) return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, path, "out of memory building the header");
  if (hlen > RT_ST_MAX_HEADER) {
    free(header);
    return fail(w->err, sizeof w->err, RT_ST_ERR_ARG, path, "header of %zu bytes is over the limit of %d", hlen,
                RT_ST_MAX_HEADER);
  }
  /* What is replaced: a regular file or nothing.  A symlink is followed, and
   * its target replaced (the link stays a link); a device node, FIFO or
   * directory is refused before anything is written. */
  const char *label = path;
  char *real = NULL;
  struct stat lsb;
  if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
    if (!(real = realpath(path, NULL)) && errno == ENOENT) real = link_target(path);
    if (!real) {
      int e = errno;
      free(header);
      return fail(w->err, sizeof w->err, RT_ST_ERR_IO, label, "a symlink whose target cannot be resolved: %s",
                  strerror(e));
    }
    path = real;
  }
  if (stat(path, &lsb) == 0 && !S_ISREG(lsb.st_mode)) {
    free(real);
    free(header);
    return fail(w->err, sizeof w->err, RT_ST_ERR_IO, label, "not a regular file (%s): refusing to replace it",
                rt_file_kind(lsb.st_mode));
  }
  size_t plen = strlen(path);
  char *tmp = malloc(plen + sizeof ".tmp.XXXXXX");
  if (!tmp) {
    free(real);
    free(header);
    return fail(w->err, sizeof w->err, RT_ST_ERR_NOMEM, label, "out of memory");
  }
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    free(real);
    free(header);
    return fail(w->err, sizeof w->err, RT_ST_ERR_IO, label, "cannot create a temporary file: %s", strerror(e));
  }
  /* mkstemp makes the file 0600; give it the target's mode, or 0644. */
  struct stat sb;
  fchmod(fd, stat(path, &sb) == 0 ? (sb.st_mode & 07777) : 0644);

  uint8_t lenbytes[8];
  for (int i = 0; i < 8; i++) lenbytes[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  const char *step = "write";
  int e = write_all(fd, lenbytes, 8);
  if (!e) e = write_all(fd, header, hlen);
  /* Same order as writer_layout. */
  for (size_t esize = 8; !e && esize >= 1; esize /= 2)
    for (size_t i = 0; !e && i < w->n; i++)
      if (DTYPES[w->t[i].dtype].size == esize && w->t[i].nbytes > 0) e = write_all(fd, w->t[i].data, w->t[i].nbytes);
  if (!e && fsync(fd) != 0) e = errno, step = "fsync";
  if (close(fd) != 0 && !e) e = errno, step = "close";
  if (!e && rename(tmp, path) != 0) e = errno, step = "rename";
  if (e)
    unlink(tmp);
  else
    sync_parent_dir(path);
  free(tmp);
  free(real);
  free(header);
  if (e)
    return fail(w->err, sizeof w->err, RT_ST_ERR_IO, label, "%s failed: %s (file left unchanged)", step, strerror(e));
  return RT_ST_OK;
}
