/* net_ckpt.c - training checkpoints (net.h): a weights file from
 * net_weights_save with the run's position in its "__metadata__", so that a
 * run resumes exactly where it stopped.
 *
 * Saving is net_weights_save's one atomic write (a temporary file beside
 * the target, then a rename) with the position entries added to its
 * metadata: the previous checkpoint is either kept whole or replaced whole.
 *
 * Loading checks everything before a parameter changes: the file opens as
 * safetensors, the format version is one this file reads, every position
 * entry is present and well formed, the model's fingerprint (SHA-256 of its
 * parameter and state names with their file shapes) and batch match, every
 * tensor is there (net_weights_load alone would let optimizer state be
 * absent); only then does net_weights_load, itself all or nothing, copy
 * the tensors in.  net_checkpoint_info reads the position alone, for no
 * model (netrun export's num_batches_tracked).  Keys and their meaning:
 * docs/training.md. */
#include "net_impl.h"

#include <errno.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_safetensors.h"
#include "rt_weights.h"

enum { CKPT_VERSION = 1, MAX_ACCUM = 1 << 20 /* net_train's limit on accum_steps */ };

static const char KEY_VERSION[] = "netc.checkpoint";
static const char KEY_MODEL[] = "netc.model";
static const char KEY_HASH[] = "netc.model_hash";

/* The integer position entries, in the order they are written. */
typedef struct IntKey {
  const char *key;
  size_t offset; /* of the int64_t in NetTrainState */
} IntKey;

static const IntKey INT_KEYS[] = {
    {"netc.batch", offsetof(NetTrainState, batch)},   {"netc.step", offsetof(NetTrainState, step)},
    {"netc.epoch", offsetof(NetTrainState, epoch)},   {"netc.batch_in_epoch", offsetof(NetTrainState, batch_in_epoch)},
    {"netc.epochs", offsetof(NetTrainState, epochs)}, {"netc.steps_total", offsetof(NetTrainState, steps_total)},
};
static const char KEY_SEED[] = "netc.seed";
static const char KEY_LR[] = "netc.lr";
static const char KEY_ACCUM[] = "netc.accum_steps"; /* optional: absent in older checkpoints, meaning 1 */
static const char KEY_DATA[] = "netc.data";         /* optional: absent in older checkpoints, not checked */
static const char KEY_WORLD[] = "netc.world";       /* optional: absent in older checkpoints, meaning 1 */
enum { MAX_WORLD = 4096 };                          /* rt_rendezvous.h's RT_RENDEZVOUS_MAX_WORLD */

enum { N_INT_KEYS = sizeof INT_KEYS / sizeof INT_KEYS[0] };

static int64_t *int_field(NetTrainState *st, int i) { return (int64_t *)(void *)((char *)st + INT_KEYS[i].offset); }
static int64_t int_value(const NetTrainState *st, int i) {
  int64_t v;
  memcpy(&v, (const char *)st + INT_KEYS[i].offset, sizeof v);
  return v;
}

static int is_weight(const IrValue *v) { return v->kind == IR_VAL_PARAM || v->kind == IR_VAL_STATE; }

static int by_name(const void *a, const void *b) {
  return strcmp((*(const IrValue *const *)a)->name, (*(const IrValue *const *)b)->name);
}

/* hex = SHA-256 of "name[d0,d1,...]\n" for every param and state of g in
 * name order, shapes as in the file (KCRS filters). */
static NetStatus fingerprint(const IrGraph *g, char hex[65]) {
  const IrValue **vals = malloc(sizeof *vals * ((size_t)g->nval + 1));
  int n = 0;
  if (!vals) return net_fail(NET_ERR_NOMEM, "out of memory");
  for (int v = 0; v < g->nval; v++)
    if (is_weight(&g->val[v])) vals[n++] = &g->val[v];
  qsort(vals, (size_t)n, sizeof *vals, by_name);
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  for (int i = 0; i < n; i++) {
    const IrValue *val = vals[i];
    int64_t shape[IR_MAX_RANK];
    int rank = rt_weights_file_shape(&val->type, 1, shape);
    char line[64];
    sha256_update(&ctx, strlen(val->name), (const uint8_t *)val->name);
    for (int d = 0; d < rank; d++) {
      int len = snprintf(line, sizeof line, "%c%lld", d ? ',' : '[', (long long)shape[d]);
      sha256_update(&ctx, (size_t)len, (const uint8_t *)line);
    }
    sha256_update(&ctx, rank ? 2 : 3, (const uint8_t *)(rank ? "]\n" : "[]\n"));
  }
  free(vals);
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, sizeof digest, digest);
  for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return NET_OK;
}

