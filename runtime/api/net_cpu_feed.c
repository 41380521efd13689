/* net_cpu_feed.c - the CPU side of the executor's input pipeline
 * (net_exec.h, docs/data.md): two host buffers of one batch of image bytes
 * each, taken in turn.  The caller fills the buffer it is given and sends
 * it; at most two wait sent; taking one converts it (rt_ref_input_u8: the
 * normalization, the layout, padded channels) into the step's input, so
 * on the CPU the conversion happens when the batch is fed.  The GPU's
 * counterpart, with pinned buffers and a copy stream, is rt_gpu_input. */
#include <stdlib.h>
#include <string.h>

#include "net_exec.h"
#include "net_status.h"

NetStatus net_cpu_feed_start(NetCpuFeed *f, const RtRefInput *in, char *err, size_t len) {
  net_cpu_feed_stop(f);
  f->bytes = (size_t)(in->n * in->c * in->h * in->w);
  f->lab = calloc(2 * (size_t)in->n, sizeof *f->lab);
  if (!(f->host = malloc(2 * f->bytes)) || !f->lab)
    return net_status_errf(NET_ERR_NOMEM, err, len, "out of memory for two batches of %zu bytes", f->bytes);
  f->filling = -1;
  f->in = *in;
  return NET_OK;
}

void net_cpu_feed_stop(NetCpuFeed *f) {
  free(f->host);
  free(f->lab);
  memset(f, 0, sizeof *f);
}

NetStatus net_cpu_feed_buffer(NetCpuFeed *f, uint8_t **host, char *err, size_t len) {
  if (f->filling < 0 && f->sent == 2)
    return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: two batches not fed");
  if (f->filling < 0) f->filling = f->next_fill;
  *host = f->host + (size_t)f->filling * f->bytes;
  return NET_OK;
}

NetStatus net_cpu_feed_send(NetCpuFeed *f, const int64_t *labels, char *err, size_t len) {
  if (f->filling < 0) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: no buffer to send");
  if (labels) memcpy(f->lab + (size_t)f->filling * (size_t)f->in.n, labels, sizeof *labels * (size_t)f->in.n);
  f->next_fill = (f->filling + 1) % 2, f->filling = -1, f->sent++;
  return NET_OK;
}

NetStatus net_cpu_feed_take(NetCpuFeed *f, float *dst, const int64_t **labels, char *err, size_t len) {
  if (!f->sent) return net_status_errf(NET_ERR_ARG, err, len, "input pipeline: no batch sent");
  rt_ref_input_u8(&f->in, f->host + (size_t)f->next_feed * f->bytes, dst);
  *labels = f->lab + (size_t)f->next_feed * (size_t)f->in.n;
  f->next_feed = (f->next_feed + 1) % 2, f->sent--;
  return NET_OK;
}
