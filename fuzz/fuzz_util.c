/* fuzz_util.c: scratch files and streams for the harnesses (see fuzz.h). */
#include "fuzz.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* At exit: the scratch directory and what the harness left in it. */
static void remove_dir(void)
{
	DIR *d = opendir(dir);
	char p[320];
	for (struct dirent *de; d && (de = readdir(d));)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

const char *fuzz_path(const char *name)
{
	static char path[4][320];
	static int k;
	if (!dir[0]) {
		/* in memory where there is /dev/shm: the harnesses write a file per run */
		snprintf(dir, sizeof dir, "%s/lmpipe-fuzz.%ld",
			 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", (long)getpid());
		if (mkdir(dir, 0700) && access(dir, W_OK))
			abort();
		atexit(remove_dir);
	}
	k = (k + 1) % 4;
	snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
	return path[k];
}

int fuzz_write_file(const char *path, const void *data, size_t size)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		return -1;
	int bad = size && fwrite(data, 1, size, fp) != size;
	return fclose(fp) || bad ? -1 : 0;
}

FILE *fuzz_stream(const uint8_t *data, size_t size)
{
	static const char empty[1];
	/* fmemopen of size 0 fails: read a 0-byte window of a 1-byte buffer */
	FILE *fp = size ? fmemopen((void *)data, size, "rb") : fmemopen((void *)empty, 1, "rb");
	if (fp && !size)
		fgetc(fp);
	return fp;
}
