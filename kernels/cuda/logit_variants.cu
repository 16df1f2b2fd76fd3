// logit_variants.cu: CUDA twins of soft-capping and of the cross-entropy
// backward with z-loss and capping (see kernels/logit_variants.h).
// Elementwise, grid-stride loops; the backward reads each row's lse and
// target, so a thread's element needs nothing from its neighbours.
#include "kernels/logit_variants.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__device__ __forceinline__ void st(bf16 *p, float v) { *p = to_bf16(v); }
__device__ __forceinline__ void st(float *p, float v) { *p = v; }

template <typename T>
__global__ void cap_kernel(T *x, size_t n, float cap)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		st(x + i, cap * tanhf(ld(x + i) / cap));
}

template <typename T>
__global__ void bwd_kernel(bf16 *dz, const T *y, const float *lse, const int32_t *targets,
			   const float *weights, const float *extra, float scale, int N, int V,
			   float z_loss, float cap)
{
	size_t n = (size_t)N * V;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / V;
		int v = (int)(i % V), t = targets[row];
		float d = t < 0 ? 0.0f : scale * (weights ? weights[row] : 1.0f), l = lse[row];
		float yv = ld(y + i);
		float g = d * (1.0f + 2.0f * z_loss * l) * __expf(yv - l) - (v == t ? d : 0.0f);
		if (extra)
			g += extra[i];
		if (cap > 0) {
			float r = yv / cap;
			g *= 1.0f - r * r;
		}
		dz[i] = to_bf16(g);
	}
}

}  // namespace

extern "C" int softcap_fwd_cuda(uint16_t *x, size_t n, float cap, void *stream)
{
	cap_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)x, n, cap);
	return launched();
}

extern "C" int softcap_fwd_f32_cuda(float *x, size_t n, float cap, void *stream)
{
	cap_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(x, n, cap);
	return launched();
}

extern "C" int logit_bwd_cuda(uint16_t *dlogits, const uint16_t *logits, const float *lse,
			      const int32_t *targets, const float *weights, const float *extra,
			      float scale, int N, int V, float z_loss, float cap, void *stream)
{
	bwd_kernel<<<grid_for((size_t)N * V), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, (const bf16 *)logits, lse, targets, weights, extra, scale, N, V,
		z_loss, cap);
	return launched();
}

extern "C" int logit_bwd_f32_cuda(uint16_t *dlogits, const float *logits, const float *lse,
				  const int32_t *targets, const float *weights, const float *extra,
				  float scale, int N, int V, float z_loss, float cap, void *stream)
{
	bwd_kernel<<<grid_for((size_t)N * V), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, logits, lse, targets, weights, extra, scale, N, V, z_loss, cap);
	return launched();
}
