/* test_nvlibs_load.c - the two optional NVIDIA libraries, with or without
 * them: runs on any machine, GPU or not.
 *
 * NVML: where libnvidia-ml.so.1 cannot be loaded, rt_nvml_open returns -1
 * and says so, naming the library; where it can, it opens device 0 (or
 * says why not) and a sample is printed.  Either way nothing crashes, and
 * sampling or closing nothing is harmless.
 *
 * nvJPEG: where libnvjpeg.so.13 (or libnvjpeg.so) cannot be loaded,
 * rt_nvjpeg_load is RT_CUDA_ENOLIB with a message naming it; where it can,
 * every entry point the decoder uses resolves.  Bad arguments to
 * rt_nvjpeg_new are refused before anything is loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rt_nvjpeg.h"
#include "rt_nvml.h"

/* Whether the dynamic loader finds name (the test's own view of the machine). */
static int have_lib(const char *name) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

static void check_nvml(void) {
  RtNvml *n = (RtNvml *)&n; /* anything but NULL: open must set it */
  char why[512] = "";
  int rc = rt_nvml_open(NULL, &n, why, sizeof why);
  if (!have_lib("libnvidia-ml.so.1")) {
    CHECK(rc == -1 && n == NULL, "no NVML, yet rt_nvml_open returned %d", rc);
    CHECK(strstr(why, "libnvidia-ml.so.1") != NULL, "the reason does not name the library: '%s'", why);
    printf("NVML: %s\n", why);
  } else if (rc == 0) {
    RtNvmlSample s;
    int got = rt_nvml_sample(n, &s);
    printf("NVML: %d: power %.1f W, SM clock %d MHz, %d C, ECC %s (%lld corrected, %lld uncorrected), "
           "PCIe %.1f/%.1f MB/s, NVLink %.1f/%.1f MB/s (none in a first sample)\n",
           got, s.power_w, s.sm_clock_mhz, s.temp_c, s.have_ecc ? "on" : "unknown/off", s.ecc_corrected,
           s.ecc_uncorrected, s.pcie_tx_mb_s, s.pcie_rx_mb_s, s.nvlink_tx_mb_s, s.nvlink_rx_mb_s);
    rt_nvml_close(n);
  } else {
    CHECK(rc == -1 && n == NULL && *why, "rt_nvml_open returned %d, handle %p, reason '%s'", rc, (void *)n, why);
    printf("NVML present but not usable: %s\n", why);
  }
  /* a second open says the same (the load is once per process) */
  char why2[512] = "";
  RtNvml *n2 = NULL;
  int rc2 = rt_nvml_open(NULL, &n2, why2, sizeof why2);
  CHECK(rc2 == rc && (rc2 != 0 || n2), "a second open returned %d, the first %d", rc2, rc);
  if (rc2 == -1) CHECK(strcmp(why, why2) == 0, "a second open says '%s', the first '%s'", why2, why);
  rt_nvml_close(n2);
  /* nothing to sample, nothing to close */
  RtNvmlSample s;
  CHECK(rt_nvml_sample(NULL, &s) == -1 && s.power_w < 0 && s.sm_clock_mhz < 0 && s.temp_c < 0 && !s.have_ecc &&
            s.pcie_tx_mb_s < 0 && s.pcie_rx_mb_s < 0 && s.nvlink_tx_mb_s < 0 && s.nvlink_rx_mb_s < 0,
        "sampling no device reads something");
  rt_nvml_close(NULL);
  CHECK(rt_nvml_open(NULL, NULL, why, sizeof why) == -1 && *why, "rt_nvml_open accepts a NULL out");
}

static void check_nvjpeg(void) {
  char err[1024] = "";
  RtCudaStatus s = rt_nvjpeg_load(err, sizeof err);
  int have = have_lib("libnvjpeg.so.13") || have_lib("libnvjpeg.so");
  if (!have) {
    CHECK(s == RT_CUDA_ENOLIB, "no nvJPEG, yet rt_nvjpeg_load returned %d (%s)", (int)s, err);
    CHECK(strstr(err, "libnvjpeg.so.13") != NULL && strstr(err, "CUDA toolkit") != NULL,
          "the message does not name the library: '%s'", err);
    printf("nvJPEG: %s\n", err);
  } else {
    CHECK(s == RT_CUDA_OK, "nvJPEG is here but its entry points did not resolve: %s", err);
    printf("nvJPEG: loaded, every entry point resolved\n");
  }
  char err2[1024] = "";
  CHECK(rt_nvjpeg_load(err2, sizeof err2) == s && strcmp(err, err2) == 0, "a second load differs: '%s'", err2);
  CHECK(rt_nvjpeg_load(NULL, 0) == s, "a load without a message buffer differs");

  RtNvjpeg *j = NULL;
  CHECK(rt_nvjpeg_new(0, RT_NVJPEG_AUTO, &j, err, sizeof err) == RT_CUDA_EARG && j == NULL, "a batch of 0 is accepted");
  CHECK(rt_nvjpeg_new(4, (RtNvjpegBackend)7, &j, err, sizeof err) == RT_CUDA_EARG, "backend 7 is accepted");
  CHECK(rt_nvjpeg_new(4, RT_NVJPEG_AUTO, NULL, err, sizeof err) == RT_CUDA_EARG, "a NULL out is accepted");
  CHECK(strcmp(rt_nvjpeg_backend_name(RT_NVJPEG_HARDWARE), "hardware") == 0 &&
            strcmp(rt_nvjpeg_backend_name(RT_NVJPEG_GPU_HYBRID), "gpu-hybrid") == 0 &&
            strcmp(rt_nvjpeg_backend_name(RT_NVJPEG_AUTO), "auto") == 0,
        "backend names");
  CHECK(rt_nvjpeg_backend(NULL) == RT_NVJPEG_AUTO, "the backend of no decoder");
  rt_nvjpeg_free(NULL);
}

int main(void) {
  check_nvml();
  check_nvjpeg();
  return check_report();
}
