/* rt_nvml.h - what a user watches of the GPU while it trains, read through
 * NVML (libnvidia-ml.so.1, loaded with dlopen at run time; the prototypes
 * used are declared in rt_nvml.c): power, SM clock, temperature, the ECC
 * error counts, and the interconnect's traffic (PCIe and NVLink, which a
 * data-parallel run's all-reduce moves over).  A machine without NVML is not
 * an error: rt_nvml_open says why, and the caller shows nothing.  Handles
 * are thread-safe as NVML is, but one handle is sampled by one thread at a
 * time (it keeps the previous sample to make rates of NVML's counters),
 * unless it is watched (rt_nvml_watch): then any thread may read it. */
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
  /* traffic in MB/s (10^6 bytes), transmitted and received; < 0 when
   * unknown.  PCIe: NVML's own 20 ms reading, taken at most once a second
   * (it takes those 20 ms).  NVLink, all links together: the rate of NVML's
   * cumulative counters over at least a second (RtNvmlRate), so a handle's
   * first second has none; unknown without NVLink or on a driver without
   * the counters. */
  double pcie_tx_mb_s, pcie_rx_mb_s;
  double nvlink_tx_mb_s, nvlink_rx_mb_s;
} RtNvmlSample;

/* The GPU whose PCI bus id is pci_bus_id ("0000:17:00.0", as the CUDA driver
 * gives it), or NVML's device 0 for NULL.  0 and *out, or -1 with why. */
int rt_nvml_open(const char *pci_bus_id, RtNvml **out, char *why, size_t len);
void rt_nvml_close(RtNvml *n); /* takes NULL */
/* Fills every field it can read; 0, or -1 when nothing could be read.
 * NVML's calls take their time (PCIe's 20 ms among them), so a handle that
 * is watched gives the watcher's last sample instead, at once. */
int rt_nvml_sample(RtNvml *n, RtNvmlSample *s);
/* Starts a thread of the handle's own that samples every every_s seconds
 * (one sample first, on the caller's thread), so that a training loop
 * reading rt_nvml_sample after every step never waits for NVML; its
 * readings are then up to every_s old.  rt_nvml_close stops it.  0, or -1
 * (already watched, every_s <= 0, no thread). */
int rt_nvml_watch(RtNvml *n, double every_s);

/* A cumulative counter of KiB (NVML's NVLink throughput fields) as a rate.
 * rt_nvml_counter_rate: MB/s between two readings, kib0 at t0 and kib1 at t1
 * seconds; -1 when t1 <= t0 or the counter went back (the driver reset it). */
double rt_nvml_counter_rate(unsigned long long kib0, double t0, unsigned long long kib1, double t1);

/* The rate over windows of at least min_s seconds: a reading min_s or more
 * after the window's first closes it (mb_s becomes its rate, -1 if the
 * counter went back) and opens the next; a reading sooner changes nothing,
 * so that steps a millisecond apart do not make a rate of the counter's
 * granularity.  rt_nvml_rate_add returns mb_s. */
typedef struct RtNvmlRate {
  unsigned long long kib; /* the window's first reading */
  double t;               /* its time in seconds; < 0: no reading yet */
  double mb_s;            /* the last closed window's rate; < 0: none */
} RtNvmlRate;
#define RT_NVML_RATE_NONE ((RtNvmlRate){0, -1, -1}) /* also what a failed reading leaves */
double rt_nvml_rate_add(RtNvmlRate *r, unsigned long long kib, double t, double min_s);

#endif
