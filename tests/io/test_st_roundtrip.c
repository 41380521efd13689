/* test_st_roundtrip.c - safetensors files written by netc read back the
 * same, and files from other writers read correctly.
 *
 * Round trip: tensors of every width (BOOL to F64), a scalar, empty
 * tensors, torchvision names and names needing JSON escapes, copied and
 * borrowed data, metadata; each read back by name and by position with
 * its dtype, shape and bytes, in the order it was added, and aligned to
 * its element size.  Foreign files: one whose bytes are spelled out here
 * (unpadded header, unaligned data, keys out of offset order), and one
 * written by make_foreign.py with Python's struct and json; and netc's file
 * read by read_netc.py -- the Python parts only when python3 is installed.  Every prefix of a valid file is refused. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "rt_safetensors.h"
#include "tmpdir.h"

typedef struct Want {
  const char *name;
  RtStDtype dtype;
  int ndim;
  int64_t shape[4];
  const void *data;
  size_t nbytes;
  RtStHold hold;
} Want;

static void check_tensor(const RtStFile *f, const Want *w) {
  const RtStTensor *t = rt_st_find(f, w->name);
  CHECK(t != NULL, "tensor '%s' not found", w->name);
  if (!t) return;
  CHECK(strcmp(t->name, w->name) == 0, "name '%s' vs '%s'", t->name, w->name);
  CHECK(t->dtype == w->dtype, "%s: dtype %s, want %s", w->name, rt_st_dtype_name(t->dtype), rt_st_dtype_name(w->dtype));
  CHECK(t->ndim == w->ndim, "%s: ndim %d, want %d", w->name, t->ndim, w->ndim);
  int64_t numel = 1;
  for (int d = 0; d < w->ndim && d < t->ndim; d++) {
    CHECK(t->shape[d] == w->shape[d], "%s: dim %d is %lld, want %lld", w->name, d, (long long)t->shape[d],
          (long long)w->shape[d]);
    numel *= w->shape[d];
  }
  CHECK(t->numel == numel, "%s: numel %lld, want %lld", w->name, (long long)t->numel, (long long)numel);
  CHECK(t->nbytes == w->nbytes, "%s: %zu bytes, want %zu", w->name, t->nbytes, w->nbytes);
  if (t->nbytes == w->nbytes && w->nbytes > 0)
    CHECK(memcmp(t->data, w->data, w->nbytes) == 0, "%s: data differs", w->name);
}

static void test_roundtrip(const char *dir) {
  float conv[2 * 3] = {0.5f, -1.25f, 3e-8f, 1e30f, -0.0f, 7.0f};
  uint16_t half[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};   /* 1, -2, 65504, tiny */
  uint16_t bf[2 * 2] = {0x3f80, 0xbf80, 0x4049, 0x0000}; /* 1, -1, 3.14, 0 */
  int8_t i8[5] = {-128, -1, 0, 1, 127};
  int32_t i32[3 * 1 * 2] = {INT32_MIN, -7, 0, 9, 1 << 20, INT32_MAX};
  int64_t steps = 123456789012345LL;
  double f64[1] = {1.0 / 3.0};
  uint8_t flags[3] = {1, 0, 1};
  uint8_t u8copy[4] = {10, 20, 30, 40};
  uint8_t u8orig[4] = {10, 20, 30, 40};
  float running_mean[64];
  for (int i = 0; i < 64; i++) running_mean[i] = (float)i * 0.125f - 3.0f;

  const Want want[] = {
      {"conv1.weight", RT_ST_F32, 2, {2, 3}, conv, sizeof conv, RT_ST_BORROW},
      {"layer1.0.bn2.running_mean", RT_ST_F32, 1, {64}, running_mean, sizeof running_mean, RT_ST_COPY},
      {"layer1.0.bn2.num_batches_tracked", RT_ST_I64, 0, {0}, &steps, sizeof steps, RT_ST_COPY},
      {"half.w", RT_ST_F16, 1, {4}, half, sizeof half, RT_ST_BORROW},
      {"bf16.w", RT_ST_BF16, 2, {2, 2}, bf, sizeof bf, RT_ST_COPY},
      {"int8", RT_ST_I8, 1, {5}, i8, sizeof i8, RT_ST_COPY},
      {"layer4.2.conv3.int32", RT_ST_I32, 3, {3, 1, 2}, i32, sizeof i32, RT_ST_BORROW},
      {"empty", RT_ST_F32, 1, {0}, NULL, 0, RT_ST_COPY},
      {"empty.2d", RT_ST_I64, 2, {3, 0}, NULL, 0, RT_ST_BORROW},
      {"fc.bias", RT_ST_F64, 1, {1}, f64, sizeof f64, RT_ST_COPY},
      {"mask", RT_ST_BOOL, 1, {3}, flags, sizeof flags, RT_ST_COPY},
      {"u8 copied", RT_ST_U8, 2, {2, 2}, u8orig, sizeof u8orig, RT_ST_COPY},
      {"odd \"name\" with \\ and \t and caf\xc3\xa9", RT_ST_U8, 1, {1}, flags, 1, RT_ST_BORROW},
  };
  size_t n = sizeof want / sizeof want[0];

  RtStWriter *w = rt_st_writer_new();
  CHECK(w != NULL, "writer_new");
  for (size_t i = 0; i < n; i++) {
    const void *src = strcmp(want[i].name, "u8 copied") == 0 ? (const void *)u8copy : want[i].data;
    RtStStatus st = rt_st_writer_add(w, want[i].name, want[i].dtype, want[i].ndim, want[i].shape, src, want[i].nbytes,
                                     want[i].hold);
    CHECK(st == RT_ST_OK, "add %s: %s", want[i].name, rt_st_writer_error(w));
  }
  /* A copied tensor does not see later changes to the caller's buffer. */
  memset(u8copy, 0xee, sizeof u8copy);
  CHECK(rt_st_writer_set_meta(w, "format", "pt") == RT_ST_OK, "meta");
  CHECK(rt_st_writer_set_meta(w, "note", "first") == RT_ST_OK, "meta");
  CHECK(rt_st_writer_set_meta(w, "note", "caf\xc3\xa9 \"quoted\"\n") == RT_ST_OK, "meta again");
  CHECK(rt_st_writer_set_meta(w, "epoch", "") == RT_ST_OK, "empty meta value");

  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  CHECK(rt_st_writer_write(w, path) == RT_ST_OK, "write: %s", rt_st_writer_error(w));
  CHECK(rt_st_writer_error(w)[0] == '\0', "error left after success");
  /* Writing twice gives the same bytes: nothing in the writer is used up. */
  char path2[512];
  snprintf(path2, sizeof path2, "%s/again.safetensors", dir);
  CHECK(rt_st_writer_write(w, path2) == RT_ST_OK, "second write: %s", rt_st_writer_error(w));
  rt_st_writer_free(w);

  size_t len1 = 0, len2 = 0;
  unsigned char *b1 = file_read(path, &len1), *b2 = file_read(path2, &len2);
  CHECK(b1 && b2 && len1 == len2 && memcmp(b1, b2, len1) == 0, "two writes differ");
  if (b1 && len1 >= 8) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b1[i];
    CHECK(hlen % 8 == 0, "header length %llu not padded to 8", (unsigned long long)hlen);
  }
  free(b1);
  free(b2);

  char err[RT_ST_ERRMAX];
  RtStFile *f = NULL;
  RtStStatus st = rt_st_open(path, &f, err, sizeof err);
  CHECK(st == RT_ST_OK, "open: %s", err);
  if (!f) return;
  CHECK(rt_st_count(f) == n, "count %zu, want %zu", rt_st_count(f), n);
  for (size_t i = 0; i < n && i < rt_st_count(f); i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    CHECK(strcmp(t->name, want[i].name) == 0, "position %zu holds '%s', want '%s'", i, t->name, want[i].name);
    CHECK((uintptr_t)t->data % rt_st_dtype_size(t->dtype) == 0, "'%s' misaligned", t->name);
    check_tensor(f, &want[i]);
  }
  CHECK(rt_st_tensor(f, n) == NULL, "index past the end");
  CHECK(rt_st_find(f, "conv1.weigh") == NULL, "prefix found");
  CHECK(rt_st_find(f, "conv1.weight ") == NULL, "longer name found");
  CHECK(rt_st_find(f, "__metadata__") == NULL, "metadata found as tensor");
  CHECK(rt_st_meta_count(f) == 3, "meta count %zu", rt_st_meta_count(f));
  const char *v = rt_st_meta_get(f, "format");
  CHECK(v && strcmp(v, "pt") == 0, "format = %s", v ? v : "(null)");
  v = rt_st_meta_get(f, "note");
  CHECK(v && strcmp(v, "caf\xc3\xa9 \"quoted\"\n") == 0, "note = %s", v ? v : "(null)");
  v = rt_st_meta_get(f, "epoch");
  CHECK(v && v[0] == '\0', "epoch = %s", v ? v : "(null)");
  CHECK(rt_st_meta_get(f, "missing") == NULL, "missing meta found");
  const char *k = NULL;
  rt_st_meta_at(f, 0, &k, &v);
  CHECK(k && strcmp(k, "format") == 0, "first meta key %s", k ? k : "(null)");

  /* Every proper prefix of a valid file is refused, without a crash. */
  size_t len = 0;
  unsigned char *bytes = file_read(path, &len);
  int refused = 0;
  for (size_t cut = 0; bytes && cut < len; cut++) {
    RtStFile *g = NULL;
    refused += rt_st_open_memory(bytes, cut, "prefix", &g, err, sizeof err) == RT_ST_ERR_FORMAT;
    CHECK(g == NULL, "prefix %zu accepted", cut);
    rt_st_close(g);
  }
  CHECK(bytes && refused == (int)len, "%d of %zu prefixes refused", refused, len);
  RtStFile *g = NULL;
  CHECK(bytes && rt_st_open_memory(bytes, len, "whole", &g, err, sizeof err) == RT_ST_OK, "whole buffer: %s", err);
  CHECK(g && rt_st_count(g) == n, "memory open count");
  rt_st_close(g);
  free(bytes);
  rt_st_close(f);

  /* The same file as a struct + json reader (PyTorch's view) sees it. */
  if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
    printf("note: python3 not found; skipping the Python reader\n");
    return;
  }
  char cmd[1200], out[600];
  snprintf(out, sizeof out, "%s/py-view.txt", dir);
  snprintf(cmd, sizeof cmd, "python3 '%s/read_netc.py' '%s' > '%s'", NETC_TENSORS_TEST_DIR, path, out);
  CHECK(system(cmd) == 0, "%s failed", cmd);
  size_t vlen = 0;
  char *view = (char *)file_read(out, &vlen);
  const char *want_view = "conv1.weight F32 [2, 3] 0.5 -1.25 2.99999989e-08 1.00000002e+30 -0 7\n"
                          "layer1.0.bn2.num_batches_tracked I64 [] 123456789012345\n"
                          "meta pt\n";
  CHECK(view && vlen == strlen(want_view) && memcmp(view, want_view, vlen) == 0, "Python reader saw:\n%.*s", (int)vlen,
        view ? view : "");
  free(view);
}

