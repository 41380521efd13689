/* rt_nvjpeg.c - nvJPEG loaded with dlopen (rt_nvjpeg.h gives the contract).
 *
 * The library (libnvjpeg.so.13, else libnvjpeg.so or the toolkit's) and its function table
 * are loaded once per process under pthread_once and read-only afterwards;
 * a decoder (RtNvjpeg) holds one nvJPEG handle and the states of one of two
 * paths:
 *
 *   hardware    nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE) and the batched API:
 *               each image parsed (nvjpegJpegStreamParse) and asked
 *               (nvjpegDecodeBatchedSupported); the ones the engines take go
 *               into one nvjpegDecodeBatched call, re-initialized whenever
 *               that count changes or a batch failed.
 *   gpu-hybrid  nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID, else DEFAULT) and
 *               the decoupled API, one image at a time: host phase, transfer,
 *               device phase.  Two decoders: GPU_HYBRID (Huffman on the GPU)
 *               and HYBRID (Huffman on the CPU) for the images the first
 *               refuses (nvjpegDecoderJpegSupported), e.g. progressive ones.
 *               Two pinned buffers taken in turn and one device buffer; the
 *               stream is synchronized before each transfer, so the host
 *               phase of one image overlaps the device phase of the last.
 *
 * Both take their device and pinned memory from rt_nvjpeg_pool (through
 * the allocator callbacks of nvjpegCreateEx and the buffers), so that no
 * cudaFree of nvJPEG's holds a decode until the device is idle.
 *
 * The nvJPEG types, enums and prototypes used are declared here (the
 * toolkit's nvjpeg.h is not needed to build); their values follow nvjpeg.h
 * of CUDA 11.6 to 13.x and the nvJPEG 13 documentation.  cudaStream_t and
 * CUstream are the same handle (struct CUstream_st *). */
#include "rt_nvjpeg.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_nvjpeg_pool.h"

/* ---- the nvJPEG ABI (nvjpeg.h) ---- */
enum { NJ_MAX_COMPONENT = 4 }; /* NVJPEG_MAX_COMPONENT */

typedef enum {
  NVJPEG_STATUS_SUCCESS = 0,
  NVJPEG_STATUS_NOT_INITIALIZED = 1,
  NVJPEG_STATUS_INVALID_PARAMETER = 2,
  NVJPEG_STATUS_BAD_JPEG = 3,
  NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4,
  NVJPEG_STATUS_ALLOCATOR_FAILURE = 5,
  NVJPEG_STATUS_EXECUTION_FAILED = 6,
  NVJPEG_STATUS_ARCH_MISMATCH = 7,
  NVJPEG_STATUS_INTERNAL_ERROR = 8,
  NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
  NVJPEG_STATUS_INCOMPLETE_BITSTREAM = 10,
} nvjpegStatus_t;

typedef enum {
  NVJPEG_BACKEND_DEFAULT = 0,
  NVJPEG_BACKEND_HYBRID = 1,
  NVJPEG_BACKEND_GPU_HYBRID = 2,
  NVJPEG_BACKEND_HARDWARE = 3,
} nvjpegBackend_t;

typedef enum { NVJPEG_OUTPUT_RGBI = 5 } nvjpegOutputFormat_t;

#define NVJPEG_FLAGS_DEFAULT                       0u
#define NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION 32u /* nvJPEG 12.x and later; refused by older ones */

typedef struct {
  unsigned char *channel[NJ_MAX_COMPONENT];
  size_t pitch[NJ_MAX_COMPONENT];
} nvjpegImage_t;

typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;
typedef struct nvjpegJpegStream *nvjpegJpegStream_t;
typedef struct nvjpegJpegDecoder *nvjpegJpegDecoder_t;
typedef struct nvjpegDecodeParams *nvjpegDecodeParams_t;
typedef struct nvjpegBufferPinned *nvjpegBufferPinned_t;
typedef struct nvjpegBufferDevice *nvjpegBufferDevice_t;
/* nvjpegDevAllocator_t and nvjpegPinnedAllocator_t; NULL: nvJPEG's defaults (cudaMalloc, cudaHostAlloc) */
typedef struct NjDevAllocator {
  int (*dev_malloc)(void **p, size_t size);
  int (*dev_free)(void *p);
} NjDevAllocator;
typedef struct NjPinnedAllocator {
  int (*pinned_malloc)(void **p, size_t size, unsigned int flags);
  int (*pinned_free)(void *p);
} NjPinnedAllocator;

