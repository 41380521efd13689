/* rt_nvml.c - NVML loaded with dlopen (rt_nvml.h gives the contract).
 *
 * libnvidia-ml.so.1 and its entry points are resolved once per process
 * under pthread_once and read-only afterwards.  Only nvmlInit_v2 and
 * nvmlShutdown are required; each other function may be missing (an old
 * driver), which leaves what it reads unknown.  Every rt_nvml_open calls
 * nvmlInit_v2 and every rt_nvml_close nvmlShutdown: NVML counts them, so
 * two users in one process do not shut each other's NVML down.
 *
 * The NVML types and enum values used are declared here (nvml.h is not
 * needed to build); they follow nvml.h of CUDA 12.6 (NVML API version 12),
 * which CUDA 13's keeps.  The interconnect's were checked against nvml.h
 * 12.6.77 (CUDA 12.6.2): nvmlPcieUtilCounter_t, nvmlValueType_t,
 * nvmlValue_t, nvmlFieldValue_t (40 bytes; scopeId was `unused` before the
 * NVLink throughput fields and sits where it did), field ids 138 and 139.
 *
 * The interconnect: nvmlDeviceGetPcieThroughput measures over 20 ms before
 * it returns, so a sample asks it at most once a second and repeats the
 * last reading in between (the watch runs after every step).  NVLink's
 * NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/_RX are cumulative KiB of payload
 * (no protocol overhead), asked with scopeId UINT_MAX for all links
 * together, and made a rate over windows of a second (RtNvmlRate).  Any
 * reading NVML refuses (the call, or a field's own nvmlReturn: no NVLink,
 * NVML_ERROR_NOT_SUPPORTED, an old driver without the fields) leaves that
 * number unknown. */
#include "rt_nvml.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_cuda.h"

/* ---- the NVML ABI (nvml.h) ---- */
typedef int nvmlReturn_t; /* an enum in nvml.h: NVML_SUCCESS = 0, then the errors */
enum { NVML_SUCCESS = 0 };
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 } nvmlClockType_t;
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 } nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 } nvmlPcieUtilCounter_t; /* KB/s */
typedef enum {
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
} nvmlValueType_t;
typedef union {
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal; /* nvml.h's other members are no larger */
} nvmlValue_t;
typedef struct {
  unsigned int fieldId;
  unsigned int scopeId; /* NVLink fields: the link, or UINT_MAX for all of them summed */
  long long timestamp, latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn; /* this field's own status: value means nothing unless NVML_SUCCESS */
  nvmlValue_t value;
} nvmlFieldValue_t;
_Static_assert(sizeof(nvmlFieldValue_t) == 40 || sizeof(long) != 8, "nvmlFieldValue_t is 40 bytes in nvml.h");
enum { NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139 }; /* KiB */

typedef struct NvmlApi {
  nvmlReturn_t (*Init)(void); /* nvmlInit_v2 */
  nvmlReturn_t (*Shutdown)(void);
  const char *(*ErrorString)(nvmlReturn_t r);
  nvmlReturn_t (*HandleByPciBusId)(const char *bus_id, nvmlDevice_t *dev); /* _v2 */
  nvmlReturn_t (*HandleByIndex)(unsigned int index, nvmlDevice_t *dev);    /* _v2 */
  nvmlReturn_t (*PowerUsage)(nvmlDevice_t dev, unsigned int *milliwatts);
  nvmlReturn_t (*ClockInfo)(nvmlDevice_t dev, nvmlClockType_t type, unsigned int *mhz);
  nvmlReturn_t (*Temperature)(nvmlDevice_t dev, nvmlTemperatureSensors_t sensor, unsigned int *celsius);
  nvmlReturn_t (*EccMode)(nvmlDevice_t dev, nvmlEnableState_t *current, nvmlEnableState_t *pending);
  nvmlReturn_t (*TotalEccErrors)(nvmlDevice_t dev, nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter,
                                 unsigned long long *count);
  nvmlReturn_t (*PcieThroughput)(nvmlDevice_t dev, nvmlPcieUtilCounter_t counter, unsigned int *kb_s);
  nvmlReturn_t (*FieldValues)(nvmlDevice_t dev, int count, nvmlFieldValue_t *values);
} NvmlApi;

