/* reward.h: scoring rollouts (JSON Lines from lm-sample --jsonl) for RL:
 * the reward functions, an external scorer over a pipe, the Kimi k1.5
 * length penalty, and the read-score-write pass of rl-reward. */
#ifndef LMPIPE_REWARD_H
#define LMPIPE_REWARD_H

#include <stddef.h>
#include <stdio.h>

#include "base/err.h"

typedef enum reward_kind {
	REWARD_R1_ZERO,     /* "</think> <answer> A </answer>", A graded as CS336 (grade.h) */
	REWARD_EXACT,       /* the whole completion, trimmed, equals the answer */
	REWARD_LAST_NUMBER, /* the last number of the completion equals the answer */
	REWARD_CMD,         /* an external program scores each line */
} reward_kind;

typedef struct reward_scores {
	double reward, format, answer;
} reward_scores;

/* Score one completion against the reference answer (built-in kinds):
 *   r1-zero:     format 1 when the r1-zero tags are there, answer 1 when the
 *                answer in them is right for the reference (grade.h, the
 *                CS336 drgrpo grader's rules);
 *   exact:       format 1; answer 1 when completion and reference, both
 *                trimmed of surrounding whitespace, are the same bytes;
 *   last-number: format 1 when the completion has a number, answer 1 when
 *                the last one equals the reference;
 * reward = answer (a wrong answer in the right format earns 0, as in CS336). */
int reward_score(reward_kind k, const char *completion, size_t n, const char *ref, size_t nref,
		 reward_scores *out, lm_err *e);

/* Kimi k1.5 length reward for one response of length len in a group whose
 * shortest and longest responses have min_len and max_len:
 * lambda = 0.5 - (len - min_len) / (max_len - min_len) (0 when all are as
 * long), returned as is for a correct response and as min(0, lambda) for a
 * wrong one. */
double reward_length_lambda(double len, double min_len, double max_len, int correct);

/* Run cmd with /bin/sh -c, write the n lines (each followed by a newline)
 * to its standard input, close it, and parse its standard output: exactly n
 * lines, each a number (the reward; format and answer get the same value) or
 * a JSON object with a numeric "reward" and optional "format_reward" and
 * "answer_reward".  A scorer that exits non-zero, dies, or prints a wrong
 * number of lines or anything else is an error naming the scorer's line.
 * Bounds: the scorer must exit within timeout seconds (0: no limit) and
 * print at most REWARD_CMD_LINE_BYTES per rollout (plus one line's worth);
 * past either it is killed (with its children: it runs in its own process
 * group) and the message says what it did. */
enum { REWARD_CMD_LINE_BYTES = 4096 };
#define REWARD_CMD_TIMEOUT 600.0   /* seconds, rl-reward --timeout */
int reward_cmd(const char *cmd, const char *const *lines, const size_t *lens, size_t n,
	       double timeout, reward_scores *out, lm_err *e);

typedef struct reward_cfg {
	reward_kind kind;
	const char *cmd;       /* REWARD_CMD */
	int format_only;       /* reward = format reward */
	double length_weight;  /* > 0: add weight * the Kimi length reward, per group */
	const char *answer_key;
	const char *completion_key;
	double cmd_timeout;    /* REWARD_CMD: seconds, 0: none */
	int threads;           /* threads that look at and score the lines, 0: all */
} reward_cfg;

typedef struct reward_summary {
	size_t rollouts, groups;
	double reward, format, answer; /* means */
} reward_summary;

/* Read every rollout of in (blank lines skipped), score it, and write each
 * line back to out, in order, with "reward", "format_reward" and
 * "answer_reward" added after the other fields (the input bytes are kept;
 * a line that already has one of those fields is rewritten compactly
 * without them, and the new ones added at the end).  Errors name in_name and the line.
 * The lines are read in order and looked at and scored on c->threads
 * threads; the output and the messages do not depend on their number. */
int reward_run(const reward_cfg *c, FILE *in, const char *in_name, FILE *out,
	       const char *out_name, reward_summary *sum, lm_err *e);

/* Shortest text that reads back as x ("1", "0.5", "-0.25"). */
void reward_format_double(double x, char *buf, size_t n);

#endif
