/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader
 * (rt_st_open_memory, runtime/io/rt_safetensors.c).
 *
 * The input is the bytes of a file.  Whatever the reader accepts must keep
 * its promises (rt_safetensors.h): every tensor's bytes lie inside the
 * input after the header, nbytes is numel times the dtype's size, numel is
 * the product of the shape, names are unique and found by rt_st_find, and
 * every __metadata__ entry is found by rt_st_meta_get; the harness reads
 * every byte of every tensor so that the sanitizers see a pointer outside
 * the buffer.  A refusal must come with a message naming the input.
 * Crashes, sanitizer reports and leaks are findings.  run_fuzz_safetensors.sh
 * seeds it with files netc's writer makes (fuzz_st_seed.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_safetensors.h"

static const char LABEL[] = "fuzz.safetensors";

static void fail(const char *what, const char *name) {
  fprintf(stderr, "accepted, but %s (%s)\n", what, name ? name : "");
  abort();
}

static void check_tensor(const RtStFile *f, const RtStTensor *t, const uint8_t *data, size_t size) {
  const uint8_t *body = data + 8, *end = data + size;
  if (!t->name || !*t->name) fail("a tensor has no name", NULL);
  if (rt_st_find(f, t->name) != t) fail("rt_st_find gives another tensor", t->name);
  if (t->dtype < 0 || t->dtype >= RT_ST_DTYPE_COUNT || t->ndim < 0) fail("a bad dtype or rank", t->name);
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) fail("a negative dimension", t->name);
    numel *= t->shape[d];
  }
  if (numel != t->numel) fail("numel is not the product of the shape", t->name);
  if ((uint64_t)t->numel * rt_st_dtype_size(t->dtype) != t->nbytes) fail("nbytes is not numel x size", t->name);
  const uint8_t *p = t->data;
  if (t->nbytes && (!p || p < body || p > end || t->nbytes > (size_t)(end - p)))
    fail("its data leave the input", t->name);
  unsigned sum = 0;
  for (size_t i = 0; i < t->nbytes; i++) sum += p[i];
  if (sum == 0xdeadbeefu) fprintf(stderr, "%u\n", sum); /* keeps the reads */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a copy of exactly `size` bytes, so that a read past the end is caught */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) abort();
  memcpy(buf, data, size);
  RtStFile *f = NULL;
  char err[RT_ST_ERRMAX] = "";
  RtStStatus s = rt_st_open_memory(buf, size, LABEL, &f, err, sizeof err);
  if (s != RT_ST_OK) {
    if (f) fail("a refusal left a handle", NULL);
    if (strncmp(err, LABEL, strlen(LABEL)) != 0) {
      fprintf(stderr, "refused without naming the input: %s\n", err);
      abort();
    }
    free(buf);
    return 0;
  }
  size_t n = rt_st_count(f);
  for (size_t i = 0; i < n; i++) {
    const RtStTensor *t = rt_st_tensor(f, i);
    if (!t) fail("rt_st_tensor gives NULL below rt_st_count", NULL);
    check_tensor(f, t, buf, size);
  }
  for (size_t i = 0; i < rt_st_meta_count(f); i++) {
    const char *key = NULL, *value = NULL;
    rt_st_meta_at(f, i, &key, &value);
    if (!key || !value) fail("a metadata entry without key or value", key);
    const char *got = rt_st_meta_get(f, key);
    if (!got) fail("rt_st_meta_get misses a key", key);
  }
  rt_st_close(f);
  free(buf);
  return 0;
}
