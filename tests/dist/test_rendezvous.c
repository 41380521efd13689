/* test_rendezvous.c - the ranks' rendezvous and control channel
 * (runtime/dist/rt_rendezvous.h), with real processes on loopback: every
 * rank gets rank 0's blob; a failed rank, a rank whose process is gone, a
 * rank that never comes, a rank 0 that never comes and a WORLD_SIZE that
 * disagrees each end every rank with a message naming the cause, within the
 * deadline (no hang); sums over the ranks give every rank the same bits, in
 * rank order; another count, other weights or a rank gone in a sum or a
 * same-bytes check are named to every rank; the environment's mistakes are
 * named.  The all-reduce of floats: 4 ranks, 1, 7 and 3,000,000 floats,
 * summed and averaged, each rank's result equal bit for bit to the sum in
 * rank order computed here (values whose sum in another order differs) and
 * the same digest on every rank (3 ranks for the mean's one rounding);
 * another n, another reduction, a rank gone before the call and a late rank
 * refused naming the rank, promptly.  The watchdog: a rank killed while the
 * others sleep (a hung collective) is reported to each by its callback
 * within 2 s, once, rank 1 by rank 0's shutdown; a call waiting in agree or
 * blocked in send (rank 0 by hand from the wire) returns at once; a normal
 * ending (end, final agree, close in any order) fires nothing, and a rank
 * that dies in the final agree is named by it. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "loopback.h"
#include "rt_rendezvous.h"

enum { MAXR = 8, BLOB = 128 };

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
  int quit;       /* exits after agreeing, before the sum or allreduce */
  /* allreduce (ar_rank) */
  int ar_cases; /* the first ar_cases cases of AR_N; 0: one allreduce of ar_n floats */
  int ar_n;     /* 0: 100 */
  int late_ms;  /* sleeps before its allreduce */
  int ar_sum;   /* asks for the sum where the others ask for the mean */
  /* the watchdog (watch_rank) */
  int die_ms;    /* SIGKILLs itself this long after the first agree (0: never) */
  int in_agree;  /* meanwhile waits in agree, not in a sleep loop */
  int end;       /* rt_rendezvous_end and the final agree (then dies if die_ms) */
  int linger_ms; /* after the final agree, before close */
} Plan;

enum { AR_CASES = 6 };
static const size_t AR_N[AR_CASES] = {1, 1, 7, 7, 3000000, 3000000}; /* even cases the sum, odd the mean */

typedef struct Outcome {
  int opened, agreed; /* open 0/-1; agree 1/0/-1 (9: not reached) */
  char msg[256];
  int summed, same; /* rt_rendezvous_sum's and _same's results (9: not reached) */
  double sums[3];
  char sum_msg[256], same_msg[256];
  /* allreduce */
  int ar[AR_CASES], ar_same[AR_CASES]; /* its results, and rt_rendezvous_same's on the digest */
  long ar_bad[AR_CASES];               /* elements whose bits differ from the sum in rank order */
  uint64_t ar_digest[AR_CASES];
  float ar_first; /* element 0 of 7, summed: 1e20 + 3 - 1e20 + 5 in rank order is 5 */
  char ar_msg[256];
  double ar_s;
  int unchanged, after; /* v as it was after a refusal; the agree that follows */
  /* the watchdog */
  int watched, lost_n; /* rt_rendezvous_watch; the callbacks */
  char lost_msg[128];
  double lost_s;              /* after the first agree */
  double lost_at, closing_at; /* CLOCK_MONOTONIC, one clock for all processes */
  int after_ar, final;
  char after_msg[256], after_ar_msg[256], final_msg[256];
  double after_s;
} Outcome;

typedef void (*RankFn)(int port, int world, int k, const Plan *p, double timeout, Outcome *o);

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

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

