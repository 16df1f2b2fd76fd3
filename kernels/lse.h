/* lse.h: the log-sum-exp of a row, log(sum_i exp(x[i])), numerically
 * stable: the row's maximum, then exp (vexp.h) of each entry less it,
 * summed in double, vectorised for the machine it runs on.  A NaN entry
 * is skipped by the maximum but makes the sum NaN: a caller that must
 * tell bad rows apart checks them first (decode_ops.h's dec_row_bad).
 *
 * The one copy on the CPU: the cross-entropy (xent.h), the sampler's
 * log-probabilities (libcommon/gen/sampler.c) and rl-update's per-token
 * log-probabilities all call it, so that a rollout's log-probs and the
 * policy's for the same logits agree to the last bit. */
#ifndef LMPIPE_LSE_H
#define LMPIPE_LSE_H

#include <stddef.h>

double lse_row_cpu(const float *x, size_t n);

#endif