static void test_empty_file(const char *dir) {
  char path[512], err[RT_ST_ERRMAX];
  snprintf(path, sizeof path, "%s/empty.safetensors", dir);
  RtStWriter *w = rt_st_writer_new();
  CHECK(rt_st_writer_write(w, path) == RT_ST_OK, "write: %s", rt_st_writer_error(w));
  rt_st_writer_free(w);
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "open: %s", err);
  CHECK(f && rt_st_count(f) == 0 && rt_st_meta_count(f) == 0, "not empty");
  CHECK(f && rt_st_find(f, "x") == NULL, "found in empty");
  rt_st_close(f);
}

/* Bytes as another writer might produce them: JSON with spaces and a
 * newline, keys not in offset order, a header whose length is not a
 * multiple of 8 (so the I32 data is unaligned), and \u escapes. */
static void test_handmade(const char *dir) {
  static const char header[] =
      "{\n \"b\\u002ebias\" : {\"shape\": [2], \"dtype\": \"I32\", \"data_offsets\": [1, 9]},\n"
      " \"__metadata__\": {\"source\": \"hand\"},\n"
      " \"a\": {\"data_offsets\": [0, 1], \"dtype\": \"U8\", \"shape\": []},\n"
      " \"c\": {\"dtype\": \"F16\", \"shape\": [1, 0, 5], \"data_offsets\": [9, 9]}}  ";
  size_t hlen = sizeof header - 1;
  unsigned char file[8 + sizeof header + 9];
  for (int i = 0; i < 8; i++) file[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  memcpy(file + 8, header, hlen);
  const unsigned char data[9] = {200, 0x01, 0x00, 0x00, 0x00, 0xfe, 0xff, 0xff, 0xff};
  memcpy(file + 8 + hlen, data, sizeof data);
  char path[512], err[RT_ST_ERRMAX];
  snprintf(path, sizeof path, "%s/hand.safetensors", dir);
  CHECK(file_write(path, file, 8 + hlen + sizeof data), "write %s", path);

  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "open: %s", err);
  if (!f) return;
  CHECK(rt_st_count(f) == 3, "count %zu", rt_st_count(f));
  CHECK(strcmp(rt_st_tensor(f, 0)->name, "b.bias") == 0, "first is %s", rt_st_tensor(f, 0)->name);
  const RtStTensor *a = rt_st_find(f, "a"), *b = rt_st_find(f, "b.bias"), *c = rt_st_find(f, "c");
  CHECK(
      a && a->dtype == RT_ST_U8 && a->ndim == 0 && a->numel == 1 && a->nbytes == 1 && *(const uint8_t *)a->data == 200,
      "scalar a");
  int32_t bv[2] = {0, 0};
  if (b && b->nbytes == sizeof bv) memcpy(bv, b->data, sizeof bv);
  CHECK(b && b->dtype == RT_ST_I32 && b->numel == 2 && bv[0] == 1 && bv[1] == -2, "b.bias = %d %d", bv[0], bv[1]);
  CHECK(c && c->ndim == 3 && c->numel == 0 && c->nbytes == 0 && c->shape[2] == 5, "empty c");
  const char *v = rt_st_meta_get(f, "source");
  CHECK(v && strcmp(v, "hand") == 0, "meta source");
  rt_st_close(f);
}