static RtRendezvous *join(int port, int world, int k, double timeout, Outcome *o) {
  RtRendezvousConfig c = {.addr = "127.0.0.1", .port = port, .rank = k, .world = world, .timeout_s = timeout};
  uint8_t blob[BLOB] = {0};
  RtRendezvous *r = NULL;
  o->opened = rt_rendezvous_open(&c, blob, BLOB, &r, o->msg, sizeof o->msg);
  return r;
}

/* Rank k's i-th float: magnitudes 2^-30..2^30 of both signs, so that the
 * sum in another order often has other bits; every 5th is 1e20, 3, -1e20, 5
 * on ranks 0..3, whose sum is 5 in rank order only. */
static float value(int k, size_t i) {
  static const float big[4] = {1e20f, 3, -1e20f, 5};
  if (i % 5 == 0) return big[k % 4];
  uint64_t x = ((uint64_t)k + 1) * 0x9E3779B97F4A7C15u ^ ((uint64_t)i + 1) * 0xBF58476D1CE4E5B9u;
  x ^= x >> 31, x *= 0x94D049BB133111EBu, x ^= x >> 29;
  uint32_t bits = (uint32_t)(x >> 63) << 31 | (uint32_t)(127 - 30 + (x >> 32) % 61) << 23 | (uint32_t)(x & 0x7fffff);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* What every rank must get: the sum in rank order in double, rounded once. */
static float expected(int world, size_t i, int mean) {
  double a = value(0, i);
  for (int k = 1; k < world; k++) a += value(k, i);
  return (float)(mean ? a / world : a);
}

static uint64_t digest(const float *v, size_t n) { /* FNV-1a over the bits */
  const uint8_t *b = (const uint8_t *)v;
  uint64_t h = 14695981039346656037u;
  for (size_t i = 0; i < 4 * n; i++) h = (h ^ b[i]) * 1099511628211u;
  return h;
}

/* The all-reduce: the six cases of AR_N, or one of ar_n (or 100) floats. */
static void ar_rank(int port, int world, int k, const Plan *p, double timeout, Outcome *o) {
  RtRendezvous *r = join(port, world, k, timeout, o);
  if (!r) return;
  o->agreed = rt_rendezvous_agree(r, 1, o->msg, sizeof o->msg);
  if (p->quit) _exit(0);
  float *v = malloc(sizeof(float) * AR_N[AR_CASES - 1]);
  for (int c = 0; c < p->ar_cases; c++) {
    size_t n = AR_N[c];
    for (size_t i = 0; i < n; i++) v[i] = value(k, i);
    o->ar[c] = rt_rendezvous_allreduce(r, v, n, c % 2, o->ar_msg, sizeof o->ar_msg);
    for (size_t i = 0; i < n; i++) {
      float e = expected(world, i, c % 2);
      o->ar_bad[c] += memcmp(&e, v + i, 4) != 0;
    }
    if (c == 2) o->ar_first = v[0];
    o->ar_digest[c] = digest(v, n);
    o->ar_same[c] = rt_rendezvous_same(r, &o->ar_digest[c], 8, o->same_msg, sizeof o->same_msg);
  }
  if (!p->ar_cases) {
    size_t n = p->ar_n ? (size_t)p->ar_n : 100;
    for (size_t i = 0; i < n; i++) v[i] = value(k, i);
    sleep_ms(p->late_ms);
    double t0 = now();
    o->ar[0] = rt_rendezvous_allreduce(r, v, n, !p->ar_sum, o->ar_msg, sizeof o->ar_msg);
    o->ar_s = now() - t0;
    o->unchanged = 1;
    for (size_t i = 0; i < n; i++) o->unchanged &= memcmp(&v[i], &(float){value(k, i)}, 4) == 0;
    o->after = rt_rendezvous_agree(r, 1, o->after_msg, sizeof o->after_msg);
  }
  free(v);
  rt_rendezvous_close(r);
}

typedef struct Seen { /* what the watchdog's callback saw, on its thread */
  atomic_int n;
  char msg[128];
  double t;
} Seen;

static void on_lost(const char *msg, void *user) {
  Seen *s = user;
  if (atomic_load(&s->n) == 0) snprintf(s->msg, sizeof s->msg, "%s", msg), s->t = now();
  atomic_fetch_add(&s->n, 1);
}

/* The watchdog: watch, agree; then die, sit in a sleep loop (a hung
 * collective) or in agree until the callback; or end the run normally. */
static void watch_rank(int port, int world, int k, const Plan *p, double timeout, Outcome *o) {
  RtRendezvous *r = join(port, world, k, timeout, o);
  if (!r) return;
  Seen seen = {0};
  o->watched = rt_rendezvous_watch(r, on_lost, &seen, o->msg, sizeof o->msg);
  o->agreed = rt_rendezvous_agree(r, 1, o->msg, sizeof o->msg); /* every rank watches from here */
  double t0 = now();
  if (p->end) {
    float v[3] = {1, 2, 3};
    o->after_ar = rt_rendezvous_allreduce(r, v, 3, 0, o->after_ar_msg, sizeof o->after_ar_msg);
    rt_rendezvous_end(r);
    if (p->die_ms) sleep_ms(p->die_ms), kill(getpid(), SIGKILL);
    o->final = rt_rendezvous_agree(r, 1, o->final_msg, sizeof o->final_msg);
    sleep_ms(p->linger_ms); /* the other ranks close meanwhile */
  } else if (p->die_ms) {
    sleep_ms(p->die_ms);
    kill(getpid(), SIGKILL);
  } else if (p->in_agree) {
    o->after = rt_rendezvous_agree(r, 1, o->after_msg, sizeof o->after_msg);
    o->after_s = now() - t0;
  } else {
    while (!atomic_load(&seen.n) && now() - t0 < 5) sleep_ms(10);
    sleep_ms(1000); /* still hung (an NCCL abort takes its time); a second callback would come now */
    double t1 = now();
    float v[3] = {1, 2, 3};
    o->after = rt_rendezvous_agree(r, 1, o->after_msg, sizeof o->after_msg);
    o->after_ar = rt_rendezvous_allreduce(r, v, 3, 0, o->after_ar_msg, sizeof o->after_ar_msg);
    o->after_s = now() - t1;
  }
  o->closing_at = now();
  rt_rendezvous_close(r); /* joins the watchdog: seen is final */
  o->lost_n = atomic_load(&seen.n);
  snprintf(o->lost_msg, sizeof o->lost_msg, "%s", seen.msg);
  o->lost_s = o->lost_n ? seen.t - t0 : -1;
  o->lost_at = seen.t;
}

static int io_all(int fd, void *buf, size_t n, int out) { /* 0 when all of buf went or came */
  uint8_t *b = buf;
  while (n) {
    ssize_t r = out ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, 0);
    if (r <= 0) return -1;
    b += r, n -= (size_t)r;
  }
  return 0;
}

