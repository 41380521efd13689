/* rt_rendezvous.c - the ranks' meeting, control channel and watchdog
 * (rt_rendezvous.h).
 *
 * Two threads may touch an RtRendezvous: the caller's, which owns the bytes
 * on every socket, and the watchdog's, which only polls them for a hangup
 * and may shut them down.  So no socket is closed before
 * rt_rendezvous_close has joined the watchdog: a connection found broken is
 * shut down and marked gone (drop), and its descriptor stays valid; the
 * flags the two threads share are atomics. */
#define _GNU_SOURCE /* getaddrinfo under -std=c11; POLLRDHUP */
#include "rt_rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rt_err.h"

static const char MAGIC[8] = {'N', 'E', 'T', 'C', 'R', 'D', 'V', '1'};
enum { HELLO = 16 };

struct RtRendezvous {
  int rank, world;
  double timeout_s;
  int *fd;            /* rank 0: fd[k] the socket of rank k (fd[0] -1); else fd[0] the socket to rank 0 */
  atomic_uchar *gone; /* gone[k]: this rank's calls found fd[k] broken and shut it down */
  /* the watchdog */
  int watching;
  pthread_t watcher;
  RtRendezvousLost lost;
  void *user;
  struct pollfd *watch_pfd; /* the watchdog's, one per connection */
  int *watch_who;
  atomic_int ending, stop, fired; /* rt_rendezvous_end; close; lost was called */
  char lost_msg[96];              /* written before fired is set */
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Waits until fd is ready for `events` or the deadline; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - now();
    struct pollfd p = {.fd = fd, .events = events};
    /* once more after the deadline: what is there already counts (rank 0 reads
     * every rank after waiting on a late one) */
    int r = poll(&p, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0 && left <= 0) return 0;
    if (r == 0) continue; /* the loop checks the deadline */
    return 1;
  }
}

/* All of buf, before the deadline: 0, 1 for the peer gone (EOF, reset), 2 for the deadline, -1 error. */
static int recv_all(int fd, void *buf, size_t n, double deadline) {
  uint8_t *p = buf;
  while (n) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w <= 0) return w == 0 ? 2 : -1;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) return 1;
    if (r < 0) return -1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

/* All of buf: 0, 1 for the peer gone, -1 error (MSG_NOSIGNAL: no SIGPIPE). */
static int send_all(int fd, const void *buf, size_t n, double deadline) {
  const uint8_t *p = buf;
  while (n) {
    int w = wait_fd(fd, POLLOUT, deadline);
    if (w <= 0) return w == 0 ? 2 : -1;
    ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) return 1;
    if (r < 0) return -1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *v) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (*end || errno || x < lo || x > hi) return -1;
  *v = x;
  return 0;
}

int rt_rendezvous_from_env(RtRendezvousConfig *c, char *err, size_t errlen) {
  const char *rank = getenv("RANK"), *world = getenv("WORLD_SIZE"), *port = getenv("MASTER_PORT");
  const char *addr = getenv("MASTER_ADDR");
  long r, w, p;
  if (parse_int(world, 1, RT_RENDEZVOUS_MAX_WORLD, &w))
    return rt_errf(err, errlen, "WORLD_SIZE must be a number of processes 1..%d, not '%s'", RT_RENDEZVOUS_MAX_WORLD,
                   world ? world : "(unset)");
  if (parse_int(rank, 0, w - 1, &r))
    return rt_errf(err, errlen, "RANK must be 0..%ld (WORLD_SIZE %ld), not '%s'", w - 1, w, rank ? rank : "(unset)");
  if (parse_int(port, 1, 65535, &p))
    return rt_errf(err, errlen, "MASTER_PORT must be a port 1..65535, not '%s'", port ? port : "(unset)");
  *c =
      (RtRendezvousConfig){.addr = addr && *addr ? addr : "127.0.0.1", .port = (int)p, .rank = (int)r, .world = (int)w};
  return 0;
}

static struct addrinfo *resolve(const RtRendezvousConfig *c, int passive, char *err, size_t errlen) {
  char port[16];
  snprintf(port, sizeof port, "%d", c->port);
  struct addrinfo hint = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
  struct addrinfo *ai = NULL;
  int e = getaddrinfo(c->addr, port, &hint, &ai);
  if (e) {
    rt_errf(err, errlen, "MASTER_ADDR '%s': %s", c->addr, gai_strerror(e));
    return NULL;
  }
  return ai;
}

