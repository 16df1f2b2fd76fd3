/* rope.h: rotary position embedding, in place, forward and backward.
 *
 * Convention (the whole project uses this one): "rotate half", as Hugging
 * Face LlamaForCausalLM does.  Within a head of dimension D the pairs are
 * (i, i + D/2) for i < D/2, rotated by the angle pos * theta^(-2i/D):
 *
 *   x'[i]       = x[i] cos a - x[i + D/2] sin a
 *   x'[i + D/2] = x[i + D/2] cos a + x[i] sin a
 *
 * CS336 rotates interleaved pairs (2i, 2i+1) with the same angles; the two
 * agree after permuting each head's dimensions (2i -> i, 2i+1 -> i + D/2),
 * which is how the conformance test compares them.  Checkpoints therefore
 * need no permutation for Hugging Face.
 *
 * rope_table fills cs[T, D/2, 2] with cos and sin of the angles (computed
 * in double, rounded once) for positions pos[t] (NULL: pos = t); it runs on
 * the host, and a backend copies the table to its memory once.  x is
 * [B, H, T, D]; the backward pass rotates the gradient by the opposite
 * angle, in place. */
#ifndef LMPIPE_ROPE_H
#define LMPIPE_ROPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROPE_THETA_DEFAULT 10000.0

void rope_table(float *cs, const int64_t *pos, int T, int D, double theta);
void rope_fwd_cpu(float *x, const float *cs, int B, int H, int T, int D);
void rope_bwd_cpu(float *dx, const float *cs, int B, int H, int T, int D);

/* CUDA twin on bf16 x (uint16_t bit patterns), fp32 table, device memory. */
int rope_fwd_cuda(uint16_t *x, const float *cs, int B, int H, int T, int D, void *stream);
int rope_bwd_cuda(uint16_t *dx, const float *cs, int B, int H, int T, int D, void *stream);

#ifdef __cplusplus
}
#endif

#endif
