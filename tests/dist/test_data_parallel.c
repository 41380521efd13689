/* test_data_parallel.c - data-parallel training through the API on the
 * CPU executor (net_dist_join, net_train), with every rank a process on
 * loopback:
 *   - equal: 2 ranks of batch B train the weights one process of batch 2B
 *     trains, to the float rounding of the average's order (mlp in fp32:
 *     no batch norm, whose per-rank statistics would differ), and every
 *     rank ends with the same bits; with accumulation too (2 ranks x B x 2
 *     against 1 x 4B);
 *   - synchronized batch norm: smallcnn in fp32, 2 ranks x 16 = 1 x 32,
 *     parameters and running statistics; apart without it; refused when
 *     one rank asks for it and the other does not;
 *   - batch norm: smallcnn (fp16) on 3 ranks: every rank's parameters and
 *     averaged running statistics are the same bits, and every rank reports
 *     the same test accuracy (the evaluation's counts summed);
 *   - resume: a checkpoint of a 2-rank run (stopped between epochs by a
 *     stop flag set on every rank) continues on 1 rank at the next epoch;
 *     one inside an epoch that 1 rank cannot split is refused by name;
 *   - refusals: ranks that start from other weights, ranks with another
 *     batch, a rank that dies in the middle of the run -- each ends the
 *     other ranks with a message naming the cause, within the deadline. */
#define _GNU_SOURCE
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"
#include "net.h"
#include "rt_safetensors.h"

enum { MAXR = 4 };

static const char *ROOT, *WORK;

/* One rank's run. */
typedef struct Job {
  const char *model, *precision;
  int64_t batch, accum, steps, epochs, synthetic_n, test_n;
  uint64_t init_seed;     /* parameters */
  int stop_after_epoch;   /* set the stop flag after this epoch (1-based; 0: never) */
  int stop_at_step;       /* or after this step */
  int die_at_step;        /* _exit at this step (0: never) */
  const char *checkpoint; /* rank 0 saves it */
  const char *resume;
  const char *weights_out; /* %d: the rank */
  int sync_bn;             /* NetDistOpts.sync_bn */
} Job;

/* What a rank reports to the parent through its exit status and a file. */
typedef struct Outcome {
  int status;
  double accuracy;
  int64_t steps;
  double allreduce_ms, exposed_ms; /* the last progress report's (NetStepInfo) */
  char msg[512];
} Outcome;

static volatile int stop_flag;
static const Job *cur;
static double seen_allreduce_ms = -2, seen_exposed_ms = -2;

static int on_epoch(const NetEpochInfo *e, void *user) {
  (void)user;
  if (cur->stop_after_epoch && e->epoch + 1 == cur->stop_after_epoch) stop_flag = 1;
  return 0;
}

static int on_step(const NetStepInfo *s, void *user) {
  (void)user;
  if (cur->die_at_step && s->step == cur->die_at_step) _exit(9);
  if (cur->stop_at_step && s->step == cur->stop_at_step) stop_flag = 1;
  seen_allreduce_ms = s->allreduce_ms, seen_exposed_ms = s->allreduce_exposed_ms;
  return 0;
}

static void run_rank(const Job *j, int rank, int world, int port, Outcome *o) {
  cur = j, stop_flag = 0;
  char model[4096];
  snprintf(model, sizeof model, "%s/%s", ROOT, j->model);
  NetLoadOpts lo = {.device = "cpu", .batch = j->batch, .seed = j->init_seed, .precision = j->precision};
  NetModel *m = NULL;
  NetStatus s = net_load(model, &lo, &m);
  if (!s && world > 0) {
    NetDistOpts d = {.rank = rank, .world = world, .port = port, .timeout_s = 20, .sync_bn = j->sync_bn};
    s = net_dist_join(m, &d);
  }
  NetTrainResult r = {0};
  if (!s) {
    NetTrainConfig c = {.data = NET_DATA_SYNTHETIC,
                        .synthetic_n = j->synthetic_n,
                        .test_limit = j->test_n,
                        .steps = j->steps,
                        .epochs = j->epochs,
                        .seed = 5,
                        .accum_steps = j->accum,
                        .on_epoch = on_epoch,
                        .on_step = on_step,
                        .checkpoint = j->checkpoint,
                        .resume = j->resume,
                        .stop = &stop_flag,
                        .result = &r};
    s = net_train(m, &c);
  }
  if ((!s || s == NET_STOPPED) && j->weights_out) {
    char path[4096];
    snprintf(path, sizeof path, j->weights_out, rank);
    NetStatus ws = net_weights_save(m, path);
    if (ws) s = ws;
  }
  o->status = s, o->accuracy = r.test_accuracy, o->steps = r.steps;
  o->allreduce_ms = seen_allreduce_ms, o->exposed_ms = seen_exposed_ms;
  snprintf(o->msg, sizeof o->msg, "%s", s ? net_last_error() : "");
  net_free(m);
}