static int nfd(const RtRendezvous *r) { return r->rank == 0 ? r->world : 1; }

/* Whether the connection fd[k] is still in use (rank 0's fd[0] never is). */
static int live(RtRendezvous *r, int k) { return r->fd[k] >= 0 && !atomic_load(&r->gone[k]); }

/* This rank's calls found fd[k] broken (gone, late, out of step): shut down,
 * so the peer learns it, and left to the watchdog unwatched; closed by
 * rt_rendezvous_close. */
static void drop(RtRendezvous *r, int k) {
  atomic_store(&r->gone[k], 1); /* before the hangup it causes can reach the watchdog */
  shutdown(r->fd[k], SHUT_RDWR);
}

void rt_rendezvous_close(RtRendezvous *r) {
  if (!r) return;
  if (r->watching) {
    atomic_store(&r->stop, 1);
    pthread_join(r->watcher, NULL);
  }
  for (int k = 0; r->fd && k < nfd(r); k++)
    if (r->fd[k] >= 0) close(r->fd[k]);
  free(r->fd), free(r->gone);
  free(r->watch_pfd), free(r->watch_who);
  free(r);
}

/* Rank 0: reason (NULL: ok) and then the blob to the rank on fd. */
static int answer(int fd, const char *reason, const void *blob, size_t len, double deadline) {
  uint8_t head[2] = {reason ? 1 : 0, 0};
  size_t rl = reason ? strlen(reason) : 0;
  if (rl > 255) rl = 255;
  head[1] = (uint8_t)rl;
  if (send_all(fd, head, 2, deadline) || (rl && send_all(fd, reason, rl, deadline))) return -1;
  if (reason) return 0;
  uint8_t l[4];
  put_u32(l, (uint32_t)len);
  return send_all(fd, l, 4, deadline) || send_all(fd, blob, len, deadline) ? -1 : 0;
}

static int open_root(RtRendezvous *r, const RtRendezvousConfig *c, const void *blob, size_t len, char *err,
                     size_t errlen) {
  double deadline = now() + r->timeout_s;
  struct addrinfo *ai = resolve(c, 1, err, errlen);
  if (!ai) return -1;
  int ls = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (ls >= 0) setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, 128)) {
    rt_errf(err, errlen, "rank 0: cannot listen on %s:%d: %s", c->addr, c->port, strerror(errno));
    if (ls >= 0) close(ls);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  int joined = 1, rc = 0;
  while (joined < r->world) {
    int w = wait_fd(ls, POLLIN, deadline);
    if (w <= 0) break;
    int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t h[HELLO];
    if (recv_all(fd, h, HELLO, deadline) || memcmp(h, MAGIC, 8) != 0) { /* not one of ours */
      close(fd);
      continue;
    }
    uint32_t k = get_u32(h + 8), world = get_u32(h + 12);
    char why[128] = "";
    if (world != (uint32_t)r->world)
      snprintf(why, sizeof why, "rank %u says WORLD_SIZE %u; rank 0 has %d", k, world, r->world);
    else if (k == 0 || k >= (uint32_t)r->world)
      snprintf(why, sizeof why, "rank %u is not a rank 1..%d", k, r->world - 1);
    else if (r->fd[k] >= 0)
      snprintf(why, sizeof why, "rank %u joined twice", k);
    if (*why) {
      answer(fd, why, NULL, 0, now() + r->timeout_s);
      close(fd);
      rt_errf(err, errlen, "rank 0: %s", why);
      rc = -1;
      break;
    }
    r->fd[k] = fd;
    joined++;
  }
  close(ls);
  if (!rc && joined < r->world) {
    char missing[256] = "";
    size_t n = 0;
    int shown = 0, count = 0;
    for (int k = 1; k < r->world; k++)
      if (r->fd[k] < 0) {
        count++;
        if (shown < 8 && n < sizeof missing)
          n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%d", shown ? ", " : "", k), shown++;
      }
    rt_errf(err, errlen, "rank 0: rank%s %s%s of %d did not join within %g s (MASTER_ADDR %s, MASTER_PORT %d)",
            count > 1 ? "s" : "", missing, count > shown ? ", ..." : "", r->world, r->timeout_s, c->addr, c->port);
    rc = -1;
  }
  double reply_by = now() + r->timeout_s; /* the joins' deadline may have passed */
  for (int k = 1; k < r->world; k++) {
    if (r->fd[k] < 0) continue;
    if (answer(r->fd[k], rc ? "rank 0 gave up waiting for the other ranks" : NULL, blob, len, reply_by) && !rc)
      rc = rt_errf(err, errlen, "rank 0: rank %d left before it got the id", k);
  }
  return rc;
}

