/* test_opts.c - the options table (compiler/opts.c): defaults, setting by
 * name and by variable, refusing bad values with a message naming the
 * variable, lists of name=value, the environment, the code key, and a
 * model's options through the C API (NetLoadOpts.options). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net.h"
#include "opts.h"

int main(int argc, char **argv) {
  const char *root = argc > 1 ? argv[1] : ".";
  char err[512], key[256];
  NetcOpts o;
  opts_default(&o);
  CHECK(o.cuda_graph == 1 && o.genstats == 1 && o.s2d == 1 && o.cudnn_deterministic == 0, "defaults");
  CHECK(o.cudnn_workspace_mb == -1 && o.nvrtc_threads == 0 && o.cudnn[0] == 0, "defaults of ints and paths");
  int n = 0;
  const OptsInfo *t = opts_table(&n);
  CHECK(n >= 20 && t[0].name && t[n - 1].name, "%d rows", n);
  for (int i = 0; i < n; i++) {
    CHECK(strncmp(t[i].env, "NETC_", 5) == 0 && t[i].meaning && *t[i].meaning, "row %s: variable and meaning",
          t[i].name);
    for (int j = 0; j < i; j++) CHECK(strcmp(t[i].env, t[j].env) != 0, "%s listed twice", t[i].env);
  }

  CHECK(opts_set(&o, "cuda_graph", "0", err, sizeof err) == 0 && o.cuda_graph == 0, "by name: %s", err);
  CHECK(opts_set(&o, "NETC_S2D", "all", err, sizeof err) == 0 && o.s2d == 2, "by variable, a choice: %s", err);
  CHECK(opts_set(&o, "cudnn_workspace_mb", "64", err, sizeof err) == 0 && o.cudnn_workspace_mb == 64, "int: %s", err);
  CHECK(opts_set(&o, "cudnn", "/x/libcudnn.so.9", err, sizeof err) == 0 && strcmp(o.cudnn, "/x/libcudnn.so.9") == 0,
        "path: %s", err);
  CHECK(opts_set(&o, "genstats", "yes", err, sizeof err) == -1 && strstr(err, "NETC_GENSTATS=yes") &&
            strstr(err, "0 or 1"),
        "a bad bool names the variable: %s", err);
  CHECK(opts_set(&o, "s2d", "2", err, sizeof err) == -1 && strstr(err, "0|1|all"), "a bad choice: %s", err);
  CHECK(opts_set(&o, "cudnn_workspace_mb", "12x", err, sizeof err) == -1, "a bad int: %s", err);
  CHECK(opts_set(&o, "no_such", "1", err, sizeof err) == -1 && strstr(err, "unknown option 'no_such'"),
        "an unknown name: %s", err);

  opts_default(&o);
  CHECK(opts_parse(&o, " multi_tensor=0 , branches=verbose,NETC_PBB=0 ", err, sizeof err) == 0 && o.multi_tensor == 0 &&
            o.branches == 2 && o.pbb == 0,
        "a list: %s", err);
  CHECK(opts_parse(&o, "multi_tensor", err, sizeof err) == -1 && strstr(err, "not name=value"), "no '=': %s", err);
  CHECK(opts_parse(&o, NULL, err, sizeof err) == 0 && opts_parse(&o, "", err, sizeof err) == 0, "empty lists");

  opts_default(&o);
  opts_code_key(&o, key, sizeof key);
  CHECK(strcmp(key, "s2d=1 pbb=1 pool_tile=1 linear_cudnn=1 sync_bn=0 stem_mma=0") == 0, "code key: %s", key);
  opts_set(&o, "cuda_graph", "0", NULL, 0);
  char key2[256];
  opts_code_key(&o, key2, sizeof key2);
  CHECK(strcmp(key, key2) == 0, "a runtime switch is not in the code key: %s", key2);
  opts_set(&o, "linear_cudnn", "0", NULL, 0);
  opts_code_key(&o, key2, sizeof key2);
  CHECK(strcmp(key2, "s2d=1 pbb=1 pool_tile=1 linear_cudnn=0 sync_bn=0 stem_mma=0") == 0, "a code switch is: %s", key2);

  setenv("NETC_DBN", "0", 1);
  setenv("NETC_NVRTC_THREADS", "3", 1);
  CHECK(opts_from_env(&o, err, sizeof err) == 0 && o.dbn == 0 && o.nvrtc_threads == 3 && o.cuda_graph == 1,
        "the environment: %s", err);
  setenv("NETC_EPILOGUE", "off", 1);
  CHECK(opts_from_env(&o, err, sizeof err) == -1 && strstr(err, "NETC_EPILOGUE=off") && o.dbn == 0,
        "a bad variable is an error, the good ones still set: %s", err);
  unsetenv("NETC_EPILOGUE");
  unsetenv("NETC_DBN");
  unsetenv("NETC_NVRTC_THREADS");

  /* per model, through the C API: a bad option fails the load and says why */
  char model[4096];
  snprintf(model, sizeof model, "%s/models/mlp.net", root);
  NetLoadOpts lo = {.device = "cpu", .batch = 4, .options = "cuda_graph=0,genstats=maybe"};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &lo, &m);
  CHECK(s == NET_ERR_ARG && !m && strstr(net_last_error(), "NETC_GENSTATS=maybe"), "net_load: %d %s", s,
        net_last_error());
  lo.options = "cuda_graph=0";
  s = net_load(model, &lo, &m);
  CHECK(s == NET_OK && m, "net_load with good options: %s", net_last_error());
  net_free(m);
  return check_report();
}
