/* fuzz_st_seed.c - fuzz_st_seed DIR: the seeds of fuzz_safetensors, written
 * by netc's own safetensors writer (rt_st_writer_*): a checkpoint-like file
 * (tensors of several dtypes and ranks, __metadata__ entries), a scalar and
 * an empty tensor, and a file with no tensors at all. */
#include <stdio.h>
#include <string.h>

#include "rt_safetensors.h"

static int write_seed(const char *dir, const char *name, int which) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  RtStWriter *w = rt_st_writer_new();
  if (!w) return 1;
  float wt[2 * 3 * 3 * 3], bias[2] = {0.5f, -1.0f}, one = 1.0f;
  for (int i = 0; i < 54; i++) wt[i] = (float)i / 7.0f;
  int64_t lab[4] = {0, 1, 2, 3};
  uint16_t half[3] = {0x3c00, 0xc000, 0x7bff};
  uint8_t bytes[5] = {1, 2, 3, 4, 5};
  int64_t s4[4] = {2, 3, 3, 3}, s1[1] = {2}, sl[1] = {4}, sh[2] = {1, 3}, sb[1] = {5}, s0[2] = {0, 7};
  RtStStatus s = RT_ST_OK;
  if (which == 0) {
    s = rt_st_writer_add(w, "conv1.weight", RT_ST_F32, 4, s4, wt, sizeof wt, RT_ST_COPY);
    if (!s) s = rt_st_writer_add(w, "conv1.bias", RT_ST_F32, 1, s1, bias, sizeof bias, RT_ST_COPY);
    if (!s) s = rt_st_writer_add(w, "label", RT_ST_I64, 1, sl, lab, sizeof lab, RT_ST_COPY);
    if (!s) s = rt_st_writer_add(w, "fc.half", RT_ST_F16, 2, sh, half, sizeof half, RT_ST_COPY);
    if (!s) s = rt_st_writer_add(w, "bytes", RT_ST_U8, 1, sb, bytes, sizeof bytes, RT_ST_COPY);
    if (!s) s = rt_st_writer_set_meta(w, "netc.checkpoint", "1");
    if (!s) s = rt_st_writer_set_meta(w, "netc.step", "12");
    if (!s) s = rt_st_writer_set_meta(w, "netc.lr", "0.050000000000000003");
  } else if (which == 1) {
    s = rt_st_writer_add(w, "scale", RT_ST_F32, 0, NULL, &one, sizeof one, RT_ST_COPY);
    if (!s) s = rt_st_writer_add(w, "empty", RT_ST_F64, 2, s0, NULL, 0, RT_ST_COPY);
  } else {
    s = rt_st_writer_set_meta(w, "format", "pt");
  }
  if (!s) s = rt_st_writer_write(w, path);
  if (s) fprintf(stderr, "fuzz_st_seed: %s: %s\n", path, rt_st_writer_error(w));
  rt_st_writer_free(w);
  return s != RT_ST_OK;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_st_seed DIR\n");
    return 2;
  }
  return write_seed(argv[1], "tensors.safetensors", 0) | write_seed(argv[1], "scalar.safetensors", 1) |
         write_seed(argv[1], "meta.safetensors", 2);
}
