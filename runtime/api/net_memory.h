/* net_memory.h - the memory limit (NetLoadOpts.memory_limit and
 * memory_fraction): what an executor's plan takes at a batch, and the
 * largest batch that fits a budget, for net_api's check before an executor
 * is made and its message when one cannot be.  Internal to libnetrt_api. */
#ifndef NETC_NET_MEMORY_H
#define NETC_NET_MEMORY_H

#include <stdint.h>

#include "ir.h"

/* Bytes an executor of g at batch holds for its plan: on the GPU the
 * activation arena of g's memory plan at that batch (made on a copy of g)
 * and the parameters and state; on the CPU every value's own buffer.  The
 * GPU's kernel scratch and cuDNN workspace come on top (rt_gpu fits them
 * under the limit).  -1 when it cannot be planned. */
double net_memory_need(const IrGraph *g, int64_t batch, int gpu);

/* The largest batch below `below` at which g's need, and also's when also
 * is not NULL (the inference graph made beside the training one), fit
 * `budget` bytes together, or 0 when not even batch 1 does. */
int64_t net_memory_largest_batch(const IrGraph *g, const IrGraph *also, int64_t below, int gpu, double budget);

#endif