/* Rank 0 by hand, from the wire in rt_rendezvous.h: lets rank 1 join and
 * agree, grants its allreduce request, never reads its floats (rank 1 is
 * left blocked in send, as when rank 0 hangs in a collective), and after
 * 500 ms shuts the connection down as rank 0's watchdog does; it closes
 * only at 2.5 s.  o->opened: how far it got (4: all). */
static void hand_root(int port, Outcome *o) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1, fd = -1;
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct timeval tv = {5, 0};
  setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv); /* accept waits 5 s at most */
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4) || (fd = accept(ls, NULL, NULL)) < 0) return;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  uint8_t hello[16], ok[2 + 4 + BLOB] = {0, 0, 0, 0, 0, BLOB}, vote, yes[5] = {1, 255, 255, 255, 255}, ask[9],
                                granted[21] = {0, 255, 255, 255, 255};
  if (io_all(fd, hello, 16, 0) || io_all(fd, ok, sizeof ok, 1)) return;
  o->opened = 1;
  if (io_all(fd, &vote, 1, 0) || io_all(fd, yes, 5, 1)) return;
  o->opened = 2;
  if (io_all(fd, ask, 9, 0)) return;
  memcpy(granted + 5, ask, 8), memcpy(granted + 13, ask, 8); /* its count and "rank 0's" */
  if (io_all(fd, granted, 21, 1)) return;
  o->opened = 3;
  sleep_ms(500);
  shutdown(fd, SHUT_RDWR);
  o->opened = 4;
  sleep_ms(2000);
  close(fd), close(ls);
}