/* The model's own entries: batch, name, fingerprint. */
static NetStatus describe(const NetModel *m, NetTrainState *st) {
  st->batch = m->batch;
  snprintf(st->model_name, sizeof st->model_name, "%s", m->gt->name ? m->gt->name : "net");
  return fingerprint(m->gt, st->model_hash);
}

static NetStatus need_training(const NetModel *m, const char *fn) {
  return m->gt ? NET_OK
               : net_fail(NET_ERR_MODEL,
                          "%s: an inference-only model has no training state (load it without "
                          "inference_only)",
                          fn);
}

/* --- saving ---------------------------------------------------------------- */

/* The position entries (RtWeightsMetaFn: user is the NetTrainState). */
static int set_meta(RtStWriter *w, void *user) {
  const NetTrainState *st = user;
  char buf[64];
  RtStStatus s = rt_st_writer_set_meta(w, KEY_VERSION, (snprintf(buf, sizeof buf, "%d", CKPT_VERSION), buf));
  if (!s) s = rt_st_writer_set_meta(w, KEY_MODEL, st->model_name);
  if (!s) s = rt_st_writer_set_meta(w, KEY_HASH, st->model_hash);
  for (int i = 0; i < N_INT_KEYS && !s; i++) {
    snprintf(buf, sizeof buf, "%lld", (long long)int_value(st, i));
    s = rt_st_writer_set_meta(w, INT_KEYS[i].key, buf);
  }
  if (!s)
    s = rt_st_writer_set_meta(w, KEY_SEED, (snprintf(buf, sizeof buf, "%llu", (unsigned long long)st->seed), buf));
  if (!s) s = rt_st_writer_set_meta(w, KEY_LR, (snprintf(buf, sizeof buf, "%.17g", st->lr), buf));
  int64_t accum = st->accum_steps > 1 ? st->accum_steps : 1;
  if (!s) s = rt_st_writer_set_meta(w, KEY_ACCUM, (snprintf(buf, sizeof buf, "%lld", (long long)accum), buf));
  if (!s && st->data[0]) s = rt_st_writer_set_meta(w, KEY_DATA, st->data);
  int64_t world = st->world > 1 ? st->world : 1;
  if (!s) s = rt_st_writer_set_meta(w, KEY_WORLD, (snprintf(buf, sizeof buf, "%lld", (long long)world), buf));
  return s != RT_ST_OK;
}

/* A position past its own plan's end, or a plan whose steps times its
 * accumulation (netrun export's num_batches_tracked) would not fit. */
static int outside_plan(const NetTrainState *st) {
  return st->step > st->steps_total || st->epoch > st->epochs || st->accum_steps > MAX_ACCUM || st->world > MAX_WORLD ||
         st->steps_total > INT64_MAX / MAX_ACCUM;
}

static NetStatus check_position(const NetTrainState *st) {
  for (int i = 1; i < N_INT_KEYS; i++) /* 0 is the batch, which comes from the model */
    if (int_value(st, i) < 0)
      return net_fail(NET_ERR_ARG, "net_checkpoint_save: %s is %lld, must not be negative", INT_KEYS[i].key + 5,
                      (long long)int_value(st, i));
  if (!isfinite(st->lr)) return net_fail(NET_ERR_ARG, "net_checkpoint_save: lr is not finite");
  if (outside_plan(st))
    return net_fail(NET_ERR_ARG,
                    "net_checkpoint_save: step %lld of %lld, epoch %lld of %lld, accum_steps %lld: outside the "
                    "plan (a load would refuse it)",
                    (long long)st->step, (long long)st->steps_total, (long long)st->epoch, (long long)st->epochs,
                    (long long)st->accum_steps);
  return NET_OK;
}

