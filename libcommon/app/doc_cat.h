/* doc_cat.h: what the doc-cat program does, as library calls: documents
 * of many files as one end-of-text separated stream, or the plan that cuts
 * the files into pieces (man 1 doc-cat). */
#ifndef LMPIPE_DOC_CAT_H
#define LMPIPE_DOC_CAT_H

#include <stdint.h>

#include "base/err.h"
#include "text/docs.h"

typedef struct doc_cat_opts {
	docs_opts docs;
	const char *range;   /* "START:END" (END empty: to the end), or NULL */
	const char *output;  /* NULL: stdout */
	int verbose;         /* a summary line on stderr */
} doc_cat_opts;

/* Write the documents of files (n = 0: stdin) to the output.  A summary,
 * when asked for, is written to stderr by the caller from *st. */
int doc_cat(doc_cat_opts *o, const char *const *files, int n, docs_stats *st, lm_err *e);

/* Print the plan: one line per piece, "PATH<TAB>START<TAB>END", END "-" for
 * the end of the file; with sizes (the documents' format and separator), a
 * fourth column: the bytes of the piece's documents (docs_plan_bytes). */
int doc_cat_plan(const char *const *files, int n, uint64_t piece_bytes, const docs_opts *sizes,
		 FILE *out, lm_err *e);

#endif
