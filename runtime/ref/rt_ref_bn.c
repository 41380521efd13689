/* rt_ref_bn.c - batch normalization over (N, H, W) per channel, PyTorch's
 * BatchNorm2d: training forward (batch statistics, biased variance to
 * normalize, unbiased variance into the running average), inference
 * forward (running statistics) and backward (dx, dgamma, dbeta).
 * Sums run in double per channel, so the result does not drift with N*H*W;
 * both activation layouts are walked in memory order. */
#include <math.h>
#include <stdlib.h>

#include "rt_ref.h"

static int bn_shape_ok(const RtRefAct *xs) {
  return xs && xs->N > 0 && xs->C > 0 && xs->H > 0 && xs->W > 0 &&
         (xs->layout == RT_REF_NCHW || xs->layout == RT_REF_NHWC);
}

/* sum[c] = per-channel sum of x (mean == NULL) or of (x - mean)^2. */
static void channel_sums(const RtRefAct *xs, const float *x, const double *mean, double *sum) {
  int C = xs->C;
  int64_t hw = (int64_t)xs->H * xs->W;
  for (int c = 0; c < C; c++) sum[c] = 0;
  if (xs->layout == RT_REF_NCHW) {
    for (int n = 0; n < xs->N; n++)
      for (int c = 0; c < C; c++) {
        const float *xp = x + ((int64_t)n * C + c) * hw;
        double acc = 0, m = mean ? mean[c] : 0.0;
        if (mean)
          for (int64_t i = 0; i < hw; i++) acc += (xp[i] - m) * (xp[i] - m);
        else
          for (int64_t i = 0; i < hw; i++) acc += xp[i];
        sum[c] += acc;
      }
  } else {
    int64_t rows = (int64_t)xs->N * hw;
    for (int64_t i = 0; i < rows; i++) {
      const float *xr = x + i * C;
      if (mean)
        for (int c = 0; c < C; c++) sum[c] += (xr[c] - mean[c]) * (xr[c] - mean[c]);
      else
        for (int c = 0; c < C; c++) sum[c] += xr[c];
    }
  }
}

/* y = (x - m[c]) * a[c] + b[c]; subtracting the mean first keeps a large
 * mean from cancelling away the precision of a small spread. */
static void channel_affine(const RtRefAct *xs, const float *x, const float *m, const float *a, const float *b,
                           float *y) {
  int C = xs->C;
  int64_t hw = (int64_t)xs->H * xs->W;
  if (xs->layout == RT_REF_NCHW) {
    for (int n = 0; n < xs->N; n++)
      for (int c = 0; c < C; c++) {
        int64_t o = ((int64_t)n * C + c) * hw;
        for (int64_t i = 0; i < hw; i++) y[o + i] = (x[o + i] - m[c]) * a[c] + b[c];
      }
  } else {
    int64_t rows = (int64_t)xs->N * hw;
    for (int64_t i = 0; i < rows; i++)
      for (int c = 0; c < C; c++) y[i * C + c] = (x[i * C + c] - m[c]) * a[c] + b[c];
  }
}

/* sum[0..n) summed over sync's processes (nothing without one), and, with
 * M, this one's count summed with them into *M: a process whose batch
 * holds another number of values still gets the true total. */
static int sync_sum(const RtRefSync *sync, double *sum, int n, int64_t *M) {
  if (!sync) return RT_REF_OK;
  int m = n + (M != NULL);
  double *v = malloc(sizeof(double) * (size_t)m);
  if (!v) return RT_REF_ENOMEM; /* the others then wait for this one until the run ends */
  for (int i = 0; i < n; i++) v[i] = sum[i];
  if (M) v[n] = (double)*M;
  int bad = !sync->sum || sync->sum(sync->user, v, m);
  for (int i = 0; !bad && i < n; i++) sum[i] = v[i];
  if (!bad && M) *M = (int64_t)v[n];
  free(v);
  return bad ? RT_REF_ESYNC : RT_REF_OK;
}

/* Batch mean and 1/sqrt(var + eps) per channel into st[0..C-1] and
 * st[C..2C-1] (double), over every process's batch with sync; saves
 * and running averages as the header says. */
