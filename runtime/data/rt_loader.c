/* rt_loader.c - the worker pool behind rt_loader.h.
 *
 * One mutex guards the shared state: the next position to fill, how many
 * batches the caller has consumed, per-slot counts of finished images, the
 * unreadable-image record.  A worker takes position p when its batch
 * p / B is less than `depth` batches past the consumed ones, decodes and
 * transforms outside the lock straight into slot (p / B) % depth, and
 * counts it done; the caller waits until its slot's count is the batch's
 * length.  rt_loader_start first waits until no worker holds a position,
 * so an epoch's permutation never changes under a worker.
 *
 * A worker of DECODE mode with a one-window transform reads the file into
 * its own buffer, parses the header, draws the window on the header's
 * size and decodes only the rows and columns the window reads
 * (rt_jpeg_decode_part); other transforms decode the whole picture.  In
 * DEFER mode a worker reads the file into the buffer of its place in the
 * slot, parses the header and draws the window there; a file the GPU
 * decoder cannot take is decoded in full (at the transform's DCT scale)
 * and its pixels replace its bytes in that buffer.
 *
 * Memory: depth * batch * 3 * H * W bytes of images (ImageNet at batch
 * 256, depth 3: 116 MB) in DECODE mode, or in DEFER mode depth * batch
 * buffers each as large as the largest file (or fallback picture) it held;
 * one byte per image for the unreadable mark, and 8 bytes per image for
 * the permutation. */
#include "rt_loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_file.h"
#include "rt_jpeg.h"

enum { KEEP_NAMES = 3, MSG = 512 };

typedef struct Slot {
  uint8_t *images;     /* DECODE: batch * S bytes */
  RtLoaderItem *items; /* DEFER: batch items */
  uint8_t **bytes;     /* DEFER: per item, its file's bytes or its RGB pixels */
  size_t *cap;         /* DEFER: their sizes */
  int64_t *labels;
  uint8_t *ok; /* evaluation: the image at i was read */
  int64_t done;
} Slot;

typedef struct Worker {
  RtLoader *l;
  pthread_t th;
  uint8_t *buf; /* DECODE, one-window transforms: the file being decoded */
  size_t cap;
} Worker;

struct RtLoader {
  RtLoaderConfig c;
  RtAugKind aug;
  int min_short;
  int window;           /* the transform is one window (rt_augment_window) */
  int64_t n, S, nbatch; /* nbatch: this rank's */
  int64_t rank, world;  /* world >= 1 */
  int64_t *items;       /* n indices into the set */
  int64_t *order;       /* training: the epoch's permutation of 0..n-1 */
  Slot *ring;
  Worker *workers;
  int nworkers;
  pthread_mutex_t mu;
  pthread_cond_t work, ready, idle;
  int inited, started, quit, holding, busy;
  int64_t epoch, total, next_pos, consumed;
  double busy_s;       /* seconds the threads spent filling positions, summed */
  int64_t filled;      /* positions filled */
  double busy_kind[2]; /* the same per item kind (RT_ITEM_JPEG, RT_ITEM_RGB) */
  int64_t filled_kind[2];
  int share, share_next; /* cpu_share: this epoch's, and from the next start */
  uint8_t *bad;
  int64_t nbad;
  char first[KEEP_NAMES][MSG];
  int fatal;
  char fatal_msg[2 * MSG];
};

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The epoch position (in batches of batch * world) of this rank's
 * position p; the position itself when the loader serves the whole epoch. */
static int64_t epoch_pos(const RtLoader *l, int64_t p) {
  int64_t B = l->c.batch;
  return (p / B * l->world + l->rank) * B + p % B;
}

/* Images in this rank's batch b: all but an evaluation epoch's last. */
static int64_t batch_len(const RtLoader *l, int64_t b) {
  if (l->c.train) return l->c.batch;
  int64_t left = l->n - epoch_pos(l, b * l->c.batch);
  return left < l->c.batch ? left : l->c.batch;
}

/* Reads the file at path into *buf (grown as needed): its length, or -1
 * with a message. */
