/* resize.c - the forward graph at another image size (see resize.h).
 *
 *   input image : f32[N,3,224,224]        input image : f32[N,3,160,160]
 *   %2 = conv2d(image, @conv1.weight)     %2 = conv2d(...)  -> f32[N,64,80,80]
 *        -> f32[N,64,112,112]             ...
 *
 * Every node is typed again from its inputs, so the shapes downstream follow
 * the new size exactly as lowering would have computed them from a file
 * declaring it; only the parameters stay as they are. */
#include "resize.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int is_image(const IrValue *v) {
  IrDtype dt = v->type.dtype;
  return v->kind == IR_VAL_INPUT && v->type.rank == 4 && v->type.layout == IR_LAYOUT_NCHW &&
         (dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16);
}

int ir_resize_image(IrGraph *g, int64_t h, int64_t w, Diag *d) {
  SrcLoc none = {0};
  if (h < 1 || w < 1 || h > RESIZE_MAX_SIDE || w > RESIZE_MAX_SIDE) {
    diag_error(d, none, "image size %" PRId64 "x%" PRId64 ": each side must be 1 to %d", h, w, RESIZE_MAX_SIDE);
    return -1;
  }
  int image = -1;
  for (int v = 0; v < g->nval; v++) {
    if (!is_image(&g->val[v])) continue;
    if (image >= 0) {
      diag_error(d, none, "--image-size: the network has two image inputs ('%s' and '%s'); netc resizes one",
                 g->val[image].name, g->val[v].name);
      return -1;
    }
    image = v;
  }
  if (image < 0) {
    diag_error(d, none, "--image-size: the network has no image input (a float input of [C, H, W])");
    return -1;
  }
  IrValue *in = &g->val[image];
  int64_t was_h = in->type.dim[2], was_w = in->type.dim[3];
  if (was_h == h && was_w == w) return 0;
  in->type.dim[2] = h, in->type.dim[3] = w;
  if (in->type.dim[1] * h * w > (int64_t)1 << 31) {
    diag_error(d, none,
               "--image-size %" PRId64 "x%" PRId64 ": input '%s' would hold %" PRId64
               " elements per image, more than netc supports",
               h, w, in->name, in->type.dim[1] * h * w);
    return -1;
  }
  IrType *out = NULL;
  int cap = 0, rc = 0;
  for (int n = 0; n < g->nnode && !rc; n++) {
    IrNode *node = &g->node[n];
    if (node->nout > cap) {
      IrType *more = realloc(out, sizeof *out * (size_t)node->nout);
      if (!more) {
        diag_error(d, none, "out of memory");
        rc = -1;
        break;
      }
      out = more, cap = node->nout;
    }
    char why[512];
    if (ir_infer(g, node, out, why, sizeof why)) {
      diag_error(d, node->loc,
                 "at image size %" PRId64 "x%" PRId64 " (the file says %" PRId64 "x%" PRId64 "): %s '%s': %s", h, w,
                 was_h, was_w, ir_op_info(node->op)->name, node->name ? node->name : "?", why);
      rc = -1;
      break;
    }
    for (int i = 0; i < node->nout; i++) g->val[node->out[i]].type = out[i];
  }
  free(out);
  return rc;
}

static int side(const char *s, char **end, int64_t *v) {
  if (*s < '0' || *s > '9') return -1;
  errno = 0;
  long long x = strtoll(s, end, 10);
  if (errno || x < 1 || x > RESIZE_MAX_SIDE) return -1;
  *v = x;
  return 0;
}

int resize_parse(const char *s, int64_t hw[2]) {
  char *end;
  if (!s || side(s, &end, &hw[0])) return -1;
  if (!*end) {
    hw[1] = hw[0];
    return 0;
  }
  if (*end != 'x' || side(end + 1, &end, &hw[1]) || *end) return -1;
  return 0;
}
