/* onnx_read.c - ONNX protobuf files to flat arrays, and attribute lookup.
 *
 * Tensor payloads come either in the typed repeated fields (float_data,
 * int32_data, int64_data, ...) or as little-endian bytes in raw_data; both
 * are decoded here into OnnxTensor's float or int64 array.  External data
 * and dtypes the runner cannot use (double, float16, strings) keep their
 * shape but no data. */
#include "onnx_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Onnx__TensorProto__DataType Dt;

static void set_err(char *err, size_t errlen, const char *fmt, const char *a, const char *b) {
  if (err && errlen) snprintf(err, errlen, fmt, a, b);
}

/* Reads a whole file; the caller frees *buf. */
static int read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    set_err(err, errlen, "%s: cannot open%s", path, "");
    return -1;
  }
  long size = -1;
  if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
  if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
    fclose(fp);
    set_err(err, errlen, "%s: cannot seek%s", path, "");
    return -1;
  }
  *buf = malloc(size ? (size_t)size : 1);
  if (!*buf || fread(*buf, 1, (size_t)size, fp) != (size_t)size) {
    free(*buf);
    *buf = NULL;
    fclose(fp);
    set_err(err, errlen, "%s: read failed%s", path, "");
    return -1;
  }
  fclose(fp);
  *len = (size_t)size;
  return 0;
}

const char *onnx_dtype_name(int dtype) {
  static const char *const NAMES[] = {"undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
                                      "int32",     "int64",  "string",    "bool",       "float16", "double",
                                      "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
  if (dtype >= 0 && dtype < (int)(sizeof NAMES / sizeof NAMES[0])) return NAMES[dtype];
  return "unknown";
}

static int is_integer(int dtype) {
  switch ((Dt)dtype) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 1;
  default: return 0;
  }
}

/* Element size in raw_data for the integer dtypes. */
static size_t int_size(int dtype) {
  switch ((Dt)dtype) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return 2;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
  default: return 8;
  }
}

static int is_signed(int dtype) {
  return dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ||
         dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
}

/* Little-endian bytes to int64, sign-extended for signed dtypes. */
static int64_t decode_int(const uint8_t *p, size_t size, int sign) {
  uint64_t u = 0;
  for (size_t b = 0; b < size; b++) u |= (uint64_t)p[b] << (8 * b);
  if (sign && size < 8 && (u >> (8 * size - 1)) & 1) u |= ~(uint64_t)0 << (8 * size);
  return (int64_t)u;
}

