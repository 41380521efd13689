/* kern_emit.c - netc-kern-emit ROOT DIR: for each kerntest graph, writes
 * DIR/<graph>.cu holding the kernels of the first node of each kind (op
 * and dtypes of its tensors), so check_nvcc.sh compiles every template
 * instantiation the graphs use with nvcc.  Exit status 0, or 1 with a
 * message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kerntest.h"

/* "op:dt,dt,...": what makes two nodes' kernels the same instantiation kind. */
static void kind_of(const IrGraph *g, const IrNode *n, char *buf, size_t len) {
  int k = snprintf(buf, len, "%s:", ir_op_info(n->op)->name);
  for (int i = 0; i < n->nin + n->nout && k > 0 && (size_t)k < len; i++) {
    const IrType *t = &g->val[i < n->nin ? n->in[i] : n->out[i - n->nin]].type;
    k += snprintf(buf + k, len - (size_t)k, "%s%s,", ir_dtype_name(t->dtype), ir_layout_name(t->layout));
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: netc-kern-emit ROOT DIR\n");
    return 1;
  }
  CgDevice dev = kerntest_h200();
  int ng, ok = 1;
  const KerntestGraph *gs = kerntest_graphs(&ng);
  for (int gi = 0; gi < ng && ok; gi++) {
    Arena a;
    arena_init(&a);
    IrGraph *g = kerntest_compile(&a, argv[1], &gs[gi]);
    char path[4096], (*seen)[160] = calloc((size_t)(g ? g->nnode : 1), sizeof *seen);
    int nseen = 0;
    snprintf(path, sizeof path, "%s/%s.cu", argv[2], gs[gi].name);
    FILE *f = g && seen ? fopen(path, "w") : NULL;
    ok = f != NULL;
    for (int i = 0; ok && i < g->nnode; i++) {
      char kind[160], err[4096];
      kind_of(g, &g->node[i], kind, sizeof kind);
      int j = 0;
      while (j < nseen && strcmp(seen[j], kind) != 0) j++;
      if (j < nseen) continue;
      strcpy(seen[nseen++], kind);
      CgKNode k;
      if (cg_kernels_emit(g, i, g->plan_batch, &dev, &k, err, sizeof err)) {
        fprintf(stderr, "netc-kern-emit: %s: %s\n", gs[gi].name, err);
        ok = 0;
      } else if (k.source) {
        ok = fputs(k.source, f) >= 0;
      }
      cg_kernels_free(&k);
    }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "netc-kern-emit: cannot write %s\n", path);
    free(seen);
    arena_free(&a);
  }
  return ok ? 0 : 1;
}
