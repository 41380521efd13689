/* netc_gpu_info.c - netc-gpu-info: what the runtime sees of the GPUs and
 * NVRTC, for device runs.  One block per device (name, compute capability,
 * SMs, memory, L2, driver) and the NVRTC version; or "no GPU: <why>".
 * Exit status: 0 with a GPU, 77 without one, 1 when a query fails. */
#include <stdio.h>

#include "rt_cuda.h"
#include "cg_nvrtc.h"

int main(void) {
  char err[2048];
  int major = 0, minor = 0;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err) == CG_OK)
    printf("nvrtc: %d.%d\n", major, minor);
  else
    printf("nvrtc: none (%s)\n", err);

  int count = 0;
  RtCudaStatus s = rt_cuda_device_count(&count, err, sizeof err);
  if (s == RT_CUDA_ENODRIVER || s == RT_CUDA_ENODEVICE) {
    printf("no GPU: %s\n", err);
    return 77;
  }
  if (s) {
    fprintf(stderr, "netc-gpu-info: %s\n", err);
    return 1;
  }
  if (count == 0) {
    printf("no GPU: the CUDA driver sees no device\n");
    return 77;
  }
  for (int i = 0; i < count; i++) {
    RtCudaDeviceInfo d;
    if (rt_cuda_device_info(i, &d, err, sizeof err)) {
      fprintf(stderr, "netc-gpu-info: %s\n", err);
      return 1;
    }
    double bw = 2.0 * d.mem_clock_khz * 1e3 * (d.mem_bus_bits / 8) / 1e9;
    printf("gpu %d: %s\n", i, d.name);
    printf("  compute capability: %d.%d (sm_%d%d)\n", d.cc_major, d.cc_minor, d.cc_major, d.cc_minor);
    printf("  SMs: %d, clock %.0f MHz\n", d.sm_count, d.clock_khz / 1e3);
    printf("  memory: %.1f GiB, bus %d bits, ~%.0f GB/s peak\n", (double)d.total_mem / (1024.0 * 1024 * 1024),
           d.mem_bus_bits, bw);
    printf("  L2: %.1f MiB, shared memory per block (opt-in): %d KiB\n", d.l2_bytes / (1024.0 * 1024),
           d.smem_per_block_optin / 1024);
    printf("  driver: CUDA %d.%d\n", d.driver_version / 1000, d.driver_version % 1000 / 10);
  }
  return 0;
}
