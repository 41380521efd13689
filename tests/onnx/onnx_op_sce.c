/* onnx_op_sce.c - ONNX SoftmaxCrossEntropyLoss on rt_ref_softmax_ce_fwd.
 *
 * scores [N, C, D1, ...] become rows [N*D1*..., C] (class axis moved last),
 * labels the matching [N*D1*...].  The optional log_prob output is the log
 * of the kernel's prob over all rows.  The loss:
 *  - reduction=mean, no weights: one kernel call over the rows whose label
 *    is not ignore_index; the kernel's batch mean is ONNX's loss;
 *  - weights, reduction=none or sum: the kernel runs once per row (N = 1)
 *    giving -log p[label]; the mapper multiplies by weights[label] and
 *    reduces (none: per element, sum: total, mean: total / sum of weights).
 * Ignored rows contribute 0 loss and 0 weight, as in ONNX. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_case.h"
#include "rt_ref.h"

typedef struct Sce {
  int64_t rows, classes;
  float *x;        /* [rows, classes] */
  int32_t *label;  /* [rows]; ignored rows hold 0 */
  char *ignored;   /* [rows] */
  float *prob;     /* [rows, classes] */
  float *packed;   /* kept rows of x, for the batch-mean call */
  int32_t *plabel; /* their labels */
} Sce;

static void sce_free(Sce *s) {
  free(s->x);
  free(s->label);
  free(s->ignored);
  free(s->prob);
  free(s->packed);
  free(s->plabel);
}

/* Fills s from scores and labels; ONNX_RUN_OK or the failing status. */
static OnnxRunStatus sce_rows(OnnxCase *c, const OnnxTensor *x, const OnnxTensor *y, Sce *s) {
  if (x->ndim < 2 || y->ndim != x->ndim - 1 || y->dims[0] != x->dims[0])
    return onnx_case_error(c, "labels shape does not match scores");
  for (int d = 2; d < x->ndim; d++)
    if (y->dims[d - 1] != x->dims[d]) return onnx_case_error(c, "labels shape does not match scores");
  if (x->dims[0] == 0) return onnx_case_error(c, "empty batch");
  if (!y->i) return onnx_case_skip(c, "labels are %s, not an integer type", onnx_dtype_name(y->dtype));
  int64_t N = x->dims[0], inner = onnx_shape_count(x->dims, 2, x->ndim);
  s->classes = x->dims[1];
  s->rows = N * inner;
  size_t nx = (size_t)(s->rows * s->classes), nr = (size_t)s->rows;
  s->x = malloc((nx ? nx : 1) * sizeof *s->x);
  s->prob = malloc((nx ? nx : 1) * sizeof *s->prob);
  s->packed = malloc((nx ? nx : 1) * sizeof *s->packed);
  s->label = calloc(nr ? nr : 1, sizeof *s->label);
  s->plabel = calloc(nr ? nr : 1, sizeof *s->plabel);
  s->ignored = calloc(nr ? nr : 1, 1);
  if (!s->x || !s->prob || !s->packed || !s->label || !s->plabel || !s->ignored)
    return onnx_case_error(c, "out of memory");
  onnx_shape_axis_to_last(x->f, N, s->classes, inner, s->x);
  const Onnx__AttributeProto *ii = onnx_attr_find(c->node, "ignore_index");
  for (int64_t r = 0; r < s->rows; r++) {
    if (ii && ii->has_i && y->i[r] == ii->i)
      s->ignored[r] = 1;
    else if (y->i[r] < 0 || y->i[r] >= s->classes)
      return onnx_case_error(c, "label %lld out of range", (long long)y->i[r]);
    else
      s->label[r] = (int32_t)y->i[r];
  }
  return ONNX_RUN_OK;
}

