/* traintest.h - what the rt_init and rt_sched tests share: a model
 * compiled through the pipeline for training or for inference. */
#ifndef NETC_TRAINTEST_H
#define NETC_TRAINTEST_H

#include "ir.h"

/* Compiles ROOT/rel through the passes up to and including autodiff (the
 * later ones turned off), for training or (inference != 0) for inference.
 * Messages go to stderr; NULL on errors. */
IrGraph *traintest_compile(Arena *a, const char *root, const char *rel, int inference);
/* The same from source text (named "test.net" in messages). */
IrGraph *traintest_compile_text(Arena *a, const char *src, int inference);

#endif
