/* test_model_gpu.c - a model.so on the GPU: test_model_gpu MODEL.so
 *
 * MODEL.so is smallcnn at batch 8, fp32, written at build time by netc
 * (tests/io/model/CMakeLists.txt).  Both of its graphs are opened with
 * rt_model_open and given to the GPU executor with their embedded programs:
 * the executor must take the embedded cubins (rt_gpu_prebuilt_hit, so no
 * NVRTC call), and one step of each, from the same seeded parameters,
 * state and inputs, must agree with the CPU executor on the loss, the
 * logits and every parameter and state value to 1e-4 relative to each
 * tensor's largest magnitude (fp32; cuDNN picks its own algorithms, as in
 * tests/gpu/exec).  Then the fallback: the same model told that its cubins
 * were made for another arch (sm_80) must not use them -- the executor
 * JIT-compiles the embedded source with NVRTC -- and must agree with the
 * CPU executor the same way.  Without a GPU the model is still opened and
 * checked, then the test exits 77. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gexec.h"
#include "rt_cpu.h"
#include "rt_model.h"

static int compared(const IrGraph *g, int v) {
  for (int k = 0; k < g->noutput; k++)
    if (g->output[k] == v) return 1;
  return g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE;
}

static void run_graph(const char *what, const IrGraph *g, int64_t batch, const CgProgram *prog, const char *arch,
                      int expect_prebuilt) {
  char err[4096];
  RtGpuOpts o = {.device = 0, .prebuilt = prog, .prebuilt_arch = arch};
  RtGpu *gpu = NULL;
  RtCpu *cpu = NULL;
  void **init = NULL;
  if (rt_gpu_new(g, batch, &o, &gpu, err, sizeof err)) {
    CHECK(0, "%s: rt_gpu_new: %s", what, err);
    return;
  }
  if (expect_prebuilt)
    CHECK(rt_gpu_prebuilt_hit(gpu), "%s: the executor took the model's cubin (no NVRTC)", what);
  else
    CHECK(!rt_gpu_prebuilt_hit(gpu), "%s: a cubin for %s is not used on this GPU (JIT from the source)", what, arch);
  if (rt_cpu_new(g, batch, &cpu, err, sizeof err)) {
    CHECK(0, "%s: rt_cpu_new: %s", what, err);
    goto done;
  }
  init = gexec_values(g, batch, 11, 8.0f);
  CHECK(init != NULL, "values");
  if (!init) goto done;
  for (int v = 0; v < g->nval; v++)
    if (init[v]) memcpy(rt_cpu_data(cpu, v), init[v], (size_t)rt_cpu_numel(cpu, v) * (rt_cpu_is_int(cpu, v) ? 8 : 4));
  int ok = gexec_write_all(gpu, g, init) == 0;
  CHECK(ok, "%s: seeding the GPU", what);
  if (!ok) goto done;
  ok = !rt_cpu_run(cpu, err, sizeof err);
  CHECK(ok, "%s: rt_cpu_run: %s", what, err);
  if (!ok) goto done;
  ok = !rt_gpu_run(gpu, err, sizeof err) && !rt_gpu_sync(gpu, err, sizeof err);
  CHECK(ok, "%s: rt_gpu_run: %s", what, err);
  if (!ok) goto done;
  double worst = 0;
  int n = 0;
  for (int v = 0; v < g->nval; v++) {
    if (!compared(g, v) || gexec_is_int(g->val[v].type.dtype)) continue;
    int64_t count = rt_cpu_numel(cpu, v);
    float *got = malloc((size_t)(count + 1) * sizeof *got);
    ok = got && !rt_gpu_read(gpu, v, got, err, sizeof err);
    CHECK(ok, "%s: reading %%%d: %s", what, v, got ? err : "out of memory");
    if (ok) {
      const char *name = g->val[v].name ? g->val[v].name : "output";
      double e = gexec_compare(name, got, rt_cpu_data(cpu, v), count, 1e-4);
      CHECK(e <= 1e-4, "%s: %s differs from the CPU by %.3g", what, name, e);
      if (e > worst) worst = e;
      n++;
    }
    free(got);
  }
  printf("%-9s prebuilt cubin %s, %d tensors compared, worst relative difference %.3g\n", what,
         rt_gpu_prebuilt_hit(gpu) ? "taken" : "NOT taken", n, worst);
done:
  gexec_values_free(g, init);
  rt_cpu_free(cpu);
  rt_gpu_free(gpu);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_model_gpu MODEL.so\n");
    return 2;
  }
  Arena a;
  arena_init(&a);
  RtModel m;
  char err[4096];
  int ok = rt_model_open(argv[1], &a, &m, err, sizeof err) == 0;
  CHECK(ok, "rt_model_open: %s", err);
  if (!ok) {
    arena_free(&a);
    return check_report();
  }
  CHECK(m.batch == 8 && strcmp(m.arch, "sm_90") == 0, "batch 8 for sm_90 (got %lld, '%s')", (long long)m.batch, m.arch);
  /* several programs, so the executor loads several modules */
  CHECK(m.train_prog.npart > 1 && m.infer_prog.npart > 1, "both graphs have several kernel programs (%d, %d)",
        m.train_prog.npart, m.infer_prog.npart);
  for (int k = 0; k < m.train_prog.npart; k++) CHECK(m.train_prog.cubin[k], "training program %d has a cubin", k);
  for (int k = 0; k < m.infer_prog.npart; k++) CHECK(m.infer_prog.cubin[k], "inference program %d has a cubin", k);
  if (!gexec_have_gpu()) {
    rt_model_close(&m);
    arena_free(&a);
    return check_nfail ? check_report() : 77;
  }
  run_graph("training", m.train, m.batch, &m.train_prog, m.arch, 1);
  run_graph("inference", m.infer, m.batch, &m.infer_prog, m.arch, 1);
  run_graph("training, cubin for sm_80", m.train, m.batch, &m.train_prog, "sm_80", 0);
  rt_model_close(&m);
  arena_free(&a);
  return check_report();
}
