/* test_nvrtc.c - every eltwise.cu instantiation compiles with NVRTC to a
 * cubin for sm_90 and to PTX for compute_90, f32 and f16, with 16-byte
 * vector accesses; failures come back as messages with the call, the
 * status, the log and the saved source.  Needs libnvrtc, not a GPU:
 * without libnvrtc it is skipped (77). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu_eltwise.h"
#include "cg_nvrtc.h"

static char err[16384];

static int contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return 1;
  return 0;
}

/* Failed compiles save their source: point them at a fresh directory,
 * and remove it with whatever landed in it afterwards. */
static char kernel_dir[64];

static void kernel_dir_begin(void) {
  snprintf(kernel_dir, sizeof kernel_dir, "/tmp/netc-test-nvrtc-XXXXXX");
  CHECK(mkdtemp(kernel_dir) != NULL, "mkdtemp failed");
  setenv("NETC_KERNEL_DIR", kernel_dir, 1);
}

static void kernel_dir_end(void) {
  DIR *d = opendir(kernel_dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[512];
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", kernel_dir, e->d_name);
    remove(path);
  }
  if (d) closedir(d);
  rmdir(kernel_dir);
  unsetenv("NETC_KERNEL_DIR");
}

/* Compiles kernel (op, dt, n) both ways and checks the images. */
static void check_kernel(int index, GpuEltOp op, GpuDtype dt, int64_t n) {
  char name[64], *src = NULL;
  CgStatus s = gpu_eltwise_source(index, op, dt, n, 0, name, sizeof name, &src, err, sizeof err);
  CHECK(s == CG_OK, "source %s %s: %s", gpu_eltwise_op_name(op), gpu_dtype_name(dt), err);
  if (s) return;
  char want[64];
  snprintf(want, sizeof want, "k%d_%s_%s", index, gpu_eltwise_op_name(op), gpu_dtype_name(dt));
  CHECK(strcmp(name, want) == 0, "kernel name %s, want %s", name, want);

  CgNvrtcOut cubin, ptx;
  s = cg_nvrtc_compile(src, name, "sm_90", CG_NVRTC_CUBIN, NULL, 0, &cubin, err, sizeof err);
  CHECK(s == CG_OK, "cubin %s: %s", name, err);
  if (!s) {
    CHECK(cubin.size > 4 && memcmp(cubin.image,
                                   "\x7f"
                                   "ELF",
                                   4) == 0,
          "%s: cubin is not an ELF image (%zu bytes)", name, cubin.size);
    CHECK(contains(cubin.image, cubin.size, name), "%s: cubin lacks the kernel's symbol", name);
    CHECK(cubin.log && cubin.log[0] == 0, "%s: NVRTC warned:\n%s", name, cubin.log ? cubin.log : "(no log)");
  }
  s = cg_nvrtc_compile(src, name, NULL, CG_NVRTC_PTX, NULL, 0, &ptx, err, sizeof err);
  CHECK(s == CG_OK, "ptx %s: %s", name, err);
  if (!s) {
    char entry[96];
    snprintf(entry, sizeof entry, ".entry %s(", name);
    CHECK(strlen(ptx.image) + 1 == ptx.size, "%s: PTX size", name);
    CHECK(strstr(ptx.image, entry), "%s: PTX has no '%s'", name, entry);
    CHECK(strstr(ptx.image, ".target sm_90"), "%s: PTX not for sm_90", name);
    /* 16-byte accesses: the point of NETC_VEC */
    CHECK(strstr(ptx.image, "ld.global.nc.v4."), "%s: no 16-byte loads", name);
    CHECK(strstr(ptx.image, "st.global.v4."), "%s: no 16-byte stores", name);
    if (dt == GPU_F16) CHECK(strstr(ptx.image, "cvt.rn.f16.f32"), "%s: no f16 rounding", name);
  }
  cg_nvrtc_out_free(&cubin);
  cg_nvrtc_out_free(&ptx);
  free(src);
}