static float decode_float(const uint8_t *p) {
  uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int decode_floats(const Onnx__TensorProto *p, OnnxTensor *t, char *err, size_t errlen) {
  t->f = calloc(t->n ? t->n : 1, sizeof *t->f);
  if (!t->f) return set_err(err, errlen, "out of memory%s%s", "", ""), -1;
  if (p->has_raw_data) {
    if (p->raw_data.len != t->n * 4) return set_err(err, errlen, "raw_data size does not match shape%s%s", "", ""), -1;
    for (size_t k = 0; k < t->n; k++) t->f[k] = decode_float(p->raw_data.data + 4 * k);
  } else {
    if (p->n_float_data != t->n) return set_err(err, errlen, "float_data count does not match shape%s%s", "", ""), -1;
    memcpy(t->f, p->float_data, t->n * sizeof *t->f);
  }
  return 0;
}

static int decode_ints(const Onnx__TensorProto *p, OnnxTensor *t, char *err, size_t errlen) {
  t->i = calloc(t->n ? t->n : 1, sizeof *t->i);
  if (!t->i) return set_err(err, errlen, "out of memory%s%s", "", ""), -1;
  size_t size = int_size(t->dtype);
  if (p->has_raw_data) {
    if (p->raw_data.len != t->n * size)
      return set_err(err, errlen, "raw_data size does not match shape%s%s", "", ""), -1;
    for (size_t k = 0; k < t->n; k++) t->i[k] = decode_int(p->raw_data.data + size * k, size, is_signed(t->dtype));
  } else if (t->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
    if (p->n_int64_data != t->n) return set_err(err, errlen, "int64_data count does not match shape%s%s", "", ""), -1;
    memcpy(t->i, p->int64_data, t->n * sizeof *t->i);
  } else if (t->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 || t->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64) {
    if (p->n_uint64_data != t->n) return set_err(err, errlen, "uint64_data count does not match shape%s%s", "", ""), -1;
    for (size_t k = 0; k < t->n; k++) t->i[k] = (int64_t)p->uint64_data[k];
  } else {
    /* int32_data also carries the 8- and 16-bit types and bool. */
    if (p->n_int32_data != t->n) return set_err(err, errlen, "int32_data count does not match shape%s%s", "", ""), -1;
    for (size_t k = 0; k < t->n; k++) t->i[k] = p->int32_data[k];
  }
  return 0;
}

int onnx_tensor_from_proto(const Onnx__TensorProto *p, OnnxTensor *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (p->n_dims > ONNX_MAX_DIMS) return set_err(err, errlen, "tensor has more than 8 dims%s%s", "", ""), -1;
  t->dtype = p->has_data_type ? p->data_type : 0;
  t->ndim = (int)p->n_dims;
  t->n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (p->dims[d] < 0) return set_err(err, errlen, "negative dim%s%s", "", ""), -1;
    t->dims[d] = p->dims[d];
    t->n *= (size_t)p->dims[d];
  }
  if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return 0;
  int rc = 0;
  if (t->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    rc = decode_floats(p, t, err, errlen);
  else if (is_integer(t->dtype))
    rc = decode_ints(p, t, err, errlen);
  if (rc) onnx_tensor_free(t);
  return rc;
}

int onnx_tensor_read(const char *path, OnnxTensor *t, char *err, size_t errlen) {
  uint8_t *buf;
  size_t len;
  memset(t, 0, sizeof *t);
  if (read_file(path, &buf, &len, err, errlen)) return -1;
  Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  if (!p) {
    set_err(err, errlen, "%s: not a TensorProto%s", path, "");
    return -1;
  }
  int rc = onnx_tensor_from_proto(p, t, err, errlen);
  onnx__tensor_proto__free_unpacked(p, NULL);
  return rc;
}

int onnx_tensor_alloc_f(OnnxTensor *t, int ndim, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  if (ndim < 0 || ndim > ONNX_MAX_DIMS) return -1;
  t->dtype = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  t->ndim = ndim;
  t->n = 1;
  for (int d = 0; d < ndim; d++) {
    t->dims[d] = dims[d];
    t->n *= (size_t)dims[d];
  }
  t->f = calloc(t->n ? t->n : 1, sizeof *t->f);
  return t->f ? 0 : -1;
}

void onnx_tensor_free(OnnxTensor *t) {
  if (!t) return;
  free(t->f);
  free(t->i);
  t->f = NULL;
  t->i = NULL;
}

Onnx__ModelProto *onnx_model_read(const char *path, char *err, size_t errlen) {
  uint8_t *buf;
  size_t len;
  if (read_file(path, &buf, &len, err, errlen)) return NULL;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  if (!m)
    set_err(err, errlen, "%s: not a ModelProto%s", path, "");
  else if (!m->graph) {
    set_err(err, errlen, "%s: model has no graph%s", path, "");
    onnx__model_proto__free_unpacked(m, NULL);
    m = NULL;
  }
  return m;
}

const Onnx__AttributeProto *onnx_attr_find(const Onnx__NodeProto *node, const char *name) {
  for (size_t k = 0; k < node->n_attribute; k++)
    if (node->attribute[k]->name && strcmp(node->attribute[k]->name, name) == 0) return node->attribute[k];
  return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *node, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = onnx_attr_find(node, name);
  return a && a->has_i ? a->i : def;
}

float onnx_attr_float(const Onnx__NodeProto *node, const char *name, float def) {
  const Onnx__AttributeProto *a = onnx_attr_find(node, name);
  return a && a->has_f ? a->f : def;
}

size_t onnx_attr_ints(const Onnx__NodeProto *node, const char *name, const int64_t **vals) {
  const Onnx__AttributeProto *a = onnx_attr_find(node, name);
  *vals = a ? a->ints : NULL;
  return a ? a->n_ints : 0;
}

const char *onnx_attr_string(const Onnx__NodeProto *node, const char *name, const char *def, char *buf, size_t buflen) {
  const Onnx__AttributeProto *a = onnx_attr_find(node, name);
  if (a && a->has_s) {
    size_t n = a->s.len < buflen - 1 ? a->s.len : buflen - 1;
    memcpy(buf, a->s.data, n);
    buf[n] = '\0';
  } else {
    snprintf(buf, buflen, "%s", def);
  }
  return buf;
}

const char *onnx_attr_unknown(const Onnx__NodeProto *node, const char *const *known) {
  for (size_t k = 0; k < node->n_attribute; k++) {
    const char *name = node->attribute[k]->name;
    int found = 0;
    for (const char *const *q = known; *q && !found; q++) found = strcmp(*q, name) == 0;
    if (!found) return name;
  }
  return NULL;
}
