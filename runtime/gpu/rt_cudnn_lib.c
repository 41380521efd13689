/* rt_cudnn_lib.c - libcudnn loaded with dlopen: the function table the
 * executor calls through (DnnApi), built once per process under
 * pthread_once from the cudnn option's library or the usual names, and
 * read-only afterwards (libcudnn stays loaded until exit); and the check
 * that turns a failed call into a message (the DNN macro). */
#include "rt_cudnn_impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"

static struct {
  pthread_once_t once;
  RtCudaStatus status;
  DnnApi api;
  char why[512];
} loaded = {PTHREAD_ONCE_INIT, RT_CUDA_OK, {0}, ""};

static int load_sym(void *lib, const char *libname, const char *name, void *slot, size_t slot_size) {
  if (rt_cuda_dlsym(lib, name, slot, slot_size)) return 1;
  snprintf(loaded.why, sizeof loaded.why, "no cuDNN (%s in %s is missing: cuDNN older than 9?)", name, libname);
  return 0;
}

#define LOAD(field) \
  if (!load_sym(lib, libname, "cudnn" #field, &a->field, sizeof a->field)) return 0

static int load_table(void *lib, const char *libname, DnnApi *a) {
  LOAD(Create);
  LOAD(Destroy);
  LOAD(SetStream);
  LOAD(GetErrorString);
  LOAD(GetLastErrorString);
  LOAD(BackendCreateDescriptor);
  LOAD(BackendDestroyDescriptor);
  LOAD(BackendFinalize);
  LOAD(BackendSetAttribute);
  LOAD(BackendGetAttribute);
  LOAD(BackendExecute);
  LOAD(GetVersion);
  return 1;
}

/* The cudnn option's library (tests name a missing file), then the two usual names. */
static void load_once(void) {
  static NetcOpts o; /* read once, for the library's path only */
  opts_from_env(&o, NULL, 0);
  const char *names[3] = {o.cudnn, "libcudnn.so.9", "libcudnn.so"};
  int first = names[0] && *names[0] ? 0 : 1, last = first ? 2 : 0;
  void *lib = NULL;
  const char *libname = NULL;
  for (int i = first; i <= last && !lib; i++) lib = dlopen(libname = names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (first == 0)
      snprintf(loaded.why, sizeof loaded.why, "no cuDNN (%s not found)", names[0]);
    else
      snprintf(loaded.why, sizeof loaded.why, "no cuDNN (libcudnn.so.9, libcudnn.so not found)");
    loaded.status = RT_CUDA_ENODRIVER;
    return;
  }
  DnnApi a;
  memset(&a, 0, sizeof a);
  if (!load_table(lib, libname, &a)) {
    loaded.status = RT_CUDA_ENODRIVER;
    dlclose(lib);
    return;
  }
  loaded.api = a;
  loaded.status = RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_lib_load(const DnnApi **api, char *err, size_t errlen) {
  pthread_once(&loaded.once, load_once);
  if (loaded.status) {
    rt_errf(err, errlen, "%s", loaded.why);
    return loaded.status;
  }
  *api = &loaded.api;
  return RT_CUDA_OK;
}

RtCudaStatus rt_cudnn_lib_check(const DnnApi *d, cudnnStatus_t status, const char *file, int line, const char *call,
                                const char *what, char *err, size_t errlen) {
  if (status == CUDNN_STATUS_SUCCESS) return RT_CUDA_OK;
  char text[512] = "";
  d->GetLastErrorString(text, sizeof text);
  for (char *p = text; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  size_t n = strlen(text);
  while (n && text[n - 1] == ' ') text[--n] = 0;
  const char *name = d->GetErrorString(status);
  rt_errf(err, errlen, "%s:%d: %s: %s: %s (%s)", file, line, call, name ? name : "CUDNN_STATUS_?",
          *text ? text : "no details", what ? what : "");
  return RT_CUDA_ECALL;
}