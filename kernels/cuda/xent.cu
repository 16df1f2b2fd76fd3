// xent.cu: CUDA twin of the softmax cross-entropy (see kernels/xent.h) on
// bf16 logits, computed in fp32: one block a row for the forward pass (max,
// sum of exponentials, loss), a fixed-order sum of the losses into a device
// scalar (double), and an elementwise backward pass with a per-row factor.
#include "kernels/xent.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { ROW_THREADS = 256, SUM_THREADS = 1024 };

__device__ float block_reduce(float x, float *sh, int is_max)
{
	int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
	x = is_max ? warp_max(x) : warp_sum(x);
	if (lane == 0)
		sh[w] = x;
	__syncthreads();
	x = lane < nw ? sh[lane] : (is_max ? -INFINITY : 0.0f);
	x = is_max ? warp_max(x) : warp_sum(x);
	__syncthreads();
	return x;
}

template <typename Z>
__global__ void fwd_kernel(float *loss, float *lse, const Z *logits, const int32_t *targets, int V)
{
	__shared__ float sh[WARP];
	int n = blockIdx.x;
	const Z *z = logits + (size_t)n * V;
	float mx = -INFINITY;
	for (int v = threadIdx.x; v < V; v += blockDim.x)
		mx = fmaxf(mx, ld(z + v));
	mx = block_reduce(mx, sh, 1);
	float s = 0;
	for (int v = threadIdx.x; v < V; v += blockDim.x)
		s += __expf(ld(z + v) - mx);
	s = block_reduce(s, sh, 0);
	if (threadIdx.x == 0) {
		float l = mx + logf(s);
		int t = targets[n];
		lse[n] = l;
		loss[n] = t < 0 ? 0.0f : l - ld(z + t);
	}
}

// *sum += sum of x[0..n), in double, in an order fixed by n alone.
__global__ void sum_kernel(double *sum, const float *x, int n)
{
	__shared__ double sh[SUM_THREADS];
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += x[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		*sum += s;
}

// One block a row: no index division per element.
template <typename Z>
__global__ void bwd_kernel(bf16 *dlogits, const Z *logits, const float *lse,
			   const int32_t *targets, const float *weights, float scale, int V)
{
	int row = blockIdx.x, t = targets[row];
	float d = t < 0 ? 0.0f : scale * (weights ? weights[row] : 1.0f), l = lse[row];
	const Z *z = logits + (size_t)row * V;
	bf16 *dz = dlogits + (size_t)row * V;
	for (int v = threadIdx.x; v < V; v += blockDim.x) {
		float g = __expf(ld(z + v) - l) * d;
		dz[v] = to_bf16(v == t ? g - d : g);
	}
}

}  // namespace

extern "C" int xent_fwd_cuda(float *loss, float *lse, const uint16_t *logits,
			     const int32_t *targets, int N, int V, double *loss_sum, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	fwd_kernel<bf16><<<N, ROW_THREADS, 0, st>>>(loss, lse, (const bf16 *)logits, targets, V);
	if (loss_sum)
		sum_kernel<<<1, SUM_THREADS, 0, st>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_bwd_cuda(uint16_t *dlogits, const uint16_t *logits, const float *lse,
			     const int32_t *targets, const float *weights, float scale, int N, int V,
			     void *stream)
{
	bwd_kernel<bf16><<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, (const bf16 *)logits, lse, targets, weights, scale, V);
	return launched();
}

extern "C" int xent_fwd_f32_cuda(float *loss, float *lse, const float *logits,
				 const int32_t *targets, int N, int V, double *loss_sum, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	fwd_kernel<float><<<N, ROW_THREADS, 0, st>>>(loss, lse, logits, targets, V);
	if (loss_sum)
		sum_kernel<<<1, SUM_THREADS, 0, st>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_bwd_f32_cuda(uint16_t *dlogits, const float *logits, const float *lse,
				 const int32_t *targets, const float *weights, float scale, int N,
				 int V, void *stream)
{
	bwd_kernel<float><<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, logits, lse, targets, weights, scale, V);
	return launched();
}