/* The entry points used, named after nvJPEG's without the "nvjpeg" prefix. */
typedef struct NjApi {
  nvjpegStatus_t (*CreateEx)(nvjpegBackend_t backend, NjDevAllocator *dev, NjPinnedAllocator *pinned,
                             unsigned int flags, nvjpegHandle_t *handle);
  nvjpegStatus_t (*Destroy)(nvjpegHandle_t handle);
  nvjpegStatus_t (*JpegStateCreate)(nvjpegHandle_t handle, nvjpegJpegState_t *state);
  nvjpegStatus_t (*JpegStateDestroy)(nvjpegJpegState_t state);
  nvjpegStatus_t (*DecodeBatchedInitialize)(nvjpegHandle_t handle, nvjpegJpegState_t state, int batch_size,
                                            int max_cpu_threads, nvjpegOutputFormat_t output_format);
  nvjpegStatus_t (*DecodeBatched)(nvjpegHandle_t handle, nvjpegJpegState_t state, const unsigned char *const *data,
                                  const size_t *lengths, nvjpegImage_t *destinations, CUstream stream);
  nvjpegStatus_t (*DecodeBatchedSupported)(nvjpegHandle_t handle, nvjpegJpegStream_t stream, int *is_supported);
  nvjpegStatus_t (*JpegStreamCreate)(nvjpegHandle_t handle, nvjpegJpegStream_t *stream);
  nvjpegStatus_t (*JpegStreamDestroy)(nvjpegJpegStream_t stream);
  nvjpegStatus_t (*JpegStreamParse)(nvjpegHandle_t handle, const unsigned char *data, size_t length, int save_metadata,
                                    int save_stream, nvjpegJpegStream_t stream);
  nvjpegStatus_t (*JpegStreamGetComponentsNum)(nvjpegJpegStream_t stream, unsigned int *components);
  nvjpegStatus_t (*DecoderCreate)(nvjpegHandle_t handle, nvjpegBackend_t backend, nvjpegJpegDecoder_t *decoder);
  nvjpegStatus_t (*DecoderDestroy)(nvjpegJpegDecoder_t decoder);
  nvjpegStatus_t (*DecoderJpegSupported)(nvjpegJpegDecoder_t decoder, nvjpegJpegStream_t stream,
                                         nvjpegDecodeParams_t params, int *is_supported);
  nvjpegStatus_t (*DecoderStateCreate)(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder, nvjpegJpegState_t *state);
  nvjpegStatus_t (*BufferPinnedCreate)(nvjpegHandle_t handle, NjPinnedAllocator *alloc, nvjpegBufferPinned_t *buf);
  nvjpegStatus_t (*BufferPinnedDestroy)(nvjpegBufferPinned_t buf);
  nvjpegStatus_t (*BufferDeviceCreate)(nvjpegHandle_t handle, NjDevAllocator *alloc, nvjpegBufferDevice_t *buf);
  nvjpegStatus_t (*BufferDeviceDestroy)(nvjpegBufferDevice_t buf);
  nvjpegStatus_t (*StateAttachPinnedBuffer)(nvjpegJpegState_t state, nvjpegBufferPinned_t buf);
  nvjpegStatus_t (*StateAttachDeviceBuffer)(nvjpegJpegState_t state, nvjpegBufferDevice_t buf);
  nvjpegStatus_t (*DecodeParamsCreate)(nvjpegHandle_t handle, nvjpegDecodeParams_t *params);
  nvjpegStatus_t (*DecodeParamsDestroy)(nvjpegDecodeParams_t params);
  nvjpegStatus_t (*DecodeParamsSetOutputFormat)(nvjpegDecodeParams_t params, nvjpegOutputFormat_t format);
  nvjpegStatus_t (*DecodeJpegHost)(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder, nvjpegJpegState_t state,
                                   nvjpegDecodeParams_t params, nvjpegJpegStream_t stream);
  nvjpegStatus_t (*DecodeJpegTransferToDevice)(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                                               nvjpegJpegState_t state, nvjpegJpegStream_t stream, CUstream cu);
  nvjpegStatus_t (*DecodeJpegDevice)(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder, nvjpegJpegState_t state,
                                     nvjpegImage_t *destination, CUstream cu);
} NjApi;

