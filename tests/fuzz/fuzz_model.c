/* fuzz_model.c - libFuzzer harness for the model.so loader (rt_model_open).
 *
 * The input is a model blob (cg_model.h's format, the bytes of netc_model).
 * The harness wraps it as a sealed file -- an ELF identification, the blob,
 * and a seal with the right SHA-256 (a forged seal, as a hostile file would
 * carry) -- so that every input gets past the digest and exercises what
 * stands behind it: the blob's header and section checks, ir_read and
 * ir_verify of both graphs.  A file whose digest is wrong is refused before
 * any of that (tests/io/model's model.fuzz flips those).  Crashes,
 * sanitizer reports and leaks are findings; a refusal must come with a
 * message naming the file.  run_fuzz_model.sh seeds it with the blob of a
 * model netc writes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg_model.h"
#include "rt_model.h"

enum { ELF_PART = 64 };

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_model.%ld.so", (long)getpid());
  size_t n = ELF_PART + size + CG_MODEL_SEAL;
  unsigned char *f = calloc(1, n);
  if (!f) abort();
  memcpy(f, "\177ELF\2\1\1", 7);
  memcpy(f + ELF_PART, data, size);
  unsigned char *seal = f + ELF_PART + size;
  memcpy(seal, CG_MODEL_SEAL_MAGIC, 8);
  put_u64(seal + 8, ELF_PART);
  put_u64(seal + 16, size);
  cg_model_digest(f, n - CG_MODEL_DIGEST, seal + CG_MODEL_SEAL - CG_MODEL_DIGEST);
  FILE *out = fopen(path, "wb");
  if (!out || fwrite(f, 1, n, out) != n || fclose(out) != 0) abort();
  free(f);
  Arena a;
  arena_init(&a);
  RtModel m;
  char err[4096] = "";
  if (rt_model_open(path, &a, &m, err, sizeof err) && strncmp(err, path, strlen(path)) != 0) {
    fprintf(stderr, "refused without naming the file: %s\n", err);
    abort();
  }
  rt_model_close(&m);
  arena_free(&a);
  return 0;
}
