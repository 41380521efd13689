/* chan_finalize.cu - per-channel results from chan_reduce.cu's partial sums
 * (or, for inference batch norm, from the running statistics): one thread
 * per channel adds the G partials in f64 and writes the node's per-channel
 * outputs and the coefficients chan_apply.cu uses, coef[4][C].
 *
 * Parameters: NETC_KERNEL_NAME; one of NETC_FIN_TRAIN, NETC_FIN_INFER,
 * NETC_FIN_BWD, NETC_FIN_SUM defined to 1; NETC_C; NETC_G (partials per
 * channel); NETC_M (values per channel: N*H*W); NETC_EPS, NETC_MOM (float
 * literals); NETC_TX (storage type of x, FIN_TRAIN).
 * Launch: grid ceil(C/CB), block (CB, GY): the GY threads of a channel add
 * every GY-th partial, coalesced across CB channels, then the first adds
 * their GY sums (in a fixed order: the result does not depend on timing)
 * and writes the channel's results.  One thread per channel adding all G
 * partials (G is in the hundreds for ResNet's 56x56 layers) took 20-35 us
 * a kernel on the H200, most of it waiting on one load after another.
 *
 *   TRAIN  mean = x[0,c] + S1/M, var = S2/M - (S1/M)^2 (biased),
 *          or, with NETC_NOSHIFT 1 (sums of y and y*y straight from cuDNN's
 *          convolution + GenStats, G = 1), mean = S1/M, var = S2/M - mean^2;
 *          invstd = 1/sqrt(var + eps); save_mean, save_invstd;
 *          running_mean = (1-mom)*running_mean + mom*mean,
 *          running_var  = (1-mom)*running_var + mom*var*M/(M-1) (in place);
 *          coef = {gamma*invstd, beta, mean}; with NETC_FIN_SB 1 also the
 *          equivalent scale and bias, in NETC_TX: sb[c] = gamma*invstd,
 *          sb[C+c] = beta - mean*sb[c] (from the f32 scale, then rounded)
 *   INFER  coef = {gamma/sqrt(running_var + eps), beta, running_mean}; with
 *          NETC_FIN_SB 1 also, in f32, sb[c] = scale = coef[c] and
 *          sb[C+c] = beta - running_mean*scale (a convolution's epilogue)
 *   BWD    dbeta = S1, dgamma = S2 (sum dy*xhat); with k = gamma*invstd:
 *          coef = {k, -k*invstd*S2/M, -k*S1/M, beta}  (dx = A*dy + B*(x-mean) + D;
 *          beta for the relu mask of batchnorm_relu_bwd, (x-mean)*k + beta > 0)
 *   SUM    out = S1
 * These are runtime/rt_ref_bn.c's formulas, f64 where it uses double.
 *
 * Synchronized batch norm (the sync_bn code switch) puts a PACK launch
 * before TRAIN or BWD, and the executor adds its sums over the ranks
 * between the two (NCCL, f64):
 *   PACK_STATS  (x, part, sums): this rank's S1 and S2 unshifted, in f64,
 *               sums = {sum x [C], sum x*x [C], M} (NETC_NOSHIFT: the
 *               partials are of x itself already)
 *   PACK_BWD    (part, dgamma, dbeta, sums): dbeta = S1 and dgamma = S2,
 *               this rank's own (the gradients' average over the ranks
 *               makes them the whole batch's), sums = {S1 [C], S2 [C], M}
 * and NETC_FIN_SYNC 1 makes TRAIN (with NETC_NOSHIFT 1) and BWD read those
 * sums (part: f64, NETC_G 1) and their count M = sums[2C] over every
 * rank's batch; BWD's dgamma and dbeta are then left as PACK wrote them. */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_C)
#error "chan_finalize.cu is a template: define NETC_KERNEL_NAME, NETC_C and one NETC_FIN_*"
#endif

static constexpr int C = NETC_C, CB = 32, GY = 8;
#if defined(NETC_FIN_SYNC) && NETC_FIN_SYNC
#if NETC_G != 1 || !(defined(NETC_FIN_TRAIN) || defined(NETC_FIN_BWD))
#error "chan_finalize.cu: NETC_FIN_SYNC goes with NETC_FIN_TRAIN or NETC_FIN_BWD and NETC_G 1"
#endif
typedef double part_t; /* the f64 sums over every rank, their count after them */
#else
typedef float part_t;
#endif

extern "C" __global__ void __launch_bounds__(CB * GY)
#if defined(NETC_FIN_TRAIN)
NETC_KERNEL_NAME(const NETC_TX *__restrict__ x, const part_t *__restrict__ part, const float *__restrict__ gamma,
                 const float *__restrict__ beta, float *__restrict__ running_mean, float *__restrict__ running_var,
                 float *__restrict__ save_mean, float *__restrict__ save_invstd, float *__restrict__ coef
#if defined(NETC_FIN_SB) && NETC_FIN_SB
                 , NETC_TX *__restrict__ sb
#endif
                 )
#elif defined(NETC_FIN_INFER)
NETC_KERNEL_NAME(const float *__restrict__ gamma, const float *__restrict__ beta,
                 const float *__restrict__ running_mean, const float *__restrict__ running_var,
                 float *__restrict__ coef
#if defined(NETC_FIN_SB) && NETC_FIN_SB
                 , float *__restrict__ sb
#endif
                 )
