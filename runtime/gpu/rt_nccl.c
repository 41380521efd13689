/* rt_nccl.c - NCCL loaded with dlopen (rt_nccl.h gives the contract).
 *
 * The library and its entry points are resolved by the first rt_nccl_load
 * that succeeds, under a mutex, and read-only afterwards.  The NCCL types
 * and enum values used are declared here, as nccl.h of NCCL 2.28 (the
 * version on the GPU machines) defines them; they have not changed since
 * NCCL 2.10, the first with ncclAvg. */
#include "rt_nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"

/* ---- the NCCL ABI (nccl.h) ---- */
typedef struct ncclComm *ncclComm_t;
typedef struct {
  char internal[RT_NCCL_ID_BYTES];
} ncclUniqueId;
typedef int ncclResult_t; /* an enum in nccl.h: ncclSuccess = 0, then the errors */
enum { ncclSuccess = 0 };
typedef enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclAvg = 4 } ncclRedOp_t;

typedef struct NcclApi {
  ncclResult_t (*GetVersion)(int *version);
  ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
  ncclResult_t (*CommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  const char *(*GetErrorString)(ncclResult_t r);
  const char *(*GetLastError)(ncclComm_t comm); /* may be missing (before 2.13) */
  ncclResult_t (*AllReduce)(const void *send, void *recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                            ncclComm_t comm, CUstream stream);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
} NcclApi;

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int load_state; /* 0 not tried, 1 loaded, -1 the last try failed (why in load_why) */
static char load_why[512];
static NcclApi api;

struct RtNccl {
  ncclComm_t comm;
};

#define SYM(field, name) rt_cuda_dlsym(lib, (name), &api.field, sizeof api.field)

static void load_locked(const char *path) {
  const char *file = path && *path ? path : "libnccl.so.2";
  void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(load_why, sizeof load_why, "no NCCL (%s)", e ? e : file);
    load_state = -1;
    return;
  }
  const char *missing = !SYM(GetVersion, "ncclGetVersion")           ? "ncclGetVersion"
                        : !SYM(GetUniqueId, "ncclGetUniqueId")       ? "ncclGetUniqueId"
                        : !SYM(CommInitRank, "ncclCommInitRank")     ? "ncclCommInitRank"
                        : !SYM(CommDestroy, "ncclCommDestroy")       ? "ncclCommDestroy"
                        : !SYM(CommAbort, "ncclCommAbort")           ? "ncclCommAbort"
                        : !SYM(GetErrorString, "ncclGetErrorString") ? "ncclGetErrorString"
                        : !SYM(AllReduce, "ncclAllReduce")           ? "ncclAllReduce"
                        : !SYM(GroupStart, "ncclGroupStart")         ? "ncclGroupStart"
                        : !SYM(GroupEnd, "ncclGroupEnd")             ? "ncclGroupEnd"
                                                                     : NULL;
  int version = 0;
  if (missing || api.GetVersion(&version) != ncclSuccess || version < 21000) {
    if (missing)
      snprintf(load_why, sizeof load_why, "%s has no %s: not an NCCL library", file, missing);
    else
      snprintf(load_why, sizeof load_why, "%s is NCCL %d.%d: 2.10 or later is needed (ncclAvg)", file, version / 10000,
               version / 100 % 100);
    memset(&api, 0, sizeof api);
    dlclose(lib);
    load_state = -1;
    return;
  }
  SYM(GetLastError, "ncclGetLastError");
  load_state = 1; /* the library stays loaded until the process ends */
}

int rt_nccl_load(const char *path, char *why, size_t len) {
  pthread_mutex_lock(&load_mu);
  if (load_state != 1) load_locked(path); /* a failure is tried again: the next path may do */
  int ok = load_state == 1;
  if (!ok && why && len) snprintf(why, len, "%s", load_why);
  pthread_mutex_unlock(&load_mu);
  return ok ? 0 : -1;
}

int rt_nccl_version(void) {
  int v = 0;
  if (rt_nccl_load(NULL, NULL, 0) || api.GetVersion(&v) != ncclSuccess) return -1;
  return v;
}

/* Formats a failed call with NCCL's text and, when the communicator has
 * one, its last message; returns -1. */
