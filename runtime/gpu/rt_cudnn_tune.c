/* rt_cudnn_tune.c - engine choice for a graph: cuDNN's heuristics (mode
 * A, then the fallback list), the configurations whose numerics keep the
 * contract (and fit the workspace cap, and are deterministic when asked),
 * timing of the first h->candidates (all: 0) when tuning, and the winners
 * remembered by (mode, position) under the description's text, in memory
 * and in the tuning cache file (rt_cudnn_tune_cache). */
#include "rt_cudnn_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The heuristics' engine configurations for the graph, best first; *cfgs
 * is malloc'd, each element a descriptor the caller destroys. */
static RtCudaStatus heuristics(RtCudnn *h, RtConvPlan *p, cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t **cfgs,
                               int64_t *count, char *err, size_t errlen) {
  cudnnBackendDescriptor_t heur = NULL;
  *cfgs = NULL;
  *count = 0;
  int64_t n = 0;
  RtCudaStatus s;
  if ((s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), p->what)) ||
      (s = SET(h, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->graph, p->what)) ||
      (s = SET(h, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, p->what)) ||
      (s = DNN(h, BackendFinalize, (heur), p->what)) ||
      (s = DNN(h, BackendGetAttribute,
               (heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL), p->what)))
    goto done;
  if (n <= 0) goto done;
  cudnnBackendDescriptor_t *c = calloc((size_t)n, sizeof *c);
  if (!c) {
    rt_errf(err, errlen, "rt_cudnn_conv_plan: out of host memory (%s)", p->what);
    s = RT_CUDA_ENOMEM;
    goto done;
  }
  int64_t got = 0;
  for (int64_t i = 0; i < n && !s; i++)
    s = DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c[i]), p->what);
  if (!s)
    s = DNN(h, BackendGetAttribute, (heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, c),
            p->what);
  if (s) {
    for (int64_t i = 0; i < n; i++) destroy(h->dnn, &c[i]);
    free(c);
    goto done;
  }
  for (int64_t i = got; i < n; i++) destroy(h->dnn, &c[i]);
  *cfgs = c;
  *count = got < n ? got : n;
done:
  destroy(h->dnn, &heur);
  return s;
}

/* Whether the configuration's engine keeps the contract (see the top).
 * When its notes cannot be read it is taken: the accuracy tests would
 * show a TF32 engine. */
static int engine_acceptable(RtCudnn *h, cudnnBackendDescriptor_t cfg, IrDtype dtype, int tf32) {
  int determ = h->deterministic;
  cudnnBackendDescriptor_t eng = NULL;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0, one = 0;
  int ok = 1;
  if (h->dnn->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return 1;
  if (h->dnn->BackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &eng) ==
          CUDNN_STATUS_SUCCESS &&
      h->dnn->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                  CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
      /* FP8's tensor cores accumulate their products more narrowly than FP32 on Hopper: its engines are taken
       * with that note (the precision FP8 asks for), every other dtype's refused */
      if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION && dtype != IR_DT_F8E4M3) ok = 0;
      if (determ && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ok = 0;
      if (dtype == IR_DT_F32 && !tf32 &&
          (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
        ok = 0;
    }
  }
  destroy(h->dnn, &eng);
  return ok;
}

/* The configuration's engine as text for the verbose tuning lines: its
 * global index and numerical notes. */
static void engine_text(RtCudnn *h, cudnnBackendDescriptor_t cfg, char *out, size_t len) {
  cudnnBackendDescriptor_t eng = NULL;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  static const char *NOTE[] = {"tensor-core", "down-convert", "reduced-precision", "fft",           "nondeterministic",
                               "winograd",    "winograd4x4",  "winograd6x6",       "winograd13x13", "strict-nan"};
  int64_t n = 0, one = 0, gidx = -1;
  snprintf(out, len, "engine ?");
  if (h->dnn->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return;
  if (h->dnn->BackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &eng) ==
      CUDNN_STATUS_SUCCESS) {
    h->dnn->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &one, &gidx);
    size_t at = (size_t)snprintf(out, len, "engine %lld", (long long)gidx);
    if (h->dnn->BackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                    CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, " %s",
                               (size_t)notes[i] < sizeof NOTE / sizeof NOTE[0] ? NOTE[notes[i]] : "note?");
  }
  destroy(h->dnn, &eng);
}

