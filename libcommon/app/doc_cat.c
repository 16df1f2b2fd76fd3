/* doc_cat.c: the doc-cat program's work (see doc_cat.h): the range
 * operand, the output file, one docs_copy per input; the plan's lines. */
#include "app/doc_cat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"
#include "cli/options.h"

int doc_cat(doc_cat_opts *o, const char *const *files, int n, docs_stats *st, lm_err *e)
{
	static const char *const stdin_only[] = { "-" };
	o->docs.start = 0;
	o->docs.end = DOCS_TO_END;
	if (o->range && n != 1)
		return lm_usage_err(e, "--range needs exactly one FILE");
	if (o->range && opt_parse_range(o->range, &o->docs.start, &o->docs.end, DOCS_TO_END, e))
		return -1;
	if (n == 0) {
		files = stdin_only;
		n = 1;
	}
	atomic_file af = { 0 };
	FILE *out = stdout;
	const char *oname = "<stdout>";
	if (o->output) {
		if (atomic_open(&af, o->output, e))
			return -1;
		out = af.fp;
		oname = o->output;
	}
	int rc = 0;
	for (int i = 0; !rc && i < n; i++)
		rc = docs_copy(&o->docs, files[i], out, oname, st, e);
	if (o->output && rc)
		atomic_abort(&af);
	else if (o->output)
		rc = atomic_commit(&af, e);
	return rc;
}

int doc_cat_plan(const char *const *files, int n, uint64_t piece_bytes, const docs_opts *sizes,
		 FILE *out, lm_err *e)
{
	for (int i = 0; i < n; i++)
		if (strpbrk(files[i], "\t\n"))
			return lm_usage_err(e, "%s: a tab or newline in a file name cannot be "
					    "planned", files[i]);
	docs_piece *v;
	size_t k;
	if (docs_plan(files, n, piece_bytes, &v, &k, e))
		return -1;
	uint64_t *bytes = sizes ? malloc((k ? k : 1) * sizeof *bytes) : NULL;
	if (sizes && !bytes) {
		free(v);
		return lm_seterr(e, "out of memory");
	}
	if (sizes)
		docs_plan_bytes(sizes, v, k, bytes);
	for (size_t i = 0; i < k; i++) {
		if (v[i].end == DOCS_TO_END)
			fprintf(out, "%s\t%llu\t-", v[i].path, (unsigned long long)v[i].start);
		else
			fprintf(out, "%s\t%llu\t%llu", v[i].path, (unsigned long long)v[i].start,
				(unsigned long long)v[i].end);
		if (sizes)
			fprintf(out, "\t%llu", (unsigned long long)bytes[i]);
		fputc('\n', out);
	}
	free(bytes);
	free(v);
	return 0;
}
