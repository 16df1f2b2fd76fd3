/* rollout.h: lm-sample's JSON Lines output (man 5 lmpipe-rollouts), one
 * object per sample: the input object's fields (or "prompt" alone for
 * plain-text prompts), then
 *
 *   completion      the decoded text (invalid UTF-8 replaced by U+FFFD)
 *   completion_ids  the completion's tokens, the end-of-text token included
 *   logprobs        log-softmax at temperature 1 of each of those tokens
 *   prompt_ids      the prompt's tokens as the model saw them
 *   group           the prompt's ordinal, shared by its -n samples
 *   sample          the sample's index within its group
 *   finish_reason   "stop" or "length"
 *   forced          (only when a thinking budget forced tokens) their
 *                   indexes in completion_ids
 *
 * Fields of the same names in the input are replaced. */
#ifndef LMPIPE_ROLLOUT_H
#define LMPIPE_ROLLOUT_H

#include <stdio.h>

#include <jansson.h>

#include "base/err.h"
#include "gen/generate.h"

/* A JSON string of the bytes s[0 .. n), invalid UTF-8 replaced. */
json_t *json_bytes(const char *s, size_t n);

/* input may be NULL (plain-text prompt). */
json_t *rollout_json(const json_t *input, const gen_sample *s, uint64_t group, lm_err *e);

/* Write obj as one line. */
int rollout_write(FILE *fp, const json_t *obj, const char *name, lm_err *e);

#endif