/* The *_HANDLE attributes: deprecated in the 9.19 header, needed by 9.14. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/* A finalized execution plan for cfg, or NULL with err set. */
static cudnnBackendDescriptor_t make_plan(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t cfg, int64_t *workspace,
                                          char *err, size_t errlen) {
  cudnnBackendDescriptor_t plan = NULL;
  int64_t n = 0;
  if (DNN(h, BackendCreateDescriptor, (CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), p->what) ||
      SET(h, plan, PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h->handle, p->what) ||
      SET(h, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, p->what) ||
      DNN(h, BackendFinalize, (plan), p->what) ||
      DNN(h, BackendGetAttribute, (plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, workspace),
          p->what)) {
    destroy(h->dnn, &plan);
    return NULL;
  }
  return plan;
}

/* Device buffers for timing candidates (contents do not matter). */
typedef struct TuneBufs {
  RtConvIo io;
  size_t ws_bytes;
} TuneBufs;

static void tune_bufs_free(const RtCudaApi *cu, TuneBufs *b) {
  CUdeviceptr *all[] = {&b->io.x,        &b->io.w,         &b->io.y,        &b->io.stats,     &b->io.sb,
                        &b->io.esb,      &b->io.residual,  &b->io.mask,     &b->io.workspace, &b->io.bn.z,
                        &b->io.bn.mean,  &b->io.bn.invstd, &b->io.bn.gamma, &b->io.bn.beta,   &b->io.bn.dgamma,
                        &b->io.bn.dbeta, &b->io.bn.abc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (*all[i]) cu->MemFree(*all[i]);
  memset(b, 0, sizeof *b);
}

/* Milliseconds per run of a tuning candidate (TUNE_RUNS after one
 * warm-up), its workspace grown in b as needed; negative when it fails. */
static float time_plan(RtCudnn *h, RtConvPlan *p, cudnnBackendDescriptor_t plan, int64_t ws, TuneBufs *b, char *err,
                       size_t errlen) {
  const RtCudaApi *cu = h->cu;
  if ((size_t)ws > b->ws_bytes) {
    if (b->io.workspace) cu->MemFree(b->io.workspace);
    b->io.workspace = 0;
    b->ws_bytes = 0;
    if (RT_CU(cu, MemAlloc, (&b->io.workspace, (size_t)ws), p->what, err, errlen)) return -1;
    b->ws_bytes = (size_t)ws;
  }
  /* dbn's outputs zeroed as in a real run (an engine may accumulate into them) */
  return rt_cudnn_exec_time(h, p, plan, &b->io, TUNE_RUNS, p->key.dbn, err, errlen);
}

/* dbn's tuning buffers: z, then the per-channel inputs (zeroed: timing
 * needs no meaningful values, only finite ones) and outputs. */
static RtCudaStatus tune_alloc_bn(RtCudnn *h, const RtConvPlan *p, RtConvIo *io, char *err, size_t errlen) {
  const CgConvDesc *d = &p->key;
  const RtCudaApi *cu = h->cu;
  size_t zb = dtype_bytes(d->dtype) * (size_t)d->n * d->h * d->w * d->c, cb = sizeof(float) * (size_t)d->c;
  CUdeviceptr *bufs[] = {&io->bn.z,    &io->bn.mean,   &io->bn.invstd, &io->bn.gamma,
                         &io->bn.beta, &io->bn.dgamma, &io->bn.dbeta,  &io->bn.abc};
  size_t bytes[] = {zb, cb, cb, cb, cb, cb, cb, 3 * cb};
  RtCudaStatus s;
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if ((s = RT_CU(cu, MemAlloc, (bufs[i], bytes[i]), p->what, err, errlen)) ||
        (s = RT_CU(cu, MemsetD8Async, (*bufs[i], 0, bytes[i], h->stream), p->what, err, errlen)))
      return s;
  return RT_CUDA_OK;
}

/* Picks p->plan/p->cfg from cfgs (taking ownership of the chosen one):
 * the first acceptable configuration that finalizes or, when tuning, the
 * fastest of the first h->candidates that do (0: of all). */
static RtCudaStatus choose(RtCudnn *h, RtConvPlan *p, int mode, cudnnBackendDescriptor_t *cfgs, int64_t n, TuneBufs *b,
                           int *acceptable, char *err, size_t errlen) {
  float best_ms = 0;
  int tried = 0;
  int limit = !h->tune ? 1 : h->candidates > 0 ? h->candidates : INT32_MAX;
  for (int64_t i = 0; i < n && tried < limit; i++) {
    char eng[160] = "";
    if (h->verbose && h->tune) engine_text(h, cfgs[i], eng, sizeof eng);
    if (!engine_acceptable(h, cfgs[i], p->key.dtype, p->key.tf32)) {
      if (h->verbose && h->tune)
        fprintf(stderr, "netc: tune %s: mode %d #%lld %s: numerics refused\n", p->what, mode, (long long)i, eng);
      continue;
    }
    ++*acceptable;
    int64_t ws = 0;
    cudnnBackendDescriptor_t plan = make_plan(h, p, cfgs[i], &ws, err, errlen);
    if (!plan) continue;
    if (h->ws_cap > 0 && ws > h->ws_cap) {
      h->capped++;
      destroy(h->dnn, &plan);
      continue;
    }
    tried++;
    float ms = 0;
    if (h->tune) {
      const CgConvDesc *d = &p->key;
      size_t eb = dtype_bytes(d->dtype), yb = dtype_bytes(d->ydtype);
      const RtCudaApi *cu = h->cu;
      RtConvIo *io = &b->io;
      if (!io->x &&
          (RT_CU(cu, MemAlloc, (&io->x, eb * (size_t)d->n * d->h * d->w * d->c), p->what, err, errlen) ||
           RT_CU(cu, MemAlloc, (&io->w, eb * (size_t)d->k * d->r * d->s * (d->c / d->groups)), p->what, err, errlen) ||
           RT_CU(cu, MemAlloc, (&io->y, yb * (size_t)d->n * d->ho * d->wo * d->k), p->what, err, errlen) ||
           (d->genstats && RT_CU(cu, MemAlloc, (&io->stats, 2 * sizeof(float) * (size_t)d->k), p->what, err, errlen)) ||
           (d->prologue &&
            (RT_CU(cu, MemAlloc, (&io->sb, 2 * eb * (size_t)d->c), p->what, err, errlen) ||
             RT_CU(cu, MemsetD8Async, (io->sb, 0, 2 * eb * (size_t)d->c, h->stream), p->what, err, errlen))) ||
           ((d->epilogue & CG_EPI_AFFINE) &&
            (RT_CU(cu, MemAlloc, (&io->esb, (size_t)cg_conv_esb_floats(d) * sizeof(float) * (size_t)d->k), p->what, err,
                   errlen) ||
             RT_CU(cu, MemsetD8Async,
                   (io->esb, 0, (size_t)cg_conv_esb_floats(d) * sizeof(float) * (size_t)d->k, h->stream), p->what, err,
                   errlen))) ||
           ((d->epilogue & CG_EPI_RESIDUAL) &&
            RT_CU(cu, MemAlloc,
                  (&io->residual, d->kind == CG_CONV_FWD ? dtype_bytes(d->rdtype) * (size_t)d->n * d->ho * d->wo * d->k
                                                         : eb * (size_t)d->n * d->h * d->w * d->c),
                  p->what, err, errlen)) ||
           ((d->epilogue & CG_EPI_DRELU) &&
            RT_CU(cu, MemAlloc, (&io->mask, eb * (size_t)d->n * d->h * d->w * d->c), p->what, err, errlen)) ||
           (d->dbn && tune_alloc_bn(h, p, io, err, errlen)))) {
        destroy(h->dnn, &plan);
        return RT_CUDA_ECALL;
      }
      ms = time_plan(h, p, plan, ws, b, err, errlen);
      if (h->verbose)
        fprintf(stderr, "netc: tune %s: mode %d #%lld %s: workspace %.1f MiB, %.4f ms\n", p->what, mode, (long long)i,
                eng, (double)ws / 1048576.0, (double)ms);
      if (ms < 0) {
        destroy(h->dnn, &plan);
        continue;
      }
    }
    if (!p->plan || ms < best_ms) {
      destroy(h->dnn, &p->plan);
      destroy(h->dnn, &p->cfg);
      p->plan = plan;
      p->cfg = cfgs[i];
      cfgs[i] = NULL;
      p->workspace = ws;
      p->mode = mode, p->index = (int)i;
      best_ms = ms;
    } else {
      destroy(h->dnn, &plan);
    }
  }
  return RT_CUDA_OK;
}

static const cudnnBackendHeurMode_t MODES[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};

static TuneEntry *tune_find(RtCudnn *h, const char *what) {
  for (int i = 0; i < h->nentries; i++)
    if (!strcmp(h->entries[i].what, what)) return &h->entries[i];
  return NULL;
}

static int tune_add(RtCudnn *h, const char *what, int mode, int index) {
  TuneEntry *e = tune_find(h, what);
  if (!e) {
    if (h->nentries == h->entries_cap) {
      int cap = h->entries_cap ? 2 * h->entries_cap : 32;
      TuneEntry *grown = realloc(h->entries, sizeof *grown * (size_t)cap);
      if (!grown) return -1;
      h->entries = grown, h->entries_cap = cap;
    }
    e = &h->entries[h->nentries++];
    snprintf(e->what, sizeof e->what, "%s", what);
  }
  e->mode = mode, e->index = index;
  return 0;
}

/* The remembered winner for p, when it still finalizes: 1 taken, 0 not. */
static int take_remembered(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  const TuneEntry *e = tune_find(h, p->what);
  if (!e || e->mode < 0 || e->mode > 1) return 0;
  cudnnBackendDescriptor_t *cfgs = NULL;
  int64_t n = 0;
  if (heuristics(h, p, MODES[e->mode], &cfgs, &n, err, errlen)) return 0;
  if (e->index < n && engine_acceptable(h, cfgs[e->index], p->key.dtype, p->key.tf32)) {
    int64_t ws = 0;
    cudnnBackendDescriptor_t plan = make_plan(h, p, cfgs[e->index], &ws, err, errlen);
    if (plan) {
      p->plan = plan, p->cfg = cfgs[e->index], cfgs[e->index] = NULL;
      p->workspace = ws, p->mode = e->mode, p->index = e->index;
    }
  }
  for (int64_t i = 0; i < n; i++) destroy(h->dnn, &cfgs[i]);
  free(cfgs);
  return p->plan != NULL;
}

/* Rewrites the tuning file with every remembered winner (temporary file,
 * then rename: a reader never sees half a file). */
static void tune_save(RtCudnn *h) {
  if (!h->tune_path) return;
  size_t len = strlen(h->tune_path) + 16;
  char *tmp = malloc(len);
  if (!tmp) return;
  snprintf(tmp, len, "%s.tmp", h->tune_path);
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL;
  if (f) {
    size_t version = h->dnn->GetVersion();
    fprintf(f, "# netc cuDNN tuning cache: cudnn-version heuristics-mode position description\n");
    for (int i = 0; i < h->nentries; i++)
      fprintf(f, "%zu %d %d %s\n", version, h->entries[i].mode, h->entries[i].index, h->entries[i].what);
    ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
  }
  if (ok) ok = rename(tmp, h->tune_path) == 0;
  if (!ok) remove(tmp);
  free(tmp);
}

RtCudaStatus rt_cudnn_tune_cache(RtCudnn *h, const char *path, char *err, size_t errlen) {
  if (!h || !path) {
    rt_errf(err, errlen, "rt_cudnn_tune_cache: NULL argument");
    return RT_CUDA_EARG;
  }
  if (!h->tune) return RT_CUDA_OK;
  free(h->tune_path);
  if (!(h->tune_path = strdup(path))) {
    rt_errf(err, errlen, "rt_cudnn_tune_cache: out of host memory");
    return RT_CUDA_ENOMEM;
  }
  FILE *f = fopen(path, "r");
  if (!f) return RT_CUDA_OK;
  char line[512];
  size_t version = h->dnn->GetVersion();
  while (fgets(line, sizeof line, f)) {
    size_t v;
    int mode, index, at = 0;
    if (line[0] == '#' || sscanf(line, "%zu %d %d %n", &v, &mode, &index, &at) != 3 || !at || v != version) continue;
    line[strcspn(line, "\n")] = 0;
    if (mode >= 0 && mode <= 1 && index >= 0 && tune_add(h, line + at, mode, index)) break;
  }
  fclose(f);
  return RT_CUDA_OK;
}

/* p->plan for p's graph: remembered, tuned or heuristics' first. */
RtCudaStatus rt_cudnn_tune_select(RtCudnn *h, RtConvPlan *p, char *err, size_t errlen) {
  RtCudaStatus s = RT_CUDA_OK;
  if (h->tune && take_remembered(h, p, err, errlen)) {
    h->cached++;
    return RT_CUDA_OK;
  }
  TuneBufs b;
  memset(&b, 0, sizeof b);
  int64_t total = 0;
  int acceptable = 0;
  RtCudaStatus heur = RT_CUDA_OK;
  h->capped = 0;
  int64_t cap = h->ws_cap;
  for (size_t m = 0; m < 2 && !p->plan && !s; m++) {
    /* nothing within the workspace cap: the modes again without it */
    if (m == 1 && !p->plan && h->capped && h->ws_cap) h->ws_cap = 0, m = 0;
    cudnnBackendDescriptor_t *cfgs = NULL;
    int64_t n = 0;
    /* a mode that fails (not every mode covers every graph) leaves the next */
    if ((heur = heuristics(h, p, MODES[m], &cfgs, &n, err, errlen))) continue;
    total += n;
    s = choose(h, p, (int)m, cfgs, n, &b, &acceptable, err, errlen);
    for (int64_t i = 0; i < n; i++) destroy(h->dnn, &cfgs[i]);
    free(cfgs);
  }
  h->ws_cap = cap;
  tune_bufs_free(h->cu, &b);
  if (s) return s;
  if (!p->plan) {
    if (!total && heur) return heur;
    if (!total)
      rt_errf(err, errlen, "%s:%d: cuDNN heuristics gave no engine configuration (%s)", __FILE__, __LINE__, p->what);
    else if (!acceptable)
      rt_errf(err, errlen,
              "%s:%d: none of cuDNN's %lld engine configurations keeps FP32 numerics (no TF32 on f32, FP32 "
              "reductions)%s (%s)",
              __FILE__, __LINE__, (long long)total, h->deterministic ? " and is deterministic" : "", p->what);
    /* otherwise err holds the last configuration's failure */
    return RT_CUDA_ECALL;
  }
  if (!h->tune) {
    h->heuristic++;
  } else {
    h->timed++;
    if (!tune_add(h, p->what, p->mode, p->index)) tune_save(h);
  }
  return RT_CUDA_OK;
}
