/* cg_emit.c - building a node's launches (cg_emit.h): its errors, grid
 * sizing, and each launch as a kernel name, the template's #defines and
 * the kernel's parameters, instantiated into the node's source.
 *
 * A node's source may be compiled together with every other node's in one
 * NVRTC program, so each instantiation is wrapped in a namespace of its own
 * (netc_k<node>_<i>: helpers do not collide; the kernels are extern "C" and
 * named k<node>_...) and followed by an #undef of every #define it got.
 * Templates other than eltwise.cu are preceded by common.cu (storage types,
 * conversions, reductions).
 *
 * Vector widths: a flat elementwise kernel moves 16 bytes per access with
 * a scalar tail; a per-channel kernel on a channels-last tensor uses the
 * widest vector (at most 16 bytes) whose width divides C.  Every tensor's
 * base must be 16-byte aligned (the memory plan's offsets are multiples of
 * 256).  Grids of grid-stride kernels are capped at 8 blocks of 256 per SM
 * (one full wave). */
#include "cg_emit.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cg_tmpl.h"

int cg_emit_fail(Emit *e, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (e->err && e->errlen)
    snprintf(e->err, e->errlen, "node %d (%s, op %s): %s", e->node, e->n->name ? e->n->name : "unnamed",
             ir_op_info(e->n->op)->name, msg);
  return -1;
}

int cg_emit_vec(IrDtype dt, int C) {
  int v = cg_tmpl_flat_vec(dt);
  while (v > 1 && C % v != 0) v /= 2;
  return v;
}

/* Blocks of BLOCK threads one SM holds at once (its thread limit; the
 * kernels' __launch_bounds__(BLOCK) leave the registers to fit). */
static int blocks_per_sm(const Emit *e) {
  int t = e->dev->max_threads_per_sm > 0 ? e->dev->max_threads_per_sm : 2048;
  return t / BLOCK > 1 ? t / BLOCK : 1;
}

unsigned cg_emit_grid_1d(const Emit *e, int64_t units) {
  int64_t cap = (int64_t)(e->dev->sm_count > 0 ? e->dev->sm_count : 1) * blocks_per_sm(e);
  int64_t b = (units + BLOCK - 1) / BLOCK;
  if (b < 1) b = 1;
  return (unsigned)(b < cap ? b : cap);
}

void cg_emit_attr2(const IrNode *n, const char *key, int dflt, int v[2]) {
  const IrAttr *a = ir_attr_find(n, key);
  v[0] = v[1] = dflt;
  if (a && a->n >= 1) v[0] = v[1] = (int)a->i[0];
  if (a && a->n >= 2) v[1] = (int)a->i[1];
}

int cg_emit_check_f32(Emit *e, int first_in, int last_in, int first_out, int last_out) {
  for (int i = first_in; i <= last_in; i++)
    if (in_type(e, i)->dtype != IR_DT_F32) return cg_emit_fail(e, "input %d is not f32", i);
  for (int i = first_out; i <= last_out; i++)
    if (out_type(e, i)->dtype != IR_DT_F32) return cg_emit_fail(e, "output %d is not f32", i);
  return 0;
}

void cg_emit_window_defs(Emit *e, const IrType *tx, const IrType *ty) {
  int k[2], s[2], p[2];
  cg_emit_attr2(e->n, "k", 1, k);
  cg_emit_attr2(e->n, "s", 1, s);
  cg_emit_attr2(e->n, "p", 0, p);
  cg_emit_def(e, "NETC_H", "%lld", (long long)tx->dim[1]);
  cg_emit_def(e, "NETC_W", "%lld", (long long)tx->dim[2]);
  cg_emit_def(e, "NETC_HO", "%lld", (long long)ty->dim[1]);
  cg_emit_def(e, "NETC_WO", "%lld", (long long)ty->dim[2]);
  cg_emit_def(e, "NETC_R", "%d", k[0]);
  cg_emit_def(e, "NETC_S", "%d", k[1]);
  cg_emit_def(e, "NETC_SH", "%d", s[0]);
  cg_emit_def(e, "NETC_SW", "%d", s[1]);
  cg_emit_def(e, "NETC_PH", "%d", p[0]);
  cg_emit_def(e, "NETC_PW", "%d", p[1]);
}

void cg_emit_def(Emit *e, const char *name, const char *fmt, ...) {
  if (e->ndefs >= MAX_DEFS) return;
  snprintf(e->defs[e->ndefs][0], DEF_LEN, "%s", name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->defs[e->ndefs][1], DEF_LEN, fmt, ap);
  va_end(ap);
  e->ndefs++;
}

void cg_emit_def_float(Emit *e, const char *name, double v) {
  char b[48];
  cg_tmpl_float(b, sizeof b, v);
  cg_emit_def(e, name, "%s", b);
}

int cg_emit_begin(Emit *e, const char *stage) {
  if (e->k->nlaunch >= CG_K_MAX_LAUNCH) return cg_emit_fail(e, "more than %d launches", CG_K_MAX_LAUNCH);
  e->cur = &e->k->launch[e->k->nlaunch];
  memset(e->cur, 0, sizeof *e->cur);
  int len = snprintf(e->cur->name, sizeof e->cur->name, "k%d_%s%s%s_%s_%s", e->node, ir_op_info(e->n->op)->name,
                     *stage ? "_" : "", stage, e->dtype, e->layout);
  if (len < 0 || (size_t)len >= sizeof e->cur->name) return cg_emit_fail(e, "kernel name too long");
  e->ndefs = 0;
  cg_emit_def(e, "NETC_KERNEL_NAME", "%s", e->cur->name);
  return 0;
}

void cg_emit_args(Emit *e, int nargs, const CgKArg *a) {
  e->cur->nargs = nargs;
  for (int i = 0; i < nargs; i++) e->cur->args[i] = a[i];
}

int cg_emit_end(Emit *e, const char *tmpl, unsigned gx, unsigned gy, unsigned bx, unsigned by) {
  if (e->ndefs >= MAX_DEFS) return cg_emit_fail(e, "too many template parameters");
  CgDefine d[MAX_DEFS];
  for (int i = 0; i < e->ndefs; i++) d[i] = (CgDefine){e->defs[i][0], e->defs[i][1]};
  char ns[64], msg[512];
  snprintf(ns, sizeof ns, "netc_k%d_%d", e->node, e->k->nlaunch);
  if (cg_tmpl_instantiate(tmpl, d, e->ndefs, ns, &e->src, NULL, msg, sizeof msg)) return cg_emit_fail(e, "%s", msg);
  CgKLaunch *l = e->cur;
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = 1;
  l->block[0] = bx, l->block[1] = by, l->block[2] = 1;
  e->k->nlaunch++;
  return 0;
}
