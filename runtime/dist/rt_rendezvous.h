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
 * well, the sums.
 *
 * allreduce, in two rounds.  The request: a rank sends its count n
 * (big-endian u64) and a byte (1 the mean, 0 the sum); rank 0 reads them
 * in rank order and answers every rank a 21-byte verdict: the status byte
 * (as for sum, and 6 another reduction), the rank it concerns (u32), that
 * rank's count and rank 0's (u64 each; for 6 their mean bytes).  A rank
 * whose request did not come is then cut off (its connection shut down).
 * Only after an ok do the floats follow, as big-endian IEEE-754 bits in
 * chunks of 65,536: every rank sends its n; rank 0 reads chunk c of rank
 * 1, 2, ... before chunk c + 1 of any (no rank waits on more than a chunk
 * of every other) and adds them to its own in double; a rank gone or
 * silent is cut off, and the others are still read to their end so that
 * their streams stay in step.  Then rank 0 sends every rank a second
 * verdict of the same form and, when it is ok, the n results in chunks.
 * Rank 0 holds one chunk of doubles; no rank more than its n floats and a
 * chunk.  A rank waits for rank 0 twice the deadline, as rank 0 may itself
 * wait a deadline on another rank.
 *
 * The watchdog reads nothing: it polls the sockets for a hangup only, so
 * the protocol above is the main thread's alone. */
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

/* The element-wise sum over the ranks of n floats, or with mean the sum
 * divided by the world size (every rank passes the same n and mean): each
 * element added in double in rank order from rank 0's value, divided once
 * and rounded to float once, so every rank ends with the same bits in v
 * (gradients of data-parallel training on the CPU; the GPU uses NCCL).  n
 * may be any size: the floats travel in chunks, and no rank holds more
 * than v and a chunk.  Returns as rt_rendezvous_sum does: 1; 0 when a rank
 * left, did not answer in time or passed another n or mean (err names it:
 * "rank 2 left the run", "rank 1 passed 10 floats, rank 0 100"); -1 when
 * this rank's own connection failed.  On 0 or -1 each element of v is
 * either this rank's value or the result, never anything else: all of v
 * is as it was when the request round failed (another n, a rank gone
 * before the call), and a failure while the floats travel may leave some
 * elements summed. */
int rt_rendezvous_allreduce(RtRendezvous *r, float *v, size_t n, int mean, char *err, size_t errlen);

/* --- the watchdog ---------------------------------------------------------
 * A rank whose process dies while the others sit in something that cannot
 * see the control channel (an NCCL collective, which waits forever) would
 * hang them.  rt_rendezvous_watch starts a thread that polls this rank's
 * connections about every 100 ms for a hangup, never reading (the calls
 * above own the bytes).  On rank 0, when rank k's connection closes, it
 * shuts down every connection (so that the other ranks' watchdogs and
 * calls learn it too) and calls lost("rank k left the run (its connection
 * closed)", user); on another rank, when rank 0's connection closes, it
 * shuts that down too and calls lost("rank 0 ended the run: a rank failed
 * or left", user).  lost runs on
 * the watchdog's thread, at most once (abort NCCL there and let the main
 * thread fail); it must not wait for the thread that calls
 * rt_rendezvous_close.  A connection that this rank's own calls found
 * broken, and reported, is not watched any more.  After lost, every call
 * above returns 0 at once with its message ("rank 0: rank 2 left the run
 * (its connection closed)"); a call already waiting returns promptly, its
 * sockets shut down.  0, or -1 with err (a second watchdog, no thread);
 * one rank alone has nothing to watch (0). */
typedef void (*RtRendezvousLost)(const char *msg, void *user);
int rt_rendezvous_watch(RtRendezvous *r, RtRendezvousLost lost, void *user, char *err, size_t errlen);

/* This rank ends the run normally: hangups from now on are no losses (the
 * watchdog stops).  Call it before the final rt_rendezvous_agree of a run:
 * every rank is then past it before any rank can close (a rank closes
 * after the final agree, which needs every rank's word), so ranks closing
 * at the end fire no watchdog; a rank that dies during the final agree is
 * named by the agree itself.  Call it too before closing after a failure if
 * lost must stay quiet.  Takes NULL. */
void rt_rendezvous_end(RtRendezvous *r);

/* Stops and joins the watchdog, then closes the connections.  Takes NULL. */
void rt_rendezvous_close(RtRendezvous *r);

#endif
