/* netrun_launch.c - `--gpus N` and `--nproc N`: netrun as the launcher of
 * its own ranks (netrun_launch.h). */
#include "netrun_launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netrun_opt.h"

enum { MAX_PROCS = 64, GRACE_S = 30 };

/* Where --gpus or --nproc is in argv (its index, with its value inline or
 * next), or -1. */
typedef struct Ask {
  int at, inline_value; /* the option's index; 1 for --gpus=N */
  int gpus;             /* --gpus (else --nproc) */
  long long n;
} Ask;

static int find_ask(int argc, char **argv, Ask *a) {
  static const char *const NAMES[] = {"--gpus", "--nproc"};
  a->at = -1;
  for (int i = 1; i < argc; i++)
    for (int k = 0; k < 2; k++) {
      size_t len = strlen(NAMES[k]);
      if (strncmp(argv[i], NAMES[k], len) != 0 || (argv[i][len] && argv[i][len] != '=')) continue;
      if (a->at >= 0) {
        fprintf(stderr, "netrun: error: give --gpus or --nproc once\n");
        return -1;
      }
      const char *v = argv[i][len] == '=' ? argv[i] + len + 1 : i + 1 < argc ? argv[i + 1] : NULL;
      if (!v) {
        fprintf(stderr, "netrun: error: %s needs a value\n", NAMES[k]);
        return -1;
      }
      if (netrun_opt_int(NAMES[k], v, 1, MAX_PROCS, &a->n)) return -1;
      a->at = i, a->inline_value = argv[i][len] == '=', a->gpus = k == 0;
    }
  return 0;
}

/* argv without the option (and its value), NULL-terminated in place. */
static void strip(int *argc, char **argv, const Ask *a) {
  int drop = a->inline_value ? 1 : 2;
  for (int i = a->at; i + drop <= *argc; i++) argv[i] = argv[i + drop];
  *argc -= drop;
}

/* A port that was free a moment ago on the loopback (the kernel's choice). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
  socklen_t len = sizeof sa;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

static volatile sig_atomic_t forwarded; /* a SIGTERM to pass on to the ranks */
static void on_term(int sig) { forwarded = sig; }

/* Rank k of n: netrun again with the arguments, in the torchrun environment. */
static pid_t start_rank(int k, int n, int port, const char *argv_option, char **argv) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  char v[32];
  snprintf(v, sizeof v, "%d", k);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", n);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", port);
  setenv("MASTER_PORT", v, 1);
  setenv("NETRUN_LAUNCH", argv_option, 1); /* how the run was started, for its resume command */
  signal(SIGINT, SIG_DFL);                 /* the launcher ignores them; the rank handles its own */
  signal(SIGTERM, SIG_DFL);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "netrun: error: rank %d: cannot start /proc/self/exe: %s\n", k, strerror(errno));
  _exit(NETRUN_EXIT_FAIL);
}

static int status_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1; }

/* Waits for the n ranks; after the first failure the others have GRACE_S
 * to end by themselves.  The first failure's status, else 0. */
static int wait_ranks(pid_t *pid, int n) {
  int left = n, rc = 0, first = -1;
  time_t failed_at = 0;
  int termed = 0;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int k = 0; k < n; k++)
        if (pid[k] == p) {
          pid[k] = 0, left--;
          int code = status_code(st);
          if (code && first < 0) {
            first = k, rc = code, failed_at = time(NULL);
            if (left) fprintf(stderr, "netrun: rank %d ended with status %d; waiting for the others\n", k, code);
          }
        }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    int sig = 0;
    if (forwarded) sig = forwarded, forwarded = 0;
    if (!sig && first >= 0 && time(NULL) - failed_at > GRACE_S) {
      sig = termed ? SIGKILL : SIGTERM, termed++;
      failed_at = time(NULL);
      fprintf(stderr, "netrun: %d ranks still running %d s after rank %d failed: sending %s\n", left, GRACE_S, first,
              sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    }
    for (int k = 0; sig && k < n; k++)
      if (pid[k] > 0) kill(pid[k], sig);
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  return rc;
}

