/* test_exec_input.c - the executor's input pipeline (net_exec_input_*) as
 * net_train uses it, on the CPU executor and, when there is one, the GPU:
 * two batches sent before either is fed, each fed batch read back equal to
 * rt_ref_input_u8 of its bytes (f32 input: exactly), host writes of the
 * input skipped while the pipeline runs and taken again after stop, and
 * misuse refused with a message (feeding with nothing sent, a third
 * buffer, a value of another size).  Labels travel with their batch into
 * the label value, read back per fed batch.  The per-step mail
 * (net_exec_post/fetch/fetched): a posted rate is what a fetch queued
 * after it reads, a later post does not change a fetched value, a stale
 * ticket and a value too big for a slot are refused.  The graph is an
 * input value, NCHW f32 [N,3,4,5], i64 labels [N], an f32 scalar and an
 * f32 [64] vector, planned by hand for the GPU.  `test_exec_input` runs the
 * CPU executor, `test_exec_input --gpu` the GPU one (77 without a GPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "net_exec.h"

enum { N = 2, C = 3, H = 4, W = 5, NUMEL = N * C * H * W };

static const RtRefInput IN = {N, C, H, W, 0, C, 0, {0.02f, 0.03f, 0.04f}, {-1.0f, -0.5f, 0.25f}};

static void bytes_of(uint8_t *b, int k) {
  for (int i = 0; i < NUMEL; i++) b[i] = (uint8_t)(i * 7 + k * 101);
}

static void check_read(NetExec *x, int v, const float *want, const char *what) {
  float got[NUMEL];
  char err[1024];
  NetStatus s = net_exec_read(x, v, got, err, sizeof err);
  CHECK(!s, "%s: read: %s", what, err);
  int bad = 0;
  for (int i = 0; !s && i < NUMEL; i++)
    if (got[i] != want[i] && !bad++) fprintf(stderr, "%s: [%d] got %.9g want %.9g\n", what, i, got[i], want[i]);
  CHECK(!bad, "%s: %d values differ", what, bad);
}

/* net_exec_post/fetch/fetched on scalar value lr and vector value big. */
static void check_mail(NetExec *x, int lr, int big, const char *dev) {
  char err[1024];
  int64_t first = -1, t = -1;
  float got = 0, vec[64] = {0};
  for (int i = 0; i < 3; i++) {
    float val = 0.5f + (float)i;
    CHECK(!net_exec_post(x, lr, &val, err, sizeof err), "%s: post %d: %s", dev, i, err);
    CHECK(!net_exec_fetch(x, lr, &t, err, sizeof err), "%s: fetch %d: %s", dev, i, err);
    if (i == 0) first = t;
  }
  int done = 0;
  CHECK(!net_exec_fetched(x, t, 1, &got, &done, err, sizeof err) && done && got == 2.5f,
        "%s: the last fetch reads the last post: %g (%s)", dev, got, err);
  CHECK(!net_exec_fetched(x, first, 1, &got, NULL, err, sizeof err) && got == 0.5f,
        "%s: an earlier fetch keeps its value: %g (%s)", dev, got, err);
  for (int i = 0; i < NET_EXEC_MAIL_SLOTS; i++) net_exec_fetch(x, lr, &t, err, sizeof err);
  CHECK(net_exec_fetched(x, first, 1, &got, NULL, err, sizeof err) == NET_ERR_ARG,
        "%s: a ticket whose slot was reused is refused", dev);
  CHECK(net_exec_fetched(x, t + 1, 1, &got, NULL, err, sizeof err) == NET_ERR_ARG, "%s: a future ticket is refused",
        dev);
  CHECK(net_exec_post(x, big, vec, err, sizeof err) == NET_ERR_ARG && strstr(err, "per-step scalar"),
        "%s: a value too big for a slot is refused: %s", dev, err);
}

