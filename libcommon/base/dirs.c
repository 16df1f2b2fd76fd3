/* dirs.c: mkdir -p of an output file's parents (see dirs.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int dirs_make_parents(const char *path, lm_err *e)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return 0;
	char *p = strndup(path, (size_t)(slash - path));
	if (!p)
		return lm_seterr(e, "out of memory");
	int rc = 0;
	for (char *c = p + 1; !rc; c++) {
		char was = *c;
		if (was != '/' && was != '\0')
			continue;
		*c = '\0';
		struct stat st;
		if (mkdir(p, 0777) && errno != EEXIST)
			rc = lm_seterr(e, "%s:", p);
		else if (stat(p, &st) || !S_ISDIR(st.st_mode))
			rc = lm_seterr(e, "%s: not a directory", p);
		*c = was;
		if (!was)
			break;
	}
	free(p);
	return rc;
}
