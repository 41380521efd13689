/* rt_rendezvous.c - the ranks' meeting and control channel (rt_rendezvous.h). */
#define _GNU_SOURCE /* getaddrinfo under -std=c11 */
#include "rt_rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
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
  int *fd; /* rank 0: fd[k] the socket of rank k (fd[0] -1); else fd[0] the socket to rank 0 */
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
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
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

static void close_all(RtRendezvous *r) {
  for (int k = 0; r->fd && k < (r->rank == 0 ? r->world : 1); k++)
    if (r->fd[k] >= 0) close(r->fd[k]);
}

void rt_rendezvous_close(RtRendezvous *r) {
  if (!r) return;
  close_all(r);
  free(r->fd);
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
  if (r) r->fd = malloc(sizeof(int) * (size_t)(c->rank == 0 ? c->world : 1));
  if (!r || !r->fd) {
    free(r);
    return rt_errf(err, errlen, "rendezvous: out of memory");
  }
  r->rank = c->rank, r->world = c->world, r->timeout_s = c->timeout_s > 0 ? c->timeout_s : 60;
  for (int k = 0; k < (c->rank == 0 ? c->world : 1); k++) r->fd[k] = -1;
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

int rt_rendezvous_agree(RtRendezvous *r, int ok, char *err, size_t errlen) {
  if (!r) return -1;
  if (r->world == 1) return ok ? 1 : 0;
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
    int s = r->fd[k] >= 0 ? recv_all(r->fd[k], &b, 1, deadline) : 1;
    if (s || !b) {
      if (first == 0xffffffffu)
        first = (uint32_t)k, how = s == 1 ? "left the run" : s == 2 ? "did not answer in time" : "failed";
      if (s && r->fd[k] >= 0) close(r->fd[k]), r->fd[k] = -1;
    }
  }
  msg[0] = first == 0xffffffffu;
  put_u32(msg + 1, first);
  for (int k = 1; k < r->world; k++)
    if (r->fd[k] >= 0) send_all(r->fd[k], msg, 5, deadline);
  if (msg[0]) return 1;
  rt_errf(err, errlen, "rank 0: rank %u %s", first, how);
  return 0;
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
    int s = r->fd[k] >= 0 ? recv_all(r->fd[k], n, 4, deadline) : 1, c = XCH_OK;
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
    if (r->fd[k] >= 0 && !send_all(r->fd[k], head, 5, deadline) && code == XCH_OK)
      send_all(r->fd[k], acc, answer_len, deadline);
  for (int k = 1; k < r->world; k++)
    if (lost[k] && r->fd[k] >= 0) close(r->fd[k]), r->fd[k] = -1;
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
  uint8_t mine[8 * RT_RENDEZVOUS_MAX_SUM + 1] = {0}, acc[8 * RT_RENDEZVOUS_MAX_SUM + 1];
  for (int i = 0; i < n; i++) put_f64(mine + 8 * i, v[i]);
  int got = exchange(r, mine, acc, 8 * (size_t)n, 8 * (size_t)n, add_f64, "sum", err, errlen);
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
  uint8_t acc[RT_RENDEZVOUS_MAX_BLOB + 1];
  return exchange(r, bytes, acc, len, 0, same_bytes, "same weights", err, errlen);
}
