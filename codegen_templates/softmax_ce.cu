/* softmax_ce.cu - softmax cross-entropy with label smoothing, mean over the
 * batch, and its gradient: runtime/rt_ref_softmax_ce.c's formulas,
 *   loss_n = (1-eps) * -log p[label] + eps * mean_j -log p[j],
 *   dlogits = loss_scale / N * (p - ((1-eps) * onehot(label) + eps/classes)),
 * with log p = z - max z - log sum exp(z - max z), sums in f64.
 *
 * Parameters: NETC_KERNEL_NAME; one of NETC_SCE_ROWS (per-sample losses
 * into scratch), NETC_SCE_MEAN (their mean into the f32[] loss),
 * NETC_SCE_BWD; NETC_N (batch), NETC_CLASSES, NETC_EPS (float literal);
 * NETC_TZ (logits), NETC_TL (labels: int or long long), NETC_TD (dlogits).
 * Launch: ROWS and BWD one block of 256 per sample (grid N); MEAN one block
 * of 256.  A label outside [0, classes) makes that sample's loss NaN (and
 * its gradient row NaN): the kernels cannot fail, the NaN shows. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_N) || !defined(NETC_CLASSES)
#error "softmax_ce.cu is a template: define NETC_KERNEL_NAME, NETC_N, NETC_CLASSES and one NETC_SCE_*"
#endif

#if defined(NETC_SCE_ROWS) || defined(NETC_SCE_BWD)
static constexpr int CLASSES = NETC_CLASSES;

/* max z and log sum exp(z - max) of one row, in every thread of the block */
__device__ __forceinline__ void row_lse(const NETC_TZ *z, float *m, double *lse) {
  __shared__ float shf[32];
  __shared__ double shd[32];
  float mx = -__int_as_float(0x7f800000);
  for (int j = threadIdx.x; j < CLASSES; j += blockDim.x) mx = fmaxf(mx, netc_ld(z[j]));
  mx = netc_block_max(mx, shf);
  double s = 0.0;
  for (int j = threadIdx.x; j < CLASSES; j += blockDim.x) s += (double)expf(netc_ld(z[j]) - mx);
  s = netc_block_sum(s, shd);
  *m = mx;
  *lse = log(s);
}
#endif

extern "C" __global__ void __launch_bounds__(256)
#if defined(NETC_SCE_ROWS)
NETC_KERNEL_NAME(const NETC_TZ *__restrict__ logits, const NETC_TL *__restrict__ labels, double *__restrict__ rows)
#elif defined(NETC_SCE_MEAN)
NETC_KERNEL_NAME(const double *__restrict__ rows, float *__restrict__ loss)
#elif defined(NETC_SCE_BWD)
NETC_KERNEL_NAME(const NETC_TZ *__restrict__ logits, const NETC_TL *__restrict__ labels,
                 const float *__restrict__ loss_scale, NETC_TD *__restrict__ dlogits)
#else
#error "softmax_ce.cu: define NETC_SCE_ROWS, NETC_SCE_MEAN or NETC_SCE_BWD"
#endif
{
#if defined(NETC_SCE_MEAN)
  __shared__ double sh[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < NETC_N; i += blockDim.x) s += rows[i];
  s = netc_block_sum(s, sh);
  if (threadIdx.x == 0) *loss = (float)(s / NETC_N);
#else
  const double eps = (double)NETC_EPS;
  const int n = blockIdx.x;
  const NETC_TZ *z = logits + (long long)n * CLASSES;
  const long long label = (long long)labels[n];
  float m;
  double lse;
  row_lse(z, &m, &lse);
#if defined(NETC_SCE_ROWS)
  __shared__ double sh[32];
  double nlp = 0.0;
  for (int j = threadIdx.x; j < CLASSES; j += blockDim.x) nlp += (double)m + lse - (double)netc_ld(z[j]);
  nlp = netc_block_sum(nlp, sh);
  if (threadIdx.x == 0) {
    if (label < 0 || label >= CLASSES) {
      rows[n] = __longlong_as_double(0x7ff8000000000000ll);
    } else {
      const double nll = -((double)netc_ld(z[label]) - m - lse);
      rows[n] = (1.0 - eps) * nll + eps * nlp / CLASSES;
    }
  }
#else
  const bool ok = label >= 0 && label < CLASSES;
  const double scale = (double)loss_scale[0] / NETC_N, off = eps / CLASSES;
  NETC_TD *d = dlogits + (long long)n * CLASSES;
  for (int j = threadIdx.x; j < CLASSES; j += blockDim.x) {
    const double p = exp((double)netc_ld(z[j]) - m - lse);
    const double t = off + (j == label ? 1.0 - eps : 0.0);
    d[j] = netc_cv<NETC_TD>(ok ? (float)(scale * (p - t)) : __int_as_float(0x7fc00000));
  }
#endif
#endif
}