/* Loss with reduction=mean and no weights: the kernel's own batch mean. */
static OnnxRunStatus sce_mean(OnnxCase *c, Sce *s, float *loss) {
  int64_t kept = 0;
  for (int64_t r = 0; r < s->rows; r++) {
    if (s->ignored[r]) continue;
    memcpy(s->packed + kept * s->classes, s->x + r * s->classes, (size_t)s->classes * sizeof *s->packed);
    s->plabel[kept++] = s->label[r];
  }
  if (kept == 0) return onnx_case_skip(c, "every label is ignore_index (0/0 mean)");
  return onnx_case_kernel(c, rt_ref_softmax_ce_fwd((int)kept, (int)s->classes, s->packed, s->plabel, 0.0f, loss, NULL),
                          "rt_ref_softmax_ce_fwd");
}

/* Loss per row from one kernel call each, weighted and reduced here. */
static OnnxRunStatus sce_per_row(OnnxCase *c, Sce *s, const OnnxTensor *w, const char *red, float *loss) {
  double total = 0, wsum = 0;
  for (int64_t r = 0; r < s->rows; r++) {
    float l = 0, wr = 0;
    if (!s->ignored[r]) {
      OnnxRunStatus st = onnx_case_kernel(
          c, rt_ref_softmax_ce_fwd(1, (int)s->classes, s->x + r * s->classes, &s->label[r], 0.0f, &l, NULL),
          "rt_ref_softmax_ce_fwd");
      if (st != ONNX_RUN_OK) return st;
      wr = w ? w->f[s->label[r]] : 1.0f;
    }
    if (strcmp(red, "none") == 0) loss[r] = wr * l;
    total += (double)wr * l;
    wsum += wr;
  }
  if (strcmp(red, "sum") == 0)
    loss[0] = (float)total;
  else if (strcmp(red, "mean") == 0)
    loss[0] = (float)(total / wsum);
  return ONNX_RUN_OK;
}

static OnnxRunStatus sce_run(OnnxCase *c, Sce *s) {
  const OnnxTensor *x = onnx_case_float_in(c, 0), *y, *w = NULL;
  if (!x) return c->status;
  if (c->nin < 2 || !(y = c->in[1])) return onnx_case_error(c, "labels missing");
  if (c->nin > 2 && c->in[2] && !(w = onnx_case_float_in(c, 2))) return c->status;
  char red[16];
  onnx_attr_string(c->node, "reduction", "mean", red, sizeof red);
  if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
    return onnx_case_error(c, "unknown reduction '%s'", red);
  OnnxRunStatus st = sce_rows(c, x, y, s);
  if (st != ONNX_RUN_OK) return st;
  if (w && (w->ndim != 1 || w->dims[0] != s->classes)) return onnx_case_error(c, "weights are not [C]");

  int none = strcmp(red, "none") == 0;
  if (onnx_case_out_f(c, 0, none ? y->ndim : 0, y->dims)) return c->status;
  st = !w && strcmp(red, "mean") == 0 ? sce_mean(c, s, c->out[0].f) : sce_per_row(c, s, w, red, c->out[0].f);
  if (st != ONNX_RUN_OK || c->nout < 2) return st;

  float unused;
  st = onnx_case_kernel(c, rt_ref_softmax_ce_fwd((int)s->rows, (int)s->classes, s->x, s->label, 0.0f, &unused, s->prob),
                        "rt_ref_softmax_ce_fwd");
  if (st != ONNX_RUN_OK || onnx_case_out_f(c, 1, x->ndim, x->dims)) return st != ONNX_RUN_OK ? st : c->status;
  for (int64_t k = 0; k < s->rows * s->classes; k++) s->prob[k] = logf(s->prob[k]);
  onnx_shape_last_to_axis(s->prob, x->dims[0], s->classes, s->rows / x->dims[0], c->out[1].f);
  return ONNX_RUN_OK;
}

OnnxRunStatus onnx_op_sce(OnnxCase *c) {
  static const char *const KNOWN[] = {"ignore_index", "reduction", NULL};
  if (onnx_case_unknown_attr(c, KNOWN)) return c->status;
  Sce s = {0};
  OnnxRunStatus st = sce_run(c, &s);
  sce_free(&s);
  return st;
}