static int64_t read_file(const char *path, uint8_t **buf, size_t *cap, char *msg) {
  /* a regular file only, opened without blocking (a FIFO named x.jpg is
   * reported unreadable, never waited on); its size from fstat bounds the read */
  struct stat st;
  char why[128];
  int fd = rt_file_open_regular(path, &st, why, sizeof why);
  if (fd < 0) return snprintf(msg, MSG, "%s: %s", path, why), -1;
  size_t n = (size_t)st.st_size;
  if (n > *cap || !*buf) {
    uint8_t *b = realloc(*buf, n + 1);
    if (!b) {
      close(fd);
      return snprintf(msg, MSG, "%s: out of memory for %zu bytes", path, n), -1;
    }
    *buf = b, *cap = n;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, *buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != n) return snprintf(msg, MSG, "%s: cannot read", path), -1;
  return (int64_t)n;
}

/* The transform's window for position pos of a w x h picture. */
static RtAugWindow window_of(const RtLoader *l, int64_t pos, int w, int h) {
  RtAugWindow win = {0};
  uint64_t seed = l->c.train ? rt_augment_seed(l->c.seed, l->epoch, pos) : 0;
  rt_augment_window(l->aug, l->c.train, seed, w, h, l->c.H, l->c.W, &win);
  return win;
}

/* DECODE: the picture at path, transformed for position pos, into dst.
 * One-window transforms read the header, draw the window and decode only
 * the rows and columns it reads (rt_jpeg_decode_part), at the smallest DCT
 * scale that keeps the window's pixels (rt_augment_window_min_short). */
static int decode_item(RtLoader *l, Worker *wk, const char *path, int64_t pos, uint8_t *dst, char *msg) {
  RtImage im;
  if (!l->window) {
    if (rt_jpeg_decode_file(path, l->min_short, &im, msg, MSG) != RT_JPEG_OK) return -1;
    if (l->c.train)
      rt_augment_train(&im, l->aug, rt_augment_seed(l->c.seed, l->epoch, pos), l->c.H, l->c.W, dst);
    else
      rt_augment_eval(&im, l->c.H, l->c.W, dst);
    rt_image_free(&im);
    return 0;
  }
  int64_t n = read_file(path, &wk->buf, &wk->cap, msg);
  int w, h, gpu_ok, sw, sh, box[4];
  if (n < 0 || rt_jpeg_header(wk->buf, (size_t)n, path, &w, &h, &gpu_ok, msg, MSG) != RT_JPEG_OK) return -1;
  RtAugWindow win = window_of(l, pos, w, h);
  int m = rt_augment_window_min_short(&win, w, h, l->c.H, l->c.W);
  rt_jpeg_scaled_size(w, h, m, &sw, &sh);
  RtAugWindow s = rt_augment_window_scaled(&win, w, h, sw, sh);
  rt_augment_footprint(&s, sw, sh, l->c.H, l->c.W, box);
  if (rt_jpeg_decode_part(wk->buf, (size_t)n, path, m, box, &im, msg, MSG) != RT_JPEG_OK) return -1;
  rt_augment_apply(&im, &s, l->c.H, l->c.W, dst);
  rt_image_free(&im);
  return 0;
}

/* Is position pos one of the cpu_share percent decoded here?  Evenly
 * spread: pos is when the running share passes a whole image at it. */
static int decoded_here(const RtLoader *l, int64_t pos) { return (pos + 1) * l->share / 100 != pos * l->share / 100; }

/* DEFER, a position decoded here: only the part its window reads, at the
 * window's DCT scale, into the slot as an RGB item with its box. */
static int share_item(RtLoader *l, Slot *s, int64_t k, const char *path, int64_t n, int w, int h, RtAugWindow win,
                      char *msg) {
  int sw, sh, box[4], m = rt_augment_window_min_short(&win, w, h, l->c.H, l->c.W);
  rt_jpeg_scaled_size(w, h, m, &sw, &sh);
  RtAugWindow sc = rt_augment_window_scaled(&win, w, h, sw, sh);
  rt_augment_footprint(&sc, sw, sh, l->c.H, l->c.W, box);
  RtImage im;
  if (rt_jpeg_decode_part(s->bytes[k], (size_t)n, path, m, box, &im, msg, MSG) != RT_JPEG_OK) return -1;
  int bw = box[2] - box[0] + 1, bh = box[3] - box[1] + 1;
  size_t row = (size_t)bw * 3, need = row * (size_t)bh;
  uint8_t *px = malloc(need ? need : 1);
  if (!px) {
    rt_image_free(&im);
    return snprintf(msg, MSG, "%s: out of memory for %zu bytes", path, need), -1;
  }
  for (int y = 0; y < bh; y++)
    memcpy(px + (size_t)y * row, im.px + ((size_t)(box[1] + y) * (size_t)im.w + (size_t)box[0]) * 3, row);
  rt_image_free(&im);
  free(s->bytes[k]);
  s->bytes[k] = px, s->cap[k] = need;
  s->items[k] = (RtLoaderItem){RT_ITEM_RGB, px, need, sw, sh, sc, path, box[0], box[1], bw, bh};
  return 0;
}

