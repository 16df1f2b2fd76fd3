// entropy.cu: CUDA twin of the per-row softmax entropy and its gradient
// (see kernels/entropy.h) on bf16 logits, in fp32: one block a row, the
// entropy summed in a fixed order (the same bits run to run).
#include "kernels/entropy.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { ROW_THREADS = 256 };

// The row's entropy sum_v p_v (lse - z_v), on every thread of the block.
__device__ float row_entropy(const bf16 *z, float l, int V, double *sh)
{
	double h = 0;
	for (int v = threadIdx.x; v < V; v += blockDim.x) {
		float d = l - ld(z + v);
		h += (double)(__expf(-d) * d);
	}
	float r = (float)block_sum(h, sh);
	__syncthreads();
	return r;
}

__global__ void fwd_kernel(float *ent, const bf16 *logits, const float *lse, int V)
{
	__shared__ double sh[ROW_THREADS];
	int n = blockIdx.x;
	float h = row_entropy(logits + (size_t)n * V, lse[n], V, sh);
	if (threadIdx.x == 0)
		ent[n] = h;
}

__global__ void bwd_kernel(float *dz, const bf16 *logits, const float *lse, const float *dent,
			   int V)
{
	__shared__ double sh[ROW_THREADS];
	int n = blockIdx.x;
	const bf16 *z = logits + (size_t)n * V;
	float *g = dz + (size_t)n * V, d = dent[n], l = lse[n];
	if (d == 0.0f) {
		for (int v = threadIdx.x; v < V; v += blockDim.x)
			g[v] = 0.0f;
		return;
	}
	float h = row_entropy(z, l, V, sh);
	for (int v = threadIdx.x; v < V; v += blockDim.x) {
		float logp = ld(z + v) - l;
		g[v] = d * -__expf(logp) * (logp + h);
	}
}

}  // namespace

extern "C" int entropy_fwd_cuda(float *ent, const uint16_t *logits, const float *lse, int N,
				int V, void *stream)
{
	fwd_kernel<<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(ent, (const bf16 *)logits, lse, V);
	return launched();
}

extern "C" int entropy_bwd_cuda(float *dz, const uint16_t *logits, const float *lse,
				const float *dent, int N, int V, void *stream)
{
	bwd_kernel<<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(dz, (const bf16 *)logits, lse, dent, V);
	return launched();
}
