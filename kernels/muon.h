/* muon.h: one Muon step (torch.optim.Muon, KellerJordan's Muon) on a batch of
 * matrices of one shape rows x cols, each matrix at offs[i] (in floats) into
 * the parameter, gradient and momentum buffers; the last n_tr of them may be
 * of the transposed shape cols x rows (one Newton-Schulz batch serves a
 * shape and its transpose, as their X is the same m x k):
 *
 *   g   = grad * grad_scale
 *   buf = buf + (1 - mu) (g - buf)                 (buf.lerp_(g, 1 - mu))
 *   u   = nesterov ? g + mu (buf - g) : buf        (g.lerp(buf, mu))
 *   O   = NS(u): X = u, or u^T when rows > cols; X /= max(|X|_F, MUON_EPS);
 *         ns_steps times { A = X X^T; B = b A + c A A; X = a X + B X };
 *         O = X, transposed back
 *   p   = p (1 - lr wd) - lr adjust O
 *
 * with (a, b, c) the quintic's coefficients below and adjust
 * muon_adjust(scale, rows, cols): sqrt(max(1, rows / cols)) ("original")
 * or 0.2 sqrt(max(rows, cols)) ("match_rms_adamw", Moonshot's).  The
 * weight decay uses the unadjusted lr, as torch does.  The CPU twin works
 * in fp32; the CUDA one runs Newton-Schulz in bf16 with fp32 accumulation
 * (as torch.optim.Muon does), all count matrices of a shape in each
 * strided-batched product. */
#ifndef LMPIPE_MUON_H
#define LMPIPE_MUON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f
#define MUON_EPS 1e-7f
enum { MUON_NS_STEPS = 5 };

typedef enum muon_scale { MUON_SCALE_ORIGINAL = 0, MUON_SCALE_MATCH_RMS_ADAMW = 1 } muon_scale;

typedef struct muon_hparams {
	float lr, momentum, weight_decay;
	int nesterov, ns_steps;
	muon_scale scale;
	/* NULL, or memory beside the parameters (the device's for CUDA) holding
	 * this step's {lr, momentum} as doubles, read in place of lr and
	 * momentum (as adamw_hparams's dev: a recorded step replayed with new
	 * values gives the same bits as one given them). */
	const double *dev;
} muon_hparams;

enum { MUON_DEV_LR = 0, MUON_DEV_MOMENTUM = 1, MUON_DEV_N = 2 };

/* The update's lr multiplier for a rows x cols matrix. */
double muon_adjust(muon_scale s, int rows, int cols);

/* Floats of scratch muon_step_cpu needs for count matrices. */
size_t muon_workspace_cpu(int count, int rows, int cols);
/* out (rows x cols) = NS(u) as above, fp32; ws holds
 * muon_workspace_cpu(1, rows, cols) floats; out may be u. */
void muon_ns_cpu(float *out, const float *u, int rows, int cols, int steps, float *ws);
/* The step on count matrices (host memory; offs host too), the last n_tr
 * of them cols x rows; the matrices are done in parallel over OpenMP
 * threads, each with its own part of ws. */
void muon_step_cpu(float *p, const float *g, float *buf, const size_t *offs, int count, int n_tr,
		   int rows, int cols, const muon_hparams *h, float grad_scale, float *ws);

/* CUDA twin (kernels/cuda/muon.cu): a context holding cuBLAS handles and
 * streams that follow stream (NULL if they cannot be had); the step reads *grad_scale from
 * the device, offs is device memory (count size_t), p_act (bf16 bit
 * patterns, may be NULL) receives the new weights at the same offsets, ws
 * is muon_workspace_cuda(count, rows, cols) bytes of device memory.  0, or
 * -1 if a launch or cuBLAS failed. */
typedef struct muon_cuda muon_cuda;
muon_cuda *muon_cuda_new(void *stream);
void muon_cuda_free(muon_cuda *mc);
size_t muon_workspace_cuda(int count, int rows, int cols);
int muon_step_cuda(muon_cuda *mc, float *p, const float *g, float *buf, uint16_t *p_act,
		   const size_t *offs, int count, int n_tr, int rows, int cols,
		   const muon_hparams *h, const float *grad_scale, void *ws);
/* The steps run on streams of their own (see muon.cu): the stream given to
 * muon_cuda_new waits for all of them, so that its later work sees their
 * results.  0, or -1 if CUDA failed.  Steps that are not joined may still
 * be running: call it before anything reads what they write, and before a
 * recorded graph ends. */
int muon_join_cuda(muon_cuda *mc);

#ifdef __cplusplus
}
#endif

#endif
