/* test_rendezvous.c - the ranks' rendezvous and control channel
 * (runtime/dist/rt_rendezvous.h), with real processes on loopback: every
 * rank gets rank 0's blob; a failed rank, a rank whose process is gone, a
 * rank that never comes, a rank 0 that never comes and a WORLD_SIZE that
 * disagrees each end every rank with a message naming the cause, within the
 * deadline (no hang); sums over the ranks give every rank the same bits, in
 * rank order; another count, other weights or a rank gone in a sum or a
 * same-bytes check are named to every rank; the environment's mistakes are
 * named. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rt_rendezvous.h"

enum { MAXR = 8, BLOB = 128 };

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t n = sizeof a;
  int port = -1;
  if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &n) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* What rank k does: join (world `says` in its hello), then agree with ok,
 * or leave right after joining.  Its outcome and message go to out. */
typedef struct Plan {
  int absent;     /* never starts */
  int says_world; /* 0: the true world size */
  int ok;         /* its verdict to agree */
  int leave;      /* exits after open, before agree */
  int xchg;       /* after agreeing: sums 3 doubles, then checks 32 bytes are the same */
  int sum_n;      /* 0: 3; else the count it passes (another length) */
  int differ;     /* its 32 bytes differ from rank 0's */
  int quit;       /* exits after agreeing, before the sum */
} Plan;

typedef struct Outcome {
  int opened, agreed; /* open 0/-1; agree 1/0/-1 (9: not reached) */
  char msg[256];
  int summed, same; /* rt_rendezvous_sum's and _same's results (9: not reached) */
  double sums[3];
  char sum_msg[256], same_msg[256];
} Outcome;

static void run_rank(int port, int world, int k, const Plan *p, double timeout, Outcome *o) {
  RtRendezvousConfig c = {.addr = "127.0.0.1",
                          .port = port,
                          .rank = k,
                          .world = p->says_world ? p->says_world : world,
                          .timeout_s = timeout};
  uint8_t blob[BLOB];
  for (int i = 0; i < BLOB; i++) blob[i] = k == 0 ? (uint8_t)(i * 7 + 3) : 0;
  RtRendezvous *r = NULL;
  o->agreed = 9;
  o->opened = rt_rendezvous_open(&c, blob, BLOB, &r, o->msg, sizeof o->msg);
  if (o->opened == 0)
    for (int i = 0; i < BLOB; i++)
      if (blob[i] != (uint8_t)(i * 7 + 3)) {
        o->opened = -2;
        snprintf(o->msg, sizeof o->msg, "byte %d of the blob differs", i);
        break;
      }
  if (o->opened == 0 && p->leave) _exit(0); /* the process is gone: its socket closes */
  if (o->opened == 0) o->agreed = rt_rendezvous_agree(r, p->ok, o->msg, sizeof o->msg);
  o->summed = o->same = 9;
  if (o->agreed == 1 && p->quit) _exit(0);
  if (o->agreed == 1 && p->xchg) {
    /* the sums of k + 1, 0.1 (k + 1) and 1e16 / (k + 1): the last two round, so one order for all */
    double v[3] = {k + 1, 0.1 * (k + 1), 1e16 / (k + 1)};
    o->summed = rt_rendezvous_sum(r, v, p->sum_n ? p->sum_n : 3, o->sum_msg, sizeof o->sum_msg);
    memcpy(o->sums, v, sizeof v);
    uint8_t digest[32];
    memset(digest, 7, sizeof digest);
    digest[5] ^= (uint8_t)p->differ;
    if (o->summed == 1) o->same = rt_rendezvous_same(r, digest, sizeof digest, o->same_msg, sizeof o->same_msg);
  }
  rt_rendezvous_close(r);
}

