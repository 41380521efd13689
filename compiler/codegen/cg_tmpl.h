/* cg_tmpl.h - instantiating one codegen_templates/ file into a
 * program's source, and the spellings of dtypes the templates take: what
 * cg_kernels.c (a node's kernels) and cg_multi.c (multi-tensor
 * kernels) both emit with. */
#ifndef NETC_CG_TMPL_H
#define NETC_CG_TMPL_H

#include <stddef.h>

#include "ir.h"
#include "cg_nvrtc.h"
#include "cg_text.h"

int cg_tmpl_is_float(IrDtype dt);      /* f32, f16 or bf16 */
int cg_tmpl_flat_vec(IrDtype dt);      /* elements per 16-byte access */
const char *cg_tmpl_ctype(IrDtype dt); /* the C type a template stores dt as; NULL for none */
/* v as an f32 literal with every bit of its f32 value ("1.000000000e-01f"). */
void cg_tmpl_float(char *buf, size_t len, double v);

/* Template tmpl (preceded by common.cu, except eltwise.cu, which stands
 * alone) with the defines, appended to src as `namespace ns { ... }`
 * followed by an #undef of every define.  *unit, when unit is not NULL,
 * receives the instantiated text alone (malloc'd).  0, or -1 with err set
 * (a template not embedded, NVRTC's preprocessing failed, out of memory). */
int cg_tmpl_instantiate(const char *tmpl, const CgDefine *defs, int ndefs, const char *ns, CgText *src, char **unit,
                        char *err, size_t errlen);

#endif
