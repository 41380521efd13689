/* netrun_launch.h - data-parallel runs from the command line
 * (docs/training.md, "Several GPUs").
 *
 * `netrun train|bench MODEL --gpus N` starts N copies of netrun on this
 * machine, one per GPU, each told its place as torchrun tells it (RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a
 * free MASTER_PORT), with the same arguments less --gpus; `--nproc N` does
 * the same on whichever device the run picks (N CPU executors with
 * `--device cpu`: how the tests run several ranks without a GPU).  On
 * several machines any launcher that sets those variables starts netrun
 * without --gpus.  The launcher waits for its ranks and exits with the
 * first failure's status; a rank that fails ends the others (the
 * rendezvous's watchdog), and those that outlive it by GRACE seconds are
 * sent SIGTERM, then SIGKILL.  Ctrl-C reaches every rank, which agree on
 * the step to stop after; rank 0 saves the checkpoint. */
#ifndef NETC_NETRUN_LAUNCH_H
#define NETC_NETRUN_LAUNCH_H

#include "net.h"

/* When argv (argv[0] the command) asks for N > 1 processes (--gpus N,
 * --nproc N): starts them, waits, and returns the exit status for
 * netrun (>= 0).  -1: nothing to launch, run in this process (argv is
 * then stripped of --gpus 1 / --nproc 1 and *argc adjusted).  A usage
 * error (a bad N, both options, --device cpu with --gpus, inside a rank
 * already) prints its message and returns NETRUN_EXIT_USAGE. */
int netrun_launch(int *argc, char **argv);

/* In a rank that netrun_launch started: its option ("--gpus 4"), for a
 * command that repeats the run; else NULL. */
const char *netrun_launch_option(void);

/* In a rank started by a launcher (WORLD_SIZE in the environment): its
 * GPU ordinal (LOCAL_RANK, else 0; 0 when the driver sees one GPU, which a
 * launcher that gives each rank its own makes it), and 1 when the run has
 * several ranks (WORLD_SIZE is not 1); else 0. */
int netrun_rank_env(int *local_rank);

/* Joins m to the run the environment describes, when there is one of
 * more than one rank (net_dist_join; WORLD_SIZE=1 is a plain run), with
 * synchronized batch norm when sync_bn (--sync-bn; outside such a run it
 * changes nothing and says so); 0, or -1 after printing the error.  *rank
 * is m's rank (0 outside a run). */
int netrun_join(NetModel *m, int sync_bn, int *rank);

#endif
