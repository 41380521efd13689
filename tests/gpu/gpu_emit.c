/* gpu_emit.c - netc-gpu-emit DIR: writes every eltwise.cu instantiation
 * that test_nvrtc compiles as DIR/<kernel>.cu, one file per kernel, so
 * check_nvcc.sh can compile the same sources with nvcc.  Exit status 0,
 * or 1 with a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_eltwise.h"

static int emit(const char *dir, int index, GpuEltOp op, GpuDtype dt, int64_t n) {
  char name[64], err[1024], path[4096], *src = NULL;
  if (gpu_eltwise_source(index, op, dt, n, 0, name, sizeof name, &src, err, sizeof err)) {
    fprintf(stderr, "netc-gpu-emit: %s\n", err);
    return 0;
  }
  snprintf(path, sizeof path, "%s/%s.cu", dir, name);
  FILE *f = fopen(path, "w");
  int ok = f && fputs(src, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) fprintf(stderr, "netc-gpu-emit: cannot write %s\n", path);
  free(src);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: netc-gpu-emit DIR\n");
    return 1;
  }
  int index = 0, ok = 1;
  for (int dt = 0; dt < GPU_DTYPE_COUNT; dt++)
    for (int op = 0; op < GPU_ELT_OP_COUNT; op++) ok &= emit(argv[1], index++, (GpuEltOp)op, (GpuDtype)dt, 1000000);
  ok &= emit(argv[1], index++, GPU_ELT_ADD_RELU_FWD, GPU_F16, 1000003);
  ok &= emit(argv[1], index++, GPU_ELT_ADD_BWD, GPU_F32, 1001);
  return ok ? 0 : 1;
}
