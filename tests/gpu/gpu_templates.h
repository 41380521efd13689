/* gpu_templates.h - the texts of the codegen_templates/ files, embedded at build
 * time (tests/gpu/CMakeLists.txt turns each file into a C array through
 * gpu_templates.c.in), so a program that instantiates kernels needs no
 * source tree at run time.  Editing a template re-runs CMake. */
#ifndef NETC_GPU_TEMPLATES_H
#define NETC_GPU_TEMPLATES_H

/* The text of template name (e.g. "eltwise.cu"), or NULL if there is none. */
const char *gpu_template_text(const char *name);
/* The index-th template's file name, or NULL past the last. */
const char *gpu_template_name(int index);

#endif
