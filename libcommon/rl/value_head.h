/* value_head.h: the PPO critic, a d_model -> 1 linear layer on the policy's
 * final hidden state (model_hidden): v_t = w . h_t + b.  It shares the
 * policy's trunk: its gradient w.r.t. h_t (dv_t w) goes back through the
 * model with rl_backward_extra.
 *
 * Tiny (d_model + 1 floats), so it lives in host memory with its own AdamW
 * moments (no weight decay); rl-update copies it to the model's device,
 * where the PPO loss op (kernels/rl_ppo_tok.h, rl_device.h) runs it, and
 * takes its gradient back once per optimizer step.  In a checkpoint it is "value_head.weight"
 * [1, d_model] and "value_head.bias" [1], names that model loading and the
 * Hugging Face export ignore.  A checkpoint without them starts the head at
 * w = 0, b = 0: values 0 at first, no randomness. */
#ifndef LMPIPE_VALUE_HEAD_H
#define LMPIPE_VALUE_HEAD_H

#include <stddef.h>

#include "base/err.h"
#include "model/safetensors.h"

#define VALUE_HEAD_WEIGHT "value_head.weight"
#define VALUE_HEAD_BIAS "value_head.bias"

typedef struct value_head {
	int d;                 /* d_model */
	float *w, *gw, *mw, *vw; /* weight, gradient, AdamW moments: d each */
	float b[1], gb[1], mb[1], vb[1];
	long long t;           /* AdamW steps */
} value_head;

/* A zero head for hidden states of d floats. */
int vh_init(value_head *h, int d, lm_err *e);
void vh_free(value_head *h);
/* Load the head from a checkpoint that has one: 1 when loaded, 0 when the
 * checkpoint has none (h unchanged), -1 on error (a bad shape or dtype). */
int vh_load(value_head *h, const char *path, lm_err *e);
/* The two tensors for ckpt_save_extra (they point into h). */
void vh_tensors(const value_head *h, sft_tensor out[2]);

/* values[i] = w . hidden[i] + b for n rows of d floats (host memory). */
void vh_forward(const value_head *h, const float *hidden, size_t n, float *values);
/* Given dvalues = d loss / d values: ACCUMULATE into the head's gradient,
 * and write d loss / d hidden ([n, d]) into dhidden. */
void vh_backward(value_head *h, const float *hidden, const float *dvalues, size_t n,
		 float *dhidden);
void vh_zero_grad(value_head *h);
/* Squared L2 norm of the head's gradient (for the global clipping norm). */
double vh_grad_sumsq(const value_head *h);
/* One AdamW step (no weight decay) on the gradient times grad_scale. */
void vh_step(value_head *h, double lr, double beta1, double beta2, double eps, double grad_scale);

#endif
