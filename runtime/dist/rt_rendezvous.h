/* rt_rendezvous.h - how the processes of a data-parallel run meet, and how
 * they learn that one of them is gone.
 *
 * One process per GPU, each told its place as torchrun tells it: RANK,
 * WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment (no MPI).
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects
 * (retrying until the deadline: rank 0 may start last) and says who it is;
 * when all WORLD_SIZE - 1 have come, rank 0 sends each the same blob (the
 * NCCL unique id that ncclCommInitRank needs, 128 bytes).  The connections
 * then stay open as the run's control channel: rt_rendezvous_agree is a
 * barrier that carries a verdict, so that a rank that failed, or whose
 * process is gone (its socket closes), ends every rank's run with a
 * message naming it instead of leaving the others waiting in a collective.
 * Every wait has the deadline of the configuration; none blocks forever.
 *
 * The wire: a rank's hello is 16 bytes, "NETCRDV1", its rank and the world
 * size as big-endian u32; rank 0 answers with one status byte (0 ok, else
 * the reason as text of the length the next byte gives) and then the blob's
 * length (big-endian u32) and bytes.  agree: one byte each way (1 ok, 0
 * not), rank 0's answer followed by the first failed rank (big-endian u32,
 * or 0xffffffff for none).  sum and same: a rank sends its payload's
 * length (u32) and the payload (doubles as big-endian IEEE-754 bits); rank
 * 0 answers a status byte (0 ok, 2 left, 3 timed out, 4 another length, 5
 * other bytes), the rank it concerns (u32) and, for sum when all went
 * well, the sums. */
#ifndef NETC_RT_RENDEZVOUS_H
#define NETC_RT_RENDEZVOUS_H

#include <stddef.h>

typedef struct RtRendezvousConfig {
  const char *addr; /* rank 0's address: a numeric IPv4 address or a host name */
  int port;         /* 1..65535 */
  int rank, world;  /* 0 <= rank < world <= RT_RENDEZVOUS_MAX_WORLD */
  double timeout_s; /* each wait's deadline (0: 60 s) */
} RtRendezvousConfig;

enum { RT_RENDEZVOUS_MAX_WORLD = 4096, RT_RENDEZVOUS_MAX_BLOB = 4096, RT_RENDEZVOUS_MAX_SUM = 512 };

/* The configuration from RANK, WORLD_SIZE, MASTER_ADDR (default
 * 127.0.0.1) and MASTER_PORT; 0, or -1 with the variable at fault in err. */
int rt_rendezvous_from_env(RtRendezvousConfig *c, char *err, size_t errlen);

typedef struct RtRendezvous RtRendezvous;

/* Meets the other ranks.  Rank 0 sends blob[0..len); the others receive it
 * into blob (cap len: the length rank 0 sends must be len).  0 with *out,
 * or -1 with what went wrong in err ("rank 0: ranks 2, 3 of 4 did not join
 * within 5 s"). */
int rt_rendezvous_open(const RtRendezvousConfig *c, void *blob, size_t len, RtRendezvous **out, char *err,
                       size_t errlen);

/* Every rank says whether it is fine (ok 1) and hears whether all are:
 * 1 when every rank said ok, 0 when one did not, left or did not answer in
 * time (err then names it: "rank 2 left the run"), -1 when this rank's own
 * connection failed. */
int rt_rendezvous_agree(RtRendezvous *r, int ok, char *err, size_t errlen);

/* The sum over the ranks of n doubles (every rank calls it with the same
 * n): v is replaced by the sum on every rank, added in rank order so that
 * every rank gets the same bits (an evaluation's counts and losses).
 * Returns as rt_rendezvous_agree does: 1, 0 when a rank left, did not
 * answer in time or passed another n (err names it; v is then left as it
 * was), -1 when this rank's own connection failed.  n at most
 * RT_RENDEZVOUS_MAX_SUM. */
int rt_rendezvous_sum(RtRendezvous *r, double *v, int n, char *err, size_t errlen);
/* Whether every rank holds the same len bytes as rank 0 (a digest of the
 * weights at the start of a run): 1, 0 naming the first rank that holds
 * others ("rank 2 holds other bytes than rank 0"), left or did not answer,
 * -1 as for rt_rendezvous_sum.  len at most RT_RENDEZVOUS_MAX_BLOB. */
int rt_rendezvous_same(RtRendezvous *r, const void *bytes, size_t len, char *err, size_t errlen);

void rt_rendezvous_close(RtRendezvous *r); /* takes NULL */

#endif
