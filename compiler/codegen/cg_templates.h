/* cg_templates.h - the CUDA C templates of codegen_templates/, embedded
 * in the library at build time (no source tree is needed at run time). */
#ifndef NETC_CG_TEMPLATES_H
#define NETC_CG_TEMPLATES_H

/* The text of template `name` (e.g. "eltwise.cu"), or NULL if there is none. */
const char *cg_templates_text(const char *name);

#endif
