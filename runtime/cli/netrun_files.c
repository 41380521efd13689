/* netrun_files.c - outputs against inputs, before any work (netrun_files.h). */
#include "netrun_files.h"

#include <stdio.h>

#include "netrun_opt.h"
#include "rt_file.h"

/* the IDX files netrun train reads from --data DIR (net_train.c's load_idx) */
static const char *const IDX_FILES[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};
enum { MAX_INPUTS = 32 };

int netrun_files_check(const char *const *ins, size_t nins, const char *data_dir, const NetrunOutput *outs,
                       size_t nouts) {
  char idx[8][4096];
  const char *all[MAX_INPUTS];
  size_t n = 0;
  for (size_t i = 0; i < nins && n < MAX_INPUTS; i++)
    if (ins[i]) all[n++] = ins[i];
  if (data_dir)
    for (int i = 0; i < 8 && n < MAX_INPUTS; i++) {
      snprintf(idx[i], sizeof idx[i], "%s/%s%s", data_dir, IDX_FILES[i / 2], i % 2 ? ".gz" : "");
      all[n++] = idx[i];
    }
  char err[8192];
  for (size_t o = 0; o < nouts; o++) {
    const char *out = outs[o].path;
    if (!out) continue;
    for (size_t i = 0; i < n; i++) {
      if (all[i] == outs[o].may_be || !rt_file_same(out, all[i])) continue;
      fprintf(stderr, "netrun: error: %s: is the same file as the input %s (refusing to overwrite it)\n", out, all[i]);
      return NETRUN_EXIT_USAGE;
    }
    for (size_t p = 0; p < o; p++)
      if (outs[p].path && rt_file_same(out, outs[p].path)) {
        fprintf(stderr, "netrun: error: %s: is the same file as the output %s (give each output its own file)\n", out,
                outs[p].path);
        return NETRUN_EXIT_USAGE;
      }
    if (rt_file_check_writable(out, !outs[o].stream, err, sizeof err)) {
      fprintf(stderr, "netrun: error: %s\n", err);
      return NETRUN_EXIT_USAGE;
    }
  }
  return 0;
}
