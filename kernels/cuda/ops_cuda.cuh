// ops_cuda.cuh: what the CUDA twins of the small ops share: the bf16 type,
// conversions, launch sizes and warp reductions.
#ifndef LMPIPE_OPS_CUDA_CUH
#define LMPIPE_OPS_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace ops {

typedef __nv_bfloat16 bf16;

enum {
	WARP = 32,
	BLOCK = 256,               // threads of an elementwise block
	ROW_WARPS = 8,             // rows (one a warp) of a row-wise block
	GRID_MAX = 132 * 16,       // blocks of a grid-stride loop: 16 per SM of an H100/H200
};

__device__ __forceinline__ float ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float warp_sum(float x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

__device__ __forceinline__ float warp_max(float x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
	return x;
}

// The sum of each thread's s over the block, by halving in a fixed order
// (the same bits run to run); sh holds blockDim.x doubles, blockDim.x a
// power of two.
__device__ __forceinline__ double block_sum(double s, double *sh)
{
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	return sh[0];
}

// Blocks for n elements, one thread each, capped for grid-stride loops.
static inline unsigned grid_for(size_t n, unsigned block = BLOCK)
{
	size_t g = (n + block - 1) / block;
	return (unsigned)(g < GRID_MAX ? (g ? g : 1) : GRID_MAX);
}

// 0, or -1 if the launch failed; the error stays for the caller to read.
static inline int launched() { return cudaPeekAtLastError() == cudaSuccess ? 0 : -1; }

}  // namespace ops

#endif
