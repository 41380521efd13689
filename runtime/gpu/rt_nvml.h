/* rt_nvml.h - what a user watches of the GPU while it trains, read through
 * NVML (libnvidia-ml.so.1, loaded with dlopen at run time; the prototypes
 * used are declared in rt_nvml.c): power, SM clock, temperature, and the
 * ECC error counts.  A machine without NVML is not an error: rt_nvml_open
 * says why, and the caller shows nothing.  Thread-safe as NVML is. */
#ifndef NETC_RT_NVML_H
#define NETC_RT_NVML_H

#include <stddef.h>

typedef struct RtNvml RtNvml;

typedef struct RtNvmlSample {
  double power_w;                           /* board power draw; < 0 when unknown */
  int sm_clock_mhz;                         /* < 0 when unknown */
  int temp_c;                               /* GPU core temperature; < 0 when unknown */
  int have_ecc;                             /* ECC enabled and its counters readable */
  long long ecc_corrected, ecc_uncorrected; /* volatile counts since the driver loaded */
} RtNvmlSample;

/* The GPU whose PCI bus id is pci_bus_id ("0000:17:00.0", as the CUDA driver
 * gives it), or NVML's device 0 for NULL.  0 and *out, or -1 with why. */
int rt_nvml_open(const char *pci_bus_id, RtNvml **out, char *why, size_t len);
void rt_nvml_close(RtNvml *n); /* takes NULL */
/* Fills every field it can read; 0, or -1 when nothing could be read. */
int rt_nvml_sample(RtNvml *n, RtNvmlSample *s);

#endif
