/* onnx_make.c - writes the ONNX models of the onnx_import tests, as
 * torch.onnx.export would (node names "/conv1/Conv", initializers under
 * the state_dict's names, opset 17), with protobuf-c: no Python needed.
 *
 *   onnx_make DIR    writes DIR/NAME.onnx for every model below
 *
 * Initializers carry their shapes only (netc reads no weight values from
 * an ONNX file but for --weights-out), so even ResNet-50 is a few
 * kilobytes; small_w and small_x carry values, small_x in a data file.  The bad_*.onnx
 * models are each broken in one way (check_onnx.sh says how). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx.pb-c.h"

/* --- allocation: everything freed at the end of each model ---------------- */

static void **allocs;
static size_t nallocs, capallocs;

static void *al(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) abort();
  if (nallocs == capallocs) {
    capallocs = capallocs ? 2 * capallocs : 1024;
    allocs = realloc(allocs, capallocs * sizeof *allocs);
    if (!allocs) abort();
  }
  return allocs[nallocs++] = p;
}

static void pool_free(void) {
  for (size_t i = 0; i < nallocs; i++) free(allocs[i]);
  nallocs = 0;
}

static char *str(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *s = al(strlen(buf) + 1);
  strcpy(s, buf);
  return s;
}

#define PUSH(arr, n, x)                             \
  do {                                              \
    void **nb = al(sizeof(void *) * ((n) + 1));     \
    if (n) memcpy(nb, (arr), sizeof(void *) * (n)); \
    nb[(n)++] = (x);                                \
    (arr) = (void *)nb;                             \
  } while (0)

/* --- the model being made ---------------------------------------------------- */

static Onnx__GraphProto *G;
static int nid; /* counter for made-up value names */

/* A comma-separated list into a string array. */
static size_t split(const char *list, char ***out) {
  size_t n = 0;
  char **v = NULL;
  const char *s = list;
  while (s && *s) {
    const char *e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    char *x = al(len + 1);
    memcpy(x, s, len);
    PUSH(v, n, x);
    s = e ? e + 1 : NULL;
  }
  *out = v;
  return n;
}

