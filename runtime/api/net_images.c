/* net_images.c - a labelled image set as a model's float input (net.h's
 * net_images_load): an ImageFolder split through the loader's evaluation
 * transform (rt_loader.h), or an IDX pair, normalized as training does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_impl.h"
#include "rt_folder.h"
#include "rt_idx.h"
#include "rt_loader.h"

/* Room for n more images in s (cap in images). */
static int reserve(NetImages *s, int64_t *cap, int64_t n, int64_t per) {
  if (s->n + n <= *cap) return 0;
  int64_t want = *cap ? *cap : 1024;
  while (want < s->n + n) want *= 2;
  float *img = realloc(s->image, sizeof(float) * (size_t)(want * per));
  if (!img) return -1;
  s->image = img;
  int64_t *lab = realloc(s->label, sizeof(int64_t) * (size_t)want);
  if (!lab) return -1;
  s->label = lab;
  *cap = want;
  return 0;
}

/* n images of bytes px (NCHW, c channels of h*w) appended, normalized. */
static void append(NetImages *s, const uint8_t *px, const int64_t *labels, int64_t n, int64_t c, int64_t hw,
                   const float scale[3], const float shift[3]) {
  float *d = s->image + s->n * c * hw;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t k = 0; k < c; k++)
      for (int64_t j = 0; j < hw; j++, px++) *d++ = (float)*px * scale[k < 3 ? k : 2] + shift[k < 3 ? k : 2];
    s->label[s->n + i] = labels[i];
  }
  s->n += n;
}

/* How many of total to take, and the stride: limit of them evenly spread. */
static int64_t count_of(int64_t total, int64_t limit) { return limit > 0 && limit < total ? limit : total; }

static int too_big(const NetImagesReq *r, int64_t n, int64_t per, char *msg, size_t cap) {
  double bytes = (double)n * (double)per * sizeof(float);
  if (!r->max_bytes || bytes <= (double)r->max_bytes) return 0;
  snprintf(msg, cap, "%s: %lld images need %.1f GiB as floats, more than the %.1f GiB allowed; take fewer", r->dir,
           (long long)n, bytes / 1073741824.0, (double)r->max_bytes / 1073741824.0);
  return 1;
}

static int from_idx(const NetImagesReq *r, const int64_t chw[3], NetImages *out, const float scale[3],
                    const float shift[3], char *msg, size_t cap) {
  const char *prefix = r->test ? "t10k" : "train";
  RtIdxSet set = {0};
  if (net_load_idx(r->dir, prefix, &set)) return -1; /* its message is in msg (net_err_buf) */
  int64_t c = chw[0], h = chw[1], w = chw[2];
  if (c != 1 || h != set.rows || w != set.cols) {
    snprintf(msg, cap, "%.3000s: the %s images are %dx%d grey; the model takes [%lld,%lld,%lld]", r->dir, prefix,
             set.rows, set.cols, (long long)c, (long long)h, (long long)w);
    rt_idx_free(&set);
    return -1;
  }
  int64_t n = count_of(set.n, r->limit), hw = h * w, cap_n = 0;
  if (too_big(r, n, hw, msg, cap)) {
    rt_idx_free(&set);
    return -1;
  }
  int bad = reserve(out, &cap_n, n, hw);
  for (int64_t i = 0; i < n && !bad; i++) {
    int64_t at = n == set.n ? i : i * set.n / n, label = set.labels[at];
    append(out, set.images + at * hw, &label, 1, 1, hw, scale, shift);
  }
  rt_idx_free(&set);
  if (bad) snprintf(msg, cap, "out of memory");
  return bad ? -1 : 0;
}

static int from_folder(const NetImagesReq *r, const int64_t chw[3], int64_t classes, NetImages *out, int64_t *skipped,
                       const float scale[3], const float shift[3], char *msg, size_t cap) {
  const char *split = r->dir;
  int64_t c = chw[0], h = chw[1], w = chw[2];
  if (c != 3) {
    snprintf(msg, cap, "%s: an ImageFolder set gives RGB images; the model takes %lld channels", r->dir, (long long)c);
    return -1;
  }
  RtFolder set = {0};
  if (rt_folder_scan(split, (int)classes, &set, msg, cap) != RT_FOLDER_OK) return -1;
  int64_t n = count_of(set.n, r->limit), hw = h * w, cap_n = 0;
  if (too_big(r, n, c * hw, msg, cap)) {
    rt_folder_free(&set);
    return -1;
  }
  RtLoaderConfig lc = {
      .set = &set, .limit = n < set.n ? n : 0, .batch = 256, .H = (int)h, .W = (int)w, .workers = r->workers};
  RtLoader *l = NULL;
  int rc = -1;
  if (rt_loader_new(&lc, &l, msg, cap) == RT_LOADER_OK) {
    rt_loader_start(l, 0);
    RtLoaderBatch b;
    int k;
    while ((k = rt_loader_next(l, &b, msg, cap)) == 1) {
      if (reserve(out, &cap_n, b.n, c * hw)) {
        snprintf(msg, cap, "out of memory");
        k = -1;
        break;
      }
      append(out, b.images, b.labels, b.n, c, hw, scale, shift);
    }
    *skipped = rt_loader_unreadable(l, NULL, 0);
    if (k == 0 && out->n == 0) snprintf(msg, cap, "%s: no readable image", split);
    rc = k == 0 && out->n > 0 ? 0 : -1;
  }
  rt_loader_free(l);
  rt_folder_free(&set);
  return rc;
}

NetStatus net_images_load(const NetModel *m, const NetImagesReq *r, NetImages *out, int64_t *skipped) {
  if (!m || !r || !r->dir || !out) return net_fail(NET_ERR_ARG, "net_images_load: an argument is NULL");
  memset(out, 0, sizeof *out);
  int64_t dropped = 0;
  if (r->kind != NET_DATA_FOLDER && r->kind != NET_DATA_IDX)
    return net_fail(NET_ERR_ARG, "net_images_load: the data must be an ImageFolder split or an IDX folder");
  float mean[3], std[3], scale[3], shift[3];
  net_data_normalization(r->kind, mean, std);
  for (int k = 0; k < 3; k++) {
    if (r->mean3 && r->std3) mean[k] = r->mean3[k], std[k] = r->std3[k];
    scale[k] = 1.0f / (255.0f * std[k]), shift[k] = -mean[k] / std[k];
  }
  int64_t chw[3];
  net_image_numel(m, chw);
  char *msg = net_err_buf();
  int rc = r->kind == NET_DATA_IDX ? from_idx(r, chw, out, scale, shift, msg, NET_ERRMAX)
                                   : from_folder(r, chw, m->classes, out, &dropped, scale, shift, msg, NET_ERRMAX);
  if (skipped) *skipped = dropped;
  if (rc) {
    net_images_free(out);
    return net_failed(NET_ERR_DATA);
  }
  return NET_OK;
}

void net_images_free(NetImages *s) {
  if (!s) return;
  free(s->image);
  free(s->label);
  memset(s, 0, sizeof *s);
}
