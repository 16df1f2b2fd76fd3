// xent.cu: CUDA twin of the softmax cross-entropy (see kernels/xent.h) on
// bf16 logits, computed in fp32: one block a row for the forward pass (max,
// sum of exponentials, loss), a fixed-order sum of the losses into a device
// scalar (double), and an elementwise backward pass with a per-row factor.
// The LM head's chunks use a fused version on bf16 logits: one block a row
// holds the row in registers, so the logits are read once and the gradient
// overwrites them in place.
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

// guard (all kernels here): NULL, or the pass runs only if *guard is set
// (xent_fused_guarded_cuda).
__device__ __forceinline__ bool skip(const int *guard) { return guard && !*guard; }

template <typename Z>
__global__ void fwd_kernel(float *loss, float *lse, const Z *logits, const int32_t *targets, int V,
			   const int *guard)
{
	__shared__ float sh[WARP];
	if (skip(guard))
		return;
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
			   const int32_t *targets, const float *weights, float scale, int V,
			   const int *guard)
{
	if (skip(guard))
		return;
	int row = blockIdx.x, t = targets[row];
	float d = t < 0 ? 0.0f : scale * (weights ? weights[row] : 1.0f), l = lse[row];
	const Z *z = logits + (size_t)row * V;
	bf16 *dz = dlogits + (size_t)row * V;
	for (int v = threadIdx.x; v < V; v += blockDim.x) {
		float g = __expf(ld(z + v) - l) * d;
		dz[v] = to_bf16(v == t ? g - d : g);
	}
}

// The fused forward and backward pass of one row: NV (at most 4) vectors
// of 8 bf16 logits a thread, held in registers between the reductions and the
// gradient, which overwrites the row (z) in place.
template <int NV>
__global__ void __launch_bounds__(1024) fused_kernel(bf16 *z, float *loss, float *lse, const int32_t *targets, float scale,
			     int V, int grad, const int *guard)
{
	__shared__ float sh[WARP];
	__shared__ float zt_sh;
	if (skip(guard))
		return;
	int row = blockIdx.x, t = targets[row], nvec = V / 8;
	uint4 *zr = (uint4 *)(z + (size_t)row * V);
	if (threadIdx.x == 0)
		zt_sh = t >= 0 ? ld(z + (size_t)row * V + t) : 0.0f;
	uint4 r[NV];
	float mx = -INFINITY;
#pragma unroll
	for (int i = 0; i < NV; i++) {
		int j = threadIdx.x + i * blockDim.x;
		if (j < nvec) {
			r[i] = zr[j];
			const __nv_bfloat162 *p = (const __nv_bfloat162 *)&r[i];
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 f = __bfloat1622float2(p[e]);
				mx = fmaxf(mx, fmaxf(f.x, f.y));
			}
		}
	}
	mx = block_reduce(mx, sh, 1);
	float s = 0;
#pragma unroll
	for (int i = 0; i < NV; i++) {
		if (threadIdx.x + i * blockDim.x < nvec) {
			const __nv_bfloat162 *p = (const __nv_bfloat162 *)&r[i];
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 f = __bfloat1622float2(p[e]);
				s += __expf(f.x - mx) + __expf(f.y - mx);
			}
		}
	}
	s = block_reduce(s, sh, 0);
	float l = mx + logf(s);
	if (threadIdx.x == 0) {
		lse[row] = l;
		loss[row] = t < 0 ? 0.0f : l - zt_sh;
	}
	if (!grad)
		return;
	float d = t < 0 ? 0.0f : scale;
#pragma unroll
	for (int i = 0; i < NV; i++) {
		int j = threadIdx.x + i * blockDim.x;
		if (j < nvec) {
			__nv_bfloat162 *p = (__nv_bfloat162 *)&r[i];
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 f = __bfloat1622float2(p[e]);
				float g0 = __expf(f.x - l) * d, g1 = __expf(f.y - l) * d;
				int v = j * 8 + e * 2;
				if (v == t)
					g0 -= d;
				if (v + 1 == t)
					g1 -= d;
				p[e] = __floats2bfloat162_rn(g0, g1);
			}
			zr[j] = r[i];
		}
	}
}

// The same for rows too long for registers (V / 8 > 4096 vectors): an
// online max and sum in one pass, then the gradient from a second read of
// the row, which the first read has just brought into L2.
__global__ void __launch_bounds__(1024) fused_stream_kernel(bf16 *z, float *loss, float *lse,
							    const int32_t *targets, float scale, int V,
							    int grad, const int *guard)
{
	__shared__ float sh[WARP];
	__shared__ float zt_sh;
	if (skip(guard))
		return;
	int row = blockIdx.x, t = targets[row], nvec = V / 8;
	uint4 *zr = (uint4 *)(z + (size_t)row * V);
	if (threadIdx.x == 0)
		zt_sh = t >= 0 ? ld(z + (size_t)row * V + t) : 0.0f;
	float m = -INFINITY, s = 0;
	for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
		uint4 r = zr[j];
		const __nv_bfloat162 *p = (const __nv_bfloat162 *)&r;
		float f[8], vm = -INFINITY;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 x = __bfloat1622float2(p[e]);
			f[2 * e] = x.x;
			f[2 * e + 1] = x.y;
			vm = fmaxf(vm, fmaxf(x.x, x.y));
		}
		float nm = fmaxf(m, vm), acc = 0;
