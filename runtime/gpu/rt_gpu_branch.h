/* rt_gpu_branch.h - where a node moved to a second stream must be joined
 * again, from the byte ranges every node reads and writes.
 *
 * The GPU executor runs some nodes (the weight gradients) on a side stream:
 * at side node s's place the main stream records an event the side stream
 * waits for, so s starts after every earlier node.  It must also finish
 * before the first later main-stream node q that touches what s touches
 * with a write on either part (q reads s's output, or writes s's input or
 * output, or shares its scratch): the main stream waits for s right before
 * q, its join.  Side nodes run in order on their stream, so they need no
 * joins among themselves, and one wait for a side node covers every earlier
 * one.  Nothing here knows about CUDA: a node is a list of ranges, built
 * with the set below, and the plan is a pure function of them. */
#ifndef NETC_RT_GPU_BRANCH_H
#define NETC_RT_GPU_BRANCH_H

#include <stdint.h>

#include "ir.h"

typedef struct RtBranchRange {
  uint64_t lo, hi; /* bytes [lo, hi) */
  int write;
} RtBranchRange;

/* Every node's ranges, node i's at range[first[i] .. first[i+1]). */
typedef struct RtBranchSet {
  RtBranchRange *range;
  int nrange, caprange;
  int *first; /* nnode + 1 entries once the nodes are ended */
  int *side;  /* per node: 1 on the side stream */
  int nnode, capnode;
} RtBranchSet;

void rt_gpu_branch_set_init(RtBranchSet *s);
void rt_gpu_branch_set_free(RtBranchSet *s); /* takes NULL; leaves *s empty */
/* Adds bytes [lo, lo + bytes) to the node being built (nothing when bytes
 * is 0).  0, or -1 when out of memory. */
int rt_gpu_branch_add(RtBranchSet *s, uint64_t lo, uint64_t bytes, int write);
/* Adds IR node `node`'s inputs (read) and outputs (written), value v at
 * addr[v] for bytes[v] (addr[v] == 0: no memory, nothing added).  The
 * ranges go to the node being built, which may hold several IR nodes'. */
int rt_gpu_branch_add_node(RtBranchSet *s, const IrGraph *g, int node, const uint64_t *addr, const uint64_t *bytes);
/* Closes the node being built (its ranges are those added since the last
 * end); side: whether it runs on the side stream. */
int rt_gpu_branch_end_node(RtBranchSet *s, int side);

typedef struct RtBranchPlan {
  int nnode;
  int *join;    /* per node: a side node's join (the first later main-stream node that
                 * conflicts with it), nnode when none does; -1 for main-stream nodes */
  int *wait_at; /* nnode + 1 entries: the latest side node whose join is node i, or -1 */
  int nside;
  /* the overlap window of side node s: main-stream nodes between s and its
   * join (to the end when it has none) */
  double window_mean;
  int window_min, window_max, narrow; /* narrow: side nodes whose window is 0 or 1 */
} RtBranchPlan;

/* The side node the main stream waits for right before node i when nodes
 * lo.. are launched and it already waited for side node `joined` (-1:
 * none): the latest side node joining at i, when it was launched in this
 * range (>= lo) and not covered by that wait; else -1.  At the range's end
 * the stream waits for its last side node when that is after `joined`. */
int rt_gpu_branch_wait(const RtBranchPlan *p, int lo, int i, int joined);
/* The joins of s's side nodes.  0, or -1 when out of memory (*out empty). */
int rt_gpu_branch_plan(const RtBranchSet *s, RtBranchPlan *out);
void rt_gpu_branch_plan_free(RtBranchPlan *p); /* takes NULL; leaves *p empty */

#endif
