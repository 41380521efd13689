/* rt_init.h - initial values of a graph's parameters and state.
 *
 * Every PARAM and STATE value gets what torchvision's ResNets start from:
 *
 *   conv weight     normal(0, sqrt(2 / (K*R*S)))       kaiming_normal_, fan_out, relu
 *   conv bias       uniform(+-1/sqrt(C/groups*R*S))    PyTorch's Conv2d default
 *   linear weight   uniform(+-1/sqrt(in))              PyTorch's Linear default
 *   linear bias     uniform(+-1/sqrt(in))
 *   batchnorm       weight 1, bias 0, running_mean 0, running_var 1
 *   momentum buffer 0
 *
 * A value's role comes from the op that reads it (which input of conv2d,
 * conv2d_bn, conv2d_bn_train, batchnorm, batchnorm_train, linear, or the
 * buffer of sgd_update), looking through cast and relayout nodes.  Its name
 * suffix (.weight .bias .running_mean .running_var .momentum_buffer) must
 * agree when it is one of these; a value no op gives a role is an error,
 * never silently zeroed.
 *
 * Random values depend only on the seed and the value's name, and are drawn
 * in KCRS order whatever the filter's layout (a KRSC filter holds the same
 * numbers, transposed), so a graph before and after a layout pass starts
 * from the same weights.  Nothing is printed; failures return a status and
 * a message. */
#ifndef NETC_RT_INIT_H
#define NETC_RT_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "rt_cpu.h"

typedef enum RtInitStatus {
  RT_INIT_OK = 0,
  RT_INIT_ERR_ROLE,  /* no role, roles that disagree, or a name that contradicts its role */
  RT_INIT_ERR_SHAPE, /* a type the role cannot have (a 3-d conv weight, an integer parameter) */
} RtInitStatus;

typedef enum RtInitRole {
  RT_INIT_CONV_WEIGHT,
  RT_INIT_CONV_BIAS,
  RT_INIT_LINEAR_WEIGHT,
  RT_INIT_LINEAR_BIAS,
  RT_INIT_BN_WEIGHT,
  RT_INIT_BN_BIAS,
  RT_INIT_RUNNING_MEAN,
  RT_INIT_RUNNING_VAR,
  RT_INIT_MOMENTUM_BUFFER,
  RT_INIT_ROLE_COUNT
} RtInitRole;

/* "conv_weight", ... */
const char *rt_init_role_name(RtInitRole r);

/* The role of PARAM or STATE value v of g, and the weight tensor it belongs
 * to (*owner: the conv or linear weight for a bias, else v itself). */
RtInitStatus rt_init_role(const IrGraph *g, int v, RtInitRole *role, int *owner, char *err, size_t errlen);

/* Writes value v's initial values into dst (ir_type_numel(type, 1) floats,
 * in the value's memory order). */
RtInitStatus rt_init_value(const IrGraph *g, int v, uint64_t seed, float *dst, char *err, size_t errlen);

/* rt_init_value for every PARAM and STATE of g (x was made from g). */
RtInitStatus rt_init_cpu(RtCpu *x, const IrGraph *g, uint64_t seed, char *err, size_t errlen);

#endif
