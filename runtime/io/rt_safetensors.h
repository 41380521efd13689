/* rt_safetensors.h - read and write tensors in the safetensors format.
 *
 * A safetensors file is an 8-byte little-endian header length H, H bytes of
 * JSON mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus
 * an optional "__metadata__" map of strings), then the raw little-endian
 * data, offsets counted from the first byte after the header.  netc keeps
 * weights and checkpoints in it under torchvision's state_dict names
 * ("layer1.0.bn2.running_mean"), so PyTorch can load what netc trains.
 *
 * Reading maps the file (or reads it whole where it cannot be mapped) and
 * checks every rule in docs/safetensors.md before handing out a tensor;
 * tensor data points into the mapping and lives until rt_st_close.
 * Writing collects tensors and metadata, then replaces the target
 * atomically: a temporary file beside it is written, fsynced and renamed
 * over it, so a reader sees the old file or the new one, never a part.
 *
 * Every call returns an RtStStatus; a failed open fills the caller's error
 * buffer, a failed writer call leaves its message in rt_st_writer_error().
 * Messages name the file and what is wrong with it.  Nothing is printed. */
#ifndef NETC_RT_SAFETENSORS_H
#define NETC_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum RtStStatus {
  RT_ST_OK = 0,
  RT_ST_ERR_IO,     /* open, read, write, fsync or rename failed */
  RT_ST_ERR_FORMAT, /* the bytes are not a valid safetensors file */
  RT_ST_ERR_ARG,    /* a caller's request is invalid (bad name, size, dtype) */
  RT_ST_ERR_NOMEM
} RtStStatus;

/* The dtypes of whole bytes that safetensors defines. */
typedef enum RtStDtype {
  RT_ST_BOOL,
  RT_ST_U8,
  RT_ST_I8,
  RT_ST_F8_E5M2,
  RT_ST_F8_E4M3,
  RT_ST_I16,
  RT_ST_U16,
  RT_ST_F16,
  RT_ST_BF16,
  RT_ST_I32,
  RT_ST_U32,
  RT_ST_F32,
  RT_ST_F64,
  RT_ST_I64,
  RT_ST_U64,
  RT_ST_DTYPE_COUNT
} RtStDtype;

enum {
  RT_ST_ERRMAX = 512,                  /* enough for any message here */
  RT_ST_MAX_HEADER = 100 * 1000 * 1000 /* bytes, as the reference reader */
};

/* One tensor of an open file.  data points into the file's bytes and is
 * not necessarily aligned beyond 1 (files from netc's writer put every
 * tensor on a multiple of its element size when the buffer is 8-aligned). */
typedef struct RtStTensor {
  const char *name;
  RtStDtype dtype;
  int ndim;             /* 0 for a scalar */
  const int64_t *shape; /* ndim entries */
  int64_t numel;        /* 1 for a scalar, 0 when any dim is 0 */
  const void *data;
  size_t nbytes;
} RtStTensor;

typedef struct RtStFile RtStFile;
typedef struct RtStWriter RtStWriter;

const char *rt_st_dtype_name(RtStDtype dt);
size_t rt_st_dtype_size(RtStDtype dt);
/* Maps "F32" etc. to its dtype; RT_ST_ERR_ARG when the name is unknown. */
RtStStatus rt_st_dtype_parse(const char *name, RtStDtype *out);

/* Opens and validates path.  On failure *out is NULL and err (when
 * errcap > 0) holds "path: what is wrong". */
RtStStatus rt_st_open(const char *path, RtStFile **out, char *err, size_t errcap);
/* The same over len bytes at buf, which the handle borrows: buf must
 * outlive it.  label names the bytes in messages. */
RtStStatus rt_st_open_memory(const void *buf, size_t len, const char *label, RtStFile **out, char *err, size_t errcap);
void rt_st_close(RtStFile *f); /* takes NULL */

/* Tensors in the order the header lists them. */
size_t rt_st_count(const RtStFile *f);
const RtStTensor *rt_st_tensor(const RtStFile *f, size_t i);
/* NULL when no tensor has that exact name. */
const RtStTensor *rt_st_find(const RtStFile *f, const char *name);

/* "__metadata__" entries in header order; rt_st_meta_get is NULL when the
 * key is absent. */
size_t rt_st_meta_count(const RtStFile *f);
void rt_st_meta_at(const RtStFile *f, size_t i, const char **key, const char **value);
const char *rt_st_meta_get(const RtStFile *f, const char *key);

/* How the writer holds a tensor's bytes until rt_st_writer_write. */
typedef enum RtStHold {
  RT_ST_COPY,  /* copied now; the caller may reuse its buffer */
  RT_ST_BORROW /* referenced; the caller keeps it alive and unchanged */
} RtStHold;

/* NULL when out of memory. */
RtStWriter *rt_st_writer_new(void);
void rt_st_writer_free(RtStWriter *w); /* takes NULL */
/* Adds a tensor.  nbytes must equal the product of shape times the dtype
 * size; the name must be non-empty, not "__metadata__", and not added
 * before.  data may be NULL only when nbytes is 0. */
RtStStatus rt_st_writer_add(RtStWriter *w, const char *name, RtStDtype dt, int ndim, const int64_t *shape,
                            const void *data, size_t nbytes, RtStHold hold);
/* Sets a metadata entry; setting a key again replaces its value. */
RtStStatus rt_st_writer_set_meta(RtStWriter *w, const char *key, const char *value);
/* Writes everything added so far to path, atomically.  On failure path is
 * as it was and no temporary file is left behind. */
RtStStatus rt_st_writer_write(RtStWriter *w, const char *path);
/* The message of the last failed call on w, "" when none failed. */
const char *rt_st_writer_error(const RtStWriter *w);

#endif
