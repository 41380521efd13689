/* net_status.c - the one place where the runtime libraries' status codes
 * become NetStatus.
 *
 * Every library below the API reports failure as its own code plus a
 * message in the caller's buffer; the API's files pass that buffer
 * (net_err_buf() or their caller's) and turn the code into a NetStatus
 * only through the functions here, one per library code, so that a code
 * means the same NetStatus everywhere.  Each is a switch without a
 * default: a code added to a library's enum fails the build (-Wswitch)
 * until this file says what it becomes.
 *
 *   library code        becomes
 *   RtIdxStatus         IO, FORMAT: NET_ERR_DATA            NOMEM: NET_ERR_NOMEM
 *   RtFolderStatus      IO, LAYOUT: NET_ERR_DATA            NOMEM: NET_ERR_NOMEM
 *   RtJpegStatus        IO, FORMAT: NET_ERR_DATA            NOMEM: NET_ERR_NOMEM
 *   RtLoaderStatus      ARG: NET_ERR_ARG  DATA: NET_ERR_DATA  NOMEM: NET_ERR_NOMEM
 *   RtStStatus          IO, FORMAT: NET_ERR_IO  ARG: NET_ERR_ARG  NOMEM: NET_ERR_NOMEM
 *   RtWeightsStatus     IO: NET_ERR_IO  MISMATCH: NET_ERR_WEIGHTS  GRAPH: NET_ERR_MODEL
 *                       NOMEM: NET_ERR_NOMEM
 *   RtInitStatus        ROLE, SHAPE: NET_ERR_MODEL
 *   RtSchedStatus       TRAIN, RANGE: NET_ERR_MODEL
 *   RtCudaStatus        ENODRIVER, ENODEVICE: NET_ERR_NO_GPU  EARG: NET_ERR_ARG
 *                       ENOMEM: NET_ERR_NOMEM  ECALL, EDEVMEM: NET_ERR_DEVICE
 *                       (code generation's CgStatus reaches the API as an
 *                       RtCudaStatus: runtime/gpu/rt_gpu_prog.c maps it)
 *
 * and every _OK is NET_OK.  A data set that does not load is NET_ERR_DATA
 * whatever the reason (a missing IDX or JPEG file included); a file the
 * API itself opens (a model, weights, a checkpoint) is NET_ERR_IO.
 *
 * Calls that return a bare -1 carry no code: their caller knows what
 * failed and says so.  They are the CPU executor's (net_exec_cpu.c:
 * rt_cpu_new NET_ERR_MODEL, a run NET_ERR_RUN, the accumulator
 * NET_ERR_NOMEM), rt_model_open (net_model.c: NET_ERR_IO when the file
 * does not open, else NET_ERR_MODEL) and rt_loader_next's -1 (net_train.c:
 * NET_ERR_DATA).  docs/runtime.md, "Status codes", has the same list. */
#include "net_status.h"

#include <stdarg.h>

#include "rt_err.h"

NetStatus net_status_of_idx(RtIdxStatus s) {
  switch (s) {
  case RT_IDX_OK: return NET_OK;
  case RT_IDX_ERR_IO:
  case RT_IDX_ERR_FORMAT: return NET_ERR_DATA;
  case RT_IDX_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_DATA;
}

NetStatus net_status_of_folder(RtFolderStatus s) {
  switch (s) {
  case RT_FOLDER_OK: return NET_OK;
  case RT_FOLDER_ERR_IO:
  case RT_FOLDER_ERR_LAYOUT: return NET_ERR_DATA;
  case RT_FOLDER_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_DATA;
}

NetStatus net_status_of_jpeg(RtJpegStatus s) {
  switch (s) {
  case RT_JPEG_OK: return NET_OK;
  case RT_JPEG_ERR_IO:
  case RT_JPEG_ERR_FORMAT: return NET_ERR_DATA;
  case RT_JPEG_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_DATA;
}

NetStatus net_status_of_loader(RtLoaderStatus s) {
  switch (s) {
  case RT_LOADER_OK: return NET_OK;
  case RT_LOADER_ERR_ARG: return NET_ERR_ARG;
  case RT_LOADER_ERR_DATA: return NET_ERR_DATA;
  case RT_LOADER_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_DATA;
}

NetStatus net_status_of_st(RtStStatus s) {
  switch (s) {
  case RT_ST_OK: return NET_OK;
  case RT_ST_ERR_IO:
  case RT_ST_ERR_FORMAT: return NET_ERR_IO; /* a file that does not parse cannot be read */
  case RT_ST_ERR_ARG: return NET_ERR_ARG;
  case RT_ST_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_IO;
}

NetStatus net_status_of_weights(RtWeightsStatus s) {
  switch (s) {
  case RT_WEIGHTS_OK: return NET_OK;
  case RT_WEIGHTS_ERR_IO: return NET_ERR_IO;
  case RT_WEIGHTS_ERR_MISMATCH:
  case RT_WEIGHTS_ERR_VALUE: return NET_ERR_WEIGHTS;
  case RT_WEIGHTS_ERR_GRAPH: return NET_ERR_MODEL;
  case RT_WEIGHTS_ERR_NOMEM: return NET_ERR_NOMEM;
  }
  return NET_ERR_WEIGHTS;
}

NetStatus net_status_of_init(RtInitStatus s) {
  switch (s) {
  case RT_INIT_OK: return NET_OK;
  case RT_INIT_ERR_ROLE:
  case RT_INIT_ERR_SHAPE: return NET_ERR_MODEL;
  }
  return NET_ERR_MODEL;
}

NetStatus net_status_of_sched(RtSchedStatus s) {
  switch (s) {
  case RT_SCHED_OK: return NET_OK;
  case RT_SCHED_ERR_TRAIN:
  case RT_SCHED_ERR_RANGE: return NET_ERR_MODEL; /* the train section's schedule does not fit the run */
  }
  return NET_ERR_MODEL;
}

#ifdef NET_HAVE_GPU
NetStatus net_status_of_cuda(RtCudaStatus s) {
  switch (s) {
  case RT_CUDA_OK: return NET_OK;
  case RT_CUDA_ENODRIVER:
  case RT_CUDA_ENODEVICE:
  case RT_CUDA_ENOLIB: return NET_ERR_NO_GPU;
  case RT_CUDA_EARG: return NET_ERR_ARG;
  case RT_CUDA_ENOMEM: return NET_ERR_NOMEM;
  case RT_CUDA_ECALL:
  case RT_CUDA_EDEVMEM: return NET_ERR_DEVICE;
  }
  return NET_ERR_DEVICE;
}
#endif

NetStatus net_status_errf(NetStatus s, char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rt_verrf(err, len, fmt, ap);
  va_end(ap);
  return s;
}