static struct {
  pthread_once_t once;
  RtCudaStatus status;
  NjApi api;
  char why[512];
} loaded = {PTHREAD_ONCE_INIT, RT_CUDA_OK, {0}, ""};

static int load_sym(void *lib, const char *libname, const char *name, void *slot, size_t slot_size) {
  if (rt_cuda_dlsym(lib, name, slot, slot_size)) return 1;
  snprintf(loaded.why, sizeof loaded.why, "no nvJPEG (%s in %s is missing: nvJPEG older than CUDA 11?)", name, libname);
  return 0;
}

#define LOAD(field) \
  if (!load_sym(lib, libname, "nvjpeg" #field, &a->field, sizeof a->field)) return 0

static int load_table(void *lib, const char *libname, NjApi *a) {
  LOAD(CreateEx);
  LOAD(Destroy);
  LOAD(JpegStateCreate);
  LOAD(JpegStateDestroy);
  LOAD(DecodeBatchedInitialize);
  LOAD(DecodeBatched);
  LOAD(DecodeBatchedSupported);
  LOAD(JpegStreamCreate);
  LOAD(JpegStreamDestroy);
  LOAD(JpegStreamParse);
  LOAD(JpegStreamGetComponentsNum);
  LOAD(DecoderCreate);
  LOAD(DecoderDestroy);
  LOAD(DecoderJpegSupported);
  LOAD(DecoderStateCreate);
  LOAD(BufferPinnedCreate);
  LOAD(BufferPinnedDestroy);
  LOAD(BufferDeviceCreate);
  LOAD(BufferDeviceDestroy);
  LOAD(StateAttachPinnedBuffer);
  LOAD(StateAttachDeviceBuffer);
  LOAD(DecodeParamsCreate);
  LOAD(DecodeParamsDestroy);
  LOAD(DecodeParamsSetOutputFormat);
  LOAD(DecodeJpegHost);
  LOAD(DecodeJpegTransferToDevice);
  LOAD(DecodeJpegDevice);
  return 1;
}

/* libnvjpeg.so.13, libnvjpeg.so, then the toolkit's own copy (as NVRTC's
 * loader does: /usr/local/cuda/lib64 is often not on the loader's path);
 * the message quotes the first dlopen error. */
static void load_once(void) {
  static const char *const NAMES[] = {"libnvjpeg.so.13", "libnvjpeg.so", "/usr/local/cuda/lib64/libnvjpeg.so.13"};
  void *lib = NULL;
  const char *libname = NULL;
  char first[384] = "";
  for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0] && !lib; i++) {
    lib = dlopen(libname = NAMES[i], RTLD_NOW | RTLD_LOCAL);
    const char *e = lib ? NULL : dlerror();
    if (i == 0 && e) snprintf(first, sizeof first, "%s", e);
  }
  if (!lib) {
    snprintf(loaded.why, sizeof loaded.why,
             "%s (nvJPEG is part of the CUDA toolkit's libraries; libnvjpeg.so and /usr/local/cuda/lib64 tried too)",
             *first ? first : "libnvjpeg.so.13: not found");
    loaded.status = RT_CUDA_ENOLIB;
    return;
  }
  NjApi a;
  memset(&a, 0, sizeof a);
  if (!load_table(lib, libname, &a)) {
    loaded.status = RT_CUDA_ENOLIB;
    dlclose(lib);
    return;
  }
  loaded.api = a;
  loaded.status = RT_CUDA_OK;
}

static RtCudaStatus nj_api(const NjApi **api, char *err, size_t errlen) {
  pthread_once(&loaded.once, load_once);
  if (loaded.status) {
    if (api) *api = NULL;
    return rt_cuda_fail(loaded.status, err, errlen, "%s", loaded.why);
  }
  if (api) *api = &loaded.api;
  return RT_CUDA_OK;
}

RtCudaStatus rt_nvjpeg_load(char *err, size_t errlen) { return nj_api(NULL, err, errlen); }

