// headnorm.cu: CUDA twin of QK-norm's per-head RMSNorm (see
// kernels/headnorm.h): bf16 rows of D (a head vector), fp32 gains and rstd.
// One warp a row, in place allowed (a lane rewrites only what it read).  The
// backward's dw is summed per warp in shared memory, per block in a fixed
// order into a workspace row, and over the blocks in order by a second
// kernel, as rmsnorm.cu does: the same bits run to run.
#include "kernels/headnorm.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void fwd_kernel(bf16 *y, float *rstd, const bf16 *x, const float *w, size_t rows,
			   int D, float eps)
{
	int lane = threadIdx.x % WARP;
	for (size_t r = blockIdx.x * (size_t)ROW_WARPS + threadIdx.x / WARP; r < rows;
	     r += (size_t)gridDim.x * ROW_WARPS) {
		const bf16 *xr = x + r * D;
		float ss = 0;
		for (int d = lane; d < D; d += WARP) {
			float v = ld(xr + d);
			ss += v * v;
		}
		ss = warp_sum(ss);
		float s = rsqrtf(ss / D + eps);
		if (lane == 0)
			rstd[r] = s;
		bf16 *yr = y + r * D;
		for (int d = lane; d < D; d += WARP)
			yr[d] = to_bf16(ld(xr + d) * s * w[d]);
	}
}

__global__ void bwd_kernel(bf16 *dx, float *partial, const bf16 *dy, const bf16 *x,
			   const float *w, const float *rstd, size_t rows, int D)
{
	__shared__ float sdw[ROW_WARPS][HEADNORM_CUDA_D_MAX];
	int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	for (int d = lane; d < D; d += WARP)
		sdw[warp][d] = 0;
	for (size_t r = blockIdx.x * (size_t)ROW_WARPS + warp; r < rows;
	     r += (size_t)gridDim.x * ROW_WARPS) {
		const bf16 *xr = x + r * D, *dyr = dy + r * D;
		float s = rstd[r], dot = 0;
		for (int d = lane; d < D; d += WARP)
			dot += w[d] * ld(dyr + d) * ld(xr + d);
		dot = warp_sum(dot);
		float k = s * s * s * dot / D;
		bf16 *dxr = dx + r * D;
		for (int d = lane; d < D; d += WARP) {
			float g = ld(dyr + d), xv = ld(xr + d);
			sdw[warp][d] += g * xv * s;
			dxr[d] = to_bf16(s * w[d] * g - k * xv);
		}
	}
	__syncthreads();
	for (int d = threadIdx.x; d < D; d += blockDim.x) {
		float t = 0;
		for (int i = 0; i < ROW_WARPS; i++)
			t += sdw[i][d];
		partial[(size_t)blockIdx.x * D + d] = t;
	}
}

__global__ void dw_kernel(float *dw, const float *partial, int blocks, int D)
{
	for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < D; d += gridDim.x * blockDim.x) {
		float t = 0;
		for (int b = 0; b < blocks; b++)
			t += partial[(size_t)b * D + d];
		dw[d] += t;
	}
}

// The decoding pass: a warp per head row of the fused projection, in place.
__global__ void qkv_kernel(bf16 *qkv, const float *wq, const float *wk, int N, int H, int Hkv,
			   int D, float eps)
{
	int lane = threadIdx.x % WARP;
	size_t heads = (size_t)H + Hkv, rows = (size_t)N * heads, width = (heads + Hkv) * D;
	for (size_t r = blockIdx.x * (size_t)ROW_WARPS + threadIdx.x / WARP; r < rows;
	     r += (size_t)gridDim.x * ROW_WARPS) {
		size_t i = r / heads, j = r % heads;
		bf16 *x = qkv + i * width + j * D;
		const float *w = j < (size_t)H ? wq : wk;
		float ss = 0;
		for (int d = lane; d < D; d += WARP) {
			float v = ld(x + d);
			ss += v * v;
		}
		ss = warp_sum(ss);
		float s = rsqrtf(ss / D + eps);
		for (int d = lane; d < D; d += WARP)
			x[d] = to_bf16(ld(x + d) * s * w[d]);
	}
}

enum { BWD_BLOCKS = 2 * 132 };

unsigned row_grid(size_t rows)
{
	unsigned g = grid_for(rows, ROW_WARPS);
	return g < BWD_BLOCKS ? g : BWD_BLOCKS;
}

}  // namespace

extern "C" int headnorm_fwd_cuda(uint16_t *y, float *rstd, const uint16_t *x, const float *w,
				 size_t rows, int D, float eps, void *stream)
{
	if (D < 1 || D > HEADNORM_CUDA_D_MAX)
		return -1;
	fwd_kernel<<<grid_for(rows, ROW_WARPS), ROW_WARPS * WARP, 0, (cudaStream_t)stream>>>(
		(bf16 *)y, rstd, (const bf16 *)x, w, rows, D, eps);
	return launched();
}

extern "C" size_t headnorm_bwd_cuda_workspace(size_t rows, int D)
{
	return (size_t)row_grid(rows) * D * sizeof(float);
}

extern "C" int headnorm_bwd_cuda(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
				 const float *w, const float *rstd, size_t rows, int D, void *ws,
				 void *stream)
{
	if (D < 1 || D > HEADNORM_CUDA_D_MAX)
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	unsigned g = row_grid(rows);
	bwd_kernel<<<g, ROW_WARPS * WARP, 0, st>>>((bf16 *)dx, (float *)ws, (const bf16 *)dy,
						   (const bf16 *)x, w, rstd, rows, D);
	dw_kernel<<<grid_for((size_t)D), BLOCK, 0, st>>>(dw, (const float *)ws, (int)g, D);
	return launched();
}

extern "C" int qkv_headnorm_cuda(uint16_t *qkv, const float *wq, const float *wk, int N, int H,
				 int Hkv, int D, float eps, void *stream)
{
	if (D < 1 || D > HEADNORM_CUDA_D_MAX)
		return -1;
	size_t rows = (size_t)N * (H + Hkv);
	qkv_kernel<<<grid_for(rows, ROW_WARPS), ROW_WARPS * WARP, 0, (cudaStream_t)stream>>>(
		(bf16 *)qkv, wq, wk, N, H, Hkv, D, eps);
	return launched();
}