/* DEFER: item k of slot s for the picture at path: its bytes and window,
 * or, for a file the GPU decoder cannot take or a position of the CPU's
 * share, its pixels decoded here. */
static int defer_item(RtLoader *l, Slot *s, int64_t k, const char *path, int64_t pos, char *msg) {
  int64_t n = read_file(path, &s->bytes[k], &s->cap[k], msg);
  int w, h, gpu_ok;
  if (n < 0 || rt_jpeg_header(s->bytes[k], (size_t)n, path, &w, &h, &gpu_ok, msg, MSG) != RT_JPEG_OK) return -1;
  RtAugWindow win = window_of(l, pos, w, h);
  if (gpu_ok && decoded_here(l, pos)) return share_item(l, s, k, path, n, w, h, win, msg);
  if (gpu_ok) {
    s->items[k] = (RtLoaderItem){RT_ITEM_JPEG, s->bytes[k], (size_t)n, w, h, win, path, 0, 0, 0, 0};
    return 0;
  }
  RtImage im;
  if (rt_jpeg_decode_mem(s->bytes[k], (size_t)n, path, l->min_short, &im, msg, MSG) != RT_JPEG_OK) return -1;
  /* the pixels take the file's place in the slot */
  free(s->bytes[k]);
  s->bytes[k] = im.px, s->cap[k] = (size_t)im.w * (size_t)im.h * 3;
  s->items[k] =
      (RtLoaderItem){RT_ITEM_RGB, s->bytes[k], s->cap[k], im.w, im.h, rt_augment_window_scaled(&win, w, h, im.w, im.h),
                     path,        0,           0,         im.w, im.h};
  return 0;
}

/* Makes item i (an index into items) at place k of slot s for position
 * pos; records a failure. */
static int read_item(RtLoader *l, Worker *wk, int64_t i, int64_t pos, Slot *s, int64_t k) {
  pthread_mutex_lock(&l->mu);
  int known_bad = l->bad[i];
  pthread_mutex_unlock(&l->mu);
  if (known_bad) return -1;
  const RtFolder *set = l->c.set;
  int64_t at = l->items[i];
  char msg[MSG];
  int r = l->c.decode == RT_LOADER_DEFER ? defer_item(l, s, k, set->paths[at], pos, msg)
                                         : decode_item(l, wk, set->paths[at], pos, s->images + k * l->S, msg);
  if (r) {
    pthread_mutex_lock(&l->mu);
    if (!l->bad[i]) {
      l->bad[i] = 1;
      if (l->nbad < KEEP_NAMES) snprintf(l->first[l->nbad], MSG, "%s", msg);
      l->nbad++;
    }
    pthread_mutex_unlock(&l->mu);
    return -1;
  }
  s->labels[k] = set->labels[at];
  return 0;
}

