/* sgd.cu - one step of torch.optim.SGD on a parameter, in place, after
 * undoing the loss scale: runtime/rt_cpu_train.c's sgd_update with
 * rt_ref_sgd.c's update (dampening 0; the buffer starts at zero, so
 * momentum * buf + d on the first step seeds it with d):
 *
 *   g' = g / loss_scale;  d = g' + weight_decay * w
 *   momentum != 0: buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf
 *   w -= lr * d
 *
 * lr and loss_scale are f32[] device scalars, read by every thread (the
 * step's graph can change them without recompiling).  A loss scale that is
 * not a positive finite number leaves w and buf alone (the CPU executor
 * fails the step there).  With NETC_SKIP the kernel takes a sixth pointer,
 * sgd_update's skip flag (dynamic loss scaling's nonfinite_check): when it
 * is nonzero, w and buf are left alone.
 *
 * Parameters: NETC_KERNEL_NAME; NETC_TW, NETC_TG, NETC_TBUF (storage types:
 * w and buf f32, g f32/f16/bf16); NETC_COUNT; NETC_V (elements per vector
 * access); NETC_MOMENTUM, NETC_WD (float literals), NETC_NESTEROV (0/1),
 * NETC_SKIP (0/1).
 * Launch: 1-D, 256 threads a block, any grid (grid-stride; the
 * COUNT % V tail one element per thread). */

#if !defined(NETC_KERNEL_NAME) || !defined(NETC_TW) || !defined(NETC_TG) || !defined(NETC_COUNT) || !defined(NETC_V) || \
    !defined(NETC_SKIP)
#error "sgd.cu is a template: define NETC_KERNEL_NAME, NETC_TW, NETC_TG, NETC_TBUF, NETC_COUNT, NETC_V, NETC_MOMENTUM, NETC_WD, NETC_NESTEROV, NETC_SKIP"
#endif

static constexpr long long count = NETC_COUNT, nvec = NETC_COUNT / NETC_V;
static constexpr int V = NETC_V;

extern "C" __global__ void __launch_bounds__(256)
NETC_KERNEL_NAME(NETC_TW *__restrict__ w, const NETC_TG *__restrict__ g, NETC_TBUF *__restrict__ buf,
                 const float *__restrict__ lr_p, const float *__restrict__ scale_p
#if NETC_SKIP
                 , const float *__restrict__ skip_p
#endif
) {
  const float lr = *lr_p, scale = *scale_p;
  if (!(scale > 0.0f) || scale == __int_as_float(0x7f800000)) return;
#if NETC_SKIP
  if (*skip_p != 0.0f) return;
#endif
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = first; i < nvec; i += stride)
    netc_sgd_vec<NETC_TW, NETC_TG, NETC_TBUF, V>(w, g, buf, i, lr, scale, NETC_MOMENTUM, NETC_WD, NETC_NESTEROV);
  if (count % V != 0 && first < count % V)
    netc_sgd_elem(w, g, buf, nvec * V + first, lr, scale, NETC_MOMENTUM, NETC_WD, NETC_NESTEROV);
}