static const char *nj_status_name(nvjpegStatus_t s) {
  static const char *const NAMES[] = {
      "NVJPEG_STATUS_SUCCESS",
      "NVJPEG_STATUS_NOT_INITIALIZED",
      "NVJPEG_STATUS_INVALID_PARAMETER",
      "NVJPEG_STATUS_BAD_JPEG",
      "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
      "NVJPEG_STATUS_ALLOCATOR_FAILURE",
      "NVJPEG_STATUS_EXECUTION_FAILED",
      "NVJPEG_STATUS_ARCH_MISMATCH",
      "NVJPEG_STATUS_INTERNAL_ERROR",
      "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
      "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
  };
  return (unsigned)s < sizeof NAMES / sizeof NAMES[0] ? NAMES[s] : "NVJPEG_STATUS_?";
}

/* A failed nvJPEG call as "file:line: nvjpegX(args): NAME (what)"; RT_CUDA_OK when it succeeded. */
static RtCudaStatus nj_check(nvjpegStatus_t s, int line, const char *call, const char *what, char *err, size_t errlen) {
  if (s == NVJPEG_STATUS_SUCCESS) return RT_CUDA_OK;
  RtCudaStatus r = s == NVJPEG_STATUS_ALLOCATOR_FAILURE ? RT_CUDA_EDEVMEM : RT_CUDA_ECALL;
  return rt_cuda_fail(r, err, errlen, "%s:%d: %s: %s (status %d) (%s)", __FILE__, line, call, nj_status_name(s), (int)s,
                      what);
}

/* NJ(j, Fn, (args), "what") calls j->nj->Fn args and reports it as "nvjpegFn(args)". */
#define NJ(j, fn, args, what) nj_check((j)->nj->fn args, __LINE__, "nvjpeg" #fn #args, (what), err, errlen)

/* An image's own fault: the decoder refuses it, the caller decodes it on the CPU. */
static int image_fault(nvjpegStatus_t s) {
  return s == NVJPEG_STATUS_BAD_JPEG || s == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
         s == NVJPEG_STATUS_INCOMPLETE_BITSTREAM || s == NVJPEG_STATUS_INVALID_PARAMETER ||
         s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED;
}

enum { STATES = 4 };

struct RtNvjpeg {
  const NjApi *nj;
  const RtCudaApi *cu;
  RtNvjpegBackend backend;
  int max_batch;
  nvjpegHandle_t h;
  nvjpegJpegStream_t js; /* parses each image before it is decoded */
  /* hardware: batched states, each initialized for one batch size (0:
   * none), so that batches of a few sizes in turn (a share decoded on the
   * CPU varies by an image or two) do not initialize one every call; the
   * least recently used is initialized again for a new size */
  nvjpegJpegState_t bstate[STATES];
  int binit[STATES];
  int64_t bused[STATES], calls;
  int prechecked;              /* rt_nvjpeg_set_prechecked: no parse before the batch */
  const unsigned char **bdata; /* max_batch entries each: the images the batch takes */
  size_t *blen;
  nvjpegImage_t *bdst;
  int *bidx;
  /* gpu-hybrid: [0] GPU_HYBRID, [1] HYBRID (NULL where it could not be made) */
  nvjpegJpegDecoder_t dec[2];
  nvjpegJpegState_t dstate[2];
  nvjpegBufferPinned_t pinned[2];
  nvjpegBufferDevice_t devbuf;
  nvjpegDecodeParams_t params;
  int pin_next; /* the pinned buffer the next host phase writes */
  int pooled;   /* its memory from rt_nvjpeg_pool (counted in pool_use.decoders) */
};

/* The pool's callbacks (rt_nvjpeg_pool.h), or NULL for nvJPEG's own
 * allocators (rt_nvjpeg_set_pool(0): only to measure what the pool saves). */
static struct {
  pthread_mutex_t mu;
  int off, decoders; /* rt_nvjpeg_set_pool(0); decoders alive, the pool trimmed when none is */
} pool_use = {.mu = PTHREAD_MUTEX_INITIALIZER};
static NjDevAllocator pool_dev = {rt_nvjpeg_pool_dev_malloc, rt_nvjpeg_pool_dev_free};
static NjPinnedAllocator pool_pinned = {rt_nvjpeg_pool_pinned_malloc, rt_nvjpeg_pool_pinned_free};

void rt_nvjpeg_set_pool(int on) {
  pthread_mutex_lock(&pool_use.mu);
  pool_use.off = !on;
  pthread_mutex_unlock(&pool_use.mu);
}

