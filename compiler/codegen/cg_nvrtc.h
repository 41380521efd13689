/* cg_nvrtc.h - CUDA C -> cubin or PTX with NVRTC, loaded at run time, and
 * the instantiation of the templates in codegen_templates/.
 *
 * NVRTC is dlopened on first use, trying in order $NETC_NVRTC (when set),
 * libnvrtc.so.13, libnvrtc.so and /usr/local/cuda/lib64/libnvrtc.so.13.
 * Like the driver table (rt_cuda.h), the loaded table is made once per
 * process under pthread_once and is read-only afterwards; NVRTC itself
 * compiles distinct programs on distinct threads safely, so every function
 * here may be called from any thread.  No GPU or driver is needed.
 *
 * A template is instantiated by prepending one "#define NAME VALUE" line
 * per parameter to its text (cg_nvrtc_instantiate); the template checks
 * with #error that it got what it needs.
 *
 * Errors follow rt_cuda.h: a status code, and one message in the caller's
 * err buffer.  A failed compilation reads
 *
 *   compiler/codegen/cg_nvrtc.c:250: nvrtcCompileProgram(prog, nopt, opts):
 *   NVRTC_ERROR_COMPILATION: the source has errors (compiling k3_relu_f16
 *   for sm_90; source saved as /tmp/netc-k3_relu_f16-Xa81Qz.cu)
 *   <the compiler log>
 *
 * The source is written to $NETC_KERNEL_DIR, else $TMPDIR, else /tmp, so
 * the log's line numbers can be read against it. */
#ifndef NETC_CG_NVRTC_H
#define NETC_CG_NVRTC_H

#include <stddef.h>

#include "cg_text.h"

typedef enum CgNvrtcTarget {
  CG_NVRTC_CUBIN, /* machine code for exactly one arch (sm_XX) */
  CG_NVRTC_PTX    /* PTX for compute_XX, NUL-terminated */
} CgNvrtcTarget;

/* A compile's result; cg_nvrtc_out_free releases it (takes NULL). */
typedef struct CgNvrtcOut {
  void *image; /* cubin bytes, or PTX text with its NUL */
  size_t size; /* bytes of image, the NUL included */
  char *log;   /* the compiler's log (warnings); may be "" */
} CgNvrtcOut;

/* Loads NVRTC (once per process) and reports its version. */
CgStatus cg_nvrtc_version(int *major, int *minor, char *err, size_t errlen);

/* Compiles src (name: the kernel or program name used in messages and
 * the saved file's name) for arch "sm_90" (NULL means sm_90; for PTX the
 * matching "compute_90" is used).  extra: nextra more NVRTC options, may
 * be NULL.  On success *out holds the image and the log; on failure *out
 * is empty and err has the message, log included. */
CgStatus cg_nvrtc_compile(const char *src, const char *name, const char *arch, CgNvrtcTarget target,
                          const char *const *extra, int nextra, CgNvrtcOut *out, char *err, size_t errlen);
void cg_nvrtc_out_free(CgNvrtcOut *out);

/* One template parameter: "#define name value". */
typedef struct CgDefine {
  const char *name, *value;
} CgDefine;

/* *src = malloc'd: a banner naming the template, one #define per entry of
 * defs, then the template's text.  Names must be C identifiers and values
 * one line; anything else is CG_EARG. */
CgStatus cg_nvrtc_instantiate(const char *template_name, const char *template_text, const CgDefine *defs, int ndefs,
                              char **src, char *err, size_t errlen);

#endif