NetStatus net_checkpoint_save(NetModel *m, const char *path, const NetTrainState *st) {
  if (!m || !path || !st)
    return net_fail(NET_ERR_ARG, "net_checkpoint_save: %s is NULL", !m ? "the model" : !path ? "path" : "the state");
  NetStatus s = need_training(m, "net_checkpoint_save");
  if (!s) s = check_position(st);
  NetTrainState full = *st;
  if (!s) s = describe(m, &full);
  if (s) return s;
  /* one atomic write (rt_st's temporary file + rename) of the weights with the position */
  s = net_weights_save_meta(m, path, set_meta, &full);
  if (s) {
    char msg[NET_ERRMAX];
    snprintf(msg, sizeof msg, "%s", net_last_error());
    net_fail(s, "%s: checkpoint not written: %s", path, msg);
  }
  return s;
}

/* --- loading --------------------------------------------------------------- */

static int parse_i64(const char *s, int64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return 0;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return 0;
  *out = v;
  return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return 0;
  *out = v;
  return 1;
}

static int has_position_key(const RtStFile *f) {
  for (size_t i = 0; i < rt_st_meta_count(f); i++) {
    const char *key, *value;
    rt_st_meta_at(f, i, &key, &value);
    if (strncmp(key, "netc.", 5) == 0) return 1;
  }
  return 0;
}

/* Appends ", what" (or "what" first) to list while it has room. */
static void list_add(char *list, size_t cap, const char *what) {
  size_t len = strlen(list);
  if (len + 8 >= cap) return;
  snprintf(list + len, cap - len, "%s%s", len ? ", " : "", what);
}

/* Every entry of a checkpoint into *st (batch, name, hash included). */
static NetStatus read_position(const RtStFile *f, const char *path, NetTrainState *st) {
  const char *version = rt_st_meta_get(f, KEY_VERSION);
  int64_t ver = 0;
  if (!parse_i64(version, &ver) || ver < 1)
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not a format version", path, KEY_VERSION, version);
  if (ver > CKPT_VERSION)
    return net_fail(NET_ERR_WEIGHTS, "%s: checkpoint format version %lld is newer than this netc reads (%d)", path,
                    (long long)ver, CKPT_VERSION);
  char missing[512] = "";
  const char *text[] = {KEY_MODEL, KEY_HASH, KEY_SEED, KEY_LR};
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
    if (!rt_st_meta_get(f, text[i])) list_add(missing, sizeof missing, text[i]);
  for (int i = 0; i < N_INT_KEYS; i++)
    if (!rt_st_meta_get(f, INT_KEYS[i].key)) list_add(missing, sizeof missing, INT_KEYS[i].key);
  if (*missing)
    return net_fail(NET_ERR_WEIGHTS, "%s: checkpoint lacks the position entries %s in __metadata__", path, missing);
  for (int i = 0; i < N_INT_KEYS; i++) {
    const char *v = rt_st_meta_get(f, INT_KEYS[i].key);
    if (!parse_i64(v, int_field(st, i)))
      return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not a non-negative integer", path,
                      INT_KEYS[i].key, v);
  }
  const char *accum = rt_st_meta_get(f, KEY_ACCUM);
  st->accum_steps = 1;
  if (accum && (!parse_i64(accum, &st->accum_steps) || st->accum_steps < 1 || st->accum_steps > MAX_ACCUM))
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not an integer in 1..%d", path, KEY_ACCUM, accum,
                    MAX_ACCUM);
  const char *world = rt_st_meta_get(f, KEY_WORLD);
  st->world = 1;
  if (world && (!parse_i64(world, &st->world) || st->world < 1 || st->world > MAX_WORLD))
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not an integer in 1..%d", path, KEY_WORLD, world,
                    MAX_WORLD);
  /* a position inside its own plan (net_train checks it against the resuming run's) */
  if (outside_plan(st))
    return net_fail(NET_ERR_WEIGHTS,
                    "%s: __metadata__ position step %lld of %lld, epoch %lld of %lld is outside its own plan (a "
                    "damaged or edited checkpoint)",
                    path, (long long)st->step, (long long)st->steps_total, (long long)st->epoch, (long long)st->epochs);
  const char *seed = rt_st_meta_get(f, KEY_SEED), *lr = rt_st_meta_get(f, KEY_LR), *hash = rt_st_meta_get(f, KEY_HASH);
  if (!parse_u64(seed, &st->seed))
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not a non-negative integer", path, KEY_SEED, seed);
  char *end;
  st->lr = strtod(lr, &end);
  if (!*lr || *end || !isfinite(st->lr))
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not a finite number", path, KEY_LR, lr);
  if (strlen(hash) != 64 || strspn(hash, "0123456789abcdef") != 64)
    return net_fail(NET_ERR_WEIGHTS, "%s: __metadata__ '%s' is '%s', not a SHA-256 in hex", path, KEY_HASH, hash);
  memcpy(st->model_hash, hash, 65);
  snprintf(st->model_name, sizeof st->model_name, "%s", rt_st_meta_get(f, KEY_MODEL));
  const char *data = rt_st_meta_get(f, KEY_DATA);
  snprintf(st->data, sizeof st->data, "%s", data ? data : "");
  return NET_OK;
}

