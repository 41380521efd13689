/* gpu_eltwise.c - parameters and names of eltwise.cu instantiations
 * (gpu_eltwise.h gives the contract). */
#include "gpu_eltwise.h"

#include <inttypes.h>
#include <stdio.h>

#include "cg_templates.h"

static const struct {
  const char *name, *define;
  int nin, nout;
} OPS[GPU_ELT_OP_COUNT] = {
    [GPU_ELT_RELU_FWD] = {"relu", "NETC_OP_RELU_FWD", 1, 1},
    [GPU_ELT_RELU_BWD] = {"relu_bwd", "NETC_OP_RELU_BWD", 2, 1},
    [GPU_ELT_ADD_FWD] = {"add", "NETC_OP_ADD_FWD", 2, 1},
    [GPU_ELT_ADD_BWD] = {"add_bwd", "NETC_OP_ADD_BWD", 1, 2},
    [GPU_ELT_ADD_RELU_FWD] = {"add_relu", "NETC_OP_ADD_RELU_FWD", 2, 1},
    [GPU_ELT_ADD_RELU_BWD] = {"add_relu_bwd", "NETC_OP_ADD_RELU_BWD", 2, 1},
};

static int op_ok(GpuEltOp op) { return op >= 0 && op < GPU_ELT_OP_COUNT; }

const char *gpu_eltwise_op_name(GpuEltOp op) { return op_ok(op) ? OPS[op].name : "?"; }
const char *gpu_dtype_name(GpuDtype dt) { return dt == GPU_F16 ? "f16" : "f32"; }
size_t gpu_dtype_size(GpuDtype dt) { return dt == GPU_F16 ? 2 : 4; }
int gpu_eltwise_nin(GpuEltOp op) { return op_ok(op) ? OPS[op].nin : 0; }
int gpu_eltwise_nout(GpuEltOp op) { return op_ok(op) ? OPS[op].nout : 0; }
int gpu_eltwise_vec(GpuDtype dt) { return (int)(16 / gpu_dtype_size(dt)); }

CgStatus gpu_eltwise_source(int index, GpuEltOp op, GpuDtype dt, int64_t n, int vec, char *name, size_t namelen,
                            char **src, char *err, size_t errlen) {
  const char *text = cg_templates_text("eltwise.cu");
  if (!op_ok(op) || (dt != GPU_F32 && dt != GPU_F16) || n < 0 || index < 0 || !name || namelen < 2 || !text) {
    snprintf(err, errlen, "gpu_eltwise_source: invalid argument%s", text ? "" : " (eltwise.cu not embedded)");
    return CG_EARG;
  }
  if (vec == 0) vec = gpu_eltwise_vec(dt);
  int len = snprintf(name, namelen, "k%d_%s_%s", index, OPS[op].name, gpu_dtype_name(dt));
  if (len < 0 || (size_t)len >= namelen) {
    snprintf(err, errlen, "gpu_eltwise_source: name buffer too small");
    return CG_EARG;
  }
  char vecs[16], ns[32];
  snprintf(vecs, sizeof vecs, "%d", vec);
  snprintf(ns, sizeof ns, "%" PRId64 "LL", n);
  const CgDefine defs[] = {
      {"NETC_KERNEL_NAME", name}, {OPS[op].define, "1"}, {dt == GPU_F16 ? "NETC_DTYPE_F16" : "NETC_DTYPE_F32", "1"},
      {"NETC_VEC", vecs},         {"NETC_N", ns},
  };
  return cg_nvrtc_instantiate("codegen_templates/eltwise.cu", text, defs, (int)(sizeof defs / sizeof defs[0]), src, err,
                              errlen);
}

unsigned gpu_eltwise_grid(int64_t n, int vec, unsigned max_blocks) {
  int64_t v = vec > 0 ? vec : 1, units = n / v;
  if (units < n % v) units = n % v; /* the tail needs n % v threads */
  int64_t blocks = (units + GPU_ELTWISE_BLOCK - 1) / GPU_ELTWISE_BLOCK;
  if (blocks < 1) blocks = 1;
  if (blocks > (int64_t)max_blocks) blocks = max_blocks;
  return (unsigned)blocks;
}