static int open_peer(RtRendezvous *r, const RtRendezvousConfig *c, void *blob, size_t len, char *err, size_t errlen) {
  double deadline = now() + r->timeout_s;
  struct addrinfo *ai = resolve(c, 0, err, errlen);
  if (!ai) return -1;
  int fd = -1;
  while (fd < 0 && now() < deadline) { /* rank 0 may not be listening yet */
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    if (fd >= 0) close(fd);
    fd = -1;
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return rt_errf(err, errlen, "rank %d: cannot reach rank 0 at %s:%d within %g s", r->rank, c->addr, c->port,
                   r->timeout_s);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  r->fd[0] = fd;
  uint8_t h[HELLO];
  memcpy(h, MAGIC, 8);
  put_u32(h + 8, (uint32_t)r->rank);
  put_u32(h + 12, (uint32_t)r->world);
  uint8_t head[2], l[4];
  /* rank 0 answers once all have joined or its own deadline passed, which
   * may be up to one timeout after this rank's: wait for that too */
  double answer_by = now() + 2 * r->timeout_s;
  if (send_all(fd, h, HELLO, deadline) || recv_all(fd, head, 2, answer_by))
    return rt_errf(err, errlen, "rank %d: rank 0 at %s:%d did not answer within %g s", r->rank, c->addr, c->port,
                   r->timeout_s);
  if (head[0]) {
    char why[256] = "";
    if (recv_all(fd, why, head[1], answer_by)) snprintf(why, sizeof why, "(no reason)");
    return rt_errf(err, errlen, "rank %d: rank 0 refused: %s", r->rank, why);
  }
  if (recv_all(fd, l, 4, answer_by)) return rt_errf(err, errlen, "rank %d: rank 0 left before it sent the id", r->rank);
  if (get_u32(l) != (uint32_t)len)
    return rt_errf(err, errlen, "rank %d: rank 0 sent %u bytes; %zu expected (another netc version?)", r->rank,
                   get_u32(l), len);
  if (recv_all(fd, blob, len, answer_by))
    return rt_errf(err, errlen, "rank %d: rank 0 left before it sent the id", r->rank);
  return 0;
}

int rt_rendezvous_open(const RtRendezvousConfig *c, void *blob, size_t len, RtRendezvous **out, char *err,
                       size_t errlen) {
  *out = NULL;
  if (!c || !c->addr || c->world < 1 || c->world > RT_RENDEZVOUS_MAX_WORLD || c->rank < 0 || c->rank >= c->world ||
      c->port < 1 || c->port > 65535 || len > RT_RENDEZVOUS_MAX_BLOB || (len && !blob))
    return rt_errf(err, errlen, "rendezvous: a bad configuration (rank, world, port or blob)");
  RtRendezvous *r = calloc(1, sizeof *r);
  size_t m = (size_t)(c->rank == 0 ? c->world : 1);
  if (r) r->fd = malloc(sizeof(int) * m), r->gone = malloc(sizeof(atomic_uchar) * m);
  if (!r || !r->fd || !r->gone) {
    if (r) free(r->fd), free(r->gone);
    free(r);
    return rt_errf(err, errlen, "rendezvous: out of memory");
  }
  r->rank = c->rank, r->world = c->world, r->timeout_s = c->timeout_s > 0 ? c->timeout_s : 60;
  atomic_init(&r->ending, 0), atomic_init(&r->stop, 0), atomic_init(&r->fired, 0);
  for (size_t k = 0; k < m; k++) r->fd[k] = -1, atomic_init(&r->gone[k], 0);
  int rc = c->world == 1  ? 0
           : c->rank == 0 ? open_root(r, c, blob, len, err, errlen)
                          : open_peer(r, c, blob, len, err, errlen);
  if (rc) {
    rt_rendezvous_close(r);
    return -1;
  }
  *out = r;
  return 0;
}

/* After the watchdog's lost, a call fails at once with its message, and a
 * call that failed meanwhile (the watchdog shut its sockets down) says
 * why rather than "left the run". */
static int told(RtRendezvous *r, int got, char *err, size_t errlen) {
  if (got != 1 && atomic_load(&r->fired)) rt_errf(err, errlen, "rank %d: %s", r->rank, r->lost_msg);
  return got;
}

static int agree(RtRendezvous *r, int ok, char *err, size_t errlen) {
  double deadline = now() + r->timeout_s;
  uint8_t v = ok ? 1 : 0, msg[5];
  if (r->rank != 0) {
    int s = send_all(r->fd[0], &v, 1, deadline);
    if (!s) s = recv_all(r->fd[0], msg, 5, deadline);
    if (s == 1) return rt_errf(err, errlen, "rank %d: rank 0 left the run", r->rank), 0;
    if (s == 2) return rt_errf(err, errlen, "rank %d: rank 0 did not answer within %g s", r->rank, r->timeout_s), 0;
    if (s) return rt_errf(err, errlen, "rank %d: the connection to rank 0 failed: %s", r->rank, strerror(errno));
    if (msg[0]) return 1;
    uint32_t k = get_u32(msg + 1);
    rt_errf(err, errlen, "rank %d: rank %u %s", r->rank, k, k == 0 ? "failed" : "failed or left the run");
    return 0;
  }
  /* rank 0: every verdict (a rank gone or silent counts as failed), then the answer to all */
  uint32_t first = ok ? 0xffffffffu : 0;
  const char *how = ok ? NULL : "failed";
  for (int k = 1; k < r->world; k++) {
    uint8_t b = 0;
    int s = live(r, k) ? recv_all(r->fd[k], &b, 1, deadline) : 1;
    if (s || !b) {
      if (first == 0xffffffffu)
        first = (uint32_t)k, how = s == 1 ? "left the run" : s == 2 ? "did not answer in time" : "failed";
      if (s && live(r, k)) drop(r, k);
    }
  }
  msg[0] = first == 0xffffffffu;
  put_u32(msg + 1, first);
  for (int k = 1; k < r->world; k++)
    if (live(r, k)) send_all(r->fd[k], msg, 5, deadline);
  if (msg[0]) return 1;
  rt_errf(err, errlen, "rank 0: rank %u %s", first, how);
  return 0;
}

int rt_rendezvous_agree(RtRendezvous *r, int ok, char *err, size_t errlen) {
  if (!r) return -1;
  if (r->world == 1) return ok ? 1 : 0;
  if (atomic_load(&r->fired)) return told(r, 0, err, errlen);
  return told(r, agree(r, ok, err, errlen), err, errlen);
}

/* --- sum and same: gathered at rank 0, answered to all -------------------- */

enum { XCH_OK = 0, XCH_LEFT = 2, XCH_LATE = 3, XCH_LENGTH = 4, XCH_DIFFER = 5 };

static void put_f64(uint8_t *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  put_u32(p, (uint32_t)(u >> 32)), put_u32(p + 4, (uint32_t)u);
}
static double get_f64(const uint8_t *p) {
  uint64_t u = (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static const char *x_why(int code) {
  return code == XCH_LEFT     ? "left the run"
         : code == XCH_LATE   ? "did not answer in time"
         : code == XCH_LENGTH ? "passed another length"
         : code == XCH_DIFFER ? "holds other bytes than rank 0"
                              : "failed";
}

/* One exchange: every rank's len bytes to rank 0; combine(acc, bytes of
 * rank k) there, in rank order from rank 0's own (acc starts as them);
 * rank 0's answer, with acc (answer_len bytes) when all went well, back to
 * every rank into acc.  1, 0 (err names the rank), -1 as agree. */
static int exchange(RtRendezvous *r, const uint8_t *mine, uint8_t *acc, size_t len, size_t answer_len,
                    int (*combine)(uint8_t *acc, const uint8_t *theirs, size_t len), const char *what, char *err,
                    size_t errlen) {
  double deadline = now() + r->timeout_s;
  uint8_t head[5];
  if (r->rank != 0) {
    uint8_t n[4];
    put_u32(n, (uint32_t)len);
    int s = send_all(r->fd[0], n, 4, deadline);
    if (!s) s = send_all(r->fd[0], mine, len, deadline);
    if (!s) s = recv_all(r->fd[0], head, 5, deadline);
    if (!s && head[0] == XCH_OK) s = recv_all(r->fd[0], acc, answer_len, deadline);
    if (s == 1) return rt_errf(err, errlen, "rank %d: %s: rank 0 left the run", r->rank, what), 0;
    if (s == 2)
      return rt_errf(err, errlen, "rank %d: %s: rank 0 did not answer within %g s", r->rank, what, r->timeout_s), 0;
    if (s)
      return rt_errf(err, errlen, "rank %d: %s: the connection to rank 0 failed: %s", r->rank, what, strerror(errno));
    if (head[0] == XCH_OK) return 1;
    rt_errf(err, errlen, "rank %d: %s: rank %u %s", r->rank, what, get_u32(head + 1), x_why(head[0]));
    return 0;
  }
  uint8_t *theirs = malloc(len + 1), *lost = calloc((size_t)r->world, 1);
  if (!theirs || !lost) {
    free(theirs), free(lost);
    return rt_errf(err, errlen, "rank 0: %s: out of host memory", what), -1;
  }
  memcpy(acc, mine, len);
  int code = XCH_OK;
  uint32_t who = 0xffffffffu;
  for (int k = 1; k < r->world; k++) {
    uint8_t n[4];
    int s = live(r, k) ? recv_all(r->fd[k], n, 4, deadline) : 1, c = XCH_OK;
    if (!s && get_u32(n) != len) c = XCH_LENGTH;
    if (!s && !c) s = recv_all(r->fd[k], theirs, len, deadline);
    if (s) c = s == 2 ? XCH_LATE : XCH_LEFT;
    if (!c && code == XCH_OK && !combine(acc, theirs, len)) c = XCH_DIFFER;
    lost[k] = s || c == XCH_LENGTH; /* its stream is no longer in step */
    if (c && code == XCH_OK) code = c, who = (uint32_t)k;
  }
  head[0] = (uint8_t)code;
  put_u32(head + 1, who);
  for (int k = 1; k < r->world; k++)
    if (live(r, k) && !send_all(r->fd[k], head, 5, deadline) && code == XCH_OK)
      send_all(r->fd[k], acc, answer_len, deadline);
  for (int k = 1; k < r->world; k++)
    if (lost[k] && live(r, k)) drop(r, k);
  free(theirs), free(lost);
  if (code == XCH_OK) return 1;
  rt_errf(err, errlen, "rank 0: %s: rank %u %s", what, who, x_why(code));
  return 0;
}

static int add_f64(uint8_t *acc, const uint8_t *theirs, size_t len) {
  for (size_t i = 0; i + 8 <= len; i += 8) put_f64(acc + i, get_f64(acc + i) + get_f64(theirs + i));
  return 1;
}

static int same_bytes(uint8_t *acc, const uint8_t *theirs, size_t len) { return memcmp(acc, theirs, len) == 0; }

int rt_rendezvous_sum(RtRendezvous *r, double *v, int n, char *err, size_t errlen) {
  if (!r || !v || n < 0 || n > RT_RENDEZVOUS_MAX_SUM)
    return rt_errf(err, errlen, "rt_rendezvous_sum: bad arguments (n %d, at most %d)", n, RT_RENDEZVOUS_MAX_SUM), -1;
  if (r->world == 1) return 1;
  if (atomic_load(&r->fired)) return told(r, 0, err, errlen);
  uint8_t mine[8 * RT_RENDEZVOUS_MAX_SUM + 1] = {0}, acc[8 * RT_RENDEZVOUS_MAX_SUM + 1];
  for (int i = 0; i < n; i++) put_f64(mine + 8 * i, v[i]);
  int got = told(r, exchange(r, mine, acc, 8 * (size_t)n, 8 * (size_t)n, add_f64, "sum", err, errlen), err, errlen);
  if (got == 1)
    for (int i = 0; i < n; i++) v[i] = get_f64(acc + 8 * i);
  return got;
}

int rt_rendezvous_same(RtRendezvous *r, const void *bytes, size_t len, char *err, size_t errlen) {
  if (!r || (!bytes && len) || len > RT_RENDEZVOUS_MAX_BLOB)
    return rt_errf(err, errlen, "rt_rendezvous_same: bad arguments (%zu bytes, at most %d)", len,
                   RT_RENDEZVOUS_MAX_BLOB),
           -1;
  if (r->world == 1) return 1;
  if (atomic_load(&r->fired)) return told(r, 0, err, errlen);
  uint8_t acc[RT_RENDEZVOUS_MAX_BLOB + 1];
  return told(r, exchange(r, bytes, acc, len, 0, same_bytes, "same weights", err, errlen), err, errlen);
}

/* --- allreduce: floats in chunks, summed in rank order at rank 0 ---------- */

enum { AR_CHUNK = 1 << 16, AR_ASK = 9, AR_VERDICT = 21, XCH_MEAN = 6 };

static void put_u64(uint8_t *p, uint64_t v) { put_u32(p, (uint32_t)(v >> 32)), put_u32(p + 4, (uint32_t)v); }
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) << 32 | get_u32(p + 4); }

static void put_f32s(uint8_t *p, const float *v, size_t m) {
  for (size_t i = 0; i < m; i++) {
    uint32_t u;
    memcpy(&u, v + i, 4);
    put_u32(p + 4 * i, u);
  }
}
static void get_f32s(float *v, const uint8_t *p, size_t m) {
  for (size_t i = 0; i < m; i++) {
    uint32_t u = get_u32(p + 4 * i);
    memcpy(v + i, &u, 4);
  }
}

static void put_verdict(uint8_t *h, int code, uint32_t who, uint64_t theirs, uint64_t ours) {
  h[0] = (uint8_t)code;
  put_u32(h + 1, who);
  put_u64(h + 5, theirs), put_u64(h + 13, ours);
}

/* 1 for an ok verdict, else 0 with what it says in err. */
static int verdict_said(RtRendezvous *r, const uint8_t *h, char *err, size_t errlen) {
  unsigned who = get_u32(h + 1);
  unsigned long long theirs = get_u64(h + 5), ours = get_u64(h + 13);
  if (h[0] == XCH_OK) return 1;
  if (h[0] == XCH_LENGTH)
    rt_errf(err, errlen, "rank %d: allreduce: rank %u passed %llu floats, rank 0 %llu", r->rank, who, theirs, ours);
  else if (h[0] == XCH_MEAN)
    rt_errf(err, errlen, "rank %d: allreduce: rank %u asked for the %s, rank 0 for the %s", r->rank, who,
            theirs ? "mean" : "sum", ours ? "mean" : "sum");
  else
    rt_errf(err, errlen, "rank %d: allreduce: rank %u %s", r->rank, who, x_why(h[0]));
  return 0;
}

static int allreduce_peer(RtRendezvous *r, float *v, size_t n, int mean, uint8_t *buf, char *err, size_t errlen) {
  /* rank 0 answers after waiting up to a timeout on other ranks: wait for it twice that */
  double wait = 2 * r->timeout_s;
  int fd = r->fd[0];
  uint8_t h[AR_VERDICT];
  put_u64(h, n);
  h[8] = mean != 0;
  int s = send_all(fd, h, AR_ASK, now() + wait);
  if (!s) s = recv_all(fd, h, AR_VERDICT, now() + wait);
  if (!s && h[0] == XCH_OK) {
    for (size_t i = 0; !s && i < n; i += AR_CHUNK) {
      size_t m = n - i < AR_CHUNK ? n - i : AR_CHUNK;
      put_f32s(buf, v + i, m);
      s = send_all(fd, buf, 4 * m, now() + wait);
    }
    if (!s) s = recv_all(fd, h, AR_VERDICT, now() + wait);
    for (size_t i = 0; !s && h[0] == XCH_OK && i < n; i += AR_CHUNK) {
      size_t m = n - i < AR_CHUNK ? n - i : AR_CHUNK;
      s = recv_all(fd, buf, 4 * m, now() + wait);
      if (!s) get_f32s(v + i, buf, m); /* whole chunks only: v holds values or results */
    }
  }
  if (s == 1) return rt_errf(err, errlen, "rank %d: allreduce: rank 0 left the run", r->rank), 0;
  if (s == 2) return rt_errf(err, errlen, "rank %d: allreduce: rank 0 did not answer within %g s", r->rank, wait), 0;
  if (s)
    return rt_errf(err, errlen, "rank %d: allreduce: the connection to rank 0 failed: %s", r->rank, strerror(errno));
  return verdict_said(r, h, err, errlen);
}

static int allreduce_root(RtRendezvous *r, float *v, size_t n, int mean, uint8_t *buf, double *acc, char *err,
                          size_t errlen) {
  uint8_t *lost = calloc((size_t)r->world, 1), h[AR_VERDICT];
  if (!lost) return rt_errf(err, errlen, "rank 0: allreduce: out of host memory");
  /* the requests, in rank order */
  double deadline = now() + r->timeout_s;
  int code = XCH_OK;
  uint32_t who = 0xffffffffu;
  uint64_t theirs = n, ours = n;
  for (int k = 1; k < r->world; k++) {
    uint8_t q[AR_ASK];
    int s = live(r, k) ? recv_all(r->fd[k], q, AR_ASK, deadline) : 1, c = XCH_OK;
    if (s)
      c = s == 2 ? XCH_LATE : XCH_LEFT, lost[k] = 1; /* a late request may come yet: out of step */
    else if (get_u64(q) != n)
      c = XCH_LENGTH;
    else if (q[8] != (mean != 0))
      c = XCH_MEAN;
    if (c && code == XCH_OK) {
      code = c, who = (uint32_t)k;
      if (c == XCH_LENGTH) theirs = get_u64(q);
      if (c == XCH_MEAN) theirs = q[8], ours = mean != 0;
    }
  }
  put_verdict(h, code, who, theirs, ours);
  for (int k = 1; k < r->world; k++)
    if (live(r, k) && send_all(r->fd[k], h, AR_VERDICT, now() + r->timeout_s)) lost[k] = 1;
  for (int k = 1; k < r->world; k++)
    if (lost[k] && live(r, k)) drop(r, k);
  free(lost);
  if (code != XCH_OK) return verdict_said(r, h, err, errlen);

  /* the floats: chunk c of every rank before chunk c + 1 of any; after a
   * failure the others are still read to their end, not added */
  for (size_t i = 0; i < n; i += AR_CHUNK) {
    size_t m = n - i < AR_CHUNK ? n - i : AR_CHUNK;
    for (size_t j = 0; j < m; j++) acc[j] = v[i + j];
    for (int k = 1; k < r->world; k++) {
      if (!live(r, k)) continue;
      int s = recv_all(r->fd[k], buf, 4 * m, now() + r->timeout_s);
      if (s) {
        if (code == XCH_OK) code = s == 2 ? XCH_LATE : XCH_LEFT, who = (uint32_t)k;
        drop(r, k);
        continue;
      }
      if (code != XCH_OK) continue;
      for (size_t j = 0; j < m; j++) {
        uint32_t u = get_u32(buf + 4 * j);
        float f;
        memcpy(&f, &u, 4);
        acc[j] += f;
      }
    }
    if (code == XCH_OK)
      for (size_t j = 0; j < m; j++) v[i + j] = (float)(mean ? acc[j] / r->world : acc[j]);
  }
  /* the verdict, then the results; a rank that stops reading is cut off (the next call names it) */
  put_verdict(h, code, who, n, n);
  for (int k = 1; k < r->world; k++)
    if (live(r, k) && send_all(r->fd[k], h, AR_VERDICT, now() + r->timeout_s)) drop(r, k);
  for (size_t i = 0; code == XCH_OK && i < n; i += AR_CHUNK) {
    size_t m = n - i < AR_CHUNK ? n - i : AR_CHUNK;
    put_f32s(buf, v + i, m);
    for (int k = 1; k < r->world; k++)
      if (live(r, k) && send_all(r->fd[k], buf, 4 * m, now() + r->timeout_s)) drop(r, k);
  }
  return verdict_said(r, h, err, errlen);
}

int rt_rendezvous_allreduce(RtRendezvous *r, float *v, size_t n, int mean, char *err, size_t errlen) {
  if (!r || (!v && n)) return rt_errf(err, errlen, "rt_rendezvous_allreduce: bad arguments (%zu floats)", n);
  if (r->world == 1) return 1; /* its own values; a mean over one is the same */
  if (atomic_load(&r->fired)) return told(r, 0, err, errlen);
  uint8_t *buf = malloc(4 * (size_t)AR_CHUNK);
  double *acc = r->rank == 0 ? malloc(sizeof(double) * AR_CHUNK) : NULL;
  int got = -1;
  if (!buf || (r->rank == 0 && !acc))
    rt_errf(err, errlen, "rank %d: allreduce: out of host memory", r->rank);
  else
    got = r->rank == 0 ? allreduce_root(r, v, n, mean, buf, acc, err, errlen)
                       : allreduce_peer(r, v, n, mean, buf, err, errlen);
  free(buf), free(acc);
  return told(r, got, err, errlen);
}

/* --- the watchdog ---------------------------------------------------------- */

enum { WATCH_MS = 100 };

/* Polls for a hangup only (never POLLIN, never reads) until one comes,
 * rt_rendezvous_end or close; then lost, once. */
static void *watch(void *arg) {
  RtRendezvous *r = arg;
  int m = nfd(r), *who = r->watch_who;
  struct pollfd *p = r->watch_pfd;
  while (!atomic_load(&r->stop) && !atomic_load(&r->ending)) {
    int np = 0;
    for (int k = 0; k < m; k++)
      if (live(r, k)) p[np] = (struct pollfd){.fd = r->fd[k], .events = POLLRDHUP}, who[np++] = k;
    int got = poll(p, (nfds_t)np, WATCH_MS);
    if (got < 0 && errno != EINTR) nanosleep(&(struct timespec){0, WATCH_MS * 1000000L}, NULL); /* no spinning */
    if (got <= 0) continue;
    /* a normal ending may have begun while poll waited: its hangups are no losses */
    if (atomic_load(&r->stop) || atomic_load(&r->ending)) break;
    int k = -1;
    for (int i = 0; i < np && k < 0; i++)
      if ((p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) && live(r, who[i])) k = who[i];
    if (k < 0) continue; /* a connection this rank's calls dropped: unwatched from now on */
    if (r->rank == 0)
      snprintf(r->lost_msg, sizeof r->lost_msg, "rank %d left the run (its connection closed)", k);
    else
      snprintf(r->lost_msg, sizeof r->lost_msg, "rank 0 ended the run: a rank failed or left");
    atomic_store(&r->fired, 1);
    /* every connection, before lost (an NCCL abort may take its time): on
     * rank 0 the other ranks learn it; on every rank a call blocked in send
     * wakes (a peer's shutdown does not wake a sender whose window is full) */
    for (int j = 0; j < m; j++)
      if (r->fd[j] >= 0) shutdown(r->fd[j], SHUT_RDWR);
    r->lost(r->lost_msg, r->user);
    break;
  }
  return NULL;
}

int rt_rendezvous_watch(RtRendezvous *r, RtRendezvousLost lost, void *user, char *err, size_t errlen) {
  if (!r || !lost) return rt_errf(err, errlen, "rt_rendezvous_watch: no rendezvous or no callback");
  if (r->watching) return rt_errf(err, errlen, "rank %d: rt_rendezvous_watch: already watching", r->rank);
  if (r->world == 1) return 0;
  r->watch_pfd = malloc(sizeof(struct pollfd) * (size_t)nfd(r)), r->watch_who = malloc(sizeof(int) * (size_t)nfd(r));
  if (!r->watch_pfd || !r->watch_who) {
    free(r->watch_pfd), free(r->watch_who);
    r->watch_pfd = NULL, r->watch_who = NULL;
    return rt_errf(err, errlen, "rank %d: rt_rendezvous_watch: out of host memory", r->rank);
  }
  r->lost = lost, r->user = user;
  /* signals go to the caller's threads, not to the watchdog */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&r->watcher, NULL, watch, r);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    free(r->watch_pfd), free(r->watch_who);
    r->watch_pfd = NULL, r->watch_who = NULL;
    return rt_errf(err, errlen, "rank %d: rt_rendezvous_watch: cannot start a thread: %s", r->rank, strerror(e));
  }
  r->watching = 1;
  return 0;
}

void rt_rendezvous_end(RtRendezvous *r) {
  if (r) atomic_store(&r->ending, 1);
}