/* The checkpoint's model, batch and tensors against m's. */
static NetStatus check_fits(const RtStFile *f, const char *path, const NetModel *m, const NetTrainState *mine,
                            const NetTrainState *st) {
  if (strcmp(st->model_hash, mine->model_hash) != 0)
    return net_fail(NET_ERR_WEIGHTS,
                    "%s: a checkpoint of another model: '%s' with parameters %.12s..., this model is '%s' with "
                    "parameters %.12s... (SHA-256 of the parameter and state names and shapes)",
                    path, st->model_name, st->model_hash, mine->model_name, mine->model_hash);
  if (st->batch != mine->batch)
    return net_fail(NET_ERR_WEIGHTS,
                    "%s: checkpoint of a run at batch %lld, this model runs batch %lld (load the model with batch "
                    "%lld to resume it)",
                    path, (long long)st->batch, (long long)mine->batch, (long long)st->batch);
  char missing[1024] = "";
  for (int v = 0; v < m->gt->nval; v++)
    if (is_weight(&m->gt->val[v]) && !rt_st_find(f, m->gt->val[v].name))
      list_add(missing, sizeof missing, m->gt->val[v].name);
  if (*missing) return net_fail(NET_ERR_WEIGHTS, "%s: checkpoint lacks the tensors %s", path, missing);
  return NET_OK;
}

NetStatus net_checkpoint_load(NetModel *m, const char *path, NetTrainState *st) {
  if (!m || !path || !st)
    return net_fail(NET_ERR_ARG, "net_checkpoint_load: %s is NULL", !m ? "the model" : !path ? "path" : "the state");
  NetStatus s = need_training(m, "net_checkpoint_load");
  NetTrainState mine = {0}, got = {0};
  if (!s) s = describe(m, &mine);
  if (s) return s;
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  RtStStatus os = rt_st_open(path, &f, err, sizeof err);
  if (os) return net_fail(net_status_of_st(os), "%s", err);
  int weights_only = !rt_st_meta_get(f, KEY_VERSION);
  if (weights_only && has_position_key(f))
    s = net_fail(NET_ERR_WEIGHTS, "%s: checkpoint lacks its format version ('%s' in __metadata__)", path, KEY_VERSION);
  else if (weights_only && !st->allow_weights)
    s = net_fail(NET_ERR_WEIGHTS,
                 "%s: a weights file, not a checkpoint (no training position in its __metadata__); ask for it "
                 "as weights (allow_weights) to start from it at step 0",
                 path);
  else if (!weights_only && !(s = read_position(f, path, &got)))
    s = check_fits(f, path, m, &mine, &got);
  rt_st_close(f);
  if (!s) s = net_weights_load(m, path);
  if (s) return s;
  if (weights_only) {
    got = mine;
    got.from_weights = 1;
  }
  got.allow_weights = st->allow_weights;
  *st = got;
  return NET_OK;
}

NetStatus net_checkpoint_info(const char *path, NetTrainState *st) {
  if (!path || !st) return net_fail(NET_ERR_ARG, "net_checkpoint_info: %s is NULL", !path ? "path" : "the state");
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX];
  RtStStatus os = rt_st_open(path, &f, err, sizeof err);
  if (os) return net_fail(net_status_of_st(os), "%s", err);
  NetTrainState got = {0};
  NetStatus s = NET_OK;
  if (rt_st_meta_get(f, KEY_VERSION))
    s = read_position(f, path, &got);
  else if (has_position_key(f))
    s = net_fail(NET_ERR_WEIGHTS, "%s: checkpoint lacks its format version ('%s' in __metadata__)", path, KEY_VERSION);
  else
    got.from_weights = 1;
  rt_st_close(f);
  if (!s) *st = got;
  return s;
}
