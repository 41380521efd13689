/* rt_gpu_prog.c - every node's kernels as one NVRTC program, with a cubin
 * cache on disk (rt_gpu_prog.h gives the contract).
 *
 * Each node's source is wrapped in a namespace of its own and followed by
 * an #undef of every macro it defined, so two instantiations of a template
 * (same helper names, same #define parameters, same include guard) live
 * side by side in one translation unit; the kernels are extern "C", so
 * their symbols stay the plain names the launches look up.
 *
 * The cache file is <dir>/netc-<hash>.cubin, hash = FNV-1a 64 of the
 * program text, the target arch and the NVRTC version.  A missing or
 * unwritable directory only means no caching; a file that is not an ELF
 * image is recompiled over.  Files are written to a temporary name and
 * renamed, so two processes warming one cache never read half a file. */
#include "rt_gpu_prog.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_nvrtc.h"


typedef struct Buf {
  char *p;
  size_t len, cap;
} Buf;

static int buf_add(Buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
  return 0;
}

static int buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_printf(Buf *b, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line) return -1;
  return buf_add(b, line, (size_t)n);
}

/* Appends "#undef NAME" for every "#define NAME" line of src. */
static int undef_macros(Buf *b, const char *src) {
  for (const char *l = src; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    const char *p = l;
    while (*p == ' ' || *p == '\t') p++;
    if (*p++ != '#') continue;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, "define", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) continue;
    p += 6;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = 0;
    while (p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
           (n && p[n] >= '0' && p[n] <= '9'))
      n++;
    if (n && (buf_add(b, "#undef ", 7) || buf_add(b, p, n) || buf_add(b, "\n", 1))) return -1;
  }
  return 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void rt_gpu_prog_cache_dir(const char *want, char *dir, size_t len) {
  dir[0] = 0;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (want && *want)
    snprintf(dir, len, "%s", want);
  else if (xdg && *xdg)
    snprintf(dir, len, "%s/netc", xdg);
  else if (home && *home)
    snprintf(dir, len, "%s/.cache/netc", home);
  else
    return;
  /* mkdir -p: each prefix in turn; existing ones are fine */
  for (char *s = dir + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    mkdir(dir, 0755);
    *s = '/';
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) dir[0] = 0;
}

static void *file_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *p = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 16 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)n)) &&
      fread(p, 1, (size_t)n, f) == (size_t)n && memcmp(p, "\177ELF", 4) == 0) {
    fclose(f);
    *size = (size_t)n;
    return p;
  }
  free(p);
  fclose(f);
  return NULL;
}

static void file_write(const char *path, const void *data, size_t size) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  int ok = fwrite(data, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* The program text of every node's source into *b. */
static RtCudaStatus assemble(const IrGraph *g, int64_t batch, RtGpuProg *p, Buf *b, char *err, size_t errlen) {
  if (buf_printf(b, "/* netc: graph %s at batch %lld, %d nodes */\n", g->name ? g->name : "?", (long long)batch,
                 g->nnode))
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory (program text)");
  for (int i = 0; i < p->nnode; i++) {
    const char *src = p->kn[i].source;
    if (!src || !*src) continue;
    const IrOpInfo *info = ir_op_info(g->node[i].op);
    if (buf_printf(b, "\n/* node %d: %s %s */\nnamespace netc_node%d {\n", i, info ? info->name : "?",
                   g->node[i].name ? g->node[i].name : "", i) ||
        buf_add(b, src, strlen(src)) || buf_printf(b, "\n} /* namespace netc_node%d */\n", i) ||
        undef_macros(b, src))
      return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory (program text)");
  }
  return RT_CUDA_OK;
}

static RtCudaStatus compile(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                            const Buf *b, RtGpuProg *p, char *err, size_t errlen) {
  char arch[32], name[160], dir[4096], path[4200];
  snprintf(arch, sizeof arch, "sm_%d%d", dev->cc_major, dev->cc_minor);
  snprintf(name, sizeof name, "netc_%s_b%lld", g->name ? g->name : "graph", (long long)batch);
  int major = 0, minor = 0;
  if (rt_nvrtc_version(&major, &minor, err, errlen)) return RT_CUDA_ENODRIVER;
  char key[96];
  snprintf(key, sizeof key, "|%s|nvrtc %d.%d|cubin", arch, major, minor);
  uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, b->p, b->len), key, strlen(key));
  rt_gpu_prog_cache_dir(cache_dir, dir, sizeof dir);
  path[0] = 0;
  if (dir[0]) {
    snprintf(path, sizeof path, "%s/netc-%016llx.cubin", dir, (unsigned long long)h);
    if ((p->cubin = file_read(path, &p->size))) {
      p->cache_hit = 1;
      return RT_CUDA_OK;
    }
  }
  RtNvrtcOut out = {0};
  RtNvrtcStatus s = rt_nvrtc_compile(b->p, name, arch, RT_NVRTC_CUBIN, NULL, 0, &out, err, errlen);
  if (s) return s == RT_NVRTC_ENOLIB ? RT_CUDA_ENODRIVER : s == RT_NVRTC_ENOMEM ? RT_CUDA_ENOMEM : RT_CUDA_ECALL;
  p->cubin = out.image, p->size = out.size;
  out.image = NULL;
  rt_nvrtc_out_free(&out);
  if (path[0]) file_write(path, p->cubin, p->size);
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_prog_emit(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, RtGpuProg *p, char *err,
                              size_t errlen) {
  memset(p, 0, sizeof *p);
  if (!g || !dev) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: no graph or device");
  p->kn = calloc((size_t)(g->nnode ? g->nnode : 1), sizeof *p->kn);
  if (!p->kn) return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory (%d nodes)", g->nnode);
  int any = 0;
  for (int i = 0; i < g->nnode; i++) {
    if (rt_gpu_kernels_emit(g, i, batch, dev, &p->kn[i], err, errlen)) {
      rt_gpu_prog_free(p);
      return RT_CUDA_EARG;
    }
    p->nnode = i + 1;
    any |= p->kn[i].source && p->kn[i].source[0];
  }
  if (!any) return RT_CUDA_OK;
  Buf b = {0};
  RtCudaStatus s = assemble(g, batch, p, &b, err, errlen);
  if (s) {
    free(b.p);
    rt_gpu_prog_free(p);
    return s;
  }
  p->source = b.p, p->source_len = b.len;
  return RT_CUDA_OK;
}