/* Runs j on `world` ranks (world 0: one process, not joined), each a
 * child process writing its Outcome to a pipe; fills out[0..n). */
static void run(const Job *jobs, int world, Outcome *out, double *seconds) {
  int n = world > 0 ? world : 1, port = free_port(), fd[MAXR][2];
  pid_t pid[MAXR];
  double t0 = now();
  for (int k = 0; k < n; k++) {
    if (pipe(fd[k])) abort();
    fflush(NULL);
    if ((pid[k] = fork()) == 0) {
      Outcome o = {0};
      run_rank(&jobs[k], k, world, port, &o);
      ssize_t w = write(fd[k][1], &o, sizeof o);
      _exit(w == (ssize_t)sizeof o ? 0 : 1);
    }
    close(fd[k][1]);
  }
  for (int k = 0; k < n; k++) {
    memset(&out[k], 0, sizeof out[k]);
    ssize_t got = read(fd[k][0], &out[k], sizeof out[k]);
    close(fd[k][0]);
    int st;
    waitpid(pid[k], &st, 0);
    if (got != (ssize_t)sizeof out[k]) {
      out[k].status = -1;
      snprintf(out[k].msg, sizeof out[k].msg, "the process ended without a word (status %d)",
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
  }
  if (seconds) *seconds = now() - t0;
}

/* The F32 tensors of a weights file, as one list. */
typedef struct Weights {
  RtStFile *f;
} Weights;

static int open_weights(const char *path, Weights *w) {
  char err[512];
  if (rt_st_open(path, &w->f, err, sizeof err)) {
    fprintf(stderr, "  %s\n", err);
    return -1;
  }
  return 0;
}

/* The largest |a - b| / (|b| + 1e-3) over every tensor of two weights
 * files (the same names), and whether they are the same bits (*same). */
static double weights_diff(const char *pa, const char *pb, int *same) {
  Weights a = {0}, b = {0};
  *same = 0;
  if (open_weights(pa, &a) || open_weights(pb, &b)) {
    rt_st_close(a.f), rt_st_close(b.f);
    return INFINITY;
  }
  double worst = 0;
  int bits = rt_st_count(a.f) == rt_st_count(b.f);
  for (size_t i = 0; bits && i < rt_st_count(a.f); i++) {
    const RtStTensor *ta = rt_st_tensor(a.f, i), *tb = rt_st_find(b.f, ta->name);
    if (!tb || tb->nbytes != ta->nbytes || ta->dtype != RT_ST_F32) {
      worst = INFINITY, bits = 0;
      break;
    }
    const float *x = ta->data, *y = tb->data;
    bits = bits && memcmp(x, y, ta->nbytes) == 0;
    for (size_t k = 0; k < ta->nbytes / 4; k++) {
      double d = fabs((double)x[k] - (double)y[k]) / (fabs((double)y[k]) + 1e-3);
      if (!(d <= worst)) worst = d;
    }
  }
  *same = bits;
  rt_st_close(a.f), rt_st_close(b.f);
  return worst;
}

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", WORK, name); }

static void same_jobs(Job *jobs, int n, const Job *j) {
  for (int k = 0; k < n; k++) jobs[k] = *j;
}

/* 2 ranks of batch B = 1 process of 2B; with accumulation 2 x B x 2 = 1 x 4B. */
static void test_equal(int accum) {
  char w2[4096], w1[4096], r0[4096], r1[4096];
  path_of(w2, sizeof w2, accum > 1 ? "eqa2-%d.safetensors" : "eq2-%d.safetensors");
  path_of(w1, sizeof w1, accum > 1 ? "eqa1-%d.safetensors" : "eq1-%d.safetensors");
  Job j = {.model = "models/mlp.net",
           .precision = "fp32",
           .batch = 16,
           .accum = accum,
           .steps = 6,
           .synthetic_n = 512,
           .test_n = 64,
           .init_seed = 11,
           .weights_out = w2};
  Job jobs[MAXR];
  Outcome o[MAXR];
  same_jobs(jobs, 2, &j);
  run(jobs, 2, o, NULL);
  CHECK(o[0].status == 0 && o[1].status == 0, "accum %d: 2 ranks: %s / %s", accum, o[0].msg, o[1].msg);
  /* the exchange's time: measured on every rank, and on the CPU all of it exposed */
  for (int k = 0; k < 2; k++)
    CHECK(o[k].allreduce_ms > 0 && o[k].exposed_ms == o[k].allreduce_ms,
          "accum %d: rank %d's all-reduce %g ms (%g exposed)", accum, k, o[k].allreduce_ms, o[k].exposed_ms);
  Job one = j;
  one.batch = 32, one.weights_out = w1;
  run(&one, 0, o, NULL);
  CHECK(o[0].status == 0 && o[0].steps == 6, "accum %d: 1 process: %s", accum, o[0].msg);
  CHECK(o[0].allreduce_ms == -1 && o[0].exposed_ms == -1, "accum %d: 1 process reports an all-reduce (%g ms)", accum,
        o[0].allreduce_ms);
  snprintf(r0, sizeof r0, w2, 0), snprintf(r1, sizeof r1, w2, 1);
  int same = 0;
  double d = weights_diff(r0, r1, &same);
  CHECK(same, "accum %d: the ranks' weights differ (%g)", accum, d);
  char s1[4096];
  snprintf(s1, sizeof s1, w1, 0);
  d = weights_diff(r0, s1, &same);
  CHECK(d < 1e-5, "accum %d: 2 ranks x 16 vs 1 x 32 after 6 steps: largest relative difference %g", accum, d);
  printf("  accum %d: 2 ranks x 16 = 1 x 32 to %.2g (the same bits on both ranks)\n", accum, d);
  /* and it is not equal by accident: one rank of 16 alone trains other weights */
  Job half = j;
  half.weights_out = w1, half.steps = 6;
  run(&half, 0, o, NULL);
  d = weights_diff(r0, s1, &same);
  CHECK(o[0].status == 0 && d > 1e-3, "accum %d: one process of 16 came out equal too (%g): the test proves nothing",
        accum, d);
}

/* Synchronized batch norm: smallcnn (three batch norms, one behind a max
 * pool) in fp32 on 2 ranks of 16 trains the parameters and running
 * statistics one process of 32 trains, to the float rounding of the
 * ranks' sums; without it the ranks' statistics are their own and the
 * weights part. */
static void test_sync_bn(void) {
  char w2[4096], w1[4096], r0[4096], r1[4096], s1[4096];
  path_of(w2, sizeof w2, "sbn2-%d.safetensors");
  path_of(w1, sizeof w1, "sbn1-%d.safetensors");
  Job j = {.model = "models/smallcnn.net",
           .precision = "fp32",
           .batch = 16,
           .steps = 4,
           .synthetic_n = 256,
           .test_n = 32,
           .init_seed = 7,
           .weights_out = w2,
           .sync_bn = 1};
  Job jobs[MAXR];
  Outcome o[MAXR];
  same_jobs(jobs, 2, &j);
  run(jobs, 2, o, NULL);
  CHECK(o[0].status == 0 && o[1].status == 0, "sync bn: 2 ranks: %s / %s", o[0].msg, o[1].msg);
  Job one = j;
  one.batch = 32, one.weights_out = w1, one.sync_bn = 0;
  run(&one, 0, o, NULL);
  CHECK(o[0].status == 0, "sync bn: 1 process: %s", o[0].msg);
  snprintf(r0, sizeof r0, w2, 0), snprintf(r1, sizeof r1, w2, 1), snprintf(s1, sizeof s1, w1, 0);
  int same = 0;
  double d = weights_diff(r0, r1, &same);
  CHECK(same, "sync bn: the ranks' weights and statistics differ (%g)", d);
  d = weights_diff(r0, s1, &same);
  CHECK(d < 1e-4, "sync bn: 2 ranks x 16 vs 1 x 32 after 4 steps: largest relative difference %g", d);
  printf("  sync bn: 2 ranks x 16 = 1 x 32 to %.2g, parameters and running statistics\n", d);
  /* without it, each rank's own statistics: other weights */
  for (int k = 0; k < 2; k++) jobs[k].sync_bn = 0;
  run(jobs, 2, o, NULL);
  double apart = weights_diff(r0, s1, &same);
  CHECK(o[0].status == 0 && apart > 100 * d && apart > 1e-4,
        "sync bn: without it 2 ranks came out as close (%g against %g): the test proves nothing", apart, d);
  /* every rank must ask the same */
  jobs[1].sync_bn = 1;
  run(jobs, 2, o, NULL);
  CHECK(o[0].status && o[1].status && strstr(o[0].msg, "different things") && strstr(o[1].msg, "synchronized"),
        "sync bn on one rank only: %s / %s", o[0].msg, o[1].msg);
}

static void test_batchnorm(void) {
  char w[4096], p0[4096], p[4096];
  path_of(w, sizeof w, "bn-%d.safetensors");
  Job j = {.model = "models/smallcnn.net",
           .batch = 16,
           .epochs = 2,
           .synthetic_n = 192,
           .test_n = 70,
           .init_seed = 3,
           .weights_out = w};
  Job jobs[MAXR];
  Outcome o[MAXR];
  same_jobs(jobs, 3, &j);
  run(jobs, 3, o, NULL);
  for (int k = 0; k < 3; k++) CHECK(o[k].status == 0, "smallcnn rank %d: %s", k, o[k].msg);
  snprintf(p0, sizeof p0, w, 0);
  for (int k = 1; k < 3; k++) {
    snprintf(p, sizeof p, w, k);
    int same = 0;
    double d = weights_diff(p0, p, &same);
    CHECK(same, "smallcnn: rank %d's parameters and statistics are not rank 0's bits (%g)", k, d);
    CHECK(o[k].accuracy == o[0].accuracy && o[0].accuracy >= 0, "smallcnn: rank %d's accuracy %g, rank 0's %g", k,
          o[k].accuracy, o[0].accuracy);
  }
  CHECK(o[0].steps == 8, "smallcnn: %lld steps (192 images in 3 x 16: 4 an epoch, 2 epochs)", (long long)o[0].steps);
  printf("  smallcnn on 3 ranks: %lld steps, the same weights on every rank, test accuracy %.2f%% on all\n",
         (long long)o[0].steps, 100 * o[0].accuracy);
}

/* Ranks 0..n-1 all ended with status and a message holding `has`. */
static void expect_all(const Outcome *o, int n, int status, const char *has, const char *what) {
  for (int k = 0; k < n; k++)
    CHECK(o[k].status == status && strstr(o[k].msg, has), "%s, rank %d: %d %s", what, k, o[k].status, o[k].msg);
}

static void test_resume(void) {
  char ck[4096], ck2[4096];
  path_of(ck, sizeof ck, "dp.ckpt.safetensors");
  path_of(ck2, sizeof ck2, "dp-mid.ckpt.safetensors");
  unlink(ck), unlink(ck2);
  Job j = {.model = "models/mlp.net",
           .precision = "fp32",
           .batch = 16,
           .epochs = 3,
           .synthetic_n = 256,
           .test_n = 32,
           .init_seed = 2,
           .stop_after_epoch = 1,
           .checkpoint = ck};
  Job jobs[MAXR];
  Outcome o[MAXR];
  same_jobs(jobs, 2, &j);
  run(jobs, 2, o, NULL);
  CHECK(o[0].status == NET_STOPPED && o[1].status == NET_STOPPED && o[0].steps == 8 && o[1].steps == 8,
        "stopped after epoch 1 on 2 ranks: %d %d, %lld steps (%s / %s)", o[0].status, o[1].status,
        (long long)o[0].steps, o[0].msg, o[1].msg);
  struct stat st;
  CHECK(stat(ck, &st) == 0, "rank 0 saved no checkpoint at %s", ck);
  NetTrainState info;
  CHECK(net_checkpoint_info(ck, &info) == 0 && info.world == 2 && info.epoch == 1 && info.batch_in_epoch == 0,
        "the checkpoint's position: world %lld, epoch %lld, step %lld of it", (long long)info.world,
        (long long)info.epoch, (long long)info.batch_in_epoch);
  Job one = j;
  one.stop_after_epoch = 0, one.checkpoint = NULL, one.resume = ck;
  run(&one, 0, o, NULL);
  /* one rank: 16 steps an epoch; the run goes on at epoch 2 (step 16) to step 48 */
  CHECK(o[0].status == 0 && o[0].steps == 48, "resumed on 1 rank: status %d, %lld steps (%s)", o[0].status,
        (long long)o[0].steps, o[0].msg);
  /* a checkpoint inside epoch 1 (stopped after step 2 of 8): 2 steps of 2 x 16 images are 4 of 1 x 16, but no
   * whole number of steps of 3 x 16 */
  Job mid = j;
  mid.stop_after_epoch = 0, mid.stop_at_step = 1, mid.checkpoint = ck2;
  same_jobs(jobs, 2, &mid);
  run(jobs, 2, o, NULL);
  CHECK(o[0].status == NET_STOPPED && o[0].steps == 2, "stopped inside epoch 1: %d, %lld steps (%s)", o[0].status,
        (long long)o[0].steps, o[0].msg);
  Job three = j;
  three.stop_after_epoch = 0, three.checkpoint = NULL, three.resume = ck2;
  same_jobs(jobs, 3, &three);
  run(jobs, 3, o, NULL);
  expect_all(o, 3, NET_ERR_ARG, "not a whole number of steps", "resumed inside an epoch on 3 ranks");
  printf("  a 2-rank run stopped after epoch 1 goes on on 1 rank from step 17 to 48\n");
}

static void test_refusals(void) {
  Job j = {.model = "models/mlp.net",
           .precision = "fp32",
           .batch = 16,
           .steps = 40,
           .synthetic_n = 4096,
           .test_n = 32,
           .init_seed = 4};
  Job jobs[MAXR];
  Outcome o[MAXR];
  double secs;
  /* other weights; another batch; a rank that dies at step 3 of 40 */
  same_jobs(jobs, 2, &j);
  jobs[1].init_seed = 5;
  run(jobs, 2, o, &secs);
  expect_all(o, 2, NET_ERR_DIST, "different weights", "other weights");
  same_jobs(jobs, 2, &j);
  jobs[1].batch = 8;
  run(jobs, 2, o, &secs);
  expect_all(o, 2, NET_ERR_DIST, "different things", "another batch");
  same_jobs(jobs, 3, &j);
  jobs[2].die_at_step = 3;
  run(jobs, 3, o, &secs);
  expect_all(o, 2, NET_ERR_DIST, "left", "rank 2 died"); /* rank 0 names rank 2; rank 1 hears it from rank 0 */
  CHECK(o[2].status == -1, "rank 2 should have died: %d %s", o[2].status, o[2].msg);
  CHECK(secs < 15, "rank 2 died: the others took %.1f s to end", secs);
  printf("  refused: other weights, another batch; a rank that died ended the others in %.1f s (%s)\n", secs, o[0].msg);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_data_parallel ROOT WORK\n");
    return 2;
  }
  ROOT = argv[1], WORK = argv[2];
  mkdir(WORK, 0755);
  test_equal(1);
  test_equal(2);
  test_sync_bn();
  test_batchnorm();
  test_resume();
  test_refusals();
  return check_report();
}
