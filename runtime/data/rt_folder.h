/* rt_folder.h - an ImageFolder tree: ROOT/<class>/<image>.jpg.
 *
 * The class folders, sorted by name (strcmp), are the labels 0, 1, ...;
 * within a class the files are sorted by name, and image i of the set is
 * the i-th in (class, file) order.  Files count when their names end in
 * .jpg, .jpeg or .JPEG (also .JPG); hidden entries and other files are
 * ignored.  A missing or unreadable root, a root without class folders, a
 * class folder without images, and more classes than max_classes are
 * errors with "ROOT: what is wrong" in the caller's buffer. */
#ifndef NETC_RT_FOLDER_H
#define NETC_RT_FOLDER_H

#include <stddef.h>
#include <stdint.h>

typedef enum RtFolderStatus {
  RT_FOLDER_OK = 0,
  RT_FOLDER_ERR_IO,
  RT_FOLDER_ERR_LAYOUT,
  RT_FOLDER_ERR_NOMEM
} RtFolderStatus;

typedef struct RtFolder {
  int nclass;
  char **classes;  /* nclass names */
  int64_t n;       /* images */
  char **paths;    /* n paths, ROOT/<class>/<file> */
  int32_t *labels; /* n class indices */
  char *pool;      /* the strings */
  size_t pool_len, pool_cap;
} RtFolder;

/* max_classes <= 0: no limit. */
RtFolderStatus rt_folder_scan(const char *root, int max_classes, RtFolder *out, char *err, size_t errmax);
void rt_folder_free(RtFolder *f); /* takes NULL; leaves *f zeroed */

#endif