/* Fills position p of the epoch (outside the lock). */
static void fill(RtLoader *l, Worker *wk, int64_t p) {
  Slot *s = &l->ring[(p / l->c.batch) % l->c.depth];
  int64_t k = p % l->c.batch, e = epoch_pos(l, p);
  if (!l->c.train) {
    s->ok[k] = read_item(l, wk, e, e, s, k) == 0;
    return;
  }
  for (int64_t t = 0; t < l->n; t++)
    if (read_item(l, wk, l->order[(e + t) % l->n], e, s, k) == 0) return;
  pthread_mutex_lock(&l->mu);
  if (!l->fatal)
    snprintf(l->fatal_msg, sizeof l->fatal_msg, "none of the %lld images can be read (%s)", (long long)l->n,
             l->first[0]);
  l->fatal = 1;
  pthread_mutex_unlock(&l->mu);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int can_take(const RtLoader *l) {
  return l->started && !l->fatal && l->next_pos < l->total && l->next_pos / l->c.batch < l->consumed + l->c.depth;
}

static void *work(void *arg) {
  Worker *wk = arg;
  RtLoader *l = wk->l;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->quit && !can_take(l)) pthread_cond_wait(&l->work, &l->mu);
    if (l->quit) break;
    int64_t p = l->next_pos++;
    l->busy++;
    pthread_mutex_unlock(&l->mu);
    double t0 = seconds();
    fill(l, wk, p);
    double took = seconds() - t0;
    pthread_mutex_lock(&l->mu);
    l->busy--;
    l->busy_s += took, l->filled++;
    if (l->c.decode == RT_LOADER_DEFER) { /* which kind of work it was */
      int rgb = l->ring[(p / l->c.batch) % l->c.depth].items[p % l->c.batch].kind == RT_ITEM_RGB;
      l->busy_kind[rgb] += took, l->filled_kind[rgb]++;
    }
    int64_t b = p / l->c.batch;
    Slot *s = &l->ring[b % l->c.depth];
    if (++s->done == batch_len(l, b) || l->fatal) pthread_cond_broadcast(&l->ready);
    if (!l->busy) pthread_cond_broadcast(&l->idle);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static int default_workers(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

RtLoaderStatus rt_loader_new(const RtLoaderConfig *c, RtLoader **out, char *err, size_t errmax) {
  *out = NULL;
  if (!c->set || c->batch < 1 || c->H < 1 || c->W < 1 || c->workers < 0 || c->limit < 0 || c->depth < 0 ||
      (c->decode != RT_LOADER_DECODE && c->decode != RT_LOADER_DEFER)) {
    snprintf(err, errmax, "loader: bad configuration (set %s, batch %lld, %dx%d, %d workers)",
             c->set ? "given" : "missing", (long long)c->batch, c->H, c->W, c->workers);
    return RT_LOADER_ERR_ARG;
  }
  RtAugKind aug = rt_augment_resolve(c->augment, c->H, c->W);
  RtAugWindow probe;
  int window = rt_augment_window(aug, c->train, 0, 256, 256, c->H, c->W, &probe) == 0;
  if (c->decode == RT_LOADER_DEFER && !window) {
    snprintf(err, errmax,
             "loader: deferred decoding needs a transform that is one window (inputs of 64 pixels and more, not "
             "pad_crop): %dx%d with %s",
             c->H, c->W, c->train ? rt_augment_name(aug) : "the evaluation transform");
    return RT_LOADER_ERR_ARG;
  }
  RtLoader *l = calloc(1, sizeof *l);
  if (!l) return snprintf(err, errmax, "loader: out of memory"), RT_LOADER_ERR_NOMEM;
  l->c = *c;
  l->world = c->world > 1 ? c->world : 1;
  l->rank = c->rank;
  if (c->rank < 0 || c->rank >= l->world) {
    snprintf(err, errmax, "loader: rank %d of a world of %d", c->rank, c->world);
    free(l);
    return RT_LOADER_ERR_ARG;
  }
  l->share = l->share_next = c->cpu_share < 0 ? 0 : c->cpu_share > 100 ? 100 : c->cpu_share;
  if (!l->c.depth) l->c.depth = 3;
  if (l->c.depth < 2) l->c.depth = 2;
  l->nworkers = c->workers ? c->workers : default_workers();
  l->aug = aug;
  l->window = window;
  l->min_short = rt_augment_min_short(l->aug, c->train, c->H, c->W);
  l->n = c->limit > 0 && c->limit < c->set->n ? c->limit : c->set->n;
  l->S = 3 * (int64_t)c->H * c->W;
  int64_t all = c->train ? l->n / (c->batch * l->world) : (l->n + c->batch - 1) / c->batch;
  l->nbatch = c->train ? all : all > l->rank ? (all - l->rank + l->world - 1) / l->world : 0;
  if (c->train && l->nbatch < 1) {
    if (l->world > 1)
      snprintf(err, errmax, "%lld images are fewer than one batch of %lld on each of %lld processes", (long long)l->n,
               (long long)c->batch, (long long)l->world);
    else
      snprintf(err, errmax, "%lld images are fewer than one batch of %lld", (long long)l->n, (long long)c->batch);
    free(l);
    return RT_LOADER_ERR_DATA;
  }
  l->items = malloc(sizeof *l->items * (size_t)(l->n ? l->n : 1));
  l->order = c->train ? malloc(sizeof *l->order * (size_t)l->n) : NULL;
  l->bad = calloc((size_t)(l->n ? l->n : 1), 1);
  l->ring = calloc((size_t)l->c.depth, sizeof *l->ring);
  l->workers = calloc((size_t)l->nworkers, sizeof *l->workers);
  int ok = l->items && (l->order || !c->train) && l->bad && l->ring && l->workers;
  for (int i = 0; ok && i < l->c.depth; i++) {
    Slot *s = &l->ring[i];
    size_t B = (size_t)c->batch;
    if (c->decode == RT_LOADER_DEFER) {
      s->items = calloc(B, sizeof *s->items);
      s->bytes = calloc(B, sizeof *s->bytes);
      s->cap = calloc(B, sizeof *s->cap);
    } else {
      s->images = malloc(B * (size_t)l->S);
    }
    s->labels = malloc(sizeof *s->labels * B);
    s->ok = malloc(B);
    ok = (s->images || (s->items && s->bytes && s->cap)) && s->labels && s->ok;
  }
  if (!ok) {
    snprintf(err, errmax, "loader: out of memory for %d batches of %lld images", l->c.depth, (long long)c->batch);
    rt_loader_free(l);
    return RT_LOADER_ERR_NOMEM;
  }
  /* an even spread: every class of a sorted ImageFolder keeps its share */
  for (int64_t i = 0; i < l->n; i++) l->items[i] = (int64_t)((double)i * (double)c->set->n / (double)l->n);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work, NULL);
  pthread_cond_init(&l->ready, NULL);
  pthread_cond_init(&l->idle, NULL);
  l->inited = 1;
  int started = 0;
  for (; started < l->nworkers; started++) {
    l->workers[started].l = l;
    if (pthread_create(&l->workers[started].th, NULL, work, &l->workers[started])) break;
  }
  if (started < l->nworkers) {
    snprintf(err, errmax, "loader: cannot start thread %d of %d", started + 1, l->nworkers);
    l->nworkers = started;
    rt_loader_free(l);
    return RT_LOADER_ERR_NOMEM;
  }
  *out = l;
  return RT_LOADER_OK;
}

void rt_loader_free(RtLoader *l) {
  if (!l) return;
  if (l->inited) {
    pthread_mutex_lock(&l->mu);
    l->quit = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nworkers; i++) pthread_join(l->workers[i].th, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->idle);
  }
  for (int i = 0; l->ring && i < l->c.depth; i++) {
    Slot *s = &l->ring[i];
    for (int64_t k = 0; s->bytes && k < l->c.batch; k++) free(s->bytes[k]);
    free(s->images), free(s->items), free(s->bytes), free(s->cap), free(s->labels), free(s->ok);
  }
  for (int i = 0; l->workers && i < l->nworkers; i++) free(l->workers[i].buf);
  free(l->ring), free(l->workers), free(l->items), free(l->order), free(l->bad);
  free(l);
}