const char *rt_nvjpeg_backend_name(RtNvjpegBackend b) {
  switch (b) {
  case RT_NVJPEG_AUTO: return "auto";
  case RT_NVJPEG_HARDWARE: return "hardware";
  case RT_NVJPEG_GPU_HYBRID: return "gpu-hybrid";
  }
  return "?";
}

RtNvjpegBackend rt_nvjpeg_backend(const RtNvjpeg *j) { return j ? j->backend : RT_NVJPEG_AUTO; }

/* Releases everything but the struct; every field may be NULL. */
static void release(RtNvjpeg *j) {
  const NjApi *a = j->nj;
  for (int k = 0; k < 2; k++) {
    if (j->dstate[k]) a->JpegStateDestroy(j->dstate[k]);
    if (j->dec[k]) a->DecoderDestroy(j->dec[k]);
    if (j->pinned[k]) a->BufferPinnedDestroy(j->pinned[k]);
    j->dstate[k] = NULL, j->dec[k] = NULL, j->pinned[k] = NULL;
  }
  if (j->devbuf) a->BufferDeviceDestroy(j->devbuf);
  if (j->params) a->DecodeParamsDestroy(j->params);
  for (int k = 0; k < STATES; k++) {
    if (j->bstate[k]) a->JpegStateDestroy(j->bstate[k]);
    j->bstate[k] = NULL, j->binit[k] = 0;
  }
  if (j->js) a->JpegStreamDestroy(j->js);
  if (j->h) a->Destroy(j->h);
  j->devbuf = NULL, j->params = NULL, j->js = NULL, j->h = NULL;
}

void rt_nvjpeg_free(RtNvjpeg *j) {
  if (!j) return;
  release(j);
  if (j->pooled) {
    pthread_mutex_lock(&pool_use.mu);
    if (--pool_use.decoders == 0) rt_nvjpeg_pool_trim();
    pthread_mutex_unlock(&pool_use.mu);
  }
  free(j->bdata);
  free(j->blen);
  free(j->bdst);
  free(j->bidx);
  free(j);
}

/* A handle for backend, with interpolated chroma upsampling (as libjpeg
 * does) where the library knows the flag, else without it. */
static nvjpegStatus_t create_handle(RtNvjpeg *j, nvjpegBackend_t backend) {
  NjDevAllocator *dev = j->pooled ? &pool_dev : NULL;
  NjPinnedAllocator *pin = j->pooled ? &pool_pinned : NULL;
  nvjpegStatus_t s = j->nj->CreateEx(backend, dev, pin, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, &j->h);
  if (s == NVJPEG_STATUS_INVALID_PARAMETER) s = j->nj->CreateEx(backend, dev, pin, NVJPEG_FLAGS_DEFAULT, &j->h);
  if (s != NVJPEG_STATUS_SUCCESS) j->h = NULL;
  return s;
}

/* The hardware path: the handle, the batched state initialized for max_batch. */
static RtCudaStatus make_hardware(RtNvjpeg *j, char *err, size_t errlen) {
  RtCudaStatus s;
  if ((s = nj_check(create_handle(j, NVJPEG_BACKEND_HARDWARE), __LINE__, "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)",
                    "the hardware JPEG decoder", err, errlen)) ||
      (s = NJ(j, JpegStreamCreate, (j->h, &j->js), "hardware decoder")) ||
      (s = NJ(j, JpegStateCreate, (j->h, &j->bstate[0]), "hardware decoder")) ||
      (s = NJ(j, DecodeBatchedInitialize, (j->h, j->bstate[0], j->max_batch, 1, NVJPEG_OUTPUT_RGBI),
              "hardware decoder")))
    return s;
  j->binit[0] = j->max_batch;
  return RT_CUDA_OK;
}

