/* arena.h - one bump allocator per compile.
 *
 * Everything a compile makes (AST, IR, strings, diagnostics) is carved out of
 * one Arena and released at once by arena_free().  No object inside is freed
 * by hand.  Allocation failure is reported through arena->oom and a NULL
 * return, never by aborting: callers that cannot continue report
 * "out of memory" through their Diag. */
#ifndef NETC_ARENA_H
#define NETC_ARENA_H

#include <stddef.h>

typedef struct ArenaChunk ArenaChunk;

typedef struct Arena {
  ArenaChunk *head;
  size_t used; /* bytes handed out, for statistics */
  int oom;     /* set once an allocation has failed */
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);                                       /* takes NULL */
void *arena_alloc(Arena *a, size_t n);                           /* zeroed, 16-byte aligned */
void *arena_grow(Arena *a, void *p, size_t old_n, size_t new_n); /* copy into a larger block */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Growable arrays in an arena: ARENA_RESERVE(a, arr, n, cap) makes sure
 * arr (n used of cap) has room for one more element; false when out of
 * memory.  The old block stays in the arena until arena_free(). */
void *arena_reserve(Arena *a, void *arr, size_t elem, int *cap);
#define ARENA_RESERVE(a, arr, n, cap) \
  ((n) < (cap) || ((arr) = arena_reserve((a), (arr), sizeof *(arr), &(cap))) != NULL)

#endif
