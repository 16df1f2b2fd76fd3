/* task_pick.c: a seeded sample of task records without replacement, in a
 * seeded order (lm-task gsm8k --seed): reservoir sampling over the records
 * as they are read, then a Fisher-Yates shuffle (see task.h). */
#include "tasks/task.h"

#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

/* The shuffle's draws are counted from here, apart from the reservoir's
 * (one a record read). */
static const uint64_t SHUFFLE_DRAWS = 1ull << 62;

void task_pick_init(task_pick *p, uint64_t want, uint64_t seed)
{
	memset(p, 0, sizeof *p);
	p->want = want;
	p->seed = seed;
}

static int add(task_item *it, void *ctx, lm_err *e)
{
	task_pick *p = ctx;
	uint64_t i = p->seen++;
	if (p->n < p->want) {
		if (p->n == p->cap) {
			uint64_t cap = p->cap ? p->cap * 2 : 64;
			if (cap > p->want)
				cap = p->want;
			task_item *grown = cap <= SIZE_MAX / sizeof *grown
						   ? realloc(p->it, (size_t)cap * sizeof *grown)
						   : NULL;
			if (!grown)
				return lm_seterr(e, "out of memory (a sample of %llu records)",
						 (unsigned long long)cap);
			p->it = grown;
			p->cap = cap;
		}
		p->it[p->n++] = *it;
	} else {
		/* record i replaces a kept one with probability want / (i + 1) */
		uint64_t j = lm_draw_below(p->seed, i, i + 1);
		if (j >= p->want)
			return 0;
		task_item_free(&p->it[j]);
		p->it[j] = *it;
	}
	memset(it, 0, sizeof *it); /* taken */
	return 0;
}

int task_pick_gsm8k(task_pick *p, FILE *in, const char *in_name, lm_err *e)
{
	return task_gsm8k_read(in, in_name, add, p, NULL, e);
}

int task_pick_write(task_pick *p, FILE *fp, const char *tmpl, int with_response,
		    const char *name, lm_err *e)
{
	for (uint64_t i = p->n; i > 1; i--) {
		uint64_t j = lm_draw_below(p->seed, SHUFFLE_DRAWS + i, i);
		task_item t = p->it[i - 1];
		p->it[i - 1] = p->it[j];
		p->it[j] = t;
	}
	for (uint64_t i = 0; i < p->n; i++)
		if (task_write(fp, tmpl, &p->it[i], with_response, name, e))
			return -1;
	return 0;
}

void task_pick_free(task_pick *p)
{
	for (uint64_t i = 0; i < p->n; i++)
		task_item_free(&p->it[i]);
	free(p->it);
	memset(p, 0, sizeof *p);
}
