/* rt_augment.h - the image transforms of the data pipeline: an RGB picture
 * of any size in, the model's input out as u8 CHW [3, H, W].
 *
 * Training (seeded: the same seed gives the same bytes):
 *   rrc       random-resized crop -- a region of 8-100% of the area with an
 *             aspect ratio in 3/4..4/3, resized bilinearly to HxW -- and a
 *             horizontal flip with probability 1/2 (torchvision's
 *             RandomResizedCrop + RandomHorizontalFlip);
 *   pad_crop  the evaluation transform, then a random HxW window of the
 *             picture padded by 4 zero pixels on each side, and a flip
 *             (the CIFAR recipe);
 *   flip      the evaluation transform and a flip;
 *   none      the evaluation transform.
 * RT_AUG_AUTO picks rrc for inputs of 64 pixels and more, else pad_crop.
 *
 * Evaluation: for inputs of 64 pixels and more, the shorter side resized
 * to H*256/224 and the centre HxW cut out (torchvision's Resize(256) +
 * CenterCrop(224)); smaller inputs get a plain resize to HxW when the
 * picture's size differs, and the bytes as they are when it matches.
 *
 * Bilinear sampling uses pixel centres (align_corners=False) and clamps at
 * the border. */
#ifndef NETC_RT_AUGMENT_H
#define NETC_RT_AUGMENT_H

#include <stdint.h>

#include "rt_jpeg.h"

typedef enum RtAugKind { RT_AUG_AUTO = 0, RT_AUG_RRC, RT_AUG_PAD_CROP, RT_AUG_FLIP, RT_AUG_NONE } RtAugKind;

/* "auto" (or NULL), "rrc", "pad_crop", "flip", "none"; -1 for anything else. */
int rt_augment_parse(const char *name, RtAugKind *kind);
const char *rt_augment_name(RtAugKind kind);
/* The kind that RT_AUG_AUTO stands for at this input size; others unchanged. */
RtAugKind rt_augment_resolve(RtAugKind kind, int H, int W);
/* The shorter side a decode needs for this transform (rt_jpeg's min_short):
 * evaluation needs H*256/224 for large inputs; a random crop twice the
 * input, so that a small crop still has pixels of its own. */
int rt_augment_min_short(RtAugKind kind, int train, int H, int W);

/* A 64-bit seed from (seed, epoch, position): the training transform of
 * one image at one place in one epoch. */
uint64_t rt_augment_seed(uint64_t seed, int64_t epoch, int64_t position);

/* Every transform of large inputs (64 pixels and more: rrc, flip, none and
 * the evaluation transform) is one bilinear sample: the region (x0, y0,
 * cw, ch) of a w x h picture, in its pixels (fractional for the centre
 * crop), resized to HxW with pixel centres (align_corners=False) and
 * clamping at the border, then mirrored when flip.  The GPU decoder's
 * crop kernel (runtime/gpu/rt_gpu_jpeg.c) applies the same window with the
 * same arithmetic. */
typedef struct RtAugWindow {
  double x0, y0, cw, ch;
  int flip;
} RtAugWindow;

/* The window of the training transform (train != 0, drawn from seed) or
 * the evaluation transform for a picture of w x h pixels.  0, or -1 when
 * the transform is not one window (pad_crop; small inputs). */
int rt_augment_window(RtAugKind kind, int train, uint64_t seed, int w, int h, int H, int W, RtAugWindow *win);
/* The window drawn on a picture of w x h mapped onto the same picture
 * decoded at sw x sh (DCT scaling): the same region of the scene. */
RtAugWindow rt_augment_window_scaled(const RtAugWindow *win, int w, int h, int sw, int sh);
/* The shorter side a decode of a w x h picture needs for one window: the
 * largest DCT scale at which the window still covers H x W pixels (to
 * within libjpeg's rounding up of the scaled size), so that no window is
 * sampled up for having been decoded small, and a large one is decoded
 * small. */
int rt_augment_window_min_short(const RtAugWindow *win, int w, int h, int H, int W);
/* The window applied: u8 CHW [3, H, W] into dst. */
void rt_augment_apply(const RtImage *src, const RtAugWindow *win, int H, int W, uint8_t *dst);
/* The pixels rt_augment_apply reads of a w x h picture: columns box[0] to
 * box[2] and rows box[1] to box[3], inclusive (a partial decode needs no
 * more). */
void rt_augment_footprint(const RtAugWindow *win, int w, int h, int H, int W, int box[4]);

void rt_augment_train(const RtImage *src, RtAugKind kind, uint64_t seed, int H, int W, uint8_t *dst);
void rt_augment_eval(const RtImage *src, int H, int W, uint8_t *dst);

#endif
