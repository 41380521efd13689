/* test_onnx_scope.c - layer names from PyTorch exporters' module paths
 * (compiler/onnx_scope.h): TorchScript node names, dynamo name_scopes, and
 * what is no scope at all. */
#include <string.h>

#include "check.h"
#include "onnx_scope.h"

typedef struct Case {
  const char *name, *scopes, *op, *want; /* want NULL: no scope */
} Case;

/* The nodes of one graph, named together (a module's kind depends on its
 * siblings), then each against its expected name. */
static void names(const char *what, const Case *c, int n) {
  Arena a;
  arena_init(&a);
  OnnxScope s[32];
  const char *got[32];
  for (int i = 0; i < n; i++) CHECK(onnx_scope_of(&a, c[i].name, c[i].scopes, c[i].op, &s[i]) == 0, "%s", what);
  CHECK(onnx_scope_names(&a, s, n, got) == 0, "%s", what);
  for (int i = 0; i < n; i++) {
    int same = c[i].want ? got[i] && strcmp(got[i], c[i].want) == 0 : got[i] == NULL;
    CHECK(same, "%s: node %d '%s' %s: got '%s', want '%s'", what, i, c[i].name ? c[i].name : "", c[i].op,
          got[i] ? got[i] : "(none)", c[i].want ? c[i].want : "(none)");
  }
  arena_free(&a);
}

int main(void) {
  /* torchvision's Bottleneck, as the TorchScript exporter names it */
  static const Case torchscript[] = {
      {"/relu/Relu", NULL, "Relu", "relu"},
      {"/maxpool/MaxPool", NULL, "MaxPool", "maxpool"},
      {"/layer1/layer1.0/relu/Relu", NULL, "Relu", "layer1.0.relu"},
      {"/layer1/layer1.0/relu_1/Relu", NULL, "Relu", "layer1.0.relu_1"},
      {"/layer1/layer1.0/Add", NULL, "Add", "layer1.0.add"},
      {"/layer1/layer1.0/relu_2/Relu", NULL, "Relu", "layer1.0.relu_2"},
      {"/layer1/layer1.1/Add_1", NULL, "Add", "layer1.1.add_1"},
      {"/avgpool/GlobalAveragePool", NULL, "GlobalAveragePool", "avgpool"},
      {"/Flatten", NULL, "Flatten", "flatten"},
      {"/features/features.3/Relu", NULL, "Relu", "features.3.relu"}, /* nn.Sequential's child */
  };
  names("torchscript", torchscript, sizeof torchscript / sizeof torchscript[0]);

  /* a module with its own ops and modules under it; one with two kinds of op */
  static const Case containers[] = {
      {"/block/relu/Relu", NULL, "Relu", "block.relu"},
      {"/block/Add", NULL, "Add", "block.add"},
      {"/res/Add", NULL, "Add", "res.add"},
      {"/res/Relu", NULL, "Relu", "res.relu"},
      {"/odd name!/Relu", NULL, "Relu", "odd_name_"},
  };
  names("containers", containers, sizeof containers / sizeof containers[0]);

  /* the dynamo exporter: flat node names, the path in the metadata */
  static const Case dynamo[] = {
      {"node_relu", "['', 'relu', 'relu']", "Relu", "relu"},
      {"node_relu_1", "['', 'layer1', 'layer1.0', 'layer1.0.relu', 'relu_1']", "Relu", "layer1.0.relu"},
      {"node_add_3", "['', 'layer1', 'layer1.0', 'add_3']", "Add", "layer1.0.add"},
      {"node_relu_2", "['', 'layer1', 'layer1.0', 'layer1.0.relu', 'relu_2']", "Relu", "layer1.0.relu"},
      {"node_view", "['', 'view']", "Reshape", "reshape"},
      {"node_x", "[\"\", \"fc\", \"linear\"]", "Gemm", "fc"},
  };
  names("dynamo", dynamo, sizeof dynamo / sizeof dynamo[0]);

  /* no scope: other exporters' names, malformed metadata (the name is used) */
  static const Case none[] = {
      {"conv1_Conv", NULL, "Conv", NULL},
      {"", NULL, "Relu", NULL},
      {NULL, NULL, "Relu", NULL},
      {"/a//Relu", NULL, "Relu", NULL},
      {"node_y", "not a list", "Relu", NULL},
      {"node_z", "['unterminated", "Relu", NULL},
      {"node_w", "['only']", "Relu", NULL},
      {"/x/Relu", "[1, 2]", "Relu", "x"},
      {"/y/Relu", NULL, NULL, NULL},
  };
  names("none", none, sizeof none / sizeof none[0]);
  return check_report();
}
