// adamw.cu: CUDA twin of the AdamW step, the gradient's sum of squares and
// the clip factor (see kernels/adamw.h).  The sum of squares is in double,
// in two fixed-order stages (per-block partials, then one block), so it is
// the same run to run.  The step reads the clip factor from device memory
// and can write the new weights' bf16 compute copy.
#include <math.h>

#include "kernels/adamw.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { RED_THREADS = 256 };

__global__ void sumsq_partial(double *part, const float *g, size_t n)
{
	__shared__ double sh[RED_THREADS];
	double s = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		s += (double)g[i] * g[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		part[blockIdx.x] = s;
}

__global__ void sumsq_final(double *out, const double *part, int np)
{
	__shared__ double sh[RED_THREADS];
	double s = 0;
	for (int i = threadIdx.x; i < np; i += blockDim.x)
		s += part[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		*out = s;
}

__global__ void clip_kernel(float *scale, const double *sumsq, double max_norm)
{
	double norm = sqrt(*sumsq);
	*scale = (float)(max_norm <= 0 || !(norm > max_norm) ? 1.0 : max_norm / (norm + ADAMW_CLIP_EPS));
}

// The step's constants from dev (adamw.h) when given, computed as the
// host computes them (no contraction into fused multiply-adds), so that
// the two give the same bits.
__global__ void step_kernel(float *p, const float *g, float *m, float *v, bf16 *p_act, size_t n,
			    float b1, float b2, float eps, float step, float rbc2, float decay,
			    const float *grad_scale, const double *dev, float wd)
{
	float s = *grad_scale;
	if (dev) {
		float lr = (float)dev[ADAMW_DEV_LR];
		step = (float)__ddiv_rn((double)lr, dev[ADAMW_DEV_BC1]);
		rbc2 = (float)__ddiv_rn(1.0, __dsqrt_rn(dev[ADAMW_DEV_BC2]));
		decay = __fsub_rn(1.0f, __fmul_rn(lr, wd));
	}
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = g[i] * s;
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float pi = p[i] * decay - step * mi / (sqrtf(vi) * rbc2 + eps);
		p[i] = pi;
		if (p_act)
			p_act[i] = to_bf16(pi);
	}
}

}  // namespace

extern "C" int sumsq_cuda(double *out, const float *g, size_t n, double *partials, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	unsigned blocks = grid_for(n, RED_THREADS);
	if (blocks > SUMSQ_CUDA_PARTIALS)
		blocks = SUMSQ_CUDA_PARTIALS;
	sumsq_partial<<<blocks, RED_THREADS, 0, st>>>(partials, g, n);
	sumsq_final<<<1, RED_THREADS, 0, st>>>(out, partials, (int)blocks);
	return launched();
}

extern "C" int clip_scale_cuda(float *scale, const double *sumsq, double max_norm, void *stream)
{
	clip_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(scale, sumsq, max_norm);
	return launched();
}

extern "C" int adamw_step_cuda(float *p, const float *g, float *m, float *v, uint16_t *p_act,
			       size_t n, const adamw_hparams *h, const float *grad_scale, void *stream)
{
	float step = 0, rbc2 = 0, decay = 0;
	if (!h->dev) {
		double dv[ADAMW_DEV_N];
		adamw_dev_values(dv, h->lr, h->beta1, h->beta2, h->t);
		step = (float)(h->lr / dv[ADAMW_DEV_BC1]);
		rbc2 = (float)(1.0 / sqrt(dv[ADAMW_DEV_BC2]));
		decay = 1.0f - h->lr * h->weight_decay;
	}
	step_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(
		p, g, m, v, (bf16 *)p_act, n, h->beta1, h->beta2, h->eps, step, rbc2, decay, grad_scale,
		h->dev, h->weight_decay);
	return launched();
}
