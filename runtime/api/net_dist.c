/* net_dist.c - a model's side of a data-parallel run (net.h's
 * net_dist_join; docs/training.md, "Several GPUs").
 *
 * Joining is a short sequence every rank walks in step, each point a
 * barrier that carries a verdict, so that a rank that cannot go on ends
 * every rank's join with its reason instead of leaving them waiting:
 *   1. rank 0 makes the NCCL communicator's id (GPU models);
 *   2. the ranks meet (rt_rendezvous_open), rank 0 handing out the id;
 *   3. they agree that the id was made;
 *   4. every rank holds rank 0's description of the run (model, batch,
 *      precision, device kind: one rank on another model is refused);
 *   5. the training executor joins (the NCCL communicator, or the CPU's
 *      all-reduce over the rendezvous) and they agree it did;
 *   6. a watchdog watches the other ranks' connections from then on.
 * The watchdog (rt_rendezvous_watch) is for the one wait the control
 * channel cannot see: a rank stuck in an NCCL collective whose peer died.
 * It records the loss, and when the process has not ended its run by
 * itself GRACE_S later -- the next step's agreement fails at once unless
 * the host is blocked on the device -- it says so on stderr and ends the
 * process (the checkpoints are written atomically, so nothing saved is
 * lost). */
#include "net_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "net_exec.h"
#include "rt_rendezvous.h"
#ifdef NET_HAVE_GPU
#include "rt_nccl.h"
#endif

enum { ID_BYTES = 128, DESC_BYTES = 256 };
static const double GRACE_S = 10, TIMEOUT_S = 300;

typedef struct NetDist NetDist;
struct NetDist {
  RtRendezvous *rv;
  int rank, world;
  volatile int lost, finished; /* the watchdog saw a rank go; the run ended on every rank */
};

static NetDist *dist_of(const NetModel *m) { return m ? m->dist : NULL; }
int net_dist_rank(const NetModel *m) { return dist_of(m) ? m->dist->rank : 0; }
int net_dist_world(const NetModel *m) { return dist_of(m) ? m->dist->world : 1; }

/* The rendezvous's failure (err) as this rank's NetStatus. */
static NetStatus dist_fail(const NetDist *d, const char *what, const char *err) {
  return net_fail(NET_ERR_DIST, "data parallel, rank %d of %d: %s: %s", d->rank, d->world, what, err);
}

/* rt_rendezvous's 1 / 0 / -1 as a status. */
static NetStatus verdict(const NetDist *d, int rc, const char *what, const char *err) {
  return rc == 1 ? NET_OK : dist_fail(d, what, err);
}

/* The watchdog's callback: recorded, then the process ended unless its run ends first. */
static void lost(const char *msg, void *user) {
  NetDist *d = user;
  if (d->finished) return;
  d->lost = 1;
  for (int i = 0; i < (int)(GRACE_S * 10) && !d->finished; i++) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  if (d->finished) return;
  fprintf(stderr, "netc: data parallel, rank %d of %d: %s; this rank cannot go on and ends now\n", d->rank, d->world,
          msg);
  fflush(stderr);
  _exit(3);
}

/* What every rank must share: the model, its batch, precision and device kind. */
static void describe(const NetModel *m, int sync_bn, char *out, size_t cap) {
  /* the flag first: a long model name may be cut off the end */
  snprintf(out, cap, "%smodel %s, batch %lld, precision %s, %s", sync_bn ? "synchronized batch norm, " : "",
           m->gt && m->gt->name ? m->gt->name : "?", (long long)m->batch, m->precision ? m->precision : "default",
           m->gpu ? "gpu" : "cpu");
}

/* Rank 0's NCCL id for a GPU model (zeros for the CPU); 0, or -1 with why. */
static int make_id(const NetModel *m, int rank, uint8_t id[ID_BYTES], char *why, size_t len) {
  memset(id, 0, ID_BYTES);
  if (!m->gpu || rank != 0) return 0;
#ifdef NET_HAVE_GPU
  if (rt_nccl_load(NULL, why, len) || rt_nccl_unique_id(id, why, len)) return -1;
  return 0;
#else
  snprintf(why, len, "this build has no GPU back end");
  return -1;
#endif
}

static NetStatus host_allreduce(void *user, float *v, size_t n, char *err, size_t len) {
  NetDist *d = user;
  char why[NET_ERRMAX];
  int rc = rt_rendezvous_allreduce(d->rv, v, n, 1, why, sizeof why);
  if (rc == 1) return NET_OK;
  snprintf(err, len, "data parallel, rank %d of %d: averaging the gradients: %s", d->rank, d->world, why);
  return NET_ERR_DIST;
}

/* v[0..n) summed over the ranks in place, RT_RENDEZVOUS_MAX_SUM at a time
 * (synchronized batch norm's statistics). */