/* A file from Python's struct + json (make_foreign.py), if python3 runs. */
static void test_python(const char *dir) {
  if (system("python3 -c 'import json, struct' >/dev/null 2>&1") != 0) {
    printf("note: python3 not found; skipping the Python-written file\n");
    return;
  }
  char cmd[1200], path[512], err[RT_ST_ERRMAX];
  snprintf(path, sizeof path, "%s/py.safetensors", dir);
  snprintf(cmd, sizeof cmd, "python3 '%s/make_foreign.py' '%s'", NETC_TENSORS_TEST_DIR, path);
  CHECK(system(cmd) == 0, "%s failed", cmd);
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_OK, "open: %s", err);
  if (!f) return;
  CHECK(rt_st_count(f) == 5, "count %zu", rt_st_count(f));
  const RtStTensor *t = rt_st_find(f, "layer1.0.conv1.weight");
  CHECK(t && t->dtype == RT_ST_F32 && t->ndim == 4 && t->numel == 2 * 3 * 1 * 1, "conv shape");
  for (int i = 0; t && t->nbytes == 24 && i < 6; i++) {
    float x;
    memcpy(&x, (const char *)t->data + 4 * i, 4);
    CHECK_CLOSE(x, i * 0.5 - 1.0, 0, "conv value");
  }
  t = rt_st_find(f, "layer1.0.bn1.num_batches_tracked");
  int64_t nb = 0;
  if (t && t->nbytes == 8) memcpy(&nb, t->data, 8);
  CHECK(t && t->dtype == RT_ST_I64 && t->ndim == 0 && nb == 1234567890123LL, "scalar %lld", (long long)nb);
  t = rt_st_find(f, "caf\xc3\xa9.bias");
  CHECK(t && t->dtype == RT_ST_F64 && t->numel == 3, "unicode name");
  for (int i = 0; t && t->nbytes == 24 && i < 3; i++) {
    double x;
    memcpy(&x, (const char *)t->data + 8 * i, 8);
    CHECK_CLOSE(x, 1.0 / (i + 3), 0, "f64 value");
  }
  t = rt_st_find(f, "empty");
  CHECK(t && t->dtype == RT_ST_U8 && t->numel == 0 && t->ndim == 2, "python empty");
  t = rt_st_find(f, "fc.weight");
  CHECK(t && t->dtype == RT_ST_BF16 && t->numel == 2 && memcmp(t->data, "\x80\x3f\x80\xbf", 4) == 0, "bf16 bytes");
  const char *v = rt_st_meta_get(f, "format");
  CHECK(v && strcmp(v, "pt") == 0, "python meta");
  rt_st_close(f);
}

int main(void) {
  char dir[256];
  if (!tmpdir_make(dir, sizeof dir, "st-roundtrip")) return check_skip("cannot make a temporary directory");
  test_roundtrip(dir);
  test_empty_file(dir);
  test_handmade(dir);
  test_python(dir);
  tmpdir_remove(dir);
  return check_report();
}