#elif defined(NETC_FIN_BWD)
NETC_KERNEL_NAME(const part_t *__restrict__ part, const float *__restrict__ gamma, const float *__restrict__ beta,
                 const float *__restrict__ invstd, float *__restrict__ dgamma, float *__restrict__ dbeta,
                 float *__restrict__ coef)
#elif defined(NETC_FIN_PACK_STATS)
NETC_KERNEL_NAME(const NETC_TX *__restrict__ x, const float *__restrict__ part, double *__restrict__ sums)
#elif defined(NETC_FIN_PACK_BWD)
NETC_KERNEL_NAME(const float *__restrict__ part, float *__restrict__ dgamma, float *__restrict__ dbeta,
                 double *__restrict__ sums)
#elif defined(NETC_FIN_SUM)
NETC_KERNEL_NAME(const float *__restrict__ part, float *__restrict__ out)
#else
#error "chan_finalize.cu: define NETC_FIN_TRAIN, NETC_FIN_INFER, NETC_FIN_BWD, NETC_FIN_PACK_* or NETC_FIN_SUM"
#endif
{
  const int c = blockIdx.x * CB + threadIdx.x, ty = threadIdx.y;
#if !defined(NETC_FIN_INFER)
  __shared__ double sum1[GY][CB], sum2[GY][CB];
  double s1 = 0.0, s2 = 0.0;
  if (c < C) {
    for (int g = ty; g < NETC_G; g += GY) s1 += part[(long long)g * C + c];
#if !defined(NETC_FIN_SUM)
    for (int g = ty; g < NETC_G; g += GY) s2 += part[(long long)(NETC_G + g) * C + c];
#endif
  }
  sum1[ty][threadIdx.x] = s1, sum2[ty][threadIdx.x] = s2;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  s1 = s2 = 0.0;
#pragma unroll
  for (int j = 0; j < GY; j++) s1 += sum1[j][threadIdx.x], s2 += sum2[j][threadIdx.x];
#if defined(NETC_FIN_SUM)
  (void)s2;
#endif
#else
  if (ty != 0 || c >= C) return;
#endif
#if defined(NETC_FIN_SYNC) && NETC_FIN_SYNC
  const double M = part[2 * C]; /* every rank's */
#else
  const double M = (double)NETC_M;
#endif
#if defined(NETC_FIN_TRAIN)
  const double shift = s1 / M;
#if defined(NETC_NOSHIFT) && NETC_NOSHIFT
  (void)x;
  const double mean = shift;
#else
  const double mean = (double)netc_ld(x[c]) + shift;
#endif
  double var = s2 / M - shift * shift;
  if (var < 0.0) var = 0.0;
  const double inv = 1.0 / sqrt(var + (double)NETC_EPS);
  const float mom = NETC_MOM;
  save_mean[c] = (float)mean;
  save_invstd[c] = (float)inv;
  running_mean[c] = (1.0f - mom) * running_mean[c] + mom * (float)mean;
  running_var[c] = (1.0f - mom) * running_var[c] + mom * (float)(var * M / (M - 1.0));
  coef[c] = (float)(gamma[c] * inv);
  coef[C + c] = beta[c];
  coef[2 * C + c] = (float)mean;
#if defined(NETC_FIN_SB) && NETC_FIN_SB
  const float scale = (float)(gamma[c] * inv);
  sb[c] = netc_cv<NETC_TX>(scale);
  sb[C + c] = netc_cv<NETC_TX>(beta[c] - (float)mean * scale);
#endif
#elif defined(NETC_FIN_INFER)
  (void)M;
  const double inv = 1.0 / sqrt((double)running_var[c] + (double)NETC_EPS);
  coef[c] = (float)(gamma[c] * inv);
  coef[C + c] = beta[c];
  coef[2 * C + c] = running_mean[c];
#if defined(NETC_FIN_SB) && NETC_FIN_SB
  const float scale = (float)(gamma[c] * inv);
  sb[c] = scale;
  sb[C + c] = beta[c] - running_mean[c] * scale;
#endif
#elif defined(NETC_FIN_BWD)
  const double k = (double)gamma[c] * invstd[c];
#if !(defined(NETC_FIN_SYNC) && NETC_FIN_SYNC)
  dbeta[c] = (float)s1;
  dgamma[c] = (float)s2;
#endif
  coef[c] = (float)k;
  coef[C + c] = (float)(-k * (s2 / M) * invstd[c]);
  coef[2 * C + c] = (float)(-k * s1 / M);
  coef[3 * C + c] = beta[c];
#elif defined(NETC_FIN_PACK_STATS) || defined(NETC_FIN_PACK_BWD)
#if defined(NETC_FIN_PACK_BWD)
  dbeta[c] = (float)s1;
  dgamma[c] = (float)s2;
#elif !(defined(NETC_NOSHIFT) && NETC_NOSHIFT)
  /* sum x = S1 + M*x0 and sum x*x = S2 + 2*x0*S1 + M*x0^2, x0 this rank's shift */
  const double x0 = (double)netc_ld(x[c]);
  s2 += 2.0 * x0 * s1 + M * x0 * x0;
  s1 += M * x0;
#else
  (void)x;
#endif
  sums[c] = s1;
  sums[C + c] = s2;
  if (c == 0) sums[2 * C] = M;
#else
  (void)M;
  out[c] = (float)s1;
#endif
}