static NetStatus host_sum(void *user, double *v, int n, char *err, size_t len) {
  NetDist *d = user;
  char why[NET_ERRMAX];
  for (int at = 0; at < n; at += RT_RENDEZVOUS_MAX_SUM) {
    int k = n - at < RT_RENDEZVOUS_MAX_SUM ? n - at : RT_RENDEZVOUS_MAX_SUM;
    if (rt_rendezvous_sum(d->rv, v + at, k, why, sizeof why) != 1) {
      snprintf(err, len, "data parallel, rank %d of %d: summing the batch statistics: %s", d->rank, d->world, why);
      return NET_ERR_DIST;
    }
  }
  return NET_OK;
}

/* Leaves the run: no loss is reported from here on; the connections close. */
static void leave(NetDist *d) {
  if (!d) return;
  d->finished = 1;
  rt_rendezvous_end(d->rv);
  rt_rendezvous_close(d->rv);
  free(d);
}

static NetStatus join(NetModel *m, NetDist *d, const RtRendezvousConfig *rc, size_t bucket_bytes, int sync_bn) {
  char err[NET_ERRMAX] = "", why[NET_ERRMAX] = "";
  uint8_t id[ID_BYTES];
  int made = make_id(m, rc->rank, id, why, sizeof why) == 0;
  if (rt_rendezvous_open(rc, id, sizeof id, &d->rv, err, sizeof err))
    return net_fail(NET_ERR_DIST, "data parallel, rank %d of %d: meeting at %s:%d: %s", rc->rank, rc->world, rc->addr,
                    rc->port, err);
  int ok = rt_rendezvous_agree(d->rv, made, err, sizeof err);
  if (!made) return net_fail(m->gpu ? NET_ERR_NO_GPU : NET_ERR_DIST, "data parallel, rank 0: NCCL: %s", why);
  NetStatus s = verdict(d, ok, "the NCCL id", err);
  char desc[DESC_BYTES] = {0};
  describe(m, sync_bn, desc, sizeof desc);
  if (!s) {
    ok = rt_rendezvous_same(d->rv, desc, sizeof desc, err, sizeof err);
    if (ok == 0 && strstr(err, "other bytes"))
      return net_fail(NET_ERR_DIST, "data parallel, rank %d of %d: the ranks run different things (%s; this rank: %s)",
                      d->rank, d->world, err, desc);
    s = verdict(d, ok, "comparing the runs", err);
  }
  if (s) return s;
  NetExecDist ed = {.rank = d->rank,
                    .world = d->world,
                    .nccl_id = id,
                    .bucket_bytes = bucket_bytes,
                    .allreduce = host_allreduce,
                    .sync_bn = sync_bn,
                    .sum = host_sum,
                    .user = d};
  NetStatus js = net_exec_dist_set(m->xt, &ed, why, sizeof why);
  ok = rt_rendezvous_agree(d->rv, js == NET_OK, err, sizeof err);
  if (js) return net_fail(js, "data parallel, rank %d of %d: %s", d->rank, d->world, why);
  s = verdict(d, ok, "joining the gradients' all-reduce", err);
  if (!s && rt_rendezvous_watch(d->rv, lost, d, err, sizeof err)) s = dist_fail(d, "the watchdog", err);
  if (s) net_exec_dist_set(m->xt, NULL, why, sizeof why); /* nothing may point at d, which the caller frees */
  return s;
}

NetStatus net_dist_join(NetModel *m, const NetDistOpts *o) {
  if (!m || !o) return net_fail(NET_ERR_ARG, "net_dist_join: %s is NULL", m ? "the options" : "the model");
  if (!m->xt) return net_fail(NET_ERR_ARG, "net_dist_join: the model was loaded for inference only");
  if (m->dist) return net_fail(NET_ERR_ARG, "net_dist_join: the model is in a run already");
  RtRendezvousConfig rc = {.addr = o->addr ? o->addr : "127.0.0.1",
                           .port = o->port,
                           .rank = o->rank,
                           .world = o->world,
                           .timeout_s = o->timeout_s > 0 ? o->timeout_s : TIMEOUT_S};
  char err[NET_ERRMAX];
  if (o->world == 0 && rt_rendezvous_from_env(&rc, err, sizeof err))
    return net_fail(NET_ERR_ARG, "net_dist_join: %s", err);
  if (o->world == 0) rc.timeout_s = o->timeout_s > 0 ? o->timeout_s : TIMEOUT_S;
  if (rc.world < 1 || rc.rank < 0 || rc.rank >= rc.world || rc.port < 1 || rc.port > 65535)
    return net_fail(NET_ERR_ARG, "net_dist_join: rank %d of a world of %d at port %d", rc.rank, rc.world, rc.port);
  NetDist *d = calloc(1, sizeof *d);
  if (!d) return net_fail(NET_ERR_NOMEM, "out of memory");
  d->rank = rc.rank, d->world = rc.world;
  NetStatus s = join(m, d, &rc, o->bucket_bytes, o->sync_bn != 0);
  if (s) {
    leave(d);
    return s;
  }
  m->dist = d, m->dist_leave = leave;
  return NET_OK;
}

