/* cg_nvrtc.c - NVRTC loaded with dlopen: compile CUDA C to cubin or PTX,
 * report failures with the log and a saved copy of the source, and build
 * sources from templates (cg_nvrtc.h gives the contract).  The only static
 * state is the loaded table, written once under pthread_once. */
#include "cg_nvrtc.h"

#include "opts.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The few NVRTC types and result codes used here (the library's ABI,
 * stable across CUDA 11-13), declared rather than taken from nvrtc.h, so
 * that code generation builds where the CUDA toolkit is not installed. */
typedef enum nvrtcResult {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
  NVRTC_ERROR_INVALID_INPUT = 3,
  NVRTC_ERROR_INVALID_PROGRAM = 4,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
  NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7
} nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

typedef struct NvrtcApi {
  nvrtcResult (*Version)(int *major, int *minor);
  const char *(*GetErrorString)(nvrtcResult r);
  nvrtcResult (*CreateProgram)(nvrtcProgram *p, const char *src, const char *name, int nheaders,
                               const char *const *headers, const char *const *include_names);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *p);
  nvrtcResult (*CompileProgram)(nvrtcProgram p, int nopt, const char *const *opts);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram p, size_t *size);
  nvrtcResult (*GetProgramLog)(nvrtcProgram p, char *log);
  nvrtcResult (*GetPTXSize)(nvrtcProgram p, size_t *size);
  nvrtcResult (*GetPTX)(nvrtcProgram p, char *ptx);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram p, size_t *size);
  nvrtcResult (*GetCUBIN)(nvrtcProgram p, char *cubin);
} NvrtcApi;

static struct {
  pthread_once_t once;
  CgStatus status;
  NvrtcApi api;
  char why[1024];
} loaded = {PTHREAD_ONCE_INIT, CG_OK, {0}, ""};

static int load_sym(void *lib, const char *path, const char *name, void *slot, size_t slot_size) {
  void *p = dlsym(lib, name);
  if (!p || slot_size != sizeof p) {
    snprintf(loaded.why, sizeof loaded.why, "NVRTC not usable (%s in %s is missing)", name, path);
    return 0;
  }
  memcpy(slot, &p, sizeof p); /* POSIX: object and function pointers agree */
  return 1;
}

#define LOAD(field, sym) \
  if (!load_sym(lib, path, #sym, &a->field, sizeof a->field)) return 0

static int load_table(void *lib, const char *path, NvrtcApi *a) {
  LOAD(Version, nvrtcVersion);
  LOAD(GetErrorString, nvrtcGetErrorString);
  LOAD(CreateProgram, nvrtcCreateProgram);
  LOAD(DestroyProgram, nvrtcDestroyProgram);
  LOAD(CompileProgram, nvrtcCompileProgram);
  LOAD(GetProgramLogSize, nvrtcGetProgramLogSize);
  LOAD(GetProgramLog, nvrtcGetProgramLog);
  LOAD(GetPTXSize, nvrtcGetPTXSize);
  LOAD(GetPTX, nvrtcGetPTX);
  LOAD(GetCUBINSize, nvrtcGetCUBINSize);
  LOAD(GetCUBIN, nvrtcGetCUBIN);
  return 1;
}

static void load_once(void) {
  NetcOpts o;
  opts_from_env(&o, NULL, 0); /* only the library's path is wanted here */
  const char *candidates[] = {o.nvrtc, "libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"};
  char tried[768] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    const char *path = candidates[i];
    if (!path || !*path) continue;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      int k = snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", path);
      if (k > 0 && (size_t)k < sizeof tried - used) used += (size_t)k;
      continue;
    }
    if (!load_table(lib, path, &loaded.api)) {
      memset(&loaded.api, 0, sizeof loaded.api);
      loaded.status = CG_ENOLIB;
      dlclose(lib);
      return;
    }
    loaded.status = CG_OK;
    return;
  }
  snprintf(loaded.why, sizeof loaded.why, "no NVRTC library (tried %s)", tried);
  loaded.status = CG_ENOLIB;
}

static CgStatus api_get(const NvrtcApi **api, char *err, size_t errlen) {
  pthread_once(&loaded.once, load_once);
  *api = loaded.status == CG_OK ? &loaded.api : NULL;
  if (loaded.status != CG_OK) cg_errf(err, errlen, "%s", loaded.why);
  return loaded.status;
}

