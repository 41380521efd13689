/* loopback.h - what the data-parallel tests share: a free port on the
 * loopback for their ranks to meet at, and a clock for their deadlines. */
#ifndef NETC_TESTS_DIST_LOOPBACK_H
#define NETC_TESTS_DIST_LOOPBACK_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A port that was free a moment ago (the kernel's choice), or -1. */
static inline int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t n = sizeof a;
  int port = -1;
  if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &n) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

/* Seconds on the monotonic clock. */
static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