/* Rank 1 watches and sends 6,000,000 floats (24 MB, more than loopback's
 * buffers hold) to hand_root. */
static void blocked_rank(int port, int world, int k, const Plan *p, double timeout, Outcome *o) {
  if (k == 0) {
    hand_root(port, o);
    return;
  }
  RtRendezvous *r = join(port, world, k, timeout, o);
  if (!r) return;
  Seen seen = {0};
  o->watched = rt_rendezvous_watch(r, on_lost, &seen, o->msg, sizeof o->msg);
  o->agreed = rt_rendezvous_agree(r, 1, o->msg, sizeof o->msg);
  size_t n = 6000000;
  float *v = calloc(n, sizeof *v);
  double t0 = now();
  o->ar[0] = rt_rendezvous_allreduce(r, v, n, 0, o->ar_msg, sizeof o->ar_msg);
  o->ar_s = now() - t0;
  free(v);
  rt_rendezvous_close(r);
  o->lost_n = atomic_load(&seen.n);
  snprintf(o->lost_msg, sizeof o->lost_msg, "%s", seen.msg);
}

/* Runs the ranks as processes; their outcomes in o; the seconds it took. */
static double run(RankFn fn, int world, const Plan *plan, double timeout, Outcome *o) {
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
      memset(&mine, 0, sizeof mine);
      fn(port, world, k, &plan[k], timeout, &mine);
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
  run(run_rank, 4, p, 5, o);
  for (int k = 0; k < 4; k++)
    CHECK(o[k].opened == 0 && o[k].agreed == 1, "world 4, rank %d: open %d agree %d (%s)", k, o[k].opened, o[k].agreed,
          o[k].msg);

  /* rank 2 fails: every rank hears it */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = k != 2;
  run(run_rank, 3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].agreed == 0 && strstr(o[k].msg, "rank 2 failed"), "rank 2 failed, rank %d: agree %d (%s)", k,
          o[k].agreed, o[k].msg);

  /* rank 1's process is gone after joining: no hang, every other rank told */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = 1;
  p[1].leave = 1;
  double t = run(run_rank, 3, p, 5, o);
  CHECK(o[0].agreed == 0 && strstr(o[0].msg, "rank 0: rank 1 left the run"), "rank 1 gone, rank 0: %d (%s)",
        o[0].agreed, o[0].msg);
  CHECK(o[2].agreed == 0 && strstr(o[2].msg, "rank 1 failed or left the run"), "rank 1 gone, rank 2: %d (%s)",
        o[2].agreed, o[2].msg);
  CHECK(t < 4, "a rank gone is seen at once, not at the deadline: %.1f s", t);

  /* rank 2 never comes: rank 0 names it at the deadline, rank 1 is sent away */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = 1;
  p[2].absent = 1;
  t = run(run_rank, 3, p, 1, o);
  CHECK(o[0].opened == -1 && strstr(o[0].msg, "rank 0: rank 2 of 3 did not join within 1 s"), "absent rank 2: %s",
        o[0].msg);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 1: rank 0 refused: rank 0 gave up waiting"), "rank 1: %s",
        o[1].msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* rank 0 never comes */
  memset(p, 0, sizeof p);
  p[0].absent = 1, p[1].ok = 1;
  t = run(run_rank, 2, p, 1, o);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 1: cannot reach rank 0 at 127.0.0.1:"), "no rank 0: %s", o[1].msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* WORLD_SIZE disagrees */
  memset(p, 0, sizeof p);
  p[0].ok = p[1].ok = 1;
  p[1].says_world = 3;
  run(run_rank, 2, p, 2, o);
  CHECK(o[0].opened == -1 && strstr(o[0].msg, "rank 1 says WORLD_SIZE 3; rank 0 has 2"), "world: %s", o[0].msg);
  CHECK(o[1].opened == -1 && strstr(o[1].msg, "rank 0 refused: rank 1 says WORLD_SIZE 3"), "world, rank 1: %s",
        o[1].msg);

  /* sums and the same-bytes check: every rank the same bits, in rank order */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 4; k++) p[k].ok = p[k].xchg = 1;
  run(run_rank, 4, p, 5, o);
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
  t = run(run_rank, 3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].summed == 0 && strstr(o[k].sum_msg, "sum: rank 2 passed another length") && o[k].same == 9,
          "another count, rank %d: %d (%s)", k, o[k].summed, o[k].sum_msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* rank 1 holds other weights */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = p[k].xchg = 1;
  p[1].differ = 1;
  run(run_rank, 3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].summed == 1 && o[k].same == 0 && strstr(o[k].same_msg, "rank 1 holds other bytes than rank 0"),
          "other bytes, rank %d: %d (%s)", k, o[k].same, o[k].same_msg);

  /* rank 1's process is gone before the sum: the others told at once */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ok = p[k].xchg = 1;
  p[1].quit = 1;
  t = run(run_rank, 3, p, 5, o);
  CHECK(o[0].summed == 0 && strstr(o[0].sum_msg, "rank 0: sum: rank 1 left the run"), "rank 1 gone, rank 0: %s",
        o[0].sum_msg);
  CHECK(o[2].summed == 0 && strstr(o[2].sum_msg, "rank 2: sum: rank 1 left the run"), "rank 1 gone, rank 2: %s",
        o[2].sum_msg);
  CHECK(t < 4, "a rank gone is seen at once: %.1f s", t);

  /* the all-reduce: every rank the sum in rank order, the same bits; 1, 7 and 3,000,000 floats */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 4; k++) p[k].ar_cases = AR_CASES;
  run(ar_rank, 4, p, 10, o);
  for (int c = 0; c < AR_CASES; c++)
    for (int k = 0; k < 4; k++)
      CHECK(o[k].ar[c] == 1 && o[k].ar_bad[c] == 0 && o[k].ar_digest[c] == o[0].ar_digest[c] && o[k].ar_same[c] == 1,
            "allreduce of %zu (%s), rank %d: %d (%s), %ld floats not the sum in rank order, digest %s, same %d (%s)",
            AR_N[c], c % 2 ? "mean" : "sum", k, o[k].ar[c], o[k].ar_msg, o[k].ar_bad[c],
            o[k].ar_digest[c] == o[0].ar_digest[c] ? "as rank 0's" : "not rank 0's", o[k].ar_same[c], o[k].same_msg);
  for (int k = 0; k < 4; k++) CHECK(o[k].ar_first == 5, "rank %d: 1e20 + 3 - 1e20 + 5 gave %g", k, o[k].ar_first);

  /* three ranks: the mean divided in double and rounded once (a division by 4 would not tell) */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].ar_cases = 4;
  run(ar_rank, 3, p, 5, o);
  for (int c = 0; c < 4; c++)
    for (int k = 0; k < 3; k++)
      CHECK(o[k].ar[c] == 1 && o[k].ar_bad[c] == 0 && o[k].ar_digest[c] == o[0].ar_digest[c],
            "world 3, allreduce of %zu (%s), rank %d: %d (%s), %ld floats not the sum in rank order", AR_N[c],
            c % 2 ? "mean" : "sum", k, o[k].ar[c], o[k].ar_msg, o[k].ar_bad[c]);

  /* rank 1 passes another n: refused on every rank, naming it; v as it was, the channel in step */
  memset(p, 0, sizeof p);
  p[1].ar_n = 10;
  t = run(ar_rank, 4, p, 5, o);
  for (int k = 0; k < 4; k++)
    CHECK(o[k].ar[0] == 0 && strstr(o[k].ar_msg, "allreduce: rank 1 passed 10 floats, rank 0 100") && o[k].unchanged &&
              o[k].after == 1,
          "another n, rank %d: %d (%s), v %s, then agree %d (%s)", k, o[k].ar[0], o[k].ar_msg,
          o[k].unchanged ? "as it was" : "changed", o[k].after, o[k].after_msg);
  CHECK(t < 4, "no hang: %.1f s", t);

  /* rank 2 asks for the sum, the others for the mean */
  memset(p, 0, sizeof p);
  p[2].ar_sum = 1;
  run(ar_rank, 3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].ar[0] == 0 && strstr(o[k].ar_msg, "allreduce: rank 2 asked for the sum, rank 0 for the mean") &&
              o[k].unchanged && o[k].after == 1,
          "another reduction, rank %d: %d (%s)", k, o[k].ar[0], o[k].ar_msg);

  /* rank 2's process is gone before the allreduce: the others told at once */
  memset(p, 0, sizeof p);
  p[2].quit = 1;
  t = run(ar_rank, 4, p, 5, o);
  for (int k = 0; k < 4; k++)
    if (k != 2)
      CHECK(o[k].ar[0] == 0 && strstr(o[k].ar_msg, "allreduce: rank 2 left the run") && o[k].unchanged && o[k].ar_s < 2,
            "rank 2 gone, rank %d: %d in %.1f s (%s), v %s", k, o[k].ar[0], o[k].ar_s, o[k].ar_msg,
            o[k].unchanged ? "as it was" : "changed");
  CHECK(t < 4, "a rank gone is seen at once: %.1f s", t);

  /* rank 3 comes after the deadline (1 s): every rank told, within it */
  memset(p, 0, sizeof p);
  p[3].late_ms = 1500;
  t = run(ar_rank, 4, p, 1, o);
  for (int k = 0; k < 4; k++)
    CHECK(o[k].ar[0] == 0 && (k == 3 || (strstr(o[k].ar_msg, "allreduce: rank 3 did not answer in time") &&
                                         o[k].ar_s < 1.9)), /* rank 3 is cut off: its own message may be either */
          "late rank 3, rank %d: %d in %.1f s (%s)", k, o[k].ar[0], o[k].ar_s, o[k].ar_msg);

  /* the watchdog: rank 2 is killed while ranks 0 and 1 sit in a hung collective */
  memset(p, 0, sizeof p);
  p[2].die_ms = 300;
  t = run(watch_rank, 3, p, 5, o);
  const char *lost0 = "rank 2 left the run (its connection closed)",
             *lost1 = "rank 0 ended the run: a rank failed or left";
  for (int k = 0; k < 2; k++) {
    const char *cb = k == 0 ? lost0 : lost1;
    char said[160];
    snprintf(said, sizeof said, "rank %d: %s", k, cb);
    CHECK(o[k].watched == 0 && o[k].agreed == 1 && o[k].lost_n == 1 && strcmp(o[k].lost_msg, cb) == 0 &&
              o[k].lost_s < 0.3 + 2,
          "rank 2 killed, rank %d: %d callbacks, the first %.2f s after the agree ('%s')", k, o[k].lost_n, o[k].lost_s,
          o[k].lost_msg);
    CHECK(o[k].after == 0 && strcmp(o[k].after_msg, said) == 0 && o[k].after_ar == 0 &&
              strcmp(o[k].after_ar_msg, said) == 0 && o[k].after_s < 1,
          "after the callback, rank %d: agree %d (%s), allreduce %d (%s), in %.2f s", k, o[k].after, o[k].after_msg,
          o[k].after_ar, o[k].after_ar_msg, o[k].after_s);
  }
  CHECK(o[1].lost_n && o[1].lost_at < o[0].closing_at, "rank 1 told by rank 0's watchdog, %.2f s before rank 0 closed",
        o[0].closing_at - o[1].lost_at);

  /* rank 0 waits in agree (deadline 10 s) when rank 2 is killed: its watchdog wakes it */
  memset(p, 0, sizeof p);
  p[0].in_agree = 1, p[2].die_ms = 300;
  t = run(watch_rank, 3, p, 10, o);
  CHECK(o[0].after == 0 && strcmp(o[0].after_msg, "rank 0: rank 2 left the run (its connection closed)") == 0 &&
            o[0].after_s < 0.3 + 2 && o[0].lost_n == 1,
        "rank 0 in agree: %d in %.2f s (%s), %d callbacks", o[0].after, o[0].after_s, o[0].after_msg, o[0].lost_n);
  CHECK(o[1].lost_n == 1 && strcmp(o[1].lost_msg, lost1) == 0, "rank 1: %d callbacks ('%s')", o[1].lost_n,
        o[1].lost_msg);
  CHECK(t < 5, "no wait for the deadline: %.1f s", t);

  /* rank 1 blocked in sending its floats when rank 0 shuts it out: its watchdog wakes the send */
  memset(p, 0, sizeof p);
  run(blocked_rank, 2, p, 10, o);
  CHECK(o[0].opened == 4, "rank 0 by hand got to step %d of 4", o[0].opened);
  CHECK(o[1].ar[0] == 0 && strcmp(o[1].ar_msg, "rank 1: rank 0 ended the run: a rank failed or left") == 0 &&
            o[1].ar_s < 0.5 + 1.5 && o[1].lost_n == 1,
        "rank 1 blocked in send: %d after %.2f s (%s), %d callbacks", o[1].ar[0], o[1].ar_s, o[1].ar_msg, o[1].lost_n);

  /* a normal ending fires nothing: rank 1 closes at once, rank 0 while rank 2 still watches */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].end = 1;
  p[0].linger_ms = 300, p[2].linger_ms = 600;
  run(watch_rank, 3, p, 5, o);
  for (int k = 0; k < 3; k++)
    CHECK(o[k].watched == 0 && o[k].after_ar == 1 && o[k].final == 1 && o[k].lost_n == 0,
          "a normal ending, rank %d: allreduce %d (%s), final agree %d (%s), %d callbacks ('%s')", k, o[k].after_ar,
          o[k].after_ar_msg, o[k].final, o[k].final_msg, o[k].lost_n, o[k].lost_msg);

  /* rank 2 dies in the final agree: the agree names it, no callback */
  memset(p, 0, sizeof p);
  for (int k = 0; k < 3; k++) p[k].end = 1;
  p[2].die_ms = 800; /* the others are in the final agree by then */
  run(watch_rank, 3, p, 5, o);
  CHECK(o[0].final == 0 && strstr(o[0].final_msg, "rank 0: rank 2 left the run") && o[0].lost_n == 0,
        "rank 2 dead in the final agree, rank 0: %d (%s), %d callbacks", o[0].final, o[0].final_msg, o[0].lost_n);
  CHECK(o[1].final == 0 && strstr(o[1].final_msg, "rank 1: rank 2 failed or left the run") && o[1].lost_n == 0,
        "rank 2 dead in the final agree, rank 1: %d (%s), %d callbacks", o[1].final, o[1].final_msg, o[1].lost_n);

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
  float f[2] = {1.5f, -2};
  CHECK(rt_rendezvous_allreduce(r, f, 2, 1, err, sizeof err) == 1 && f[0] == 1.5f && f[1] == -2,
        "world 1: the mean is its own values");
  CHECK(rt_rendezvous_allreduce(r, NULL, 2, 0, err, sizeof err) == -1 && strstr(err, "bad arguments"), "no floats: %s",
        err);
  CHECK(rt_rendezvous_watch(r, on_lost, NULL, err, sizeof err) == 0, "world 1: nothing to watch: %s", err);
  rt_rendezvous_end(r);
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
