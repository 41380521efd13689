/* emit_net.h - a forward graph written back out as netc's own language.
 *
 * `netc FILE.onnx --emit-net=OUT.net` (and the same for a .net file, as a
 * normalizer): the forward IR of the parse stage (lower_file's or
 * onnx_import's graph, before any pass) becomes a .net file with one line
 * per layer, `LAYER = op(args)` in node order, every layer under its IR
 * name, so its parameters keep their names (`conv1 = conv2d(...)` makes
 * @conv1.weight) and weights saved by name load into it.  Where the graph
 * repeats (runs of layers named PREFIX.K.*, as torchvision's layer1.0.conv1
 * ... layer1.1.conv1, with the same ops and wiring) a block is written once
 * and called `layer1.0 = unit1(x, 64, 1)`, its differing integers (widths,
 * strides) parameters, and calls layer1.0, layer1.1, ... become a stage
 * block with a loop, `layer1 = stage1(x, 64, 1, 3)`; the rest, and a graph
 * that does not repeat, is one line per layer (EMIT_NET_PLAIN: all of it).
 * Compiling the text gives the same forward IR (values, names, shapes, ops,
 * attributes, the train section) and so the same --summary totals;
 * emit_net_text checks that before netc writes the file.
 *
 * What the language cannot say is refused, each case reported with the
 * layer's name and op: an op that has no form in the language (a graph
 * after autodiff or fuse), parameters not named LAYER.weight, LAYER.bias,
 * LAYER.running_mean, LAYER.running_var (an eval-mode ONNX export's
 * onnx__Conv_NNN), a layer name that is no NAME of the language.  An input
 * or network name that is no identifier (an ONNX input named `input`, a
 * keyword) is renamed, with a warning "'input' is written as 'input_'":
 * an input holds no weights. */
#ifndef NETC_EMIT_NET_H
#define NETC_EMIT_NET_H

#include <stddef.h>
#include <stdio.h>

#include "ir.h"

/* flags: EMIT_NET_PLAIN writes every layer as its own line, no blocks;
 * EMIT_NET_NO_LOOPS writes blocks but no stages (each call its own line). */
enum { EMIT_NET_PLAIN = 1, EMIT_NET_NO_LOOPS = 2 };

/* Writes g as .net text to f; src names the input in the file's opening
 * comment.  Returns 0, or -1 after reporting to d everything the language
 * cannot express (nothing useful is in f then).  Renames are warnings.
 * The text is not checked (emit_net_text does that). */
int emit_net(FILE *f, const IrGraph *g, Diag *d, const char *src, unsigned flags);

enum { EMIT_NET_REFUSED = -1, EMIT_NET_DIFFERS = -2 };

/* emit_net into malloc'd text (*text, *len bytes; the caller frees it),
 * then compiles the text (named path in messages) and compares its forward
 * IR with g's (ir_print, without locations, the renames applied).  Without
 * EMIT_NET_PLAIN the texts with stages and with blocks alone (unless
 * EMIT_NET_NO_LOOPS) are tried: the shorter of those that give g's IR is
 * kept; else (quietly) the plain text is.  Returns 0; EMIT_NET_REFUSED
 * after reporting what the language cannot express; or EMIT_NET_DIFFERS
 * when the plain text does not give g's IR (a netc bug, reported with the
 * first line that differs).  *text is NULL unless 0. */
int emit_net_text(const IrGraph *g, Diag *d, const char *src, const char *path, unsigned flags, char **text,
                  size_t *len);

/* emit_net_text, then the text written to path.  0, or -1 after saying why in d. */
int emit_net_write(const char *path, const IrGraph *g, Diag *d, const char *src, unsigned flags);

#endif