/* A sentence for each status: nvrtcGetErrorString gives only the name. */
static const char *status_text(nvrtcResult r) {
  switch (r) {
  case NVRTC_SUCCESS: return "success";
  case NVRTC_ERROR_OUT_OF_MEMORY: return "out of host memory";
  case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return "the program could not be created";
  case NVRTC_ERROR_INVALID_INPUT: return "an argument is invalid";
  case NVRTC_ERROR_INVALID_PROGRAM: return "the program handle is invalid";
  case NVRTC_ERROR_INVALID_OPTION: return "an option is not recognized";
  case NVRTC_ERROR_COMPILATION: return "the source has errors";
  case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: return "a builtin operation failed";
  default: return "NVRTC failed";
  }
}

/* "file:line: call: NAME: text (what)"; returns CG_ECALL. */
static CgStatus call_failed(const NvrtcApi *api, nvrtcResult r, int line, const char *call, const char *what, char *err,
                            size_t errlen) {
  cg_errf(err, errlen, "%s:%d: %s: %s: %s (%s)", __FILE__, line, call, api->GetErrorString(r), status_text(r), what);
  return CG_ECALL;
}

#define NV(fn, args, what)                                                             \
  do {                                                                                 \
    nvrtcResult r_ = api->fn args;                                                     \
    if (r_ != NVRTC_SUCCESS) {                                                         \
      status = call_failed(api, r_, __LINE__, "nvrtc" #fn #args, (what), err, errlen); \
      goto done;                                                                       \
    }                                                                                  \
  } while (0)

CgStatus cg_nvrtc_version(int *major, int *minor, char *err, size_t errlen) {
  const NvrtcApi *api;
  CgStatus status = api_get(&api, err, errlen);
  if (status) return status;
  if (!major || !minor) {
    cg_errf(err, errlen, "cg_nvrtc_version: NULL argument");
    return CG_EARG;
  }
  NV(Version, (major, minor), "NVRTC version");
done:
  return status;
}

/* Writes src to a fresh file in the kernel directory; path gets its name,
 * or a note on why it could not be written. */
static void save_source(const char *src, const char *name, char *path, size_t pathlen) {
  NetcOpts o;
  opts_from_env(&o, NULL, 0); /* only the directory is wanted here */
  const char *dir = o.kernel_dir;
  if (!*dir) dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char safe[64];
  size_t k = 0;
  for (const char *p = name; *p && k + 1 < sizeof safe; p++)
    safe[k++] = isalnum((unsigned char)*p) || *p == '_' ? *p : '_';
  safe[k] = 0;
  snprintf(path, pathlen, "%s/netc-%s-XXXXXX.cu", dir, safe);
  int fd = mkstemps(path, 3);
  if (fd < 0) {
    snprintf(path, pathlen, "not saved: cannot create a file in %s", dir);
    return;
  }
  size_t n = strlen(src), off = 0;
  while (off < n) {
    ssize_t w = write(fd, src + off, n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  close(fd);
  if (off < n) snprintf(path, pathlen, "not saved: write to %s failed", dir);
}

static char *program_log(const NvrtcApi *api, nvrtcProgram prog) {
  size_t n = 0;
  if (api->GetProgramLogSize(prog, &n) != NVRTC_SUCCESS) n = 0;
  char *log = malloc(n + 1);
  if (!log) return NULL;
  log[0] = 0;
  if (n && api->GetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = 0;
  log[n] = 0;
  return log;
}

CgStatus cg_nvrtc_compile(const char *src, const char *name, const char *arch, CgNvrtcTarget target,
                          const char *const *extra, int nextra, CgNvrtcOut *out, char *err, size_t errlen) {
  if (out) memset(out, 0, sizeof *out);
  const NvrtcApi *api;
  CgStatus status = api_get(&api, err, errlen);
  if (status) return status;
  if (!src || !name || !out || nextra < 0 || (nextra && !extra)) {
    cg_errf(err, errlen, "cg_nvrtc_compile: NULL or invalid argument");
    return CG_EARG;
  }
  if (!arch) arch = "sm_90";
  if (strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3])) {
    cg_errf(err, errlen, "cg_nvrtc_compile: arch '%s' is not of the form sm_90", arch);
    return CG_EARG;
  }
  char archopt[64], what[192];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s%s", target == CG_NVRTC_PTX ? "compute_" : "sm_", arch + 3);
  snprintf(what, sizeof what, "compiling %s for %s%s", name, target == CG_NVRTC_PTX ? "compute_" : "sm_", arch + 3);
  enum { NBASE = 2 };
  const char **opts = malloc(sizeof *opts * (size_t)(NBASE + nextra));
  if (!opts) {
    cg_errf(err, errlen, "cg_nvrtc_compile: out of host memory");
    return CG_ENOMEM;
  }
  opts[0] = archopt;
  opts[1] = "--std=c++17";
  for (int i = 0; i < nextra; i++) opts[NBASE + i] = extra[i];
  int nopt = NBASE + nextra;

  nvrtcProgram prog = NULL;
  char *log = NULL;
  NV(CreateProgram, (&prog, src, name, 0, NULL, NULL), what);
  nvrtcResult r = api->CompileProgram(prog, nopt, opts);
  log = program_log(api, prog);
  if (r != NVRTC_SUCCESS) {
    char path[512];
    save_source(src, name, path, sizeof path);
    cg_errf(err, errlen,
            "%s:%d: nvrtcCompileProgram(prog, nopt, opts): %s: %s (%s; source "
            "saved as %s)\n%s",
            __FILE__, __LINE__, api->GetErrorString(r), status_text(r), what, path, log ? log : "(no log)");
    status = r == NVRTC_ERROR_COMPILATION ? CG_ECOMPILE : CG_ECALL;
    goto done;
  }
  size_t size = 0;
  if (target == CG_NVRTC_PTX)
    NV(GetPTXSize, (prog, &size), what);
  else
    NV(GetCUBINSize, (prog, &size), what);
  out->image = malloc(size ? size : 1);
  if (!out->image || !log) {
    cg_errf(err, errlen, "cg_nvrtc_compile: out of host memory (%s)", what);
    status = CG_ENOMEM;
    goto done;
  }
  if (target == CG_NVRTC_PTX)
    NV(GetPTX, (prog, out->image), what);
  else
    NV(GetCUBIN, (prog, out->image), what);
  out->size = size;
  out->log = log;
  log = NULL;
done:
  if (status) {
    free(out->image);
    memset(out, 0, sizeof *out);
  }
  free(log);
  if (prog) api->DestroyProgram(&prog);
  free(opts);
  return status;
}

void cg_nvrtc_out_free(CgNvrtcOut *out) {
  if (!out) return;
  free(out->image);
  free(out->log);
  memset(out, 0, sizeof *out);
}

static int is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
  return 1;
}

CgStatus cg_nvrtc_instantiate(const char *template_name, const char *template_text, const CgDefine *defs, int ndefs,
                              char **src, char *err, size_t errlen) {
  if (src) *src = NULL;
  if (!template_name || !template_text || !src || ndefs < 0 || (ndefs && !defs)) {
    cg_errf(err, errlen, "cg_nvrtc_instantiate: NULL or invalid argument");
    return CG_EARG;
  }
  size_t need = strlen(template_text) + strlen(template_name) + 64;
  for (int i = 0; i < ndefs; i++) {
    const char *v = defs[i].value;
    if (!is_identifier(defs[i].name) || !v || strpbrk(v, "\r\n")) {
      cg_errf(err, errlen, "%s: parameter %d (%s) needs a C identifier and a one-line value", template_name, i,
              defs[i].name ? defs[i].name : "NULL");
      return CG_EARG;
    }
    need += strlen(defs[i].name) + strlen(v) + 12;
  }
  char *s = malloc(need);
  if (!s) {
    cg_errf(err, errlen, "cg_nvrtc_instantiate: out of host memory");
    return CG_ENOMEM;
  }
  size_t at = (size_t)snprintf(s, need, "/* instantiated from %s */\n", template_name);
  for (int i = 0; i < ndefs; i++)
    at += (size_t)snprintf(s + at, need - at, "#define %s %s\n", defs[i].name, defs[i].value);
  snprintf(s + at, need - at, "%s", template_text);
  *src = s;
  return CG_OK;
}
