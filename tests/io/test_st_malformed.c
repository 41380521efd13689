/* test_st_malformed.c - the safetensors reader refuses broken files, each
 * with a message that names the file and says what is wrong.
 *
 * Each case is a header (as literal JSON) plus a data size, or raw bytes
 * where the length field itself is the fault; the case is written to a
 * file, opened, and must fail with RT_ST_ERR_FORMAT (or IO), no handle,
 * and a message containing the path and the expected phrase. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "rt_safetensors.h"
#include "tmpdir.h"

typedef struct Case {
  const char *what;
  const char *header; /* NULL: raw bytes below are the whole file */
  size_t data_len;    /* zero bytes of data after the header */
  int64_t hlen;       /* -1: the header's real length */
  const char *raw;
  size_t raw_len;
  const char *expect;
} Case;

#define T(name, dtype, shape, offs) \
  "\"" name "\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": " offs "}"

static const Case CASES[] = {
    {"empty file", NULL, 0, -1, "", 0, "file too short (0 bytes"},
    {"five bytes", NULL, 0, -1, "\x02\0\0\0\0", 5, "file too short (5 bytes"},
    {"header past the end", "{}", 0, 200, NULL, 0,
     "header length 200 runs past the end of the file (2 bytes follow it)"},
    {"header over 100 MB", "{}", 0, 100000001, NULL, 0, "header length 100000001 is over the limit of 100000000 bytes"},
    {"header length 2^63", "{}", 0, INT64_MAX, NULL, 0, "is over the limit"},
    {"invalid JSON", "{\"a\": {\"dtype\": ", 0, -1, NULL, 0, "header is not valid JSON"},
    {"NUL in header", NULL, 0, -1, "\x03\0\0\0\0\0\0\0{}\0", 11,
     "header has junk after its JSON object (at header byte 2)"},
    {"junk after JSON", "{} x", 0, -1, NULL, 0, "header has junk after its JSON object (at header byte 3)"},
    {"array header", "[1, 2]", 0, -1, NULL, 0, "header is not a JSON object"},
    {"unknown dtype", "{" T("w", "F33", "[1]", "[0, 4]") "}", 4, -1, NULL, 0, "tensor 'w': unknown dtype 'F33'"},
    {"lower-case dtype", "{" T("w", "f32", "[1]", "[0, 4]") "}", 4, -1, NULL, 0, "unknown dtype 'f32'"},
    {"shape overflow", "{" T("big", "F32", "[4294967296, 4294967296, 4294967296]", "[0, 4]") "}", 4, -1, NULL, 0,
     "tensor 'big': shape product overflows"},
    {"bytes overflow", "{" T("big", "F64", "[9007199254740992, 256]", "[0, 8]") "}", 8, -1, NULL, 0,
     "tensor 'big': shape product overflows"},
    {"negative dim", "{" T("w", "F32", "[-1]", "[0, 4]") "}", 4, -1, NULL, 0,
     "tensor 'w': shape entry 0 is not a non-negative integer"},
    {"fractional dim", "{" T("w", "F32", "[2, 1.5]", "[0, 12]") "}", 12, -1, NULL, 0,
     "shape entry 1 is not a non-negative integer"},
    {"offsets out of range", "{" T("w", "F32", "[100]", "[0, 400]") "}", 16, -1, NULL, 0,
     "tensor 'w': data_offsets [0, 400] out of range (data section is 16 bytes)"},
    {"offsets reversed", "{" T("w", "U8", "[0]", "[8, 4]") "}", 8, -1, NULL, 0, "data_offsets [8, 4] out of range"},
    {"offsets not a pair", "{" T("w", "U8", "[4]", "[0, 4, 8]") "}", 8, -1, NULL, 0,
     "tensor 'w': data_offsets is not a pair of non-negative integers"},
    {"offsets fractional", "{" T("w", "U8", "[1]", "[0.5, 1.5]") "}", 2, -1, NULL, 0, "data_offsets is not a pair"},
    {"overlap", "{" T("a", "F32", "[2]", "[0, 8]") ", " T("b", "F32", "[2]", "[4, 12]") "}", 12, -1, NULL, 0,
     "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
    {"same range twice", "{" T("a", "F32", "[2]", "[0, 8]") ", " T("b", "I32", "[2]", "[0, 8]") "}", 8, -1, NULL, 0,
     "overlap"},
    {"size mismatch", "{" T("w", "F32", "[2]", "[0, 12]") "}", 12, -1, NULL, 0,
     "tensor 'w': data_offsets [0, 12] hold 12 bytes but its shape and dtype F32 need 8"},
    {"duplicate names",
     "{" T("layer1.0.bn2.running_mean", "F32", "[1]", "[0, 4]") ", " T("layer1.0.bn2.running_mean", "F32", "[1]",
                                                                       "[4, 8]") "}",
     8, -1, NULL, 0, "duplicate tensor name 'layer1.0.bn2.running_mean'"},
    {"trailing garbage", "{" T("w", "F32", "[4]", "[0, 16]") "}", 20, -1, NULL, 0,
     "trailing garbage: 4 bytes after the last tensor's data"},
    {"data but no tensors", "{}", 3, -1, NULL, 0, "trailing garbage: 3 bytes"},
    {"gap", "{" T("a", "U8", "[2]", "[0, 2]") ", " T("b", "U8", "[2]", "[4, 6]") "}", 6, -1, NULL, 0,
     "gap of 2 unused bytes before tensor 'b'"},
    {"gap at start", "{" T("a", "U8", "[2]", "[2, 4]") "}", 4, -1, NULL, 0, "gap of 2 unused bytes before tensor 'a'"},
    {"missing shape", "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, -1, NULL, 0,
     "tensor 'w': missing \"shape\""},
    {"unknown key",
     "{\"w\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4], "
     "\"foo\": 1}}",
     4, -1, NULL, 0, "tensor 'w': unknown key 'foo'"},
    {"key twice",
     "{\"w\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [], "
     "\"data_offsets\": [0, 4]}}",
     4, -1, NULL, 0, "tensor 'w': key 'dtype' given twice"},
    {"entry not object", "{\"w\": [1, 2]}", 0, -1, NULL, 0, "tensor 'w': entry is not a JSON object"},
    {"dtype not string", "{\"w\": {\"dtype\": 5, \"shape\": [], \"data_offsets\": [0, 4]}}", 4, -1, NULL, 0,
     "tensor 'w': dtype is not a string"},
    {"shape not array", "{\"w\": {\"dtype\": \"U8\", \"shape\": 3, \"data_offsets\": [0, 3]}}", 3, -1, NULL, 0,
     "tensor 'w': shape is not a JSON array"},
    {"empty name", "{" T("", "U8", "[1]", "[0, 1]") "}", 1, -1, NULL, 0, "a tensor has an empty name"},
    {"metadata not strings", "{\"__metadata__\": {\"epoch\": 3}}", 0, -1, NULL, 0,
     "metadata value for 'epoch' is not a string"},
    {"metadata not object", "{\"__metadata__\": \"x\"}", 0, -1, NULL, 0, "\"__metadata__\" is not a JSON object"},
    {"metadata twice", "{\"__metadata__\": {}, \"__metadata__\": {}}", 0, -1, NULL, 0,
     "\"__metadata__\" appears twice"},
    {"metadata key twice", "{\"__metadata__\": {\"a\": \"1\", \"a\": \"2\"}}", 0, -1, NULL, 0,
     "duplicate metadata key 'a'"},
};

/* Writes one case's file: length field, header, data_len zero bytes. */
static int write_case(const char *path, const Case *c) {
  if (!c->header) return file_write(path, c->raw, c->raw_len);
  size_t len = strlen(c->header);
  uint64_t field = c->hlen < 0 ? (uint64_t)len : (uint64_t)c->hlen;
  size_t total = 8 + len + c->data_len;
  unsigned char *buf = calloc(1, total);
  if (!buf) return 0;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(field >> (8 * i));
  memcpy(buf + 8, c->header, len);
  int ok = file_write(path, buf, total);
  free(buf);
  return ok;
}

int main(void) {
  char dir[256];
  if (!tmpdir_make(dir, sizeof dir, "st-malformed")) return check_skip("cannot make a temporary directory");
  size_t n = sizeof CASES / sizeof CASES[0];
  for (size_t i = 0; i < n; i++) {
    const Case *c = &CASES[i];
    char path[600], err[RT_ST_ERRMAX];
    snprintf(path, sizeof path, "%s/case%02zu.safetensors", dir, i);
    CHECK(write_case(path, c), "%s: cannot write %s", c->what, path);
    RtStFile *f = (RtStFile *)&err; /* must be reset to NULL */
    memset(err, 'x', sizeof err);
    RtStStatus st = rt_st_open(path, &f, err, sizeof err);
    CHECK(st == RT_ST_ERR_FORMAT, "%s: status %d (%s)", c->what, (int)st, err);
    CHECK(f == NULL, "%s: handle returned", c->what);
    CHECK(strncmp(err, path, strlen(path)) == 0 && strncmp(err + strlen(path), ": ", 2) == 0,
          "%s: message does not start with the path: %s", c->what, err);
    CHECK(strstr(err, c->expect) != NULL, "%s:\n  got:  %s\n  want: ...%s...", c->what, err, c->expect);
    if (f != NULL && f != (RtStFile *)&err) rt_st_close(f);
  }
  printf("%zu malformed files checked\n", n);

  /* A missing file and a directory are I/O errors, also naming the path. */
  char path[600], err[RT_ST_ERRMAX];
  snprintf(path, sizeof path, "%s/no-such.safetensors", dir);
  RtStFile *f = NULL;
  CHECK(rt_st_open(path, &f, err, sizeof err) == RT_ST_ERR_IO && f == NULL, "missing file");
  CHECK(strstr(err, path) && strstr(err, "cannot open: No such file"), "missing: %s", err);
  CHECK(rt_st_open(dir, &f, err, sizeof err) == RT_ST_ERR_IO && f == NULL, "directory");
  CHECK(strstr(err, "not a regular file (a directory)") != NULL, "directory: %s", err);
  /* a device and a FIFO with no writer: refused at once, never read or waited on */
  CHECK(rt_st_open("/dev/zero", &f, err, sizeof err) == RT_ST_ERR_IO && f == NULL, "/dev/zero");
  CHECK(strstr(err, "/dev/zero: not a regular file (a character device)") != NULL, "/dev/zero: %s", err);
  char fifo[600];
  snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
  CHECK(mkfifo(fifo, 0644) == 0, "mkfifo %s", fifo);
  CHECK(rt_st_open(fifo, &f, err, sizeof err) == RT_ST_ERR_IO && f == NULL, "FIFO");
  CHECK(strstr(err, "not a regular file (a FIFO)") != NULL, "FIFO: %s", err);
  unlink(fifo);

  /* A tiny error buffer is filled without overflow; none at all is fine. */
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  CHECK(rt_st_open(path, &f, tiny, 4) == RT_ST_ERR_IO && tiny[3] == '\0' && tiny[4] == 'x', "tiny buffer");
  CHECK(rt_st_open(path, &f, NULL, 0) == RT_ST_ERR_IO, "no buffer");

  /* A message from the in-memory reader names its label. */
  static const char bad[] = "\x02\0\0\0\0\0\0\0[]";
  CHECK(rt_st_open_memory(bad, sizeof bad - 1, "<weights blob>", &f, err, sizeof err) == RT_ST_ERR_FORMAT, "memory");
  CHECK(strcmp(err, "<weights blob>: header is not a JSON object") == 0, "memory: %s", err);

  tmpdir_remove(dir);
  return check_report();
}
