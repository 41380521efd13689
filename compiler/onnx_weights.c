/* onnx_weights.c - an ONNX model's initializers written as a safetensors
 * file (netc FILE.onnx --weights-out=W.safetensors), so that the model runs
 * with the weights it was exported with (netrun infer MODEL --weights W).
 *
 * Each tensor is F32, named and shaped as the IR's parameter or state
 * (docs/safetensors.md's format: a u64 header length, the JSON header
 * padded with spaces to a multiple of 8, the data, every tensor on a
 * multiple of 4 bytes).  A MatMul (or Gemm transB=0) weight, [in, out] in
 * the file, is written transposed, [out, in], as linear keeps it.  The
 * compiler cannot use the runtime's writer (runtime/io): this one writes
 * only what the ONNX front end needs. */
#include "onnx_weights.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static float get_f32(const OnnxWeight *w, int64_t i) {
  if (!w->raw) return w->f[i];
  uint32_t u = (uint32_t)w->raw[4 * i] | (uint32_t)w->raw[4 * i + 1] << 8 | (uint32_t)w->raw[4 * i + 2] << 16 |
               (uint32_t)w->raw[4 * i + 3] << 24;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

int onnx_weights_write(const char *path, const OnnxWeight *w, int n, char *err, size_t errlen) {
  /* the header: {"name":{"dtype":"F32","shape":[..],"data_offsets":[a,b]},...} */
  size_t cap = 64 + (size_t)n * 160, len = 0;
  char *hdr = malloc(cap);
  if (!hdr) return snprintf(err, errlen, "out of memory"), -1;
  uint64_t off = 0;
  len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int k = 0; k < w[i].rank; k++) numel *= w[i].dim[k];
    if (cap - len < 160 + strlen(w[i].name)) {
      cap = 2 * cap + strlen(w[i].name);
      char *nh = realloc(hdr, cap);
      if (!nh) return free(hdr), snprintf(err, errlen, "out of memory"), -1;
      hdr = nh;
    }
    len += (size_t)snprintf(hdr + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", w[i].name);
    for (int k = 0; k < w[i].rank; k++)
      len += (size_t)snprintf(hdr + len, cap - len, "%s%" PRId64, k ? "," : "", w[i].dim[k]);
    len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off,
                            off + (uint64_t)numel * 4);
    off += (uint64_t)numel * 4;
  }
  if (cap - len < 16) {
    char *nh = realloc(hdr, cap += 16);
    if (!nh) return free(hdr), snprintf(err, errlen, "out of memory"), -1;
    hdr = nh;
  }
  hdr[len++] = '}';
  while (len % 8) hdr[len++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f) {
    snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
    free(hdr);
    return -1;
  }
  uint8_t head[8];
  put_u64(head, len);
  int ok = fwrite(head, 1, 8, f) == 8 && fwrite(hdr, 1, len, f) == len;
  free(hdr);
  for (int i = 0; ok && i < n; i++) {
    const OnnxWeight *t = &w[i];
    int64_t numel = 1;
    for (int k = 0; k < t->rank; k++) numel *= t->dim[k];
    for (int64_t j = 0; ok && j < numel; j++) {
      /* transposed: the IR's [out, in] element (o, c) is the file's (c, o) */
      int64_t src = t->transposed ? (j % t->dim[1]) * t->dim[0] + j / t->dim[1] : j;
      float v = get_f32(t, src);
      uint32_t u;
      memcpy(&u, &v, sizeof u);
      uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
      ok = fwrite(b, 1, 4, f) == 4;
    }
  }
  if (fclose(f) || !ok) {
    snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    remove(path);
    return -1;
  }
  return 0;
}
