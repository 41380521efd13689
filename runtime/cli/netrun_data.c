/* netrun_data.c - the data set layout of `netrun train --data DIR`
 * (netrun_data.h). */
#include "netrun_data.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* the IDX files net_train's load_idx reads, each plain or .gz */
static const char *const IDX_FILES[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};

static const char FOLDER_LAYOUT[] = "ImageFolder (DIR/train/<class>/*.jpg and DIR/test/ or DIR/val/)";
static const char IDX_LAYOUT[] = "Fashion-MNIST IDX ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])";

/* 1 when path is a folder; else 0 with why: "" when nothing is there, else
 * what is wrong ("not a folder", "Too many levels of symbolic links"). */
static int folder_at(const char *path, char *why, size_t cap) {
  struct stat st;
  why[0] = 0;
  if (stat(path, &st) != 0) {
    if (errno != ENOENT) snprintf(why, cap, "%s", strerror(errno));
    return 0;
  }
  if (S_ISDIR(st.st_mode)) return 1;
  snprintf(why, cap, "not a folder");
  return 0;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Appends to s (of cap bytes) while it has room. */
static void add(char *s, size_t cap, const char *what) {
  size_t len = strlen(s);
  if (len + 1 < cap) snprintf(s + len, cap - len, "%s", what);
}

/* " (why)" after s, when there is a why. */
static void add_why(char *s, size_t cap, const char *why) {
  if (!*why) return;
  add(s, cap, " (");
  add(s, cap, why);
  add(s, cap, ")");
}

NetrunLayout netrun_data_layout(const char *dir, char *train, char *test, size_t cap, char *msg, size_t msgcap) {
  char why[160];
  msg[0] = 0;
  if (!folder_at(dir, why, sizeof why)) {
    snprintf(msg, msgcap, "%s: %s; --data takes a folder holding an %s or a %s data set", dir,
             *why ? why : "no such folder", FOLDER_LAYOUT, IDX_LAYOUT);
    return NETRUN_LAYOUT_NONE;
  }
  /* ImageFolder: train/ and test/ (or val/) */
  char twhy[160], vwhy[160], val[4096];
  snprintf(train, cap, "%s/train", dir);
  snprintf(test, cap, "%s/test", dir);
  snprintf(val, sizeof val, "%s/val", dir);
  int has_train = folder_at(train, why, sizeof why), has_test = folder_at(test, twhy, sizeof twhy);
  int has_val = !has_test && folder_at(val, vwhy, sizeof vwhy);
  if (has_val) snprintf(test, cap, "%s", val);
  if (has_train && (has_test || has_val)) return NETRUN_LAYOUT_FOLDER;
  /* IDX: the four files */
  char missing[1024] = "", path[4096];
  int lacks = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, IDX_FILES[i]);
    if (exists(path)) continue;
    snprintf(path, sizeof path, "%s/%s.gz", dir, IDX_FILES[i]);
    if (exists(path)) continue;
    add(missing, sizeof missing, lacks++ ? ", " : "");
    add(missing, sizeof missing, IDX_FILES[i]);
    add(missing, sizeof missing, "[.gz]");
  }
  if (!lacks) return NETRUN_LAYOUT_IDX;
  char folder[1024] = "";
  if (!has_train) {
    add(folder, sizeof folder, "no train/ folder");
    add_why(folder, sizeof folder, why);
  }
  if (!has_test && !has_val) {
    add(folder, sizeof folder, has_train ? "no " : " and no ");
    add(folder, sizeof folder, "test/ or val/ folder");
    add_why(folder, sizeof folder, twhy);
  }
  snprintf(msg, msgcap, "%s: not a data set netrun reads; tried\n  %s: %s\n  %s: no %s", dir, FOLDER_LAYOUT, folder,
           IDX_LAYOUT, missing);
  return NETRUN_LAYOUT_NONE;
}
