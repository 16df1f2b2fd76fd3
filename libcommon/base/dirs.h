/* dirs.h: making the directories an output path needs (mkdir -p). */
#ifndef LMPIPE_DIRS_H
#define LMPIPE_DIRS_H

#include "base/err.h"

/* Make every missing directory above the file path ("data/train" makes
 * "data/").  A component that exists but is not a directory is an error. */
int dirs_make_parents(const char *path, lm_err *e);

#endif