static void check_broken_source(void) {
  const char *src = "extern \"C\" __global__ void k0_broken(float *x) {\n"
                    "  x[0] = undefined_thing;\n"
                    "}\n";
  CgNvrtcOut out = {(void *)1, 1, NULL};
  CgStatus s = cg_nvrtc_compile(src, "k0_broken", "sm_90", CG_NVRTC_CUBIN, NULL, 0, &out, err, sizeof err);
  CHECK(s == CG_ECOMPILE, "broken source: status %d", s);
  CHECK(out.image == NULL && out.size == 0, "failed compile left an image");
  CHECK(strstr(err, "cg_nvrtc.c:"), "no file:line in: %s", err);
  CHECK(strstr(err, "nvrtcCompileProgram("), "no call in: %s", err);
  CHECK(strstr(err, "NVRTC_ERROR_COMPILATION"), "no status in: %s", err);
  CHECK(strstr(err, "k0_broken for sm_90"), "no purpose in: %s", err);
  CHECK(strstr(err, "undefined_thing"), "no compiler log in: %s", err);
  const char *saved = strstr(err, "source saved as ");
  CHECK(saved != NULL, "no saved source in: %s", err);
  if (saved) {
    char path[512];
    size_t k = 0;
    for (saved += strlen("source saved as "); *saved && *saved != ')' && k + 1 < sizeof path;) path[k++] = *saved++;
    path[k] = 0;
    CHECK(strncmp(path, kernel_dir, strlen(kernel_dir)) == 0, "saved in %s, not %s", path, kernel_dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "saved source %s does not exist", path);
    if (f) {
      char buf[512] = "";
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      buf[n] = 0;
      fclose(f);
      CHECK(strcmp(buf, src) == 0, "saved source differs: %s", buf);
    }
  }
}

/* The template's own guards: a missing op is an #error with a sentence. */
static void check_template_guard(void) {
  char name[64], *src = NULL;
  CgStatus s = gpu_eltwise_source(1, GPU_ELT_RELU_FWD, GPU_F32, 64, 3, name, sizeof name, &src, err, sizeof err);
  CHECK(s == CG_OK, "source: %s", err);
  if (s) return;
  CgNvrtcOut out;
  s = cg_nvrtc_compile(src, name, "sm_90", CG_NVRTC_PTX, NULL, 0, &out, err, sizeof err);
  CHECK(s == CG_ECOMPILE, "NETC_VEC 3 compiled (status %d)", s);
  CHECK(strstr(err, "NETC_VEC must be 1, 2, 4 or 8"), "message: %s", err);
  free(src);
}

static void check_bad_arguments(void) {
  CgNvrtcOut out;
  const char *src = "extern \"C\" __global__ void k(float *x) { x[0] = 1; }";
  CHECK(cg_nvrtc_compile(src, "k", "90", CG_NVRTC_CUBIN, NULL, 0, &out, err, sizeof err) == CG_EARG,
        "arch '90' accepted");
  CHECK(strstr(err, "sm_90"), "arch message: %s", err);
  const char *bad_opt[] = {"--no-such-option"};
  CgStatus s = cg_nvrtc_compile(src, "k", "sm_90", CG_NVRTC_CUBIN, bad_opt, 1, &out, err, sizeof err);
  CHECK(s == CG_ECALL || s == CG_ECOMPILE, "a bad option was accepted (status %d)", s);
  CHECK(strstr(err, "NVRTC_ERROR_"), "bad option message: %s", err);
  cg_nvrtc_out_free(NULL);

  char *text = NULL;
  const CgDefine bad_name[] = {{"1X", "1"}};
  const CgDefine bad_value[] = {{"X", "1\n#include <x>"}};
  const CgDefine good[] = {{"A", "1"}, {"B_2", "k7_add_f32"}};
  CHECK(cg_nvrtc_instantiate("t.cu", "body\n", bad_name, 1, &text, err, sizeof err) == CG_EARG && !text,
        "identifier check");
  CHECK(cg_nvrtc_instantiate("t.cu", "body\n", bad_value, 1, &text, err, sizeof err) == CG_EARG && !text,
        "one-line value check");
  CHECK(cg_nvrtc_instantiate("t.cu", "body\n", good, 2, &text, err, sizeof err) == CG_OK, "instantiate: %s", err);
  if (text) {
    CHECK(strcmp(text, "/* instantiated from t.cu */\n#define A 1\n"
                       "#define B_2 k7_add_f32\nbody\n") == 0,
          "instantiated text: %s", text);
    free(text);
  }
}

int main(void) {
  int major = 0, minor = 0;
  if (cg_nvrtc_version(&major, &minor, err, sizeof err) != CG_OK) return check_skip(err);
  printf("NVRTC %d.%d\n", major, minor);
  int index = 0;
  for (int dt = 0; dt < GPU_DTYPE_COUNT; dt++)
    for (int op = 0; op < GPU_ELT_OP_COUNT; op++) check_kernel(index++, (GpuEltOp)op, (GpuDtype)dt, 1000000);
  /* sizes with a tail that is not a whole vector */
  check_kernel(index++, GPU_ELT_ADD_RELU_FWD, GPU_F16, 1000003);
  check_kernel(index++, GPU_ELT_ADD_BWD, GPU_F32, 1001);
  kernel_dir_begin();
  check_broken_source();
  check_template_guard();
  check_bad_arguments();
  kernel_dir_end();
  return check_report();
}
