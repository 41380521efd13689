/* cg_tmpl.c - one codegen_templates/ file instantiated into a
 * program's source (cg_tmpl.h). */
#include "cg_tmpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_templates.h"

int cg_tmpl_is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16; }

int cg_tmpl_flat_vec(IrDtype dt) { return (int)(16 / ir_dtype_size(dt)); }

const char *cg_tmpl_ctype(IrDtype dt) {
  switch (dt) {
  case IR_DT_F32: return "float";
  case IR_DT_F16: return "netc_f16";
  case IR_DT_BF16: return "netc_bf16";
  case IR_DT_I8: return "signed char";
  case IR_DT_I32: return "int";
  case IR_DT_I64: return "long long";
  default: return NULL;
  }
}

void cg_tmpl_float(char *buf, size_t len, double v) { snprintf(buf, len, "%.9ef", (double)(float)v); }

int cg_tmpl_instantiate(const char *tmpl, const CgDefine *defs, int ndefs, const char *ns, CgText *src, char **unit,
                        char *err, size_t errlen) {
  const char *text = cg_templates_text(tmpl), *common = cg_templates_text("common.cu");
  if (!text || !common) return cg_errf(err, errlen, "template %s is not embedded", text ? "common.cu" : tmpl);
  CgText joined = {0};
  if (strcmp(tmpl, "eltwise.cu") != 0) cg_text_puts(&joined, common);
  cg_text_puts(&joined, "\n");
  cg_text_puts(&joined, text);
  if (joined.bad) {
    free(joined.p);
    return cg_errf(err, errlen, "out of memory");
  }
  char name[64], *out = NULL;
  snprintf(name, sizeof name, "codegen_templates/%s", tmpl);
  CgStatus s = cg_nvrtc_instantiate(name, joined.p, defs, ndefs, &out, err, errlen);
  free(joined.p);
  if (s != CG_OK) return -1;
  cg_text_printf(src, "namespace %s {\n", ns);
  cg_text_puts(src, out);
  cg_text_puts(src, "} /* namespace */\n");
  for (int i = 0; i < ndefs; i++) cg_text_printf(src, "#undef %s\n", defs[i].name);
  if (unit)
    *unit = out;
  else
    free(out);
  return src->bad ? cg_errf(err, errlen, "out of memory") : 0;
}
