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
 * which CUDA 13's keeps. */
#include "rt_nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  loaded.ok = 1; /* the library stays loaded until the process ends */
}

struct RtNvml {
  const NvmlApi *api;
  nvmlDevice_t dev;
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
  *out = n;
  return 0;
}

void rt_nvml_close(RtNvml *n) {
  if (!n) return;
  n->api->Shutdown();
  free(n);
}

int rt_nvml_sample(RtNvml *n, RtNvmlSample *s) {
  if (!s) return -1;
  s->power_w = -1, s->sm_clock_mhz = -1, s->temp_c = -1;
  s->have_ecc = 0, s->ecc_corrected = -1, s->ecc_uncorrected = -1;
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
  return got ? 0 : -1;
}
