/* onnx_external.h - an ONNX initializer's values kept outside the model
 * file (TensorProto data_location EXTERNAL), as torch.onnx.export's default
 * exporter writes them: MODEL.onnx beside MODEL.onnx.data.
 *
 * The tensor's external_data entries name the file (`location`, relative
 * to the model's folder), and where its bytes start (`offset`, default 0)
 * and how many there are (`length`, default: as many as the shape needs).
 * Each data file is opened once (without blocking, a regular file only)
 * and each tensor's bytes are read from it into memory, which stays valid
 * until onnx_external_close: read, not mapped, so that a file cut short
 * meanwhile is an error, never a SIGBUS.  A location that is absolute or
 * climbs out of the model's folder ("..") is refused, as the ONNX checker
 * refuses it. */
#ifndef NETC_ONNX_EXTERNAL_H
#define NETC_ONNX_EXTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

typedef struct OnnxExternalFile {
  char *location;
  int fd;
  uint64_t size; /* when opened */
} OnnxExternalFile;

typedef struct OnnxExternal {
  const char *model_path; /* the .onnx file, whose folder holds the data files */
  OnnxExternalFile *file;
  int nfile, cap;
  uint8_t **bytes; /* what was read, freed at close */
  int nbytes, capbytes;
} OnnxExternal;

/* Whether t keeps its values outside the model. */
int onnx_external_is(const Onnx__TensorProto *t);

/* The nbytes bytes of t's values, or NULL with what is wrong in err
 * ("keeps its values in 'm.onnx.data', which cannot be opened: ..."). */
const uint8_t *onnx_external_data(OnnxExternal *x, const Onnx__TensorProto *t, size_t nbytes, char *err, size_t errlen);

/* Closes every data file and frees what was read. */
void onnx_external_close(OnnxExternal *x);

#endif