/* The gpu-hybrid path: the handle, two decoders with their states, the buffers and the parameters. */
static RtCudaStatus make_hybrid(RtNvjpeg *j, char *err, size_t errlen) {
  RtCudaStatus s;
  nvjpegStatus_t c = create_handle(j, NVJPEG_BACKEND_GPU_HYBRID);
  if (c != NVJPEG_STATUS_SUCCESS) c = create_handle(j, NVJPEG_BACKEND_DEFAULT);
  if ((s = nj_check(c, __LINE__, "nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID or DEFAULT)", "the GPU JPEG decoder", err,
                    errlen)))
    return s;
  static const nvjpegBackend_t KIND[2] = {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_HYBRID};
  for (int k = 0; k < 2; k++)
    if (j->nj->DecoderCreate(j->h, KIND[k], &j->dec[k]) != NVJPEG_STATUS_SUCCESS) j->dec[k] = NULL;
  if (!j->dec[0] && !j->dec[1])
    return NJ(j, DecoderCreate, (j->h, NVJPEG_BACKEND_DEFAULT, &j->dec[0]), "the GPU JPEG decoder");
  if ((s = NJ(j, JpegStreamCreate, (j->h, &j->js), "GPU decoder")) ||
      (s = NJ(j, BufferPinnedCreate, (j->h, j->pooled ? &pool_pinned : NULL, &j->pinned[0]), "GPU decoder")) ||
      (s = NJ(j, BufferPinnedCreate, (j->h, j->pooled ? &pool_pinned : NULL, &j->pinned[1]), "GPU decoder")) ||
      (s = NJ(j, BufferDeviceCreate, (j->h, j->pooled ? &pool_dev : NULL, &j->devbuf), "GPU decoder")) ||
      (s = NJ(j, DecodeParamsCreate, (j->h, &j->params), "GPU decoder")) ||
      (s = NJ(j, DecodeParamsSetOutputFormat, (j->params, NVJPEG_OUTPUT_RGBI), "GPU decoder")))
    return s;
  for (int k = 0; k < 2; k++) {
    if (!j->dec[k]) continue;
    if ((s = NJ(j, DecoderStateCreate, (j->h, j->dec[k], &j->dstate[k]), "GPU decoder")) ||
        (s = NJ(j, StateAttachDeviceBuffer, (j->dstate[k], j->devbuf), "GPU decoder")))
      return s;
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_nvjpeg_new(int max_batch, RtNvjpegBackend want, RtNvjpeg **out, char *err, size_t errlen) {
  if (!out || max_batch < 1 || (want != RT_NVJPEG_AUTO && want != RT_NVJPEG_HARDWARE && want != RT_NVJPEG_GPU_HYBRID))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_nvjpeg_new: max_batch %d, backend %d, out %p", max_batch,
                        (int)want, (void *)out);
  *out = NULL;
  const RtCudaApi *cu;
  const NjApi *nj;
  RtCudaStatus s;
  if ((s = rt_cuda_api(&cu, err, errlen)) || (s = nj_api(&nj, err, errlen))) return s;
  RtNvjpeg *j = calloc(1, sizeof *j);
  size_t n = (size_t)max_batch;
  if (!j || !(j->bdata = calloc(n, sizeof *j->bdata)) || !(j->blen = calloc(n, sizeof *j->blen)) ||
      !(j->bdst = calloc(n, sizeof *j->bdst)) || !(j->bidx = calloc(n, sizeof *j->bidx))) {
    if (j) j->nj = nj;
    rt_nvjpeg_free(j);
    return rt_cuda_fail(RT_CUDA_ENOMEM, err, errlen, "rt_nvjpeg_new: out of host memory (%d images)", max_batch);
  }
  j->nj = nj, j->cu = cu, j->max_batch = max_batch;
  pthread_mutex_lock(&pool_use.mu);
  j->pooled = !pool_use.off;
  pool_use.decoders += j->pooled;
  pthread_mutex_unlock(&pool_use.mu);
  rt_nvjpeg_pool_use(cu);
  s = RT_CUDA_EARG;
  if (want != RT_NVJPEG_GPU_HYBRID) {
    s = make_hardware(j, err, errlen);
    if (s == RT_CUDA_OK) j->backend = RT_NVJPEG_HARDWARE;
    if (s && want == RT_NVJPEG_AUTO) release(j); /* no JPEG engines here: the hybrid decoder */
  }
  if (want == RT_NVJPEG_GPU_HYBRID || (s && want == RT_NVJPEG_AUTO)) {
    s = make_hybrid(j, err, errlen);
    if (s == RT_CUDA_OK) j->backend = RT_NVJPEG_GPU_HYBRID;
  }
  if (s) {
    rt_nvjpeg_free(j);
    return s;
  }
  *out = j;
  return RT_CUDA_OK;
}

/* Parses one image into j->js; 1 when it is an RGB or grey JPEG nvJPEG can read. */
static int parse_ok(RtNvjpeg *j, const uint8_t *data, size_t len) {
  unsigned int nc = 0;
  if (!data || !len || j->nj->JpegStreamParse(j->h, data, len, 0, 0, j->js) != NVJPEG_STATUS_SUCCESS) return 0;
  if (j->nj->JpegStreamGetComponentsNum(j->js, &nc) != NVJPEG_STATUS_SUCCESS) return 0;
  return nc == 1 || nc == 3; /* CMYK and 2-channel images are the CPU's (rt_jpeg.h refuses CMYK too) */
}

static nvjpegImage_t image_of(uint8_t *dst, size_t pitch) {
  nvjpegImage_t im;
  memset(&im, 0, sizeof im);
  im.channel[0] = dst, im.pitch[0] = pitch;
  return im;
}

/* One nvjpegDecodeBatched call for the nb images gathered in j->b*, the
 * state re-initialized first when nb is not the size it was made for. */
static nvjpegStatus_t batch_call(RtNvjpeg *j, int nb, CUstream stream) {
  nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;
  int k = 0;
  for (int i = 0; i < STATES; i++)
    if (j->binit[i] == nb || (j->binit[k] != nb && j->bused[i] < j->bused[k])) k = i;
  if (!j->bstate[k] && (s = j->nj->JpegStateCreate(j->h, &j->bstate[k])) != NVJPEG_STATUS_SUCCESS) return s;
  if (j->binit[k] != nb) {
    j->binit[k] = 0;
    s = j->nj->DecodeBatchedInitialize(j->h, j->bstate[k], nb, 1, NVJPEG_OUTPUT_RGBI);
    if (s != NVJPEG_STATUS_SUCCESS) return s;
    j->binit[k] = nb;
  }
  j->bused[k] = ++j->calls;
  s = j->nj->DecodeBatched(j->h, j->bstate[k], j->bdata, j->blen, j->bdst, stream);
  if (s != NVJPEG_STATUS_SUCCESS) j->binit[k] = 0; /* a failed batch needs a new initialization */
  return s;
}

void rt_nvjpeg_set_prechecked(RtNvjpeg *j, int on) {
  if (j) j->prechecked = on != 0;
}

static RtCudaStatus decode_hardware(RtNvjpeg *j, int n, const uint8_t *const *data, const size_t *len,
                                    uint8_t *const *dst, const size_t *pitch, CUstream stream, uint8_t *failed,
                                    char *err, size_t errlen) {
  int nb = 0;
  for (int i = 0; i < n; i++) {
    int sup = 1;
    if (!data[i] || !len[i] ||
        (!j->prechecked && (!parse_ok(j, data[i], len[i]) ||
                            j->nj->DecodeBatchedSupported(j->h, j->js, &sup) != NVJPEG_STATUS_SUCCESS || sup != 0))) {
      failed[i] = 1; /* is_supported: 0 means the engines take it */
      continue;
    }
    j->bdata[nb] = data[i], j->blen[nb] = len[i], j->bdst[nb] = image_of(dst[i], pitch[i]), j->bidx[nb] = i;
    nb++;
  }
  if (nb == 0) return RT_CUDA_OK;
  nvjpegStatus_t s = batch_call(j, nb, stream);
  if (s == NVJPEG_STATUS_SUCCESS) return RT_CUDA_OK;
  if (!image_fault(s))
    return nj_check(s, __LINE__, "nvjpegDecodeBatched(h, state, data, len, dst, stream)", "a batch of JPEG images", err,
                    errlen);
  /* An image that parsed is still bad (its entropy-coded data, say): find it
   * by decoding one at a time, so that the others are not lost.  The bad
   * one's buffer may hold what the failed batch wrote before it stopped. */
  for (int b = 0; b < nb; b++) {
    int i = j->bidx[b];
    /* entry 0 carries the one image (for b > 0, entry 0's own image is done) */
    j->bdata[0] = j->bdata[b], j->blen[0] = j->blen[b], j->bdst[0] = j->bdst[b];
    s = batch_call(j, 1, stream);
    if (s == NVJPEG_STATUS_SUCCESS) continue;
    if (!image_fault(s))
      return nj_check(s, __LINE__, "nvjpegDecodeBatched(h, state, data, len, dst, stream)", "one JPEG image", err,
                      errlen);
    failed[i] = 1;
  }
  return RT_CUDA_OK;
}

/* Image i through the decoupled API on decoder k; the status of the first phase that failed. */
static nvjpegStatus_t decode_one(RtNvjpeg *j, int k, nvjpegImage_t *im, CUstream stream, RtCudaStatus *cu_status,
                                 char *err, size_t errlen) {
  const NjApi *a = j->nj;
  nvjpegStatus_t s = a->StateAttachPinnedBuffer(j->dstate[k], j->pinned[j->pin_next]);
  if (s == NVJPEG_STATUS_SUCCESS) s = a->DecodeJpegHost(j->h, j->dec[k], j->dstate[k], j->params, j->js);
  if (s != NVJPEG_STATUS_SUCCESS) return s;
  j->pin_next ^= 1;
  /* the last image's device phase must be done with the shared device buffer */
  if ((*cu_status = RT_CU(j->cu, StreamSynchronize, (stream), "before a JPEG image's transfer", err, errlen)))
    return NVJPEG_STATUS_EXECUTION_FAILED;
  s = a->DecodeJpegTransferToDevice(j->h, j->dec[k], j->dstate[k], j->js, stream);
  if (s == NVJPEG_STATUS_SUCCESS) s = a->DecodeJpegDevice(j->h, j->dec[k], j->dstate[k], im, stream);
  return s;
}

static RtCudaStatus decode_hybrid(RtNvjpeg *j, int n, const uint8_t *const *data, const size_t *len,
                                  uint8_t *const *dst, const size_t *pitch, CUstream stream, uint8_t *failed, char *err,
                                  size_t errlen) {
  for (int i = 0; i < n; i++) {
    if (!parse_ok(j, data[i], len[i])) {
      failed[i] = 1;
      continue;
    }
    int k = -1;
    for (int c = 0; c < 2 && k < 0; c++) {
      int sup = 1;
      if (j->dec[c] && j->nj->DecoderJpegSupported(j->dec[c], j->js, j->params, &sup) == NVJPEG_STATUS_SUCCESS &&
          sup == 0)
        k = c;
    }
    if (k < 0) {
      failed[i] = 1;
      continue;
    }
    nvjpegImage_t im = image_of(dst[i], pitch[i]);
    RtCudaStatus cs = RT_CUDA_OK;
    nvjpegStatus_t s = decode_one(j, k, &im, stream, &cs, err, errlen);
    if (cs) return cs;
    if (s == NVJPEG_STATUS_SUCCESS) continue;
    if (!image_fault(s))
      return nj_check(s, __LINE__, "nvjpegDecodeJpeg{Host,TransferToDevice,Device}(...)", "one JPEG image", err,
                      errlen);
    failed[i] = 1;
  }
  return RT_CUDA_OK;
}

RtCudaStatus rt_nvjpeg_decode(RtNvjpeg *j, int n, const uint8_t *const *data, const size_t *len, uint8_t *const *dst,
                              const size_t *pitch, CUstream stream, uint8_t *failed, char *err, size_t errlen) {
  if (!j || n < 0 || n > j->max_batch || (n > 0 && (!data || !len || !dst || !pitch || !failed)))
    return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_nvjpeg_decode: %d images for a decoder of %d, or a NULL array",
                        n, j ? j->max_batch : 0);
  for (int i = 0; i < n; i++) {
    failed[i] = 0;
    if (!dst[i]) return rt_cuda_fail(RT_CUDA_EARG, err, errlen, "rt_nvjpeg_decode: image %d has no destination", i);
  }
  if (n == 0) return RT_CUDA_OK;
  /* the stream's earlier decodes are done: what nvJPEG freed in them may serve this one */
  if (j->pooled) {
    RtCudaStatus s = RT_CU(j->cu, StreamSynchronize, (stream), "before a batch of JPEG images", err, errlen);
    if (s) return s;
    rt_nvjpeg_pool_fence();
  }
  return j->backend == RT_NVJPEG_HARDWARE ? decode_hardware(j, n, data, len, dst, pitch, stream, failed, err, errlen)
                                          : decode_hybrid(j, n, data, len, dst, pitch, stream, failed, err, errlen);
}
