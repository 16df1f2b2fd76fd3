/* version.c: the build's version string (see version.h); the Makefile
 * defines LMPIPE_BUILD for this file alone and rebuilds it when it changes. */
#include "base/version.h"

#ifndef LMPIPE_BUILD
#define LMPIPE_BUILD "unknown"
#endif

const char *lmpipe_build(void)
{
	return LMPIPE_BUILD;
}
