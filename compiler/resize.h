/* resize.h - the forward graph at another image size (netc --image-size).
 *
 * A network file declares its image input's size (`input image :
 * f32[3, 224, 224]`); the same network trains and runs at others, as
 * progressive-resizing recipes do (128, 160, 192 pixels, then 224 or 288).
 * ir_resize_image gives the forward graph's one image input (the rank-4
 * float input) height h and width w and types every node again with
 * ir_infer, in order; parameters keep their shapes, so a network whose
 * classifier reads a global pool takes any size its windows fit, and one
 * whose linear layer reads a flattened feature map is refused at any other
 * size than its own. */
#ifndef NETC_RESIZE_H
#define NETC_RESIZE_H

#include <stdint.h>

#include "diag.h"
#include "ir.h"

/* Largest height or width accepted (an image of 16384x16384 pixels). */
enum { RESIZE_MAX_SIDE = 16384 };

/* Returns 0, or -1 after an error in d naming the node that cannot take
 * the new size (with its source location) or why the graph has no image
 * input to resize.  g must be a forward graph (before autodiff). */
int ir_resize_image(IrGraph *g, int64_t h, int64_t w, Diag *d);

/* Parses "S" or "HxW" (1..RESIZE_MAX_SIDE each) into hw[0], hw[1]; 0, or
 * -1 when it is no such size. */
int resize_parse(const char *s, int64_t hw[2]);

#endif
