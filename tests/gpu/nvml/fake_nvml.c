/* fake_nvml.c - a stand-in libnvidia-ml.so.1 for test_nvml_rate --fake: the
 * few entry points rt_nvml.c needs to open a device and read the
 * interconnect, with numbers the test knows.  Built as
 * fake/libnvidia-ml.so.1 in the build tree and found through
 * LD_LIBRARY_PATH by that test alone.
 *
 * Its declarations follow nvml.h 12.6.77 (CUDA 12.6.2), written out here
 * apart from rt_nvml.c's so that the two are checked against each other:
 * nvmlDeviceGetPcieThroughput's counters 0 (TX) and 1 (RX) in KB/s, and
 * nvmlDeviceGetFieldValues' NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (138) and
 * _RX (139), cumulative KiB, answered for scopeId UINT_MAX (every link).
 *
 * The NVLink counters start at 1 TiB and grow with the monotonic clock at
 * NVLINK_TX_MB_S and NVLINK_RX_MB_S, so that any two readings make those
 * rates; the test steers the rest through fake_nvml_set and reads
 * fake_nvml_stats. */
#include <limits.h>
#include <string.h>
#include <time.h>

#define NVLINK_TX_MB_S 12300.0
#define NVLINK_RX_MB_S 11900.0
#define PCIE_TX_KB_S   100000u
#define PCIE_RX_KB_S   200000u

enum { SUCCESS = 0, ERROR_INVALID_ARGUMENT = 2, ERROR_NOT_SUPPORTED = 3 }; /* nvmlReturn_t */
enum { VALUE_TYPE_UNSIGNED_LONG_LONG = 3 };                                /* nvmlValueType_t */

typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType, nvmlReturn; /* enums in nvml.h */
  union {
    double dVal;
    unsigned long long ullVal;
  } value;
} FieldValue; /* nvmlFieldValue_t */

static struct {
  int nvlink;              /* 0: the fields unsupported, 1: counting */
  int pcie;                /* 0: unsupported, 1: the fixed throughput */
  unsigned long long base; /* KiB at t0 */
  double t0;
  int pcie_calls, bad_requests;
} fake = {1, 1, 1ull << 30, -1, 0, 0};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The test's controls: what NVML supports from now on; restart != 0 sets
 * the counters back to 0 (a driver reloaded). */
void fake_nvml_set(int nvlink, int pcie, int restart) {
  fake.nvlink = nvlink, fake.pcie = pcie;
  if (fake.t0 < 0) fake.t0 = now_s();
  if (restart) fake.base = 0, fake.t0 = now_s();
}

/* nvmlDeviceGetPcieThroughput calls so far, and requests for another field or scope */
void fake_nvml_stats(int *pcie_calls, int *bad_requests) {
  *pcie_calls = fake.pcie_calls, *bad_requests = fake.bad_requests;
}

int nvmlInit_v2(void) {
  if (fake.t0 < 0) fake.t0 = now_s();
  return SUCCESS;
}
int nvmlShutdown(void) { return SUCCESS; }
const char *nvmlErrorString(int r) { return r == ERROR_NOT_SUPPORTED ? "Not Supported" : "fake NVML error"; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **dev) {
  if (index != 0) return ERROR_INVALID_ARGUMENT;
  *dev = &fake;
  return SUCCESS;
}

int nvmlDeviceGetPcieThroughput(void *dev, int counter, unsigned int *kb_s) {
  fake.pcie_calls++;
  if (dev != &fake || counter < 0 || counter > 1) return ERROR_INVALID_ARGUMENT;
  if (!fake.pcie) return ERROR_NOT_SUPPORTED;
  *kb_s = counter == 0 ? PCIE_TX_KB_S : PCIE_RX_KB_S;
  return SUCCESS;
}

int nvmlDeviceGetFieldValues(void *dev, int count, FieldValue *v) {
  if (dev != &fake || count < 0 || !v) return ERROR_INVALID_ARGUMENT;
  double s = now_s() - fake.t0;
  for (int k = 0; k < count; k++) {
    int tx = v[k].fieldId == 138, rx = v[k].fieldId == 139;
    if ((!tx && !rx) || v[k].scopeId != UINT_MAX) {
      fake.bad_requests++;
      v[k].nvmlReturn = ERROR_INVALID_ARGUMENT;
      continue;
    }
    v[k].nvmlReturn = fake.nvlink ? SUCCESS : ERROR_NOT_SUPPORTED;
    v[k].valueType = VALUE_TYPE_UNSIGNED_LONG_LONG;
    v[k].value.ullVal = fake.base + (unsigned long long)(s * (tx ? NVLINK_TX_MB_S : NVLINK_RX_MB_S) * 1e6 / 1024);
  }
  return SUCCESS;
}