int64_t rt_loader_size(const RtLoader *l) { return l->n; }
int64_t rt_loader_batches(const RtLoader *l) { return l->nbatch; }
int rt_loader_workers(const RtLoader *l) { return l->nworkers; }

void rt_loader_start(RtLoader *l, int64_t epoch) { rt_loader_start_at(l, epoch, 0); }

void rt_loader_start_at(RtLoader *l, int64_t epoch, int64_t first) {
  pthread_mutex_lock(&l->mu);
  l->started = 0;
  while (l->busy) pthread_cond_wait(&l->idle, &l->mu);
  l->epoch = epoch, l->holding = 0, l->share = l->share_next;
  for (int i = 0; i < l->c.depth; i++) l->ring[i].done = 0;
  if (l->c.train) {
    uint64_t r = l->c.seed * 0x2545f4914f6cdd1dull ^ (uint64_t)epoch * 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < l->n; i++) l->order[i] = i;
    for (int64_t i = l->n - 1; i > 0; i--) {
      int64_t j = (int64_t)(mix(&r) % (uint64_t)(i + 1)), t = l->order[i];
      l->order[i] = l->order[j], l->order[j] = t;
    }
  }
  /* only an evaluation epoch's last batch may be short */
  l->total = l->nbatch ? (l->nbatch - 1) * l->c.batch + batch_len(l, l->nbatch - 1) : 0;
  l->consumed = first < 0 ? 0 : first > l->nbatch ? l->nbatch : first;
  l->next_pos = l->consumed * l->c.batch < l->total ? l->consumed * l->c.batch : l->total;
  l->started = 1;
  pthread_cond_broadcast(&l->work);
  pthread_mutex_unlock(&l->mu);
}