static Onnx__NodeProto *node(const char *op, const char *name, const char *ins, const char *outs) {
  Onnx__NodeProto *n = al(sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = str("%s", op);
  n->name = str("%s", name);
  n->n_input = split(ins, &n->input);
  n->n_output = split(outs, &n->output);
  PUSH(G->node, G->n_node, n);
  return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *key, Onnx__AttributeProto__AttributeType t) {
  Onnx__AttributeProto *a = al(sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = str("%s", key);
  a->has_type = 1;
  a->type = t;
  PUSH(n->attribute, n->n_attribute, a);
  return a;
}

static void attr_i(Onnx__NodeProto *n, const char *key, int64_t v) {
  Onnx__AttributeProto *a = attr(n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

static void attr_f(Onnx__NodeProto *n, const char *key, float v) {
  Onnx__AttributeProto *a = attr(n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}

static void attr_is(Onnx__NodeProto *n, const char *key, int cnt, const int64_t *v) {
  Onnx__AttributeProto *a = attr(n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = (size_t)cnt;
  a->ints = al(sizeof(int64_t) * (size_t)cnt);
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
}

static void attr_s(Onnx__NodeProto *n, const char *key, const char *v) {
  Onnx__AttributeProto *a = attr(n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.data = (uint8_t *)str("%s", v);
  a->s.len = strlen(v);
}

static void pair(Onnx__NodeProto *n, const char *key, int64_t a, int64_t b) { attr_is(n, key, 2, (int64_t[]){a, b}); }
static void pads(Onnx__NodeProto *n, int64_t p) { attr_is(n, "pads", 4, (int64_t[]){p, p, p, p}); }

static Onnx__TensorProto *tensor(const char *name, int dtype, int rank, const int64_t *dims) {
  Onnx__TensorProto *t = al(sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = str("%s", name);
  t->has_data_type = 1;
  t->data_type = dtype;
  t->n_dims = (size_t)rank;
  t->dims = al(sizeof(int64_t) * (size_t)(rank ? rank : 1));
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* with_data: initializers carry values, wval(name, j) for element j, exact
 * in float (check_weights.py computes the same) */
static int with_data;

static float wval(const char *name, int64_t j) {
  unsigned h = 0;
  for (const char *c = name; *c; c++) h = h * 31 + (unsigned char)*c;
  float v = (float)((int)((h + (unsigned)j * 7u) % 17u) - 8) / 16.0f;
  return strstr(name, "running_var") ? (v < 0 ? -v : v) + 0.5f : v; /* variances positive */
}

static void set_raw(Onnx__TensorProto *t, int64_t j, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  for (int b = 0; b < 4; b++) t->raw_data.data[4 * j + b] = (uint8_t)(u >> (8 * b));
}

/* A float initializer: its shape, and with_data its values. */
static Onnx__TensorProto *init(const char *name, int rank, const int64_t *dims) {
  Onnx__TensorProto *t = tensor(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
  PUSH(G->initializer, G->n_initializer, t);
  if (with_data) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)n * 4;
    t->raw_data.data = al((size_t)n * 4);
    for (int64_t j = 0; j < n; j++) set_raw(t, j, wval(name, j));
  }
  return t;
}
#define INIT(name, ...) init(name, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (int64_t[]){__VA_ARGS__})

/* An int64 Constant node. */
static void const_ints(const char *out, int rank, int cnt, const int64_t *v) {
  Onnx__NodeProto *n = node("Constant", str("/Constant_%d", nid++), "", out);
  Onnx__AttributeProto *a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  int64_t d[1] = {cnt};
  a->t = tensor("", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, rank, d);
  a->t->n_int64_data = (size_t)cnt;
  a->t->int64_data = al(sizeof(int64_t) * (size_t)cnt);
  memcpy(a->t->int64_data, v, sizeof(int64_t) * (size_t)cnt);
}

static Onnx__ValueInfoProto *value_info(const char *name, int rank, const int64_t *dims) {
  Onnx__ValueInfoProto *v = al(sizeof *v);
  onnx__value_info_proto__init(v);
  v->name = str("%s", name);
  Onnx__TypeProto *tp = al(sizeof *tp);
  onnx__type_proto__init(tp);
  Onnx__TypeProto__Tensor *tt = al(sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  Onnx__TensorShapeProto *sh = al(sizeof *sh);
  onnx__tensor_shape_proto__init(sh);
  for (int i = 0; i < rank; i++) {
    Onnx__TensorShapeProto__Dimension *d = al(sizeof *d);
    onnx__tensor_shape_proto__dimension__init(d);
    if (dims[i] < 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = str("batch_size");
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    }
    PUSH(sh->dim, sh->n_dim, d);
  }
  tt->shape = sh;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  v->type = tp;
  return v;
}

static void begin(const char *name, const char *input, int64_t c, int64_t h, int64_t w) {
  G = al(sizeof *G);
  onnx__graph_proto__init(G);
  G->name = str("%s", name);
  nid = 0;
  PUSH(G->input, G->n_input, value_info(input, 4, (int64_t[]){-1, c, h, w}));
}

/* Packs the model with opset `opset` into DIR/NAME.onnx; 0 or -1. */
static int finish(const char *dir, const char *name, const char *output, int64_t classes, int opset) {
  PUSH(G->output, G->n_output, value_info(output, 2, (int64_t[]){-1, classes}));
  Onnx__ModelProto m;
  onnx__model_proto__init(&m);
  m.has_ir_version = 1;
  m.ir_version = 8;
  m.producer_name = str("netc tests/onnx_import/onnx_make.c");
  Onnx__OperatorSetIdProto *o = al(sizeof *o);
  onnx__operator_set_id_proto__init(o);
  o->domain = str("");
  o->has_version = 1;
  o->version = opset;
  PUSH(m.opset_import, m.n_opset_import, o);
  m.graph = G;
  size_t len = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = al(len);
  onnx__model_proto__pack(&m, buf);
  char *path = str("%s/%s.onnx", dir, name);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(buf, 1, len, f) == len;
  if (f && fclose(f)) ok = 0;
  if (!ok) fprintf(stderr, "onnx_make: cannot write %s\n", path);
  pool_free();
  return ok ? 0 : -1;
}

/* The model being made with its float initializers' values moved to
 * DIR/NAME.onnx.data (data_location EXTERNAL), as torch.onnx.export's
 * default exporter keeps them; damage: 0 none, 1 the last tensor's length
 * past the file's end, 2 a location outside the model's folder, 3 a data
 * file that is not there.  Then finish(). */
static int finish_external(const char *dir, const char *name, int damage, int64_t classes) {
  const char *loc = damage == 2 ? str("../%s.onnx.data", name) : str("%s.onnx.data", name);
  char *path = str("%s/%s.onnx.data", dir, name);
  if (damage == 3) unlink(path);
  FILE *f = damage == 3 ? NULL : fopen(path, "wb");
  if (damage != 3 && !f) {
    fprintf(stderr, "onnx_make: cannot write %s\n", path);
    return -1;
  }
  size_t off = 0;
  int ok = 1;
  for (size_t i = 0; i < G->n_initializer; i++) {
    Onnx__TensorProto *t = G->initializer[i];
    if (!t->has_raw_data || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) continue;
    if (f && fwrite(t->raw_data.data, 1, t->raw_data.len, f) != t->raw_data.len) ok = 0;
    const char *kv[3][2] = {{"location", loc}, {"offset", str("%zu", off)}, {"length", str("%zu", t->raw_data.len)}};
    for (int k = 0; k < 3; k++) {
      Onnx__StringStringEntryProto *e = al(sizeof *e);
      onnx__string_string_entry_proto__init(e);
      e->key = str("%s", kv[k][0]), e->value = (char *)kv[k][1];
      PUSH(t->external_data, t->n_external_data, e);
    }
    off += t->raw_data.len;
    t->has_raw_data = 0, t->raw_data.len = 0, t->raw_data.data = NULL;
    t->has_data_location = 1, t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  }
  if (f && damage == 1 && (fflush(f) || ftruncate(fileno(f), (off_t)(off - 4)))) ok = 0;
  if (f && fclose(f)) ok = 0;
  if (!ok) fprintf(stderr, "onnx_make: cannot write %s\n", path);
  return finish(dir, name, "logits", classes, 17) | (ok ? 0 : -1);
}

/* --- layers, as torch.onnx.export writes them ---------------------------------- */

/* Conv (no bias unless bias) with weight LAYER.weight [k, c/groups, r, r]. */
static const char *conv(const char *x, const char *layer, int64_t c, int64_t k, int64_t r, int64_t s, int64_t p,
                        int64_t groups, int bias) {
  const char *y = str("/%s/Conv_output_0", layer);
  const char *w = str("%s.weight", layer);
  INIT(w, k, c / groups, r, r);
  const char *ins = w;
  if (bias) {
    INIT(str("%s.bias", layer), k);
    ins = str("%s,%s.bias", w, layer);
  }
  Onnx__NodeProto *n = node("Conv", str("/%s/Conv", layer), str("%s,%s", x, ins), y);
  attr_is(n, "dilations", 2, (int64_t[]){1, 1});
  attr_i(n, "group", groups);
  pair(n, "kernel_shape", r, r);
  pads(n, p);
  pair(n, "strides", s, s);
  return y;
}

/* As a training-mode export writes batch norms: training_mode=1, the
 * updated statistics as extra outputs (and graph outputs), and
 * num_batches_tracked + 1 computed and left unused. */
static int training_export;

static const char *bn(const char *x, const char *layer, int64_t c) {
  const char *y = str("/%s/BatchNormalization_output_0", layer);
  static const char *const suffix[] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; i++) INIT(str("%s.%s", layer, suffix[i]), c);
  const char *outs = training_export ? str("%s,/%s/mean_out,/%s/var_out", y, layer, layer) : y;
  Onnx__NodeProto *n =
      node("BatchNormalization", str("/%s/BatchNormalization", layer),
           str("%s,%s.weight,%s.bias,%s.running_mean,%s.running_var", x, layer, layer, layer, layer), outs);
  attr_f(n, "epsilon", 1e-5f);
  attr_f(n, "momentum", 0.9f);
  if (training_export) {
    attr_i(n, "training_mode", 1);
    PUSH(G->output, G->n_output, value_info(str("/%s/mean_out", layer), 1, (int64_t[]){c}));
    PUSH(G->initializer, G->n_initializer,
         tensor(str("%s.num_batches_tracked", layer), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL));
    const char *one = str("/%s/Constant_output_0", layer);
    const_ints(one, 0, 1, (int64_t[]){1});
    node("Add", str("/%s/Add", layer), str("%s.num_batches_tracked,%s", layer, one), str("/%s/Add_output_0", layer));
  }
  return y;
}

static const char *unary(const char *op, const char *x, const char *where) {
  const char *y = str("/%s/%s_output_0", where, op);
  node(op, str("/%s/%s", where, op), x, y);
  return y;
}

static const char *add(const char *a, const char *b, const char *where) {
  const char *y = str("/%s/Add_output_0", where);
  node("Add", str("/%s/Add", where), str("%s,%s", a, b), y);
  return y;
}

static const char *pooling(const char *op, const char *x, const char *where, int64_t k, int64_t s, int64_t p) {
  const char *y = str("/%s/%s_output_0", where, op);
  Onnx__NodeProto *n = node(op, str("/%s/%s", where, op), x, y);
  if (strcmp(op, "MaxPool") == 0) attr_i(n, "ceil_mode", 0);
  if (strcmp(op, "AveragePool") == 0) attr_i(n, "count_include_pad", 1);
  pair(n, "kernel_shape", k, k);
  pads(n, p);
  pair(n, "strides", s, s);
  return y;
}

static const char *gemm(const char *x, const char *layer, int64_t in, int64_t out) {
  INIT(str("%s.weight", layer), out, in);
  INIT(str("%s.bias", layer), out);
  Onnx__NodeProto *n = node("Gemm", str("/%s/Gemm", layer), str("%s,%s.weight,%s.bias", x, layer, layer), "logits");
  attr_f(n, "alpha", 1);
  attr_f(n, "beta", 1);
  attr_i(n, "transB", 1);
  return "logits";
}

/* x.view(x.size(0), -1) as the TorchScript exporter writes it. */
static const char *view_flat(const char *x) {
  node("Shape", "/Shape", x, "/Shape_output_0");
  const_ints("/Constant_output_0", 0, 1, (int64_t[]){0});
  Onnx__NodeProto *g = node("Gather", "/Gather", "/Shape_output_0,/Constant_output_0", "/Gather_output_0");
  attr_i(g, "axis", 0);
  const_ints("/Constant_1_output_0", 1, 1, (int64_t[]){0});
  node("Unsqueeze", "/Unsqueeze", "/Gather_output_0,/Constant_1_output_0", "/Unsqueeze_output_0");
  const_ints("/Constant_2_output_0", 1, 1, (int64_t[]){-1});
  Onnx__NodeProto *c = node("Concat", "/Concat", "/Unsqueeze_output_0,/Constant_2_output_0", "/Concat_output_0");
  attr_i(c, "axis", 0);
  node("Reshape", "/Reshape", str("%s,/Concat_output_0", x), "/Reshape_output_0");
  return "/Reshape_output_0";
}

/* --- the models ----------------------------------------------------------------- */

/* small.net: conv-bn-relu-maxpool, a residual conv-bn-add-relu, a conv with
 * bias, avgpool, global_avgpool, flatten, linear.  reshape: the flatten as
 * view(size(0), -1) and the linear as MatMul + Add (after an Identity). */
static void small(int reshape) {
  begin("small", "image", 1, 28, 28);
  const char *x = conv("image", "conv1", 1, 16, 3, 1, 1, 1, 0);
  x = unary("Relu", bn(x, "bn1", 16), "relu1");
  const char *pool1 = pooling("MaxPool", x, "pool1", 2, 2, 0);
  x = bn(conv(pool1, "conv2", 16, 16, 3, 1, 1, 1, 0), "bn2", 16);
  x = unary("Relu", add(x, pool1, "res"), "res");
  x = unary("Relu", conv(x, "conv3", 16, 32, 3, 2, 1, 1, 1), "relu3");
  x = pooling("AveragePool", x, "pool3", 3, 2, 1);
  x = unary("GlobalAveragePool", x, "gap");
  if (!reshape) {
    Onnx__NodeProto *f = node("Flatten", "/flat/Flatten", x, "/flat/Flatten_output_0");
    attr_i(f, "axis", 1);
    gemm("/flat/Flatten_output_0", "fc", 32, 10);
    return;
  }
  x = view_flat(x);
  node("Identity", "/Identity", x, "/Identity_output_0");
  Onnx__TensorProto *wt = INIT("fc.weight_t", 32, 10); /* MatMul's weight is [in, out]: fc.weight transposed */
  for (int64_t c = 0; with_data && c < 32; c++)
    for (int64_t o = 0; o < 10; o++) set_raw(wt, c * 10 + o, wval("fc.weight", o * 32 + c));
  INIT("fc.bias", 10);
  node("MatMul", "/fc/MatMul", "/Identity_output_0,fc.weight_t", "/fc/MatMul_output_0");
  node("Add", "/fc/Add", "fc.bias,/fc/MatMul_output_0", "logits");
}

/* resblock.net: a stem and one basic block with a projection shortcut, as
 * a training-mode export writes it (training_export); the global average
 * pool written as ReduceMean. */
static void resblock(void) {
  begin("resblock", "x", 3, 32, 32);
  training_export = 1;
  const char *x = unary("Relu", bn(conv("x", "conv1", 3, 16, 3, 1, 1, 1, 0), "bn1", 16), "relu");
  const char *y = unary("Relu", bn(conv(x, "block.conv1", 16, 32, 3, 2, 1, 1, 0), "block.bn1", 32), "block/relu");
  y = bn(conv(y, "block.conv2", 32, 32, 3, 1, 1, 1, 0), "block.bn2", 32);
  const char *s = bn(conv(x, "block.downsample.0", 16, 32, 1, 2, 0, 1, 0), "block.downsample.1", 32);
  y = unary("Relu", add(y, s, "block"), "block/relu_1");
  /* the global pool as ReduceMean over H and W (opset 17: axes an attribute) */
  Onnx__NodeProto *r = node("ReduceMean", "/avgpool/ReduceMean", y, "/avgpool/ReduceMean_output_0");
  attr_is(r, "axes", 2, (int64_t[]){-1, -2});
  attr_i(r, "keepdims", 1);
  y = "/avgpool/ReduceMean_output_0";
  Onnx__NodeProto *f = node("Flatten", "/Flatten", y, "/Flatten_output_0");
  attr_i(f, "axis", 1);
  gemm("/Flatten_output_0", "fc", 32, 10);
  training_export = 0;
}

/* As an eval-mode export writes conv + batch norm: folded into one Conv
 * whose weight and bias the exporter names onnx::Conv_N. */
static void folded(int dynamo) {
  begin("folded", "input", 3, 16, 16);
  /* the TorchScript exporter in eval mode, or the dynamo exporter (its node
   * names are not scopes, its folded bias is the weight's name + _bias) */
  const char *w = dynamo ? "conv1.weight" : "onnx::Conv_5", *b = dynamo ? "conv1.weight_bias" : "onnx::Conv_6";
  INIT(w, 8, 3, 3, 3);
  INIT(b, 8);
  Onnx__NodeProto *n =
      node("Conv", dynamo ? "node_Conv_0" : "/conv1/Conv", str("input,%s,%s", w, b), "/conv1/Conv_output_0");
  pair(n, "kernel_shape", 3, 3);
  pads(n, 1);
  const char *x = unary("Relu", "/conv1/Conv_output_0", "relu");
  x = unary("GlobalAveragePool", x, "avgpool");
  Onnx__NodeProto *f = node("Flatten", "/Flatten", x, "/Flatten_output_0");
  attr_i(f, "axis", 1);
  gemm("/Flatten_output_0", "fc", 8, 10);
}

/* torchvision's resnet50 (groups 1, width 64) or resnext50_32x4d. */
static void resnet50(int64_t groups, int64_t width_per_group) {
  begin("resnet50", "input", 3, 224, 224);
  const char *x = unary("Relu", bn(conv("input", "conv1", 3, 64, 7, 2, 3, 1, 0), "bn1", 64), "relu");
  x = pooling("MaxPool", x, "maxpool", 3, 2, 1);
  static const int blocks[4] = {3, 4, 6, 3};
  int64_t inplanes = 64;
  for (int l = 0; l < 4; l++) {
    int64_t planes = 64 << l, width = planes * width_per_group / 64 * groups, out = planes * 4;
    for (int b = 0; b < blocks[l]; b++) {
      const char *p = str("layer%d.%d", l + 1, b);
      int64_t s = b == 0 && l > 0 ? 2 : 1;
      const char *y =
          unary("Relu", bn(conv(x, str("%s.conv1", p), inplanes, width, 1, 1, 0, 1, 0), str("%s.bn1", p), width),
                str("%s/relu", p));
      y = unary("Relu", bn(conv(y, str("%s.conv2", p), width, width, 3, s, 1, groups, 0), str("%s.bn2", p), width),
                str("%s/relu_1", p));
      y = bn(conv(y, str("%s.conv3", p), width, out, 1, 1, 0, 1, 0), str("%s.bn3", p), out);
      const char *sc = x;
      if (b == 0)
        sc = bn(conv(x, str("%s.downsample.0", p), inplanes, out, 1, s, 0, 1, 0), str("%s.downsample.1", p), out);
      x = unary("Relu", add(y, sc, p), str("%s/relu_2", p));
      inplanes = out;
    }
  }
  x = unary("GlobalAveragePool", x, "avgpool");
  Onnx__NodeProto *f = node("Flatten", "/Flatten", x, "/Flatten_output_0");
  attr_i(f, "axis", 1);
  gemm("/Flatten_output_0", "fc", 2048, 1000);
}

/* The bad models: small() broken in one way each. */
static int bad(const char *dir) {
  int st = 0;
  /* a cycle: conv2 reads the add that reads it */
  small(0);
  G->node[4]->input[0] = str("/res/Add_output_0");
  st |= finish(dir, "bad_cycle", "logits", 10, 17);
  /* conv2's weight is not in the file */
  small(0);
  G->node[4]->input[1] = str("conv2.weight_missing");
  st |= finish(dir, "bad_missing_init", "logits", 10, 17);
  /* bn2's statistics have 8 channels; conv2 makes 16 */
  small(0);
  for (size_t i = 0; i < G->n_initializer; i++) {
    if (strcmp(G->initializer[i]->name, "bn2.running_mean") == 0) G->initializer[i]->dims[0] = 8;
  }
  st |= finish(dir, "bad_shapes", "logits", 10, 17);
  /* two nodes netc does not know and an attribute it does not take: listed at once */
  small(0);
  G->node[2]->op_type = str("LeakyRelu");
  attr_s(G->node[3], "auto_pad", "SAME_UPPER");
  G->node[7]->op_type = str("Softmax");
  attr_i(G->node[4], "foo", 1);
  st |= finish(dir, "bad_ops", "logits", 10, 17);
  /* conv1's weight holds 10 floats, not 16x1x3x3 */
  small(0);
  G->initializer[0]->has_raw_data = 1;
  G->initializer[0]->raw_data.len = 40;
  G->initializer[0]->raw_data.data = al(40);
  st |= finish(dir, "bad_data", "logits", 10, 17);
  /* an opset netc does not know */
  small(0);
  st |= finish(dir, "bad_opset", "logits", 10, 99);
  /* a reshape to something other than [N, features] */
  small(1);
  G->node[17]->attribute[0]->t->int64_data[0] = 7; /* Constant_2: -1 -> 7 */
  st |= finish(dir, "bad_reshape", "logits", 10, 17);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: onnx_make DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  int st = 0;
  small(0);
  st |= finish(dir, "small", "logits", 10, 17);
  small(1);
  st |= finish(dir, "small_reshape", "logits", 10, 13);
  resblock();
  st |= finish(dir, "resblock", "logits", 10, 17);
  folded(0);
  st |= finish(dir, "folded", "logits", 10, 17);
  folded(1);
  st |= finish(dir, "folded_dynamo", "logits", 10, 17);
  with_data = 1; /* the two small models with values (check_weights.py) */
  small(0);
  st |= finish(dir, "small_w", "logits", 10, 17);
  small(1);
  st |= finish(dir, "small_reshape_w", "logits", 10, 17);
  small(0); /* small_w's values beside the model, and broken so three ways */
  st |= finish_external(dir, "small_x", 0, 10);
  static const char *const broken[] = {NULL, "bad_external_short", "bad_external_outside", "bad_external_missing"};
  for (int d = 1; d <= 3; d++) {
    small(0);
    st |= finish_external(dir, broken[d], d, 10);
  }
  with_data = 0;
  resnet50(1, 64);
  st |= finish(dir, "resnet50", "logits", 1000, 17);
  resnet50(32, 4);
  st |= finish(dir, "resnext50_32x4d", "logits", 1000, 17);
  st |= bad(dir);
  free(allocs);
  return st ? 1 : 0;
}
