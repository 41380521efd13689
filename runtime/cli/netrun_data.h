/* netrun_data.h - which data set `netrun train --data DIR` reads: an
 * ImageFolder JPEG set (DIR/train/<class>/<image>.jpg with DIR/test/ or DIR/val/,
 * docs/data.md) when DIR has those folders, else a Fashion-MNIST IDX folder
 * when it has all four files ({train,t10k}-{images-idx3,labels-idx1}-ubyte,
 * each also as .gz).  When neither fits, the message says what each layout
 * lacked, so that a typo in DIR or a half-copied set is told apart from a
 * broken file (which the loaders report when they read it). */
#ifndef NETC_NETRUN_DATA_H
#define NETC_NETRUN_DATA_H

#include <stddef.h>

typedef enum NetrunLayout { NETRUN_LAYOUT_NONE = 0, NETRUN_LAYOUT_FOLDER, NETRUN_LAYOUT_IDX } NetrunLayout;

/* DIR's layout.  FOLDER: train and test hold DIR/train and DIR/test (or
 * DIR/val).  NONE: msg holds "DIR: ..." naming every layout tried and what
 * DIR lacks for it (or why DIR itself cannot be read). */
NetrunLayout netrun_data_layout(const char *dir, char *train, char *test, size_t cap, char *msg, size_t msgcap);

#endif