/* Runs the ranks as processes; their outcomes in o; the seconds it took. */
static double run(int world, const Plan *plan, double timeout, Outcome *o) {
  int port = free_port();
  Outcome *shared = NULL;
  FILE *f[MAXR] = {0};
  pid_t pid[MAXR];
  double t0 = now();
  for (int k = 0; k < world; k++) {
    memset(&o[k], 0, sizeof o[k]);
    o[k].opened = o[k].agreed = o[k].summed = o[k].same = 9;
    pid[k] = -1;
    if (plan[k].absent) continue;
    f[k] = tmpfile();
    pid[k] = fork();
    if (pid[k] == 0) {
      Outcome mine;
      run_rank(port, world, k, &plan[k], timeout, &mine);
      fwrite(&mine, sizeof mine, 1, f[k]);
      fflush(f[k]);
      _exit(0);
    }
  }
  (void)shared;
  for (int k = 0; k < world; k++) {
    if (pid[k] < 0) continue;
    int st;
    waitpid(pid[k], &st, 0);
    rewind(f[k]);
    if (fread(&o[k], sizeof o[k], 1, f[k]) != 1) o[k].opened = 8; /* it left without a word (plan.leave) */
    fclose(f[k]);
  }
  return now() - t0;
}

int main(void) {
  Outcome o[MAXR];
  Plan p[MAXR];

  /* four ranks: the blob, then agreement */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 4; k++) p[k].ok = 1;
  run(4, p, 5, o);
  for (int k = 0; k < 4; k++)
    CHECK(o[k].opened == 0 && o[k].agreed == 1, "world 4, rank %d: open %d agree %d (%s)", k, o[k].opened, o[k].agreed,
          o[k].msg);

  /* rank 2 fails: every rank hears it */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = k != 2;
  run(3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].agreed == 0 && strstr(o[k].msg, "rank 2 failed"), "rank 2 failed, rank %d: agree %d (%s)", k,
          o[k].agreed, o[k].msg);

  /* rank 1's process is gone after joining: no hang, every other rank told */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = 1;
  p[1].leave = 1;
  double t = run(3, p, 5, o);
  CHECK(o[0].agreed == 0 && strstr(o[0].msg, "rank 0: rank 1 left the run"), "rank 1 gone, rank 0: %d (%s)",
        o[0].agreed, o[0].msg);
  CHECK(o[2].agreed == 0 && strstr(o[2].msg, "rank 1 failed or left the run"), "rank 1 gone, rank 2: %d (%s)",
        o[2].agreed, o[2].msg);
  CHECK(t < 4, "a rank gone is seen at once, not at the deadline: %.1f s", t);

  /* rank 2 never comes: rank 0 names it at the deadline, rank 1 is sent away */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = 1;
  p[2].absent = 1;
  t = run(3, p, 1, o);
  CHECK(o[0].opened == -1 && strstr(o[0].msg, "rank 0: rank 2 of 3 did not join within 1 s"), "absent rank 2: %s",
        o[0].msg);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 1: rank 0 refused: rank 0 gave up waiting"), "rank 1: %s",
        o[1].msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* rank 0 never comes */
  memset(p, 0, sizeof p);
  p[0].absent = 1, p[1].ok = 1;
  t = run(2, p, 1, o);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 1: cannot reach rank 0 at 127.0.0.1:"), "no rank 0: %s", o[1].msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* WORLD_SIZE disagrees */
  memset(p, 0, sizeof p);
  p[0].ok = p[1].ok = 1;
  p[1].says_world = 3;
  run(2, p, 2, o);
  CHECK(o[0].opened == -1 && strstr(o[0].msg, "rank 1 says WORLD_SIZE 3; rank 0 has 2"), "world: %s", o[0].msg);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 0 refused: rank 1 says WORLD_SIZE 3"), "world, rank 1: %s",
        o[1].msg);

  /* sums and the same-bytes check: every rank the same bits, in rank order */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 4; k++) p[k].ok = p[k].xchg = 1;
  run(4, p, 5, o);
  double want[3] = {0, 0, 0};
  for (int k = 0; k < 4; k++) want[0] += k + 1, want[1] += 0.1 * (k + 1), want[2] += 1e16 / (k + 1);
  for (int k = 0; k < 4; k++)
    CHECK(o[k].summed == 1 && o[k].same == 1 && !memcmp(o[k].sums, want, sizeof want),
          "world 4, rank %d: sum %d (%.17g %.17g %.17g; %s), same %d (%s)", k, o[k].summed, o[k].sums[0], o[k].sums[1],
          o[k].sums[2], o[k].sum_msg, o[k].same, o[k].same_msg);

  /* rank 2 passes another count: every rank told, no hang */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = p[k].xchg = 1;
  p[2].sum_n = 2;
  t = run(3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].summed == 0 && strstr(o[k].sum_msg, "sum: rank 2 passed another length") && o[k].same == 9,
          "another count, rank %d: %d (%s)", k, o[k].summed, o[k].sum_msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* rank 1 holds other weights */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = p[k].xchg = 1;
  p[1].differ = 1;
  run(3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].summed == 1 && o[k].same == 0 && strstr(o[k].same_msg, "rank 1 holds other bytes than rank 0"),
          "other bytes, rank %d: %d (%s)", k, o[k].same, o[k].same_msg);

  /* rank 1's process is gone before the sum: the others told at once */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = p[k].xchg = 1;
  p[1].quit = 1;
  t = run(3, p, 5, o);
  CHECK(o[0].summed == 0 && strstr(o[0].sum_msg, "rank 0: sum: rank 1 left the run"), "rank 1 gone, rank 0: %s",
        o[0].sum_msg);
  CHECK(o[2].summed == 0 && strstr(o[2].sum_msg, "rank 2: sum: rank 1 left the run"), "rank 1 gone, rank 2: %s",
        o[2].sum_msg);
  CHECK(t < 4, "a rank gone is seen at once: %.1f s", t);

  /* one process alone */
  RtRendezvousConfig c1 = {.addr = "127.0.0.1", .port = 1, .rank = 0, .world = 1};
  RtRendezvous *r = NULL;
  char err[256];
  uint8_t b[4] = {0};
  CHECK(rt_rendezvous_open(&c1, b, 4, &r, err, sizeof err) == 0 && rt_rendezvous_agree(r, 1, err, sizeof err) == 1,
        "world 1");
  double one[2] = {1.5, -2};
  CHECK(rt_rendezvous_sum(r, one, 2, err, sizeof err) == 1 && one[0] == 1.5 && one[1] == -2 &&
            rt_rendezvous_same(r, b, 4, err, sizeof err) == 1,
        "world 1: the sum is its own values");
  CHECK(rt_rendezvous_sum(r, one, RT_RENDEZVOUS_MAX_SUM + 1, err, sizeof err) == -1 && strstr(err, "at most 512"),
        "too many to sum: %s", err);
  rt_rendezvous_close(r);

  /* the environment */
  RtRendezvousConfig c;
  setenv("WORLD_SIZE", "4", 1), setenv("RANK", "4", 1), setenv("MASTER_PORT", "29500", 1), unsetenv("MASTER_ADDR");
  CHECK(rt_rendezvous_from_env(&c, err, sizeof err) == -1 && strstr(err, "RANK must be 0..3 (WORLD_SIZE 4), not '4'"),
        "RANK: %s", err);
  setenv("RANK", "1", 1), setenv("MASTER_PORT", "70000", 1);
  CHECK(rt_rendezvous_from_env(&c, err, sizeof err) == -1 && strstr(err, "MASTER_PORT must be a port"), "PORT: %s",
        err);
  unsetenv("WORLD_SIZE");
  CHECK(rt_rendezvous_from_env(&c, err, sizeof err) == -1 && strstr(err, "WORLD_SIZE must be"), "WORLD: %s", err);
  setenv("WORLD_SIZE", "4", 1), setenv("MASTER_PORT", "29500", 1);
  CHECK(rt_rendezvous_from_env(&c, err, sizeof err) == 0 && c.rank == 1 && c.world == 4 && c.port == 29500 &&
            strcmp(c.addr, "127.0.0.1") == 0,
        "a good environment: %s", err);
  return check_report();
}
