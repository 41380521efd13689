/* rt_gpu_tmpl.c - one codegen_templates/ file instantiated into a
 * program's source (rt_gpu_tmpl.h). */
#include "rt_gpu_tmpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_err.h"
#include "rt_gpu_templates.h"

int rt_gpu_tmpl_is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16; }

int rt_gpu_tmpl_flat_vec(IrDtype dt) { return (int)(16 / ir_dtype_size(dt)); }

const char *rt_gpu_tmpl_ctype(IrDtype dt) {
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

void rt_gpu_tmpl_float(char *buf, size_t len, double v) { snprintf(buf, len, "%.9ef", (double)(float)v); }

int rt_gpu_tmpl_instantiate(const char *tmpl, const RtNvrtcDefine *defs, int ndefs, const char *ns, RtText *src,
                            char **unit, char *err, size_t errlen) {
  const char *text = rt_gpu_templates_text(tmpl), *common = rt_gpu_templates_text("common.cu");
  if (!text || !common) return rt_errf(err, errlen, "template %s is not embedded", text ? "common.cu" : tmpl);
  RtText joined = {0};
  if (strcmp(tmpl, "eltwise.cu") != 0) rt_text_puts(&joined, common);
  rt_text_puts(&joined, "\n");
  rt_text_puts(&joined, text);
  if (joined.bad) {
    free(joined.p);
    return rt_errf(err, errlen, "out of memory");
  }
  char name[64], *out = NULL;
  snprintf(name, sizeof name, "codegen_templates/%s", tmpl);
  RtNvrtcStatus s = rt_nvrtc_instantiate(name, joined.p, defs, ndefs, &out, err, errlen);
  free(joined.p);
  if (s != RT_NVRTC_OK) return -1;
  rt_text_printf(src, "namespace %s {\n", ns);
  rt_text_puts(src, out);
  rt_text_puts(src, "} /* namespace */\n");
  for (int i = 0; i < ndefs; i++) rt_text_printf(src, "#undef %s\n", defs[i].name);
  if (unit)
    *unit = out;
  else
    free(out);
  return src->bad ? rt_errf(err, errlen, "out of memory") : 0;
}
