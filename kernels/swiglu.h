/* swiglu.h: the SwiGLU gate, forward and backward.
 *
 * h is [N, 2F]: the gate projection (w1, HF gate_proj) in columns [0, F) and
 * the up projection (w3, HF up_proj) in [F, 2F), as the fused matmul
 * produces them.  out[N, F] = silu(gate) * up, silu(x) = x / (1 + e^-x).
 * The backward pass overwrites dh[N, 2F]. */
#ifndef LMPIPE_SWIGLU_H
#define LMPIPE_SWIGLU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void swiglu_fwd_cpu(float *out, const float *h, int N, int F);
void swiglu_bwd_cpu(float *dh, const float *dout, const float *h, int N, int F);

/* CUDA twin on bf16 (uint16_t bit patterns), computed in fp32. */
int swiglu_fwd_cuda(uint16_t *out, const uint16_t *h, int N, int F, void *stream);
int swiglu_bwd_cuda(uint16_t *dh, const uint16_t *dout, const uint16_t *h, int N, int F,
		    void *stream);

#ifdef __cplusplus
}
#endif

#endif
