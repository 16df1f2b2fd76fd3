/* reward_internal.h: what the files of rl-reward's pass (reward_run in
 * reward.h) share: the rollouts held in memory with the fields the scoring
 * reads out of them.
 *
 *   reward.c       the reward functions, the length reward, the spelling
 *                  of numbers
 *   reward_read.c  the lines read, then on threads skimmed
 *                  (base/json_skim.h) or, where the skimmer declines,
 *                  parsed by jansson, their fields taken out and scored
 *   reward_run.c   the pass: scoring by an external program, the length
 *                  penalty, the lines written back, the summary */
#ifndef LMPIPE_REWARD_INTERNAL_H
#define LMPIPE_REWARD_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "tasks/reward.h"

typedef struct rollout {
	char *line;         /* the input line (trimmed as jsonl_next trims it), NUL-terminated */
	size_t len;
	unsigned long lineno;
	json_t *obj;        /* jansson's object, kept only where the line is written anew */
	int had;            /* it holds a reward field already: written anew without them */
	int empty;          /* an object of no members */
	char *comp;         /* the completion (NULL: not a string), comp_len bytes */
	size_t comp_len;
	char *ref;          /* the reference answer as text (NULL: neither string nor number) */
	long long n_ids;    /* completion_ids' elements, -1: not an array */
	char *group;        /* the "group" value as compact JSON, or NULL */
	reward_scores s;
	double length;      /* tokens (completion_ids) or bytes of the completion */
	int bad;            /* ROLLOUT_PARSE or ROLLOUT_SCORE: err says why */
	lm_err *err;
} rollout;

enum { ROLLOUT_PARSE = 1, ROLLOUT_SCORE = 2 };

/* The fields rl-reward adds: "reward", "format_reward", "answer_reward". */
enum { REWARD_OUT_KEYS = 3 };
extern const char *const reward_out_keys[REWARD_OUT_KEYS];

typedef struct batch {
	rollout *r;
	size_t n, cap;
} batch;

void reward_batch_free(batch *b);

/* A failed rollout's message into e: -1. */
int reward_report(const rollout *r, lm_err *e);

/* Read every line of in (blank lines skipped) and take each one's fields
 * out, on c->threads threads (0: all); with score, each is scored there
 * as well (reward_score_one).  0, or -1 with the message of the first
 * problem in line order that reading them one by one with jansson would
 * have met (a bad line, a read error); a rollout that fails to score has
 * bad set, and the caller reports the first. */
int reward_read_all(const reward_cfg *c, FILE *in, const char *name, batch *b, int score,
		    lm_err *e);

/* Score one rollout by c's built-in function (from its fields). */
int reward_score_one(const reward_cfg *c, rollout *r, const char *name, lm_err *e);

#endif
