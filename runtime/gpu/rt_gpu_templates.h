/* rt_gpu_templates.h - the CUDA C templates of codegen_templates/, embedded
 * in the library at build time (no source tree is needed at run time). */
#ifndef NETC_RT_GPU_TEMPLATES_H
#define NETC_RT_GPU_TEMPLATES_H

/* The text of template `name` (e.g. "eltwise.cu"), or NULL if there is none. */
const char *rt_gpu_templates_text(const char *name);

#endif