int rt_loader_next(RtLoader *l, RtLoaderBatch *b, char *err, size_t errmax) {
  pthread_mutex_lock(&l->mu);
  if (!l->started) {
    pthread_mutex_unlock(&l->mu);
    snprintf(err, errmax, "loader: no epoch started");
    return -1;
  }
  if (l->holding) {
    l->ring[l->consumed % l->c.depth].done = 0;
    l->consumed++, l->holding = 0;
    pthread_cond_broadcast(&l->work);
  }
  if (l->consumed >= l->nbatch) {
    pthread_mutex_unlock(&l->mu);
    return 0;
  }
  Slot *s = &l->ring[l->consumed % l->c.depth];
  int64_t len = batch_len(l, l->consumed);
  while (s->done < len && !l->fatal) pthread_cond_wait(&l->ready, &l->mu);
  if (l->fatal) {
    snprintf(err, errmax, "%s", l->fatal_msg);
    pthread_mutex_unlock(&l->mu);
    return -1;
  }
  l->holding = 1;
  pthread_mutex_unlock(&l->mu);
  int64_t n = len;
  if (!l->c.train) {
    n = 0;
    for (int64_t i = 0; i < len; i++) {
      if (!s->ok[i]) continue;
      if (n != i) {
        if (s->images) memcpy(s->images + n * l->S, s->images + i * l->S, (size_t)l->S);
        if (s->items) s->items[n] = s->items[i];
        s->labels[n] = s->labels[i];
      }
      n++;
    }
  }
  *b = (RtLoaderBatch){.images = s->images, .items = s->items, .labels = s->labels, .n = n};
  return 1;
}

int64_t rt_loader_unreadable(RtLoader *l, char *names, size_t cap) {
  pthread_mutex_lock(&l->mu);
  int64_t n = l->nbad;
  if (names && cap) {
    names[0] = 0;
    size_t used = 0;
    for (int64_t i = 0; i < n && i < KEEP_NAMES && used + 1 < cap; i++) {
      int k = snprintf(names + used, cap - used, "%s%s", i ? "; " : "", l->first[i]);
      if (k < 0) break;
      used += (size_t)k;
    }
  }
  pthread_mutex_unlock(&l->mu);
  return n;
}

void rt_loader_rates(RtLoader *l, double *handed_on, double *decoded) {
  pthread_mutex_lock(&l->mu);
  double r[2];
  for (int k = 0; k < 2; k++)
    r[k] = l->busy_kind[k] > 0 ? (double)l->filled_kind[k] * l->nworkers / l->busy_kind[k] : 0;
  pthread_mutex_unlock(&l->mu);
  *handed_on = r[0], *decoded = r[1];
}

int rt_loader_best_share(double gpu_jpeg, double handed_on, double decoded, double *most) {
  *most = 0;
  if (!(gpu_jpeg > 0) || !(handed_on > 0) || !(decoded > 0)) return -1;
  int best = 0;
  for (int p = 0; p <= 100; p++) {
    double s = p / 100.0, threads = 1 / ((1 - s) / handed_on + s / decoded);
    double gpu = p < 100 ? gpu_jpeg / (1 - s) : threads, rate = threads < gpu ? threads : gpu;
    if (rate > *most) *most = rate, best = p;
  }
  return best;
}

void rt_loader_set_cpu_share(RtLoader *l, int percent) {
  pthread_mutex_lock(&l->mu);
  l->share_next = percent < 0 ? 0 : percent > 100 ? 100 : percent;
  pthread_mutex_unlock(&l->mu);
}

int rt_loader_cpu_share(RtLoader *l) {
  pthread_mutex_lock(&l->mu);
  int s = l->share;
  pthread_mutex_unlock(&l->mu);
  return s;
}

double rt_loader_rate(RtLoader *l) {
  pthread_mutex_lock(&l->mu);
  double rate = l->busy_s > 0 ? (double)l->filled * l->nworkers / l->busy_s : 0;
  pthread_mutex_unlock(&l->mu);
  return rate;
}
