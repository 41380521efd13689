/* arena.c - the per-compile bump allocator (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK_MIN = 64 * 1024, ALIGN = 16 };

struct ArenaChunk {
  ArenaChunk *next;
  size_t cap, off;
  _Alignas(16) unsigned char data[];
};

void arena_init(Arena *a) { memset(a, 0, sizeof *a); }

void arena_free(Arena *a) {
  if (!a) return;
  for (ArenaChunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  memset(a, 0, sizeof *a);
}

void *arena_alloc(Arena *a, size_t n) {
  if (n > SIZE_MAX / 2) {
    a->oom = 1;
    return NULL;
  }
  n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  if (n == 0) n = ALIGN;
  ArenaChunk *c = a->head;
  if (!c || c->cap - c->off < n) {
    size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
    c = malloc(sizeof *c + cap);
    if (!c) {
      a->oom = 1;
      return NULL;
    }
    c->cap = cap;
    c->off = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->off;
  c->off += n;
  a->used += n;
  memset(p, 0, n);
  return p;
}

void *arena_grow(Arena *a, void *p, size_t old_n, size_t new_n) {
  void *q = arena_alloc(a, new_n);
  if (q && p && old_n) memcpy(q, p, old_n < new_n ? old_n : new_n);
  return q;
}

void *arena_reserve(Arena *a, void *arr, size_t elem, int *cap) {
  int ncap = *cap ? 2 * *cap : 8;
  if (ncap < *cap) return NULL;
  void *q = arena_grow(a, arr, elem * (size_t)*cap, elem * (size_t)ncap);
  if (q) *cap = ncap;
  return q;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *d = arena_alloc(a, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *d = arena_alloc(a, (size_t)n + 1);
  if (!d) return NULL;
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}
