/* task.h: verifiable tasks for fine-tuning and RL: arithmetic word
 * problems of adjustable difficulty, generated from a seed, and GSM8K
 * problems, both written by one path (task_write) as JSON Lines
 * {"prompt", "answer"} (plus "response" for SFT) in a prompt template. */
#ifndef LMPIPE_TASK_H
#define LMPIPE_TASK_H

#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

/* The r1-zero prompt of Stanford CS336 assignment 5
 * (cs336_alignment/prompts/r1_zero.prompt at stanford-cs336/
 * assignment5-alignment eb2c562e, no trailing newline).  "{question}" marks
 * where the question goes. */
extern const char TASK_R1_ZERO_TEMPLATE[];

typedef struct task_item {
	char *question;
	char *answer;   /* the final answer, a plain number for arith and GSM8K */
	char *solution; /* worked reasoning that leads to the answer */
} task_item;

void task_item_free(task_item *it);

/* Arithmetic word problems: a starting amount, then steps operations drawn
 * from ops ("+-*" "/"), each operand with digits digits (2..9 for one
 * digit; a subtrahend may be smaller so as not to go below 0); the running value
 * stays a whole number in [0, TASK_ARITH_MAX] (an operation that would
 * leave that range, or a division with no divisor, becomes an addition). */
#define TASK_ARITH_MAX 1000000000000000LL
enum { TASK_MAX_DIGITS = 9, TASK_MAX_STEPS = 16 };

typedef struct task_arith_cfg {
	int digits;      /* 1 .. TASK_MAX_DIGITS */
	int steps;       /* 1 .. TASK_MAX_STEPS */
	const char *ops; /* nonempty subset of "+-*" "/" */
} task_arith_cfg;

/* Check a configuration (usage error with a message). */
int task_arith_check(const task_arith_cfg *c, lm_err *e);

/* One problem from *rng (a 64-bit state, advanced); the same state and
 * configuration give the same problem on every machine. */
int task_arith(uint64_t *rng, const task_arith_cfg *c, task_item *out, lm_err *e);

/* A GSM8K record: the question as is; the answer field's text after the
 * last "####", trimmed, commas removed; the solution is the text before it
 * without the <<calculator>> annotations. */
int task_gsm8k(const char *question, const char *answer_field, task_item *out, lm_err *e);

/* Check that a template holds "{question}". */
int task_template_check(const char *tmpl, lm_err *e);

/* Write one JSON line: {"prompt": template with every "{question}"
 * replaced, "answer": ...} and, when with_response, "response": " SOLUTION
 * </think> <answer> ANSWER </answer>" (the r1-zero continuation of a prompt
 * that ends in "<think>"). */
int task_write(FILE *fp, const char *tmpl, const task_item *it, int with_response,
	       const char *name, lm_err *e);

/* count problems from seed, one JSON line each (task_write). */
int task_arith_write(FILE *fp, const task_arith_cfg *c, uint64_t count, uint64_t seed,
		     const char *tmpl, int with_response, const char *name, lm_err *e);

/* The records of a GSM8K JSON Lines stream ("question", "answer"; blank
 * lines skipped), one JSON line each, at most *left of them (NULL: all;
 * else decreased by the records written, so that several streams share
 * one count); errors name in_name and the line. */
int task_gsm8k_write(FILE *in, const char *in_name, FILE *fp, const char *tmpl,
		     int with_response, uint64_t *left, const char *name, lm_err *e);

/* The same records handed to fn (which may take the item's strings,
 * leaving NULLs); fn's error stops the reading. */
typedef int (*task_item_fn)(task_item *it, void *ctx, lm_err *e);
int task_gsm8k_read(FILE *in, const char *in_name, task_item_fn fn, void *ctx, uint64_t *left,
		    lm_err *e);

/* A sample of want records (UINT64_MAX: all) drawn without replacement
 * from every record added, by seed, in an order drawn by seed: a
 * reservoir of at most want items (the memory of the sample, not of the
 * inputs), shuffled when written.  The same inputs and seed give the same
 * sample and order on every machine. */
typedef struct task_pick {
	task_item *it;
	uint64_t n, cap, seen, want, seed;
} task_pick;

void task_pick_init(task_pick *p, uint64_t want, uint64_t seed);
/* Every GSM8K record of in into the sample. */
int task_pick_gsm8k(task_pick *p, FILE *in, const char *in_name, lm_err *e);
/* The sample, one JSON line each (task_write). */
int task_pick_write(task_pick *p, FILE *fp, const char *tmpl, int with_response,
		    const char *name, lm_err *e);
void task_pick_free(task_pick *p);

#endif
