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

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
		    int N, int IN, int OUT, int accumulate);
void matmul_bwd_cpu(float *dinp, float *dw, const float *dout, const float *inp,
		    const float *w, int N, int IN, int OUT, int accumulate);

/* CUDA version through cuBLASLt (kernels/cuda/matmul.cu): a context holding
 * the handle, its workspace and the plan of each product shape, bound to
 * one stream; NULL if cuBLASLt or the workspace cannot be had.  bf16
 * operands (uint16_t bit patterns), fp32 accumulation.  The forward
 * product's out is bf16 when addend is NULL, else fp32 = addend + inp . W^T
 * (addend fp32 [N, OUT], may be out).  The backward pass writes dinp (bf16,
 * may be NULL) and ADDS dout^T . inp into dw (fp32; NULL: dinp alone).  0,
 * or -1 if cuBLASLt refused or failed. */
typedef struct matmul_cuda matmul_cuda;
matmul_cuda *matmul_cuda_new(void *stream);
void matmul_cuda_free(matmul_cuda *mc);
/* Whether a new product's algorithm is the fastest of cuBLASLt's first
 * candidates, timed on its first call (the default; the environment's
 * LMPIPE_MATMUL_AUTOTUNE=0 turns it off), or the heuristic's first, the
 * same choice every run. */
void matmul_cuda_set_autotune(matmul_cuda *mc, int on);
/* Read *deterministic at each product (NULL: never): when set, cuBLASLt's
 * algorithm is the heuristic's first (never timed) and may not reduce
 * split-K partial sums in place, so the bits are the same run to run
 * (lm_backend.deterministic points here). */
void matmul_cuda_follow(matmul_cuda *mc, const int *deterministic);
/* Size the products from now on for sms multiprocessors (cuBLASLt's SM
 * count target; 0: the whole GPU), when other work is to run beside them
 * on the rest (the CUDA backend's weight-gradient queue,
 * bench/overlap_bench.c).  Each target has plans of its own. */
void matmul_cuda_set_sm_target(matmul_cuda *mc, int sms);
/* Make new products take the heuristic's candidate i (-1: timed or first,
 * as usual); a product fails where there are not i + 1 (bench/overlap_bench.c
 * tries them one by one).  And the last product's algorithm: cuBLASLt's
 * algorithm, tile and stages ids (-1 where it does not say). */
void matmul_cuda_force_candidate(matmul_cuda *mc, int i);
void matmul_cuda_last_algo(matmul_cuda *mc, int *id, int *tile, int *stages);
int matmul_fwd_cuda(matmul_cuda *mc, void *out, const float *addend, const uint16_t *inp,
		    const uint16_t *w, int N, int IN, int OUT);
/* The forward product with a bf16 addend and output (the residual stream
 * kept in bf16): out = bf16(addend + inp . W^T), the sum in fp32 before its
 * one rounding; addend may be out.  Always cuBLASLt's (C and D bf16). */
int matmul_fwd_add_bf16_cuda(matmul_cuda *mc, uint16_t *out, const uint16_t *addend,
			     const uint16_t *inp, const uint16_t *w, int N, int IN, int OUT);
/* The forward product with an fp32 output and no addend. */
int matmul_fwd_f32_cuda(matmul_cuda *mc, float *out, const uint16_t *inp, const uint16_t *w,
			int N, int IN, int OUT);
int matmul_bwd_cuda(matmul_cuda *mc, uint16_t *dinp, float *dw, const uint16_t *dout,
		    const uint16_t *inp, const uint16_t *w, int N, int IN, int OUT);
/* The backward pass's input gradient alone, in fp32: dinp = dout . W. */
int matmul_dinp_f32_cuda(matmul_cuda *mc, float *dinp, const uint16_t *dout, const uint16_t *w,
			 int N, int IN, int OUT);

/* The forward product of a few rows (generation's steps), which
 * matmul_fwd_cuda hands to its own kernel (kernels/cuda/matmul_small.cu)
 * when matmul_small_applies: N <= MATMUL_SMALL_N, IN a multiple of 8,
 * inp and w 16-byte aligned.  The same contract as matmul_fwd_cuda. */
enum { MATMUL_SMALL_N = 16 };
int matmul_small_applies(const void *inp, const void *w, int N, int IN);
int matmul_fwd_small_cuda(void *out, const float *addend, const uint16_t *inp, const uint16_t *w,
			  int N, int IN, int OUT, void *stream);
/* Fused few-row products (N <= MATMUL_SMALL_N; C or F a multiple of 8;
 * 16-byte aligned pointers, else -1): out (bf16) = RMSNorm(x (fp32), gains
 * g, eps) . W^T without rounding the normalised input; out (fp32) =
 * addend + swiglu(h) . W^T, h [N, 2F] as kernels/swiglu.h lays it out. */
int norm_matmul_small_cuda(uint16_t *out, const float *x, const float *g, const uint16_t *w, int N,
			   int C, int OUT, float eps, void *stream);
int glu_matmul_small_cuda(float *out, const float *addend, const uint16_t *h, const uint16_t *w,
			  int N, int F, int OUT, void *stream);

/* The forward product of a few tens of rows (a decoding step of
 * MATMUL_SMALL_N + 1 to MATMUL_ROWS_N sequences) on tensor cores
 * (kernels/cuda/matmul_rows.cu), which matmul_fwd_cuda takes when
 * matmul_rows_applies: N in that range, IN a multiple of 16, inp and w
 * 16-byte aligned (and LMPIPE_NO_ROWS unset).  The same contracts as
 * matmul_fwd_cuda and norm_matmul_small_cuda (-1: not these shapes, or the
 * launch failed); norm_glu_rows_cuda is RMSNorm, the gate/up product and
 * SwiGLU in one: sw [N, F] (bf16) = swiglu(RMSNorm(x) g . Wgu^T), Wgu
 * [2F, C] (gate rows, then up rows).  The kernels read the weights before
 * the kernel ahead of them in the stream has finished (programmatic
 * launch): that kernel must not write them. */
enum { MATMUL_ROWS_N = 64 };
int matmul_rows_applies(const void *inp, const void *w, int N, int IN);
int matmul_fwd_rows_cuda(void *out, const float *addend, const uint16_t *inp, const uint16_t *w,
			 int N, int IN, int OUT, void *stream);
int norm_matmul_rows_cuda(uint16_t *out, const float *x, const float *g, const uint16_t *w, int N,
			  int C, int OUT, float eps, void *stream);
int norm_glu_rows_cuda(uint16_t *sw, const float *x, const float *g, const uint16_t *wgu, int N,
		       int C, int F, float eps, void *stream);

#ifdef __cplusplus
}
#endif

#endif
