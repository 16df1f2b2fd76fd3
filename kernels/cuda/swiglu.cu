// swiglu.cu: CUDA twin of the SwiGLU gate (see kernels/swiglu.h) on bf16,
// computed in fp32.
#include "kernels/swiglu.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

// One thread per pair of outputs (F is even in every shape the model
// takes; an odd F runs a thread per element), 32-bit indices.
__global__ void fwd_kernel(bf16 *out, const bf16 *h, int N, int F)
{
	unsigned n = (unsigned)N * F;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F, j = i % F;
		const bf16 *hr = h + (size_t)row * 2 * F;
		float g = ld(hr + j), u = ld(hr + F + j);
		float sig = 1.0f / (1.0f + __expf(-g));
		out[i] = to_bf16(g * sig * u);
	}
}

__global__ void fwd2_kernel(__nv_bfloat162 *out, const __nv_bfloat162 *h, int N, int F2)
{
	unsigned n = (unsigned)N * F2;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F2, j = i % F2;
		float2 g = __bfloat1622float2(h[(size_t)row * 2 * F2 + j]);
		float2 u = __bfloat1622float2(h[(size_t)row * 2 * F2 + F2 + j]);
		float sx = 1.0f / (1.0f + __expf(-g.x)), sy = 1.0f / (1.0f + __expf(-g.y));
		out[i] = __floats2bfloat162_rn(g.x * sx * u.x, g.y * sy * u.y);
	}
}

__global__ void bwd_kernel(bf16 *dh, const bf16 *dout, const bf16 *h, int N, int F)
{
	unsigned n = (unsigned)N * F;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F, j = i % F;
		size_t o = (size_t)row * 2 * F + j;
		float g = ld(h + o), u = ld(h + o + F), d = ld(dout + i);
		float sig = 1.0f / (1.0f + __expf(-g));
		dh[o + F] = to_bf16(d * g * sig);
		dh[o] = to_bf16(d * u * sig * (1.0f + g * (1.0f - sig)));
	}
}

__global__ void bwd2_kernel(__nv_bfloat162 *dh, const __nv_bfloat162 *dout,
			    const __nv_bfloat162 *h, int N, int F2)
{
	unsigned n = (unsigned)N * F2;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F2, j = i % F2;
		size_t o = (size_t)row * 2 * F2 + j;
		float2 g = __bfloat1622float2(h[o]), u = __bfloat1622float2(h[o + F2]);
		float2 d = __bfloat1622float2(dout[i]);
		float sx = 1.0f / (1.0f + __expf(-g.x)), sy = 1.0f / (1.0f + __expf(-g.y));
		dh[o + F2] = __floats2bfloat162_rn(d.x * g.x * sx, d.y * g.y * sy);
		dh[o] = __floats2bfloat162_rn(d.x * u.x * sx * (1.0f + g.x * (1.0f - sx)),
					      d.y * u.y * sy * (1.0f + g.y * (1.0f - sy)));
	}
}

// fwd2_kernel and bwd2_kernel in 16-byte vectors of 8 (F a multiple of 8,
// 16-byte aligned tensors): the same arithmetic, a quarter of the accesses.
__global__ void fwd8_kernel(uint4 *out, const uint4 *h, int N, int F8)
{
	unsigned n = (unsigned)N * F8;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F8, j = i % F8;
		uint4 gv = h[(size_t)row * 2 * F8 + j], uv = h[(size_t)row * 2 * F8 + F8 + j], ov;
		const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)&gv, *u2 = (const __nv_bfloat162 *)&uv;
		__nv_bfloat162 *o2 = (__nv_bfloat162 *)&ov;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 g = __bfloat1622float2(g2[e]), u = __bfloat1622float2(u2[e]);
			float sx = 1.0f / (1.0f + __expf(-g.x)), sy = 1.0f / (1.0f + __expf(-g.y));
			o2[e] = __floats2bfloat162_rn(g.x * sx * u.x, g.y * sy * u.y);
		}
		out[i] = ov;
	}
}

__global__ void bwd8_kernel(uint4 *dh, const uint4 *dout, const uint4 *h, int N, int F8)
{
	unsigned n = (unsigned)N * F8;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / F8, j = i % F8;
		size_t o = (size_t)row * 2 * F8 + j;
		uint4 gv = h[o], uv = h[o + F8], dv = dout[i], dg, du;
		const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)&gv, *u2 = (const __nv_bfloat162 *)&uv;
		const __nv_bfloat162 *d2 = (const __nv_bfloat162 *)&dv;
		__nv_bfloat162 *dg2 = (__nv_bfloat162 *)&dg, *du2 = (__nv_bfloat162 *)&du;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 g = __bfloat1622float2(g2[e]), u = __bfloat1622float2(u2[e]);
			float2 d = __bfloat1622float2(d2[e]);
			float sx = 1.0f / (1.0f + __expf(-g.x)), sy = 1.0f / (1.0f + __expf(-g.y));
			du2[e] = __floats2bfloat162_rn(d.x * g.x * sx, d.y * g.y * sy);
			dg2[e] = __floats2bfloat162_rn(d.x * u.x * sx * (1.0f + g.x * (1.0f - sx)),
						       d.y * u.y * sy * (1.0f + g.y * (1.0f - sy)));
		}
		dh[o + F8] = du;
		dh[o] = dg;
	}
}

bool vec8(int F, const void *a, const void *b, const void *c)
{
	return F % 8 == 0 && !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15);
}

}  // namespace

extern "C" int swiglu_fwd_cuda(uint16_t *out, const uint16_t *h, int N, int F, void *stream)
{
	if ((size_t)N * F > UINT32_MAX)
		return -1;
	if (vec8(F, out, h, h)) {
		fwd8_kernel<<<grid_for((size_t)N * F / 8), BLOCK, 0, (cudaStream_t)stream>>>(
			(uint4 *)out, (const uint4 *)h, N, F / 8);
		return launched();
	}
	if (F % 2 == 0) {
		fwd2_kernel<<<grid_for((size_t)N * F / 2), BLOCK, 0, (cudaStream_t)stream>>>(
			(__nv_bfloat162 *)out, (const __nv_bfloat162 *)h, N, F / 2);
		return launched();
	}
	fwd_kernel<<<grid_for((size_t)N * F), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)out, (const bf16 *)h, N, F);
	return launched();
}

extern "C" int swiglu_bwd_cuda(uint16_t *dh, const uint16_t *dout, const uint16_t *h, int N, int F,
			       void *stream)
{
	if ((size_t)N * F > UINT32_MAX)
		return -1;
	if (vec8(F, dh, dout, h)) {
		bwd8_kernel<<<grid_for((size_t)N * F / 8), BLOCK, 0, (cudaStream_t)stream>>>(
			(uint4 *)dh, (const uint4 *)dout, (const uint4 *)h, N, F / 8);
		return launched();
	}
	if (F % 2 == 0) {
		bwd2_kernel<<<grid_for((size_t)N * F / 2), BLOCK, 0, (cudaStream_t)stream>>>(
			(__nv_bfloat162 *)dh, (const __nv_bfloat162 *)dout, (const __nv_bfloat162 *)h, N,
			F / 2);
		return launched();
	}
	bwd_kernel<<<grid_for((size_t)N * F), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dh, (const bf16 *)dout, (const bf16 *)h, N, F);
	return launched();
}