int netrun_launch(int *argc, char **argv) {
  Ask a;
  if (find_ask(*argc, argv, &a)) return NETRUN_EXIT_USAGE;
  if (a.at < 0) return -1;
  for (int i = 1; i < *argc; i++)
    if (a.gpus && (strcmp(argv[i], "--device=cpu") == 0 ||
                   (strcmp(argv[i], "--device") == 0 && i + 1 < *argc && strcmp(argv[i + 1], "cpu") == 0))) {
      fprintf(stderr, "netrun: error: --gpus runs one process per GPU; --nproc N runs N on the CPU\n");
      return NETRUN_EXIT_USAGE;
    }
  if (getenv("WORLD_SIZE")) {
    fprintf(stderr, "netrun: error: %s inside a rank of a run already (WORLD_SIZE is set)\n",
            a.gpus ? "--gpus" : "--nproc");
    return NETRUN_EXIT_USAGE;
  }
  int n = (int)a.n;
  strip(argc, argv, &a);
  int gpus = a.gpus ? net_gpu_count() : 0;
  if (a.gpus && gpus < n) {
    char why[256] = "";
    if (!net_gpu_available(why, sizeof why)) snprintf(why + strlen(why), sizeof why - strlen(why), "; ");
    fprintf(stderr, "netrun: error: --gpus %d: %sthe driver sees %d GPU%s (--nproc N runs N ranks on the CPU)\n", n,
            why, gpus, gpus == 1 ? "" : "s");
    return NETRUN_EXIT_FAIL;
  }
  if (n == 1) return -1;
  int port = free_port();
  if (port < 0) {
    fprintf(stderr, "netrun: error: no free port on 127.0.0.1 for the ranks to meet: %s\n", strerror(errno));
    return NETRUN_EXIT_FAIL;
  }
  /* argv as the ranks get it: the program, then the command's words */
  char *args[*argc + 2];
  args[0] = "netrun";
  for (int i = 0; i < *argc; i++) args[i + 1] = argv[i];
  args[*argc + 1] = NULL;
  char option[32];
  snprintf(option, sizeof option, "%s %d", a.gpus ? "--gpus" : "--nproc", n);
  signal(SIGINT, SIG_IGN); /* Ctrl-C reaches the ranks, which stop together */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  fflush(stdout);
  fflush(stderr);
  pid_t pid[MAX_PROCS];
  int started = 0;
  for (; started < n; started++)
    if ((pid[started] = start_rank(started, n, port, option, args)) < 0) {
      fprintf(stderr, "netrun: error: cannot start rank %d: %s\n", started, strerror(errno));
      for (int k = 0; k < started; k++) kill(pid[k], SIGTERM);
      wait_ranks(pid, started);
      return NETRUN_EXIT_FAIL;
    }
  return wait_ranks(pid, n);
}

const char *netrun_launch_option(void) {
  const char *o = getenv("WORLD_SIZE") ? getenv("NETRUN_LAUNCH") : NULL;
  return o && (strncmp(o, "--gpus ", 7) == 0 || strncmp(o, "--nproc ", 8) == 0) ? o : NULL;
}

int netrun_rank_env(int *local_rank) {
  *local_rank = 0;
  if (!getenv("WORLD_SIZE")) return 0;
  const char *lr = getenv("LOCAL_RANK");
  long long v = 0;
  if (lr && netrun_opt_int("LOCAL_RANK", lr, 0, 1 << 20, &v) == 0) *local_rank = (int)v;
  /* a launcher that gives each rank one GPU of its own (CUDA_VISIBLE_DEVICES, as Slurm's --gpus-per-task
   * does) leaves it ordinal 0 whatever the local rank */
  if (*local_rank > 0 && net_gpu_count() == 1) *local_rank = 0;
  return strcmp(getenv("WORLD_SIZE"), "1") != 0;
}

int netrun_join(NetModel *m, int sync_bn, int *rank) {
  *rank = 0;
  int local;
  if (!netrun_rank_env(&local)) {
    /* one rank: a plain run, without the all-reduce's cost; its batch is every rank's already */
    if (sync_bn) fprintf(stderr, "netrun: warning: --sync-bn: one process, whose batch norm sees the whole batch\n");
    return 0;
  }
  NetDistOpts o = {.sync_bn = sync_bn}; /* world 0: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT */
  if (net_dist_join(m, &o)) {
    fprintf(stderr, "netrun: error: %s\n", net_last_error());
    return -1;
  }
  *rank = net_dist_rank(m);
  return 0;
}