static int batch_stats(const RtRefAct *xs, const RtRefSync *sync, const float *x, float *running_mean,
                       float *running_var, float momentum, float eps, float *save_mean, float *save_invstd,
                       double *st) {
  int C = xs->C;
  int64_t M = (int64_t)xs->N * xs->H * xs->W;
  double *mean = st, *invstd = st + C, *var = invstd;
  channel_sums(xs, x, NULL, mean);
  int r = sync_sum(sync, mean, C, &M);
  if (r) return r;
  if (M < 2) return RT_REF_ESHAPE; /* no unbiased variance; with sync every process's total, so all agree */
  for (int c = 0; c < C; c++) mean[c] /= (double)M;
  channel_sums(xs, x, mean, var);
  if ((r = sync_sum(sync, var, C, NULL))) return r; /* the count came with the means */
  for (int c = 0; c < C; c++) {
    double v = var[c] / (double)M;
    if (running_var) running_var[c] = (1 - momentum) * running_var[c] + momentum * (float)(var[c] / (double)(M - 1));
    invstd[c] = 1.0 / sqrt(v + eps);
    if (save_mean) save_mean[c] = (float)mean[c];
    if (save_invstd) save_invstd[c] = (float)invstd[c];
    if (running_mean) running_mean[c] = (1 - momentum) * running_mean[c] + momentum * (float)mean[c];
  }
  return RT_REF_OK;
}

int rt_ref_batchnorm_fwd_train(const RtRefAct *xs, const float *x, const float *gamma, const float *beta, float *y,
                               float *running_mean, float *running_var, float momentum, float eps, float *save_mean,
                               float *save_invstd) {
  return rt_ref_batchnorm_fwd_train_sync(xs, NULL, x, gamma, beta, y, running_mean, running_var, momentum, eps,
                                         save_mean, save_invstd);
}

int rt_ref_batchnorm_fwd_train_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, const float *gamma,
                                    const float *beta, float *y, float *running_mean, float *running_var,
                                    float momentum, float eps, float *save_mean, float *save_invstd) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !gamma || !beta || !y || !(eps >= 0)) return RT_REF_EARG;
  int C = xs->C;
  double *st = malloc(sizeof(double) * 2 * (size_t)C);
  float *ab = malloc(sizeof(float) * 3 * (size_t)C);
  if (!st || !ab) {
    free(st);
    free(ab);
    return RT_REF_ENOMEM;
  }
  int r = batch_stats(xs, sync, x, running_mean, running_var, momentum, eps, save_mean, save_invstd, st);
  if (r) {
    free(st);
    free(ab);
    return r;
  }
  /* the coefficient from invstd as saved (rounded to f32), as saved_scale
   * makes it: a backward's relu mask, or a max pool recomputing y from z,
   * sees the forward's values exactly */
  for (int c = 0; c < C; c++) {
    ab[c] = (float)(gamma[c] * (double)(float)st[C + c]);
    ab[C + c] = beta[c];
    ab[2 * C + c] = (float)st[c];
  }
  channel_affine(xs, x, ab + 2 * C, ab, ab + C, y);
  free(st);
  free(ab);
  return RT_REF_OK;
}

int rt_ref_batchnorm_stats(const RtRefAct *xs, const float *x, float *running_mean, float *running_var, float momentum,
                           float eps, float *save_mean, float *save_invstd) {
  return rt_ref_batchnorm_stats_sync(xs, NULL, x, running_mean, running_var, momentum, eps, save_mean, save_invstd);
}

int rt_ref_batchnorm_stats_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, float *running_mean,
                                float *running_var, float momentum, float eps, float *save_mean, float *save_invstd) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !save_mean || !save_invstd || !(eps >= 0)) return RT_REF_EARG;
  double *st = malloc(sizeof(double) * 2 * (size_t)xs->C);
  if (!st) return RT_REF_ENOMEM;
  int r = batch_stats(xs, sync, x, running_mean, running_var, momentum, eps, save_mean, save_invstd, st);
  free(st);
  return r;
}

