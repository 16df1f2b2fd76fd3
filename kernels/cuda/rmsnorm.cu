// rmsnorm.cu: CUDA twin of RMSNorm (see kernels/rmsnorm.h): fp32 input (the
// residual stream), gains and rstd; bf16 output y and output gradient dy;
// the backward pass accumulates dx (fp32) and dw.  One warp a row; the
// backward's dw is summed per warp in shared memory, per block in a fixed
// order into a workspace row, and over the blocks in order by a second
// kernel: no atomics, the same bits run to run.
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

// dx for each row, and this block's partial dw: each warp sums its rows'
// dw terms into its own shared row (no atomics), then the warps' rows are
// added in a fixed order and written to partial[blockIdx.x].
__global__ void bwd_kernel(float *dx, float *partial, const bf16 *dy, const float *x,
			   const float *w, const float *rstd, int N, int C)
{
	extern __shared__ float sdw[];
	int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	float *mine = sdw + (size_t)warp * C;
	for (int c = lane; c < C; c += WARP)
		mine[c] = 0;
	for (int n = blockIdx.x * ROW_WARPS + warp; n < N; n += gridDim.x * ROW_WARPS) {
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
			mine[c] += g * xr[c] * r;
		}
	}
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0;
		for (int i = 0; i < ROW_WARPS; i++)
			t += sdw[(size_t)i * C + c];
		partial[(size_t)blockIdx.x * C + c] = t;
	}
}

// dw[c] += the blocks' partials, in block order.
__global__ void dw_kernel(float *dw, const float *partial, int blocks, int C)
{
	for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
		float t = 0;
		for (int b = 0; b < blocks; b++)
			t += partial[(size_t)b * C + c];
		dw[c] += t;
	}
}

// Few blocks for the backward pass, each over many rows: each block writes
// one row of dw partials.  Shared memory past SMEM_DEFAULT needs opting in.
enum { BWD_BLOCKS = 2 * 132, SMEM_DEFAULT = 48 << 10 };

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

extern "C" size_t rmsnorm_bwd_cuda_workspace(int N, int C)
{
	return (size_t)row_grid(N) * C * sizeof(float);
}

extern "C" int rmsnorm_bwd_cuda(float *dx, float *dw, const uint16_t *dy, const float *x,
				const float *w, const float *rstd, int N, int C, void *ws, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	size_t smem = (size_t)ROW_WARPS * C * sizeof(float);
	if (smem > SMEM_DEFAULT &&
	    cudaFuncSetAttribute(bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
		    cudaSuccess)
		return -1;
	unsigned g = row_grid(N);
	bwd_kernel<<<g, ROW_WARPS * WARP, smem, st>>>(dx, (float *)ws, (const bf16 *)dy, x, w, rstd, N, C);
	dw_kernel<<<grid_for((size_t)C), BLOCK, 0, st>>>(dw, (const float *)ws, (int)g, C);
	return launched();
}
