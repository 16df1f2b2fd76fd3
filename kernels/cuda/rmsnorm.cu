// rmsnorm.cu: CUDA twin of RMSNorm (see kernels/rmsnorm.h): fp32 input (the
// residual stream), gains and rstd; bf16 output y and output gradient dy;
// the backward pass accumulates dx (fp32) and dw.  One warp a row; the
// backward's dw is summed per block in shared memory, then added to dw
// with one atomic add per column and block.
#include "kernels/rmsnorm.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void fwd_kernel(bf16 *y, float *rstd, const float *x, const float *w, int N, int C,
			   float eps)
{
	int lane = threadIdx.x % WARP;
	for (int n = blockIdx.x * ROW_WARPS + threadIdx.x / WARP; n < N; n += gridDim.x * ROW_WARPS) {
		const float *xr = x + (size_t)n * C;
		float ss = 0;
		for (int c = lane; c < C; c += WARP)
			ss += xr[c] * xr[c];
		ss = warp_sum(ss);
		float r = rsqrtf(ss / C + eps);
		if (lane == 0)
			rstd[n] = r;
		bf16 *yr = y + (size_t)n * C;
		for (int c = lane; c < C; c += WARP)
			yr[c] = to_bf16(xr[c] * r * w[c]);
	}
}

__global__ void bwd_kernel(float *dx, float *dw, const bf16 *dy, const float *x, const float *w,
			   const float *rstd, int N, int C)
{
	extern __shared__ float sdw[];
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		sdw[c] = 0;
	__syncthreads();
	int lane = threadIdx.x % WARP;
	for (int n = blockIdx.x * ROW_WARPS + threadIdx.x / WARP; n < N; n += gridDim.x * ROW_WARPS) {
		const float *xr = x + (size_t)n * C;
		const bf16 *dyr = dy + (size_t)n * C;
		float r = rstd[n], dot = 0;
		for (int c = lane; c < C; c += WARP)
			dot += w[c] * ld(dyr + c) * xr[c];
		dot = warp_sum(dot);
		float k = r * r * r * dot / C;
		float *dxr = dx + (size_t)n * C;
		for (int c = lane; c < C; c += WARP) {
			float g = ld(dyr + c);
			dxr[c] += r * w[c] * g - k * xr[c];
			atomicAdd(sdw + c, g * xr[c] * r);
		}
	}
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		atomicAdd(dw + c, sdw[c]);
}

// Few blocks for the backward pass, each over many rows: its dw sums cost
// one atomic add per column and block.
enum { BWD_BLOCKS = 2 * 132 };

unsigned row_grid(int N)
{
	unsigned g = grid_for((size_t)N, ROW_WARPS);
	return g < BWD_BLOCKS ? g : BWD_BLOCKS;
}

}  // namespace

extern "C" int rmsnorm_fwd_cuda(uint16_t *y, float *rstd, const float *x, const float *w, int N,
				int C, float eps, void *stream)
{
	unsigned g = grid_for((size_t)N, ROW_WARPS);
	fwd_kernel<<<g, ROW_WARPS * WARP, 0, (cudaStream_t)stream>>>((bf16 *)y, rstd, x, w, N, C, eps);
	return launched();
}

extern "C" int rmsnorm_bwd_cuda(float *dx, float *dw, const uint16_t *dy, const float *x,
				const float *w, const float *rstd, int N, int C, void *stream)
{
	bwd_kernel<<<row_grid(N), ROW_WARPS * WARP, (size_t)C * sizeof(float), (cudaStream_t)stream>>>(
		dx, dw, (const bf16 *)dy, x, w, rstd, N, C);
	return launched();
}