int rt_ref_bn_scale_bias(int C, const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
                         float *sb) {
  if (C < 1) return RT_REF_ESHAPE;
  if (!gamma || !beta || !save_mean || !save_invstd || !sb) return RT_REF_EARG;
  for (int c = 0; c < C; c++) {
    float scale = gamma[c] * save_invstd[c];
    float shift = save_mean[c] * scale;
    sb[c] = scale;
    sb[C + c] = beta[c] - shift;
  }
  return RT_REF_OK;
}

int rt_ref_bn_prologue(const RtRefAct *xs, const float *x, const float *sb, float *y) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !sb || !y) return RT_REF_EARG;
  int C = xs->C;
  int64_t hw = (int64_t)xs->H * xs->W;
  const float *s = sb, *b = sb + C;
  if (xs->layout == RT_REF_NCHW) {
    for (int64_t o = 0, n = 0; n < xs->N; n++)
      for (int c = 0; c < C; c++)
        for (int64_t p = 0; p < hw; p++, o++) {
          float v = x[o] * s[c] + b[c];
          y[o] = v <= 0.0f ? 0.0f : v; /* NaN stays NaN (rt_ref_eltwise.c) */
        }
  } else {
    for (int64_t o = 0, i = 0; i < xs->N * hw; i++)
      for (int c = 0; c < C; c++, o++) {
        float v = x[o] * s[c] + b[c];
        y[o] = v <= 0.0f ? 0.0f : v; /* NaN stays NaN (rt_ref_eltwise.c) */
      }
  }
  return RT_REF_OK;
}

int rt_ref_batchnorm_fwd_infer(const RtRefAct *xs, const float *x, const float *gamma, const float *beta,
                               const float *running_mean, const float *running_var, float eps, float *y) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !gamma || !beta || !running_mean || !running_var || !y || !(eps >= 0)) return RT_REF_EARG;
  int C = xs->C;
  float *ab = malloc(sizeof(float) * 2 * (size_t)C);
  if (!ab) return RT_REF_ENOMEM;
  for (int c = 0; c < C; c++) {
    double invstd = 1.0 / sqrt((double)running_var[c] + eps);
    ab[c] = (float)(gamma[c] * invstd);
    ab[C + c] = beta[c];
  }
  channel_affine(xs, x, running_mean, ab, ab + C, y);
  free(ab);
  return RT_REF_OK;
}

int rt_ref_batchnorm_bwd(const RtRefAct *xs, const float *x, const float *dy, const float *gamma,
                         const float *save_mean, const float *save_invstd, float *dx, float *dgamma, float *dbeta) {
  return rt_ref_batchnorm_bwd_sync(xs, NULL, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

int rt_ref_batchnorm_bwd_sync(const RtRefAct *xs, const RtRefSync *sync, const float *x, const float *dy,
                              const float *gamma, const float *save_mean, const float *save_invstd, float *dx,
                              float *dgamma, float *dbeta) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !dy || !gamma || !save_mean || !save_invstd) return RT_REF_EARG;
  int C = xs->C;
  int64_t hw = (int64_t)xs->H * xs->W, M = xs->N * hw;
  double *sdy = calloc(2 * (size_t)C, sizeof(double));
  float *coef = malloc(sizeof(float) * 3 * (size_t)C);
  if (!sdy || !coef) {
    free(sdy);
    free(coef);
    return RT_REF_ENOMEM;
  }
  double *sdyx = sdy + C; /* sum dy * xhat */
  if (xs->layout == RT_REF_NCHW) {
    for (int n = 0; n < xs->N; n++)
      for (int c = 0; c < C; c++) {
        int64_t o = ((int64_t)n * C + c) * hw;
        double a = 0, b = 0, m = save_mean[c];
        for (int64_t i = 0; i < hw; i++) {
          a += dy[o + i];
          b += dy[o + i] * (x[o + i] - m);
        }
        sdy[c] += a;
        sdyx[c] += b * save_invstd[c];
      }
  } else {
    for (int64_t i = 0; i < M; i++)
      for (int c = 0; c < C; c++) {
        float g = dy[i * C + c];
        sdy[c] += g;
        sdyx[c] += (double)g * ((x[i * C + c] - save_mean[c]) * save_invstd[c]);
      }
  }
  for (int c = 0; c < C; c++) {
    if (dbeta) dbeta[c] = (float)sdy[c];
    if (dgamma) dgamma[c] = (float)sdyx[c];
  }
  /* the data gradient's terms over every process's batch (sdy and sdyx are in a row) */
  int64_t Mt = M; /* the count over every process (M: this one's, the loops') */
  int r = dx ? sync_sum(sync, sdy, 2 * C, &Mt) : RT_REF_OK;
  if (r) {
    free(sdy);
    free(coef);
    return r;
  }
  if (dx) {
    /* dx = k*dy - k*(sdy/M) - k*xhat*(sdyx/M), k = gamma*invstd, written
     * as dx = A*dy + B*(x - mean) + D per channel */
    for (int c = 0; c < C; c++) {
      double k = (double)gamma[c] * save_invstd[c];
      double xs_coef = -k * (sdyx[c] / (double)Mt) * save_invstd[c];
      coef[c] = (float)k;
      coef[C + c] = (float)xs_coef;
      coef[2 * C + c] = (float)(-k * sdy[c] / (double)Mt);
    }
    const float *A = coef, *B = coef + C, *D = coef + 2 * C;
    if (xs->layout == RT_REF_NCHW) {
      for (int n = 0; n < xs->N; n++)
        for (int c = 0; c < C; c++) {
          int64_t o = ((int64_t)n * C + c) * hw;
          for (int64_t i = 0; i < hw; i++) dx[o + i] = A[c] * dy[o + i] + B[c] * (x[o + i] - save_mean[c]) + D[c];
        }
    } else {
      for (int64_t i = 0; i < M; i++)
        for (int c = 0; c < C; c++) dx[i * C + c] = A[c] * dy[i * C + c] + B[c] * (x[i * C + c] - save_mean[c]) + D[c];
    }
  }
  free(sdy);
  free(coef);
  return RT_REF_OK;
}