static int fail(ncclComm_t comm, ncclResult_t r, const char *call, char *err, size_t len) {
  const char *text = api.GetErrorString ? api.GetErrorString(r) : NULL;
  const char *last = comm && api.GetLastError ? api.GetLastError(comm) : NULL;
  snprintf(err, len, "%s: %s (ncclResult_t %d)%s%s", call, text ? text : "NCCL error", r, last && *last ? ": " : "",
           last && *last ? last : "");
  return -1;
}

int rt_nccl_unique_id(void *id, char *err, size_t len) {
  if (!id) return snprintf(err, len, "rt_nccl_unique_id: id is NULL"), -1;
  if (rt_nccl_load(NULL, err, len)) return -1;
  ncclUniqueId u;
  ncclResult_t r = api.GetUniqueId(&u);
  if (r != ncclSuccess) return fail(NULL, r, "ncclGetUniqueId", err, len);
  memcpy(id, u.internal, sizeof u.internal);
  return 0;
}

int rt_nccl_join(const void *id, int world, int rank, RtNccl **out, char *err, size_t len) {
  if (!out || !id || world < 1 || rank < 0 || rank >= world) {
    snprintf(err, len, "rt_nccl_join: bad arguments (rank %d of %d%s)", rank, world, id ? "" : ", no id");
    return -1;
  }
  *out = NULL;
  if (rt_nccl_load(NULL, err, len)) return -1;
  RtNccl *c = calloc(1, sizeof *c);
  if (!c) return snprintf(err, len, "rt_nccl_join: out of host memory"), -1;
  ncclUniqueId u;
  memcpy(u.internal, id, sizeof u.internal);
  ncclResult_t r = api.CommInitRank(&c->comm, world, u, rank);
  if (r != ncclSuccess) {
    char call[64];
    snprintf(call, sizeof call, "ncclCommInitRank(rank %d of %d)", rank, world);
    fail(c->comm, r, call, err, len);
    if (c->comm) api.CommAbort(c->comm);
    free(c);
    return -1;
  }
  *out = c;
  return 0;
}

int rt_nccl_allreduce(RtNccl *c, CUdeviceptr send, CUdeviceptr recv, size_t count, IrDtype dtype, int mean,
                      CUstream stream, char *err, size_t len) {
  ncclDataType_t t;
  switch (dtype) {
  case IR_DT_F32: t = ncclFloat32; break;
  case IR_DT_F16: t = ncclFloat16; break;
  case IR_DT_BF16: t = ncclBfloat16; break;
  default: return snprintf(err, len, "rt_nccl_allreduce: %s is not summed (f32, f16, bf16)", ir_dtype_name(dtype)), -1;
  }
  if (!c) return snprintf(err, len, "rt_nccl_allreduce: no communicator"), -1;
  ncclResult_t r = api.AllReduce((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, t,
                                 mean ? ncclAvg : ncclSum, c->comm, stream);
  return r == ncclSuccess ? 0 : fail(c->comm, r, "ncclAllReduce", err, len);
}

int rt_nccl_sum_f64(RtNccl *c, CUdeviceptr buf, size_t count, CUstream stream, char *err, size_t len) {
  if (!c) return snprintf(err, len, "rt_nccl_sum_f64: no communicator"), -1;
  ncclResult_t r =
      api.AllReduce((const void *)(uintptr_t)buf, (void *)(uintptr_t)buf, count, ncclFloat64, ncclSum, c->comm, stream);
  return r == ncclSuccess ? 0 : fail(c->comm, r, "ncclAllReduce (f64)", err, len);
}

int rt_nccl_group_begin(char *err, size_t len) {
  if (rt_nccl_load(NULL, err, len)) return -1;
  ncclResult_t r = api.GroupStart();
  return r == ncclSuccess ? 0 : fail(NULL, r, "ncclGroupStart", err, len);
}

int rt_nccl_group_end(char *err, size_t len) {
  if (rt_nccl_load(NULL, err, len)) return -1;
  ncclResult_t r = api.GroupEnd();
  return r == ncclSuccess ? 0 : fail(NULL, r, "ncclGroupEnd", err, len);
}

void rt_nccl_free(RtNccl *c, int abort) {
  if (!c) return;
  if (c->comm) (abort ? api.CommAbort : api.CommDestroy)(c->comm);
  free(c);
}
