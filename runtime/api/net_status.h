/* net_status.h - the one seam where the runtime libraries' status codes
 * become the API's NetStatus (net_status.c says which code becomes which),
 * and the API's one way to fail with a NetStatus and a message in a
 * caller's buffer.  Internal to libnetrt_api.
 *
 * The GPU libraries' headers (rt_cuda.h, cg_nvrtc.h) exist only in a build
 * with the CUDA toolkit, so their two mappings are declared only there
 * (NET_HAVE_GPU); only GPU code (net_exec_gpu.c, net_profile.c) calls them. */
#ifndef NETC_NET_STATUS_H
#define NETC_NET_STATUS_H

#include <stddef.h>

#include "net.h"
#include "rt_folder.h"
#include "rt_idx.h"
#include "rt_init.h"
#include "rt_jpeg.h"
#include "rt_loader.h"
#include "rt_safetensors.h"
#include "rt_sched.h"
#include "rt_weights.h"

/* One mapping per library status type; each takes any value (one outside
 * the enum is the library's most general failure). */
NetStatus net_status_of_idx(RtIdxStatus s);         /* data/rt_idx.h */
NetStatus net_status_of_folder(RtFolderStatus s);   /* data/rt_folder.h */
NetStatus net_status_of_jpeg(RtJpegStatus s);       /* data/rt_jpeg.h */
NetStatus net_status_of_loader(RtLoaderStatus s);   /* data/rt_loader.h */
NetStatus net_status_of_st(RtStStatus s);           /* io/rt_safetensors.h */
NetStatus net_status_of_weights(RtWeightsStatus s); /* io/rt_weights.h */
NetStatus net_status_of_init(RtInitStatus s);       /* train/rt_init.h */
NetStatus net_status_of_sched(RtSchedStatus s);     /* train/rt_sched.h */
#ifdef NET_HAVE_GPU
#include "rt_cuda.h"
NetStatus net_status_of_cuda(RtCudaStatus s); /* gpu/rt_cuda.h: also every rt_gpu_* call */
#endif

/* printf into err (len bytes, may be 0) and returns s: the failure path of
 * the API's files that write into a caller's buffer rather than
 * net_last_error()'s. */
NetStatus net_status_errf(NetStatus s, char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
