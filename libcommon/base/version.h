/* version.h: which lmpipe a program is: the git commit it was built from. */
#ifndef LMPIPE_VERSION_H
#define LMPIPE_VERSION_H

/* "git describe --always --dirty" of the tree at build time (a commit, with
 * "-dirty" for uncommitted changes), or "unknown" outside a git checkout. */
const char *lmpipe_build(void);

#endif