/* k[c] = (float)(gamma[c] * invstd[c]), in double, rounded once: the
 * coefficient the forward (rt_ref_batchnorm_fwd_train, rt_ref_bn_normalize)
 * and the relu mask both use, so that they agree on every element.  NULL
 * when out of memory. */
static float *saved_scale(int C, const float *gamma, const float *save_invstd) {
  float *k = malloc(sizeof(float) * (size_t)C);
  for (int c = 0; k && c < C; c++) k[c] = (float)((double)gamma[c] * save_invstd[c]);
  return k;
}

int rt_ref_bn_relu_mask(const RtRefAct *xs, const float *x, const float *dy, const float *gamma, const float *beta,
                        const float *save_mean, const float *save_invstd, float *g) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !dy || !gamma || !beta || !save_mean || !save_invstd || !g) return RT_REF_EARG;
  int C = xs->C;
  int64_t hw = (int64_t)xs->H * xs->W;
  float *k = saved_scale(C, gamma, save_invstd);
  if (!k) return RT_REF_ENOMEM;
  /* in memory order: channel-major planes (NCHW) or channels innermost (NHWC) */
  if (xs->layout == RT_REF_NCHW) {
    for (int64_t o = 0, n = 0; n < xs->N; n++)
      for (int c = 0; c < C; c++)
        for (int64_t p = 0; p < hw; p++, o++) g[o] = (x[o] - save_mean[c]) * k[c] + beta[c] <= 0.0f ? 0.0f : dy[o];
  } else {
    for (int64_t o = 0, i = 0; i < xs->N * hw; i++)
      for (int c = 0; c < C; c++, o++) g[o] = (x[o] - save_mean[c]) * k[c] + beta[c] <= 0.0f ? 0.0f : dy[o];
  }
  free(k);
  return RT_REF_OK;
}

int rt_ref_bn_normalize(const RtRefAct *xs, const float *x, const float *gamma, const float *beta,
                        const float *save_mean, const float *save_invstd, float *y) {
  if (!bn_shape_ok(xs)) return RT_REF_ESHAPE;
  if (!x || !gamma || !beta || !save_mean || !save_invstd || !y) return RT_REF_EARG;
  float *k = saved_scale(xs->C, gamma, save_invstd);
  if (!k) return RT_REF_ENOMEM;
  channel_affine(xs, x, save_mean, k, beta, y);
  free(k);
  return RT_REF_OK;
}
