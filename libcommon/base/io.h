/* io.h: small checked I/O helpers shared by the programs.  "-" names stdin
 * or stdout.  All return 0 or -1 with a message naming the file. */
#ifndef LMPIPE_IO_H
#define LMPIPE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

/* Open for reading; "-" or NULL gives stdin. */
FILE *io_open_read(const char *path, lm_err *e);
/* Close what io_open_read opened (stdin is left open). */
void io_close_read(FILE *fp);

/* Read up to n bytes; *got is what was read (0 at end of file). */
int io_read_some(FILE *fp, void *buf, size_t n, size_t *got, const char *name, lm_err *e);
/* Write n bytes. */
int io_write_all(FILE *fp, const void *buf, size_t n, const char *name, lm_err *e);

/* Read a whole file into a malloc'd buffer (with a NUL after the data). */
int io_read_file(const char *path, uint8_t **buf, size_t *len, lm_err *e);

/* Display name for a path: "<stdin>" for "-" or NULL. */
const char *io_name(const char *path);

#endif