NetStatus net_dist_sum(NetModel *m, double *v, int n) {
  NetDist *d = dist_of(m);
  if (!d) return NET_OK;
  char err[NET_ERRMAX];
  return verdict(d, rt_rendezvous_sum(d->rv, v, n, err, sizeof err), "summing over the ranks", err);
}

NetStatus net_dist_any(NetModel *m, int mine, int *any) {
  double v = mine ? 1 : 0;
  NetStatus s = net_dist_sum(m, &v, 1);
  *any = v > 0;
  return s;
}

/* Calls fn for every PARAM and STATE value of the training graph that
 * holds floats, with its numel; stops at the first failure. */
typedef NetStatus (*WeightFn)(NetModel *m, int v, int64_t n, float *buf, void *user);
static NetStatus each_weight(NetModel *m, int state_only, WeightFn fn, void *user) {
  const IrGraph *g = m->gt;
  int64_t most = 1;
  for (int v = 0; v < g->nval; v++)
    if (g->val[v].kind == IR_VAL_PARAM || g->val[v].kind == IR_VAL_STATE)
      most = net_exec_numel(m->xt, v) > most ? net_exec_numel(m->xt, v) : most;
  float *buf = malloc(sizeof(int64_t) * (size_t)most); /* an integer value's int64 fits too */
  if (!buf) return net_fail(NET_ERR_NOMEM, "out of memory");
  NetStatus s = NET_OK;
  for (int v = 0; v < g->nval && !s; v++) {
    const IrValue *val = &g->val[v];
    if ((val->kind != IR_VAL_STATE && (state_only || val->kind != IR_VAL_PARAM)) || net_exec_numel(m->xt, v) < 1)
      continue;
    s = fn(m, v, net_exec_numel(m->xt, v), buf, user);
  }
  free(buf);
  return s;
}

static int is_float(IrDtype dt) { return dt == IR_DT_F32 || dt == IR_DT_F16 || dt == IR_DT_BF16; }

static NetStatus hash_one(NetModel *m, int v, int64_t n, float *buf, void *user) {
  NetStatus s = net_exec_read(m->xt, v, buf, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  size_t elem = is_float(m->gt->val[v].type.dtype) ? sizeof(float) : sizeof(int64_t);
  sha256_update(user, elem * (size_t)n, (const uint8_t *)buf);
  return NET_OK;
}

NetStatus net_dist_same_weights(NetModel *m) {
  NetDist *d = dist_of(m);
  if (!d) return NET_OK;
  struct sha256_ctx h;
  sha256_init(&h);
  NetStatus s = each_weight(m, 0, hash_one, &h);
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&h, sizeof digest, digest);
  char err[NET_ERRMAX];
  int ok = s ? -1 : rt_rendezvous_same(d->rv, digest, sizeof digest, err, sizeof err);
  if (s) return s;
  if (ok == 0 && strstr(err, "other bytes"))
    return net_fail(NET_ERR_DIST,
                    "data parallel, rank %d of %d: the ranks start from different weights (%s): give every rank the "
                    "same --weights, checkpoint and seed",
                    d->rank, d->world, err);
  return verdict(d, ok, "comparing the weights", err);
}

/* Whether the optimizer section reads v (momentum buffers, the loss scale):
 * those agree on every rank already, and are the bulk of the state. */
static int optimizer_reads(const IrGraph *g, int v) {
  for (int i = g->opt_first; i >= 0 && i < g->nnode; i++)
    for (int k = 0; k < g->node[i].nin; k++)
      if (g->node[i].in[k] == v) return 1;
  return 0;
}

static NetStatus average_one(NetModel *m, int v, int64_t n, float *buf, void *user) {
  NetDist *d = user;
  /* FP8's amax histories stay each rank's own: a mean of the ranks' largest magnitudes is below some rank's, which
     would then saturate */
  if (!is_float(m->gt->val[v].type.dtype) || optimizer_reads(m->gt, v) || ir_amax_history(m->gt, v)) return NET_OK;
  NetStatus s = net_exec_read(m->xt, v, buf, net_err_buf(), NET_ERRMAX);
  if (s) return net_failed(s);
  char err[NET_ERRMAX];
  int ok = rt_rendezvous_allreduce(d->rv, buf, (size_t)n, 1, err, sizeof err);
  if (ok != 1) return dist_fail(d, "averaging the running statistics", err);
  return net_failed(net_exec_write(m->xt, v, buf, net_err_buf(), NET_ERRMAX));
}

NetStatus net_dist_average_state(NetModel *m) {
  NetDist *d = dist_of(m);
  if (!d || d->world == 1) return NET_OK;
  NetStatus s = each_weight(m, 1, average_one, d);
  if (!s) m->infer_stale = 1;
  return s;
}

NetStatus net_dist_finish(NetModel *m, int ok) {
  NetDist *d = dist_of(m);
  if (!d || d->finished) return NET_OK;
  rt_rendezvous_end(d->rv);
  char err[NET_ERRMAX];
  int rc = rt_rendezvous_agree(d->rv, ok, err, sizeof err);
  d->finished = 1;
  return ok ? verdict(d, rc, "ending the run", err) : NET_OK;
}
