/* profile.c: the per-op profiler of profile.h.  Spans are kept as pairs of
 * marks until prof_rows resolves them (after the device is done), then
 * folded into one total per name. */
#include "model/profile.h"

#include <stdlib.h>
#include <string.h>


typedef struct span {
	void *from, *to;
	int row;
	double flops, bytes;
} span;

struct lm_profile {
	span *spans;
	size_t n, cap;
	lm_prof_row *rows;
	int n_rows, cap_rows, paused;
};

int prof_attach(lm_backend *be, lm_err *e)
{
	if (!be->mark)
		return lm_seterr(e, "the %s backend cannot be profiled", be->name);
	be->prof = calloc(1, sizeof *be->prof);
	return be->prof ? 0 : lm_seterr(e, "out of memory");
}

static void drop_spans(lm_backend *be, lm_profile *p)
{
	for (size_t i = 0; i < p->n; i++) {
		be->mark_free(be, p->spans[i].from);
		be->mark_free(be, p->spans[i].to);
	}
	p->n = 0;
}

void prof_detach(lm_backend *be)
{
	lm_profile *p = be->prof;
	if (!p)
		return;
	drop_spans(be, p);
	free(p->spans);
	free(p->rows);
	free(p);
	be->prof = NULL;
}

void prof_pause(lm_backend *be, int paused)
{
	if (be->prof)
		be->prof->paused = paused;
}

prof_span prof_begin(lm_backend *be, const char *name)
{
	prof_span s = { NULL, name };
	if (be->prof->paused)
		return s;
	if (be->range)
		be->range(be, name);
	s.from = be->mark(be);
	return s;
}

static int row_of(lm_profile *p, const char *name)
{
	for (int i = 0; i < p->n_rows; i++)
		if (!strncmp(p->rows[i].name, name, PROF_NAME_MAX - 1))
			return i;
	if (p->n_rows == p->cap_rows) {
		int cap = p->cap_rows ? 2 * p->cap_rows : 32;
		lm_prof_row *r = realloc(p->rows, cap * sizeof *r);
		if (!r)
			return -1;
		p->rows = r;
		p->cap_rows = cap;
	}
	lm_prof_row *r = &p->rows[p->n_rows];
	memset(r, 0, sizeof *r);
	strncpy(r->name, name, PROF_NAME_MAX - 1);
	return p->n_rows++;
}

void prof_end(lm_backend *be, prof_span *s, double flops, double bytes)
{
	lm_profile *p = be->prof;
	if (!s->from)
		return;
	void *to = be->mark(be);
	if (be->range)
		be->range(be, NULL);
	int row = row_of(p, s->name);
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 1024;
		span *sp = realloc(p->spans, cap * sizeof *sp);
		if (sp) {
			p->spans = sp;
			p->cap = cap;
		}
	}
	if (!to || row < 0 || p->n == p->cap) {
		be->mark_free(be, s->from);
		be->mark_free(be, to);
		return;
	}
	p->spans[p->n++] = (span){ s->from, to, row, flops, bytes };
}

static int by_time(const void *a, const void *b)
{
	double x = ((const lm_prof_row *)a)->ms, y = ((const lm_prof_row *)b)->ms;
	return x < y ? 1 : x > y ? -1 : 0;
}

int prof_rows(lm_backend *be, lm_prof_row *rows, int max, lm_err *e)
{
	lm_profile *p = be->prof;
	if (!p)
		return 0;
	if (be->sync(be, e))
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		lm_prof_row *r = &p->rows[p->spans[i].row];
		r->calls++;
		r->ms += be->mark_ms(be, p->spans[i].from, p->spans[i].to);
		r->flops += p->spans[i].flops;
		r->bytes += p->spans[i].bytes;
	}
	drop_spans(be, p);
	int n = p->n_rows < max ? p->n_rows : max;
	lm_prof_row *all = malloc((p->n_rows ? p->n_rows : 1) * sizeof *all);
	if (!all)
		return lm_seterr(e, "out of memory");
	memcpy(all, p->rows, p->n_rows * sizeof *all);
	qsort(all, p->n_rows, sizeof *all, by_time);
	memcpy(rows, all, n * sizeof *rows);
	free(all);
	return n;
}

void prof_write_table(FILE *f, const char *prog, const char *unit, const lm_prof_row *rows, int n,
		      int steps, double wall_ms)
{
	double total = 0;
	for (int i = 0; i < n; i++)
		total += rows[i].ms;
	if (!steps)
		return;
	fprintf(f, "%s: profile of %d %s: %.3f ms a step, %.3f ms of it in ops\n", prog, steps, unit,
		wall_ms / steps, total / steps);
	fprintf(f, "%-28s %7s %10s %6s %9s %8s %8s\n", "op", "calls", "total ms", "share", "ms/call",
		"TFLOP/s", "GB/s");
	for (int i = 0; i < n; i++) {
		const lm_prof_row *r = &rows[i];
		double s = r->ms / 1e3;
		fprintf(f, "%-28s %7lld %10.3f %5.1f%% %9.4f %8.1f %8.1f\n", r->name, r->calls, r->ms,
			total > 0 ? 100 * r->ms / total : 0, r->ms / r->calls,
			s > 0 ? r->flops / s / 1e12 : 0, s > 0 ? r->bytes / s / 1e9 : 0);
	}
}
