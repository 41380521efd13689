/* onnx_scope.h - the module path of each exported ONNX node, as layer names.
 *
 * PyTorch's exporters record which module each node came from: the
 * TorchScript exporter in the node's name ("/layer1/layer1.0/relu_1/Relu"),
 * the dynamo exporter in the node's metadata, key pkg.torch.onnx.name_scopes
 * ("['', 'layer1', 'layer1.0', 'layer1.0.relu', 'relu_1']").  The ONNX
 * front end names a layer without weights after that path, dotted as the
 * weights' names are, so layer1.0.relu_1 sits beside layer1.0.conv1 and a
 * block's layers share its prefix (what netc --emit-net looks for):
 *
 *   /layer1/layer1.0/relu_1/Relu            layer1.0.relu_1
 *   /layer1/layer1.0/Add                    layer1.0.add     (the block's own op)
 *   /res/Add, /res/Relu                     res.add, res.relu
 *   /avgpool/GlobalAveragePool              avgpool
 *   /Flatten                                flatten
 *   name_scopes [..., 'layer1.0', 'layer1.0.relu', 'relu_1']   layer1.0.relu
 *   name_scopes [..., 'layer1', 'layer1.0', 'add_3']           layer1.0.add
 *
 * A module is a container, and the op's type (TorchScript's op part, with
 * its _N), lower-cased, names each of its own nodes under its path, when it
 * is the root, its path ends in a number (layer1.0, an nn.Sequential's
 * child), other modules lie under it, or its nodes are of more than one
 * type; any other module is a leaf (nn.ReLU, nn.MaxPool2d), and its path
 * names its nodes.  Names may
 * repeat (a ReLU module called twice): the front end makes them unique. */
#ifndef NETC_ONNX_SCOPE_H
#define NETC_ONNX_SCOPE_H

#include "arena.h"

typedef struct OnnxScope {
  const char *path; /* the module path, "" for the root; NULL: the node records none */
  const char *op;   /* the node's own part: TorchScript's "Add_1", else its type */
  const char *type; /* the node's op_type */
} OnnxScope;

/* The scope of a node called name (may be NULL), of type op_type, with the
 * dynamo exporter's name_scopes value (or NULL); path NULL when neither
 * carries one.  0, or -1 when out of memory. */
int onnx_scope_of(Arena *a, const char *name, const char *name_scopes, const char *op_type, OnnxScope *s);

/* The layer names of nodes s[0..n) ([A-Za-z0-9_.] only, in a; NULL where
 * the path is), each a leaf's path or a container's path and op as above:
 * s holds the nodes that become layers, the others' paths NULL.  0, or -1
 * when out of memory. */
int onnx_scope_names(Arena *a, const OnnxScope *s, int n, const char **name);

#endif