#pragma unroll
		for (int e = 0; e < 8; e++)
			acc += __expf(f[e] - nm);
		s = s * __expf(m - nm) + acc;
		m = nm;
	}
	float M = block_reduce(m, sh, 1);
	s = block_reduce(m == -INFINITY ? 0.0f : s * __expf(m - M), sh, 0);
	float l = M + logf(s);
	if (threadIdx.x == 0) {
		lse[row] = l;
		loss[row] = t < 0 ? 0.0f : l - zt_sh;
	}
	if (!grad)
		return;
	float d = t < 0 ? 0.0f : scale;
	for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
		uint4 r = zr[j];
		__nv_bfloat162 *p = (__nv_bfloat162 *)&r;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 f = __bfloat1622float2(p[e]);
			float g0 = __expf(f.x - l) * d, g1 = __expf(f.y - l) * d;
			int v = j * 8 + e * 2;
			if (v == t)
				g0 -= d;
			if (v + 1 == t)
				g1 -= d;
			p[e] = __floats2bfloat162_rn(g0, g1);
		}
		zr[j] = r;
	}
}

template <int NV>
void launch_fused(bf16 *z, float *loss, float *lse, const int32_t *targets, float scale, int N,
		  int V, int grad, const int *guard, cudaStream_t st)
{
	int nvec = V / 8, threads = (nvec + NV - 1) / NV;
	threads = (threads + WARP - 1) / WARP * WARP;
	fused_kernel<NV><<<N, threads, 0, st>>>(z, loss, lse, targets, scale, V, grad, guard);
}

}  // namespace

extern "C" int xent_fused_guarded_cuda(uint16_t *logits, float *loss, float *lse,
				       const int32_t *targets, float scale, int N, int V,
				       double *loss_sum, int grad, const int *guard, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	bf16 *z = (bf16 *)logits;
	int nvec = V / 8;
	if (V % 8 || ((uintptr_t)logits & 15)) {
		fwd_kernel<bf16><<<N, ROW_THREADS, 0, st>>>(loss, lse, z, targets, V, guard);
		if (grad)
			bwd_kernel<bf16><<<N, ROW_THREADS, 0, st>>>(z, z, lse, targets, NULL, scale, V,
								    guard);
	} else if (nvec <= 1024) {
		launch_fused<1>(z, loss, lse, targets, scale, N, V, grad, guard, st);
	} else if (nvec <= 2 * 1024) {
		launch_fused<2>(z, loss, lse, targets, scale, N, V, grad, guard, st);
	} else if (nvec <= 4 * 1024) {
		launch_fused<4>(z, loss, lse, targets, scale, N, V, grad, guard, st);
	} else {
		fused_stream_kernel<<<N, 1024, 0, st>>>(z, loss, lse, targets, scale, V, grad, guard);
	}
	if (loss_sum)
		sum_kernel<<<1, SUM_THREADS, 0, st>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_fused_cuda(uint16_t *logits, float *loss, float *lse, const int32_t *targets,
			       float scale, int N, int V, double *loss_sum, int grad, void *stream)
{
	return xent_fused_guarded_cuda(logits, loss, lse, targets, scale, N, V, loss_sum, grad, NULL,
				       stream);
}

extern "C" int xent_sum_cuda(double *loss_sum, const float *loss, int N, void *stream)
{
	sum_kernel<<<1, SUM_THREADS, 0, (cudaStream_t)stream>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_fwd_cuda(float *loss, float *lse, const uint16_t *logits,
			     const int32_t *targets, int N, int V, double *loss_sum, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	fwd_kernel<bf16><<<N, ROW_THREADS, 0, st>>>(loss, lse, (const bf16 *)logits, targets, V, NULL);
	if (loss_sum)
		sum_kernel<<<1, SUM_THREADS, 0, st>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_bwd_cuda(uint16_t *dlogits, const uint16_t *logits, const float *lse,
			     const int32_t *targets, const float *weights, float scale, int N, int V,
			     void *stream)
{
	bwd_kernel<bf16><<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, (const bf16 *)logits, lse, targets, weights, scale, V, NULL);
	return launched();
}

extern "C" int xent_fwd_f32_cuda(float *loss, float *lse, const float *logits,
				 const int32_t *targets, int N, int V, double *loss_sum, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	fwd_kernel<float><<<N, ROW_THREADS, 0, st>>>(loss, lse, logits, targets, V, NULL);
	if (loss_sum)
		sum_kernel<<<1, SUM_THREADS, 0, st>>>(loss_sum, loss, N);
	return launched();
}

extern "C" int xent_bwd_f32_cuda(uint16_t *dlogits, const float *logits, const float *lse,
				 const int32_t *targets, const float *weights, float scale, int N,
				 int V, void *stream)
{
	bwd_kernel<float><<<N, ROW_THREADS, 0, (cudaStream_t)stream>>>(
		(bf16 *)dlogits, logits, lse, targets, weights, scale, V, NULL);
	return launched();
}
