/* matmul.h: the linear layer without bias, PyTorch/Hugging Face layout.
 *
 *   forward:  out[N, OUT] (+)= inp[N, IN] . W[OUT, IN]^T
 *   backward: dinp[N, IN] (+)= dout[N, OUT] . W
 *             dW[OUT, IN]  += dout^T . inp          (always accumulates)
 *
 * accumulate = 1 adds into out (forward) or dinp (backward) instead of
 * overwriting it: the forward pass uses it to add a branch onto the
 * residual stream with no separate add.  dinp may be NULL (not needed). */
#ifndef LMPIPE_MATMUL_H
#define LMPIPE_MATMUL_H

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
		    int N, int IN, int OUT, int accumulate);
void matmul_bwd_cpu(float *dinp, float *dw, const float *dout, const float *inp,
		    const float *w, int N, int IN, int OUT, int accumulate);

#endif
