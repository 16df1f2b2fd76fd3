// ops_cuda.cuh: what the CUDA twins of the small ops share: the bf16 type,
// conversions, launch sizes, warp reductions, and programmatic dependent
// launch.
#ifndef LMPIPE_OPS_CUDA_CUH
#define LMPIPE_OPS_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

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

// The i-th group of 4 (ld4) or 8 (ld8) consecutive values at p as fp32:
// 16- or 8-byte loads of fp32 or bf16 (p aligned to the group's bytes).
__device__ __forceinline__ void ld4(const float *p, int i, float v[4])
{
	const float4 a = ((const float4 *)p)[i];
	v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ __forceinline__ void ld4(const bf16 *p, int i, float v[4])
{
	const uint2 d = ((const uint2 *)p)[i];
	const float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&d.x);
	const float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&d.y);
	v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
template <typename X>
__device__ __forceinline__ void ld8(const X *p, float v[8])
{
	ld4(p, 0, v);
	ld4(p, 1, v + 4);
}
// Stores of one, 4 (st4: one 16- or 8-byte store) or 8 consecutive values
// (st8: 16-byte stores) at p, rounded to nearest where p is bf16.
__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(bf16 *p, float v) { *p = to_bf16(v); }
__device__ __forceinline__ void st4(float *p, const float v[4])
{
	*(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void st4(bf16 *p, const float v[4])
{
	const __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]);
	const __nv_bfloat162 b = __floats2bfloat162_rn(v[2], v[3]);
	uint2 u;
	u.x = *(const uint32_t *)&a;
	u.y = *(const uint32_t *)&b;
	*(uint2 *)p = u;
}
__device__ __forceinline__ void st8(float *p, const float v[8])
{
	st4(p, v);
	st4(p + 4, v + 4);
}
__device__ __forceinline__ void st8(bf16 *p, const float v[8])
{
	uint4 u;
	__nv_bfloat162 *h = (__nv_bfloat162 *)&u;
#pragma unroll
	for (int e = 0; e < 4; e++)
		h[e] = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
	*(uint4 *)p = u;
}
template <>
__device__ __forceinline__ void ld8(const bf16 *p, float v[8])
{
	const uint4 d = *(const uint4 *)p;
	const __nv_bfloat162 *h = (const __nv_bfloat162 *)&d;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		const float2 f = __bfloat1622float2(h[e]);
		v[2 * e] = f.x, v[2 * e + 1] = f.y;
	}
}

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

// Programmatic dependent launch (PDL, sm_90): a kernel launched by
// launch_pdl may start while the kernel before it in the stream is still
// running, so that its blocks are resident when that one ends (at a few
// microseconds a kernel, the launch gap is a good part of a decoding
// step).  Such a kernel must call pdl_begin() first: it waits until the
// kernel before has finished and its writes are visible, so nothing is
// read or written early, then lets the next kernel start in turn.  The
// kernels' results are the same bits as with plain launches.
// LMPIPE_NO_PDL=1 in the environment makes every launch a plain one.
__device__ __forceinline__ void pdl_begin()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

static inline int pdl_on()
{
	static int on = -1;
	if (on < 0) {
		const char *v = getenv("LMPIPE_NO_PDL");
		on = !(v && *v && *v != '0');
	}
	return on;
}

// kernel<<<grid, block, smem, stream>>>(args...), with PDL where it is on;
// 0, or -1 if the launch failed.
template <typename... P, typename... A>
static inline int launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
			     void *stream, A &&...args)
{
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = (cudaStream_t)stream;
	cfg.attrs = at;
	cfg.numAttrs = pdl_on() ? 1 : 0;
	return cudaLaunchKernelEx(&cfg, kernel, static_cast<A &&>(args)...) == cudaSuccess ? 0 : -1;
}

}  // namespace ops

#endif