RtCudaStatus rt_gpu_prog_compile(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                                 RtGpuProg *p, char *err, size_t errlen) {
  if (!p->source || p->cubin) return RT_CUDA_OK;
  Buf b = {.p = p->source, .len = p->source_len, .cap = p->source_len + 1};
  return compile(g, batch, dev, cache_dir, &b, p, err, errlen);
}

RtCudaStatus rt_gpu_prog_build_prebuilt(const IrGraph *g, int64_t batch, const RtGpuDevice *dev,
                                        const char *cache_dir, const RtModelProgram *pre, const char *pre_arch,
                                        RtGpuProg *p, char *err, size_t errlen) {
  RtCudaStatus s = rt_gpu_prog_emit(g, batch, dev, p, err, errlen);
  if (s || !p->source) return s;
  char arch[32];
  snprintf(arch, sizeof arch, "sm_%d%d", dev->cc_major, dev->cc_minor);
  /* the launches come from this emission, so a cubin is only usable when it
   * was made from exactly this text, for this device's arch */
  if (pre && pre->source && pre->cubin && pre->cubin_size > 16 && pre_arch && strcmp(pre_arch, arch) == 0 &&
      strcmp(pre->source, p->source) == 0) {
    if (!(p->cubin = malloc(pre->cubin_size))) {
      rt_gpu_prog_free(p);
      return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_gpu: out of host memory (%zu-byte cubin)", pre->cubin_size);
    }
    memcpy(p->cubin, pre->cubin, pre->cubin_size);
    p->size = pre->cubin_size, p->prebuilt = 1;
    return RT_CUDA_OK;
  }
  s = rt_gpu_prog_compile(g, batch, dev, cache_dir, p, err, errlen);
  if (s) rt_gpu_prog_free(p);
  return s;
}

RtCudaStatus rt_gpu_prog_build(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                               RtGpuProg *p, char *err, size_t errlen) {
  return rt_gpu_prog_build_prebuilt(g, batch, dev, cache_dir, NULL, NULL, p, err, errlen);
}

void rt_gpu_prog_free(RtGpuProg *p) {
  if (!p) return;
  for (int i = 0; i < p->nnode; i++) rt_gpu_kernels_free(&p->kn[i]);
  free(p->kn);
  free(p->cubin);
  free(p->source);
  memset(p, 0, sizeof *p);
}

RtCudaStatus rt_gpu_precompile(const IrGraph *g, int64_t batch, const RtGpuDevice *dev, const char *cache_dir,
                               char *err, size_t errlen) {
  if (g && g->plan_batch != batch)
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_gpu: plan made for batch %lld, not %lld", (long long)g->plan_batch,
                (long long)batch);
  RtGpuProg p;
  RtCudaStatus s = rt_gpu_prog_build(g, batch, dev, cache_dir, &p, err, errlen);
  rt_gpu_prog_free(&p);
  return s;
}
