/* files.c: a program's input operands and -o output (see files.h). */
#include "cli/files.h"

#include <string.h>
#include <unistd.h>

#include "base/io.h"
#include "cli/die.h"

const char *cli_one_input(char **operands, int n)
{
	if (n > 1)
		die(EXIT_USAGE, "one input file at most (got %d)", n);
	return n ? operands[0] : "-";
}

FILE *cli_open_input(const char *path)
{
	lm_err e;
	FILE *fp = io_open_read(path, &e);
	if (!fp)
		die_err(&e);
	/* a program waiting on a terminal in silence looks hung */
	if (!strcmp(path, "-") && isatty(STDIN_FILENO) && isatty(STDERR_FILENO))
		warnmsg("reading standard input from the terminal (Ctrl-D ends it; or give a FILE)");
	return fp;
}

int cli_next_input(cli_inputs *in)
{
	if (in->fp)
		io_close_read(in->fp);
	in->fp = NULL;
	if (in->next >= (in->n ? in->n : 1))
		return 0;
	in->path = in->n ? in->files[in->next] : "-";
	in->next++;
	in->name = io_name(in->path);
	in->fp = cli_open_input(in->path);
	return 1;
}

void cli_output_open(cli_output *o, const char *path)
{
	memset(o, 0, sizeof *o);
	o->fp = stdout;
	o->name = "<stdout>";
	if (!path)
		return;
	lm_err e;
	if (atomic_open(&o->af, path, &e))
		die_err(&e);
	o->fp = o->af.fp;
	o->name = path;
}

void cli_output_commit(cli_output *o)
{
	lm_err e;
	if (o->af.fp && atomic_commit(&o->af, &e))
		die_err(&e);
}
