/* compile.h - one compile of a .net (or .onnx) file, from bytes to the final IR.
 *
 * The sequence every user of the compiler needs (the netc CLI, tools, tests,
 * the fuzzer): read the file, parse, lower to the forward IR, run the pass
 * pipeline.  Errors go to the Diag; nothing here prints or exits. */
#ifndef NETC_COMPILE_H
#define NETC_COMPILE_H

#include <stddef.h>

#include "pipeline.h"

/* Reads the whole file into malloc'd memory, NUL-terminated (*len excludes
 * the NUL).  NULL, with a message naming the file in d, when it is missing,
 * a directory, unreadable or larger than 256 MB. */
char *compile_read_file(const char *path, size_t *len, Diag *d);

/* Parses src (len bytes, named path in messages), lowers it and, when cx is
 * not NULL, runs the pipeline with it (NULL: the forward graph, before any
 * pass).  src must stay alive while d may still print source lines for it.
 * Returns the graph, or NULL after errors. */
IrGraph *compile_source(Arena *a, Diag *d, const char *path, const char *src, size_t len, PassCtx *cx);

/* 1 when path names an ONNX model (it ends in .onnx): compile_onnx reads it. */
int compile_is_onnx(const char *path);

/* The train section an ONNX model gets without --train (docs/onnx.md). */
extern const char COMPILE_DEFAULT_TRAIN[];

/* An ONNX model (bytes[0..len-1], named path) to the forward IR, with the
 * train section of the file train_file (a file holding only `train {...}`
 * in the language) or, when NULL, COMPILE_DEFAULT_TRAIN; with weights_out,
 * the initializers' values written there as safetensors (netc
 * --weights-out); then, when cx is not NULL, the pipeline.  Returns the graph, or NULL after errors. */
IrGraph *compile_onnx(Arena *a, Diag *d, const char *path, const void *bytes, size_t len, const char *train_file,
                      const char *weights_out, PassCtx *cx);

/* compile_read_file, then compile_source (or compile_onnx for a .onnx file,
 * with cx's train_file); the source is released (and d detached from it)
 * before returning. */
IrGraph *compile_file(Arena *a, Diag *d, const char *path, PassCtx *cx);

#endif