static void run(int gpu, const IrGraph *g, int v, int lab, int lr, int big) {
  const char *dev = gpu ? "gpu" : "cpu";
  char err[4096], what[64];
  NetExec *x = NULL;
  NetStatus s = net_exec_new(gpu, NULL, g, N, &x, err, sizeof err);
  CHECK(!s, "%s: executor: %s", dev, err);
  if (s) return;
  uint8_t bytes[2][NUMEL], *host = NULL;
  const int64_t labels[2][N] = {{3, 1}, {0, 2}};
  float want[2][NUMEL], junk[NUMEL];
  for (int k = 0; k < 2; k++) {
    bytes_of(bytes[k], k);
    rt_ref_input_u8(&IN, bytes[k], want[k]);
  }
  for (int i = 0; i < NUMEL; i++) junk[i] = 1234.5f;

  RtRefInput wrong = IN;
  wrong.h = H + 1;
  CHECK(net_exec_input_start(x, v, -1, &wrong, err, sizeof err) == NET_ERR_ARG && strstr(err, "does not hold"),
        "%s: a batch of another size is refused: %s", dev, err);
  CHECK(net_exec_input_start(x, v, big, &IN, err, sizeof err) == NET_ERR_ARG, "%s: labels of another size are refused",
        dev);
  s = net_exec_input_start(x, v, lab, &IN, err, sizeof err);
  CHECK(!s, "%s: start: %s", dev, err);
  if (s) {
    net_exec_free(x);
    return;
  }
  CHECK(net_exec_input_feed(x, err, sizeof err) == NET_ERR_ARG, "%s: feeding with nothing sent is refused", dev);
  for (int k = 0; k < 2; k++) {
    s = net_exec_input_buffer(x, &host, err, sizeof err);
    CHECK(!s, "%s: buffer %d: %s", dev, k, err);
    if (s) break;
    memcpy(host, bytes[k], NUMEL);
    CHECK(net_exec_input_send(x, NULL, err, sizeof err) == NET_ERR_ARG, "%s: a batch without its labels is refused",
          dev);
    s = net_exec_input_send(x, labels[k], err, sizeof err);
    CHECK(!s, "%s: send %d: %s", dev, k, err);
  }
  CHECK(net_exec_input_buffer(x, &host, err, sizeof err) == NET_ERR_ARG, "%s: a third buffer is refused", dev);
  for (int k = 0; k < 2 && !s; k++) {
    s = net_exec_input_feed(x, err, sizeof err);
    CHECK(!s, "%s: feed %d: %s", dev, k, err);
    /* net_step_run writes the host image every step: skipped */
    CHECK(!net_exec_write(x, v, junk, err, sizeof err), "%s: write while fed: %s", dev, err);
    snprintf(what, sizeof what, "%s batch %d", dev, k);
    if (!s) check_read(x, v, want[k], what);
    int64_t got[N] = {0};
    CHECK(!net_exec_read(x, lab, got, err, sizeof err) && got[0] == labels[k][0] && got[1] == labels[k][1],
          "%s: batch %d's labels %lld %lld (%s)", dev, k, (long long)got[0], (long long)got[1], err);
  }
  net_exec_input_stop(x);
  CHECK(!net_exec_write(x, v, junk, err, sizeof err), "%s: write after stop: %s", dev, err);
  snprintf(what, sizeof what, "%s after stop", dev);
  check_read(x, v, junk, what);
  check_mail(x, lr, big, dev);
  net_exec_free(x);
}

/* No argument: the CPU executor.  --gpu: the GPU executor (77 without one). */
int main(int argc, char **argv) {
  int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
  char why[512] = "";
  if (gpu && !net_exec_gpu_present(why, sizeof why)) return check_skip(why);
  Arena a;
  arena_init(&a);
  IrGraph *g = ir_graph_new(&a, "input_only");
  IrType t = {.dtype = IR_DT_F32, .layout = IR_LAYOUT_NCHW, .rank = 4, .dim = {IR_DIM_N, C, H, W}};
  int v = ir_value_add(g, IR_VAL_INPUT, t, "image");
  IrType tl = {.dtype = IR_DT_I64, .layout = IR_LAYOUT_ROW, .rank = 1, .dim = {IR_DIM_N}};
  IrType ts = {.dtype = IR_DT_F32, .layout = IR_LAYOUT_ROW, .rank = 1, .dim = {1}};
  IrType tb = {.dtype = IR_DT_F32, .layout = IR_LAYOUT_ROW, .rank = 1, .dim = {64}};
  int lab = ir_value_add(g, IR_VAL_INPUT, tl, "label");
  int lr = ir_value_add(g, IR_VAL_INPUT, ts, "lr");
  int big = ir_value_add(g, IR_VAL_INPUT, tb, "big");
  g->val[v].offset = 0, g->val[lab].offset = 1024, g->val[lr].offset = 1280, g->val[big].offset = 1536;
  g->plan_bytes = 4096, g->plan_batch = N;
  run(gpu, g, v, lab, lr, big);
  arena_free(&a);
  return check_report();
}