static struct {
  pthread_once_t once;
  int ok;
  NvmlApi api;
  char why[512];
} loaded = {PTHREAD_ONCE_INIT, 0, {0}, ""};

#define SYM(field, name) rt_cuda_dlsym(lib, (name), &a->field, sizeof a->field)

static void load_once(void) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(loaded.why, sizeof loaded.why, "%s (NVML comes with the NVIDIA driver)",
             e ? e : "libnvidia-ml.so.1: not found");
    return;
  }
  NvmlApi *a = &loaded.api;
  if (!SYM(Init, "nvmlInit_v2") || !SYM(Shutdown, "nvmlShutdown")) {
    snprintf(loaded.why, sizeof loaded.why, "libnvidia-ml.so.1 has no nvmlInit_v2 or nvmlShutdown (driver too old?)");
    memset(a, 0, sizeof *a);
    dlclose(lib);
    return;
  }
  SYM(ErrorString, "nvmlErrorString");
  SYM(HandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2");
  SYM(HandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  SYM(PowerUsage, "nvmlDeviceGetPowerUsage");
  SYM(ClockInfo, "nvmlDeviceGetClockInfo");
  SYM(Temperature, "nvmlDeviceGetTemperature");
  SYM(EccMode, "nvmlDeviceGetEccMode");
  SYM(TotalEccErrors, "nvmlDeviceGetTotalEccErrors");
  SYM(PcieThroughput, "nvmlDeviceGetPcieThroughput");
  SYM(FieldValues, "nvmlDeviceGetFieldValues");
  loaded.ok = 1; /* the library stays loaded until the process ends */
}

/* The windows of the interconnect's numbers, in seconds: one PCIe reading
 * and one NVLink rate per second at most. */
#define PCIE_EVERY_S    1.0
#define NVLINK_WINDOW_S 1.0

struct RtNvml {
  const NvmlApi *api;
  nvmlDevice_t dev;
  double pcie_t; /* when PCIe was last read (< 0: never) */
  double pcie_tx_mb_s, pcie_rx_mb_s;
  RtNvmlRate nvlink_tx, nvlink_rx;
  /* the watcher (rt_nvml_watch): its thread samples every every_s into
   * last; mu guards last, last_rc and quit */
  int watching, quit;
  double every_s;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  RtNvmlSample last;
  int last_rc;
};

static int nvml_fail(const NvmlApi *a, nvmlReturn_t r, const char *call, char *why, size_t len) {
  const char *text = a->ErrorString ? a->ErrorString(r) : NULL;
  snprintf(why, len, "%s: %s (nvmlReturn_t %d)", call, text ? text : "NVML error", r);
  return -1;
}

int rt_nvml_open(const char *pci_bus_id, RtNvml **out, char *why, size_t len) {
  char scratch[8];
  if (!why) why = scratch, len = sizeof scratch;
  if (len) why[0] = 0;
  if (!out) {
    snprintf(why, len, "rt_nvml_open: out is NULL");
    return -1;
  }
  *out = NULL;
  pthread_once(&loaded.once, load_once);
  if (!loaded.ok) {
    snprintf(why, len, "%s", loaded.why);
    return -1;
  }
  const NvmlApi *a = &loaded.api;
  nvmlReturn_t r = a->Init();
  if (r != NVML_SUCCESS) return nvml_fail(a, r, "nvmlInit_v2()", why, len);
  nvmlDevice_t dev = NULL;
  if (pci_bus_id) {
    r = a->HandleByPciBusId ? a->HandleByPciBusId(pci_bus_id, &dev) : -1;
    if (r != NVML_SUCCESS) {
      if (a->HandleByPciBusId)
        nvml_fail(a, r, "nvmlDeviceGetHandleByPciBusId_v2", why, len);
      else
        snprintf(why, len, "libnvidia-ml.so.1 has no nvmlDeviceGetHandleByPciBusId_v2");
      size_t n = strlen(why);
      if (n < len) snprintf(why + n, len - n, " (GPU %s)", pci_bus_id);
      a->Shutdown();
      return -1;
    }
  } else {
    r = a->HandleByIndex ? a->HandleByIndex(0, &dev) : -1;
    if (r != NVML_SUCCESS) {
      if (a->HandleByIndex)
        nvml_fail(a, r, "nvmlDeviceGetHandleByIndex_v2(0)", why, len);
      else
        snprintf(why, len, "libnvidia-ml.so.1 has no nvmlDeviceGetHandleByIndex_v2");
      a->Shutdown();
      return -1;
    }
  }
  RtNvml *n = calloc(1, sizeof *n);
  if (!n) {
    a->Shutdown();
    snprintf(why, len, "rt_nvml_open: out of memory");
    return -1;
  }
  n->api = a, n->dev = dev;
  n->pcie_t = -1, n->pcie_tx_mb_s = -1, n->pcie_rx_mb_s = -1;
  n->nvlink_tx = RT_NVML_RATE_NONE, n->nvlink_rx = RT_NVML_RATE_NONE;
  *out = n;
  return 0;
}

void rt_nvml_close(RtNvml *n) {
  if (!n) return;
  if (n->watching) {
    pthread_mutex_lock(&n->mu);
    n->quit = 1;
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    pthread_cond_destroy(&n->cv), pthread_mutex_destroy(&n->mu);
  }
  n->api->Shutdown();
  free(n);
}

double rt_nvml_counter_rate(unsigned long long kib0, double t0, unsigned long long kib1, double t1) {
  if (!(t1 > t0) || kib1 < kib0) return -1;
  return (double)(kib1 - kib0) * 1024 / 1e6 / (t1 - t0);
}

double rt_nvml_rate_add(RtNvmlRate *r, unsigned long long kib, double t, double min_s) {
  if (r->t >= 0 && t - r->t < min_s) return r->mb_s;
  if (r->t >= 0) r->mb_s = rt_nvml_counter_rate(r->kib, r->t, kib, t);
  r->kib = kib, r->t = t;
  return r->mb_s;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 1 and *v, a counter field's value; 0 when NVML did not give one. */
static int field_count(const nvmlFieldValue_t *f, unsigned long long *v) {
  if (f->nvmlReturn != NVML_SUCCESS) return 0;
  switch (f->valueType) {
  case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *v = f->value.ullVal; return 1;
  case NVML_VALUE_TYPE_UNSIGNED_LONG: *v = f->value.ulVal; return 1;
  case NVML_VALUE_TYPE_UNSIGNED_INT: *v = f->value.uiVal; return 1;
  default: return 0;
  }
}

/* PCIe (at most once per PCIE_EVERY_S, else the last reading) and NVLink's
 * rates into s; the number of readings NVML gave. */
static int sample_links(RtNvml *n, RtNvmlSample *s) {
  const NvmlApi *a = n->api;
  int got = 0;
  double t = now_s();
  if (a->PcieThroughput && (n->pcie_t < 0 || t - n->pcie_t >= PCIE_EVERY_S)) {
    unsigned int tx = 0, rx = 0; /* KB/s of 1024 bytes, as NVLink's KiB */
    int ok = a->PcieThroughput(n->dev, NVML_PCIE_UTIL_TX_BYTES, &tx) == NVML_SUCCESS &&
             a->PcieThroughput(n->dev, NVML_PCIE_UTIL_RX_BYTES, &rx) == NVML_SUCCESS;
    n->pcie_t = now_s(); /* after the 20 ms, so that the next second is the steps' */
    n->pcie_tx_mb_s = ok ? tx * 1024.0 / 1e6 : -1, n->pcie_rx_mb_s = ok ? rx * 1024.0 / 1e6 : -1;
  }
  s->pcie_tx_mb_s = n->pcie_tx_mb_s, s->pcie_rx_mb_s = n->pcie_rx_mb_s;
  got += s->pcie_tx_mb_s >= 0;
  nvmlFieldValue_t f[2];
  memset(f, 0, sizeof f);
  f[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, f[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  f[0].scopeId = f[1].scopeId = UINT_MAX;
  unsigned long long tx = 0, rx = 0;
  t = now_s();
  if (a->FieldValues && a->FieldValues(n->dev, 2, f) == NVML_SUCCESS && field_count(&f[0], &tx) &&
      field_count(&f[1], &rx)) {
    s->nvlink_tx_mb_s = rt_nvml_rate_add(&n->nvlink_tx, tx, t, NVLINK_WINDOW_S);
    s->nvlink_rx_mb_s = rt_nvml_rate_add(&n->nvlink_rx, rx, t, NVLINK_WINDOW_S);
    got++;
  } else {
    n->nvlink_tx = RT_NVML_RATE_NONE, n->nvlink_rx = RT_NVML_RATE_NONE;
  }
  return got;
}

static int sample_now(RtNvml *n, RtNvmlSample *s) {
  if (!s) return -1;
  s->power_w = -1, s->sm_clock_mhz = -1, s->temp_c = -1;
  s->have_ecc = 0, s->ecc_corrected = -1, s->ecc_uncorrected = -1;
  s->pcie_tx_mb_s = -1, s->pcie_rx_mb_s = -1, s->nvlink_tx_mb_s = -1, s->nvlink_rx_mb_s = -1;
  if (!n) return -1;
  const NvmlApi *a = n->api;
  int got = 0;
  unsigned int v = 0;
  if (a->PowerUsage && a->PowerUsage(n->dev, &v) == NVML_SUCCESS) s->power_w = v / 1000.0, got++;
  if (a->ClockInfo && a->ClockInfo(n->dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS) s->sm_clock_mhz = (int)v, got++;
  if (a->Temperature && a->Temperature(n->dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) s->temp_c = (int)v, got++;
  nvmlEnableState_t cur = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
  unsigned long long ce = 0, ue = 0;
  if (a->EccMode && a->TotalEccErrors && a->EccMode(n->dev, &cur, &pending) == NVML_SUCCESS &&
      cur == NVML_FEATURE_ENABLED &&
      a->TotalEccErrors(n->dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ce) == NVML_SUCCESS &&
      a->TotalEccErrors(n->dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ue) == NVML_SUCCESS) {
    s->have_ecc = 1, s->ecc_corrected = (long long)ce, s->ecc_uncorrected = (long long)ue, got++;
  }
  got += sample_links(n, s);
  return got ? 0 : -1;
}

int rt_nvml_sample(RtNvml *n, RtNvmlSample *s) {
  if (!n || !n->watching) return sample_now(n, s);
  if (!s) return -1;
  pthread_mutex_lock(&n->mu);
  *s = n->last;
  int rc = n->last_rc;
  pthread_mutex_unlock(&n->mu);
  return rc;
}

static void *watch_main(void *arg) {
  RtNvml *n = arg;
  pthread_mutex_lock(&n->mu);
  while (!n->quit) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double at = (double)until.tv_sec + until.tv_nsec * 1e-9 + n->every_s;
    until.tv_sec = (time_t)at, until.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
    while (!n->quit && pthread_cond_timedwait(&n->cv, &n->mu, &until) == 0) {
    }
    if (n->quit) break;
    pthread_mutex_unlock(&n->mu);
    RtNvmlSample s;
    int rc = sample_now(n, &s); /* NVML's calls, the 20 ms of PCIe's included, outside the lock */
    pthread_mutex_lock(&n->mu);
    n->last = s, n->last_rc = rc;
  }
  pthread_mutex_unlock(&n->mu);
  return NULL;
}

int rt_nvml_watch(RtNvml *n, double every_s) {
  if (!n || n->watching || !(every_s > 0)) return -1;
  n->last_rc = sample_now(n, &n->last);
  n->every_s = every_s, n->quit = 0;
  pthread_mutex_init(&n->mu, NULL), pthread_cond_init(&n->cv, NULL);
  if (pthread_create(&n->thread, NULL, watch_main, n) != 0) {
    pthread_cond_destroy(&n->cv), pthread_mutex_destroy(&n->mu);
    return -1;
  }
  n->watching = 1;
  return 0;
}
