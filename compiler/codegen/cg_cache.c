/* cg_cache.c - NVRTC with a cubin cache on disk (cg_cache.h). */
#include "cg_cache.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cg_nvrtc.h"

uint64_t cg_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void cg_cache_dir(const char *want, char *dir, size_t len) {
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

/* The file at path when it is an ELF image (a cubin), else NULL. */
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

CgStatus cg_cache_compile(const CgCompile *c, const char *cache_dir, void **cubin, size_t *size, int *hit, char *err,
                          size_t errlen) {
  *cubin = NULL, *size = 0;
  if (hit) *hit = 0;
  if (!c || !c->source || !c->arch) return cg_fail(CG_EARG, err, errlen, "cg_cache_compile: no program or arch");
  int major = 0, minor = 0;
  CgStatus s = cg_nvrtc_version(&major, &minor, err, errlen);
  if (s) return s;
  /* everything that changes the cubin; NVRTC gets no options of its own */
  char key[512];
  snprintf(key, sizeof key, "|%s|nvrtc %d.%d|cubin|nvrtc options: none|codegen options: %s", c->arch, major, minor,
           c->opts ? c->opts : "");
  uint64_t h = cg_fnv1a(cg_fnv1a(CG_FNV1A_INIT, c->source, strlen(c->source)), key, strlen(key));
  char dir[4096], path[4200];
  cg_cache_dir(cache_dir, dir, sizeof dir);
  path[0] = 0;
  if (dir[0]) {
    snprintf(path, sizeof path, "%s/netc-%s-%016llx.cubin", dir, c->kind ? c->kind : "prog", (unsigned long long)h);
    if ((*cubin = file_read(path, size))) {
      if (hit) *hit = 1;
      return CG_OK;
    }
  }
  CgNvrtcOut out = {0};
  s = cg_nvrtc_compile(c->source, c->name ? c->name : "netc_program", c->arch, CG_NVRTC_CUBIN, NULL, 0, &out, err,
                       errlen);
  if (s) return s;
  *cubin = out.image, *size = out.size;
  out.image = NULL;
  cg_nvrtc_out_free(&out);
  if (path[0]) file_write(path, *cubin, *size);
  return CG_OK;
}
