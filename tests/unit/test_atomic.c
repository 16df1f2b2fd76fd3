/* test_atomic.c: whole-or-nothing output files and lm_err messages. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "base/atomic.h"
#include "base/io.h"

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

int main(void)
{
	char dir[] = "/tmp/lmpipe-atomic.XXXXXX", path[256];
	lm_err e;
	atomic_file af;
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(path, sizeof path, "%s/out.bin", dir);

	is_int(atomic_open(&af, path, &e), 0, "open");
	fputs("hello", af.fp);
	ok(!exists(path), "nothing under the final name before commit");
	ok(exists(af.tmp), "temporary file exists");
	is_int(atomic_commit(&af, &e), 0, "commit");
	ok(exists(path), "final file after commit");

	uint8_t *buf;
	size_t len;
	is_int(io_read_file(path, &buf, &len, &e), 0, "read back");
	ok(len == 5 && !memcmp(buf, "hello", 5), "contents intact");
	free(buf);

	is_int(atomic_open(&af, path, &e), 0, "open again");
	char tmp[256];
	snprintf(tmp, sizeof tmp, "%s", af.tmp);
	fputs("partial", af.fp);
	atomic_abort(&af);
	ok(!exists(tmp), "abort removes the temporary file");
	is_int(io_read_file(path, &buf, &len, &e), 0, "old file untouched");
	ok(len == 5, "old contents kept");
	free(buf);

	is_int(atomic_open(&af, path, &e), 0, "open a third time");
	snprintf(tmp, sizeof tmp, "%s", af.tmp);
	atomic_abort_all();
	ok(!exists(tmp), "abort_all removes pending files");
	atomic_abort(&af);

	is_int(atomic_open(&af, "/nonexistent-dir/x", &e), -1, "open in a missing directory fails");
	ok(strstr(e.msg, "/nonexistent-dir/x: No such file or directory") != NULL,
	   "message names the file and the reason: %s", e.msg);

	errno = ENOENT;
	lm_seterr(&e, "plain");
	is_str(e.msg, "plain", "no colon, no strerror");
	is_int(io_read_file("/nonexistent-file", &buf, &len, &e), -1, "missing input");
	is_str(e.msg, "/nonexistent-file: No such file or directory", "input error message");

	lm_seterr(&e, "bad thing");
	lm_err_prefix(&e, "%s line %d", "x.txt", 3);
	is_str(e.msg, "x.txt line 3: bad thing", "lm_err_prefix prepends");

	unlink(path);
	rmdir(dir);
	return done_testing();
}
