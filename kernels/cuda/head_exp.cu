// head_exp.cu: the LM head's steps around gemm_exp_cuda (see
// kernels/head_exp.h): each row's statistics and the target entries, the
// fallback's rs and xs, and the input gradient's row scaling.
#include "kernels/head_exp.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

// Outside [2^-60, 2^120] (or NaN) the unshifted exponentials lost or
// overflowed terms that matter: the chunk falls back.
constexpr float S_MIN = 0x1p-60f, S_MAX = 0x1p120f;

// The dot product of 8 bf16 pairs.
__device__ __forceinline__ float dot8(uint4 a, uint4 b)
{
	const __nv_bfloat162 *p = (const __nv_bfloat162 *)&a, *q = (const __nv_bfloat162 *)&b;
	float s = 0.0f;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		const float2 u = __bfloat1622float2(p[e]), v = __bfloat1622float2(q[e]);
		s = fmaf(u.x, v.x, s);
		s = fmaf(u.y, v.y, s);
	}
	return s;
}

// One warp a row: its partial sums in a fixed order (the same bits run to
// run), z_t, the loss, and with grad rs, xs and E's target entry.
__global__ void finish_kernel(bf16 *E, float *rs, bf16 *xs, float *loss, float *lse, int *flag,
			      const float *part, int ntn, const bf16 *x, const bf16 *w,
			      const int32_t *targets, float scale, int N, int C, int V, int grad)
{
	const int lane = threadIdx.x % WARP, row = blockIdx.x * ROW_WARPS + threadIdx.x / WARP;
	if (row >= N)
		return;
	const float *p = part + (size_t)row * ntn;
	float s = 0.0f;
	for (int k = lane; k < ntn; k += WARP)
		s += p[k];
	s = warp_sum(s);
	const int t = targets[row], nv = C / 8;
	const uint4 *xr = (const uint4 *)(x + (size_t)row * C);
	float zt = 0.0f;
	if (t >= 0) {
		const uint4 *wr = (const uint4 *)(w + (size_t)t * C);
		for (int j = lane; j < nv; j += WARP)
			zt += dot8(xr[j], wr[j]);
		zt = warp_sum(zt);
	}
	if (!(s >= S_MIN && s <= S_MAX)) {
		if (lane == 0)
			*flag = 1;
	}
	const float l = logf(s);
	if (lane == 0) {
		lse[row] = l;
		loss[row] = t < 0 ? 0.0f : l - zt;
	}
	if (!grad)
		return;
	const float r = (t < 0 ? 0.0f : scale) / s;
	if (lane == 0) {
		rs[row] = r;
		if (t >= 0)
			E[(size_t)row * V + t] = to_bf16(expf(zt) - s);
	}
	uint4 *xo = (uint4 *)(xs + (size_t)row * C);
	for (int j = lane; j < nv; j += WARP) {
		uint4 v = xr[j];
		__nv_bfloat162 *q = (__nv_bfloat162 *)&v;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const float2 f = __bfloat1622float2(q[e]);
			q[e] = __floats2bfloat162_rn(f.x * r, f.y * r);
		}
		xo[j] = v;
	}
}

__global__ void plain_kernel(float *rs, bf16 *xs, const bf16 *x, const int *flag, int N, size_t nv)
{
	if (!*flag)
		return;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride)
		((uint4 *)xs)[i] = ((const uint4 *)x)[i];
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)N; i += stride)
		rs[i] = 1.0f;
}

// Eight elements a thread (C is a multiple of 8: one row each).
__global__ void dx_kernel(bf16 *dx, const float *dxf, const float *rs, int C, size_t nv)
{
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride) {
		const float r = rs[i * 8 / C];
		const float4 a = ((const float4 *)dxf)[2 * i], b = ((const float4 *)dxf)[2 * i + 1];
		uint4 v;
		__nv_bfloat162 *q = (__nv_bfloat162 *)&v;
		q[0] = __floats2bfloat162_rn(a.x * r, a.y * r);
		q[1] = __floats2bfloat162_rn(a.z * r, a.w * r);
		q[2] = __floats2bfloat162_rn(b.x * r, b.y * r);
		q[3] = __floats2bfloat162_rn(b.z * r, b.w * r);
		((uint4 *)dx)[i] = v;
	}
}

bool aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

}  // namespace

extern "C" int head_exp_finish_cuda(uint16_t *E, float *rs, uint16_t *xs, float *loss, float *lse,
				    int *flag, const float *part, int ntn, const uint16_t *x,
				    const uint16_t *w, const int32_t *targets, float scale, int N,
				    int C, int V, int grad, void *stream)
{
	if (N <= 0 || C % 8 || V % 8 || !aligned(x) || !aligned(w) || (grad && !aligned(xs)))
		return -1;
	const unsigned blocks = (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
	finish_kernel<<<blocks, ROW_WARPS * WARP, 0, (cudaStream_t)stream>>>(
		(bf16 *)E, rs, (bf16 *)xs, loss, lse, flag, part, ntn, (const bf16 *)x,
		(const bf16 *)w, targets, scale, N, C, V, grad);
	return launched();
}

extern "C" int head_exp_plain_cuda(float *rs, uint16_t *xs, const uint16_t *x, const int *flag,
				   int N, int C, void *stream)
{
	if (N <= 0 || C % 8 || !aligned(x) || !aligned(xs))
		return -1;
	const size_t nv = (size_t)N * C / 8;
	plain_kernel<<<grid_for(nv), BLOCK, 0, (cudaStream_t)stream>>>(rs, (bf16 *)xs,
								       (const bf16 *)x, flag, N, nv);
	return launched();
}

extern "C" int head_exp_dx_cuda(uint16_t *dx, const float *dxf, const float *rs, int N, int C,
				void *stream)
{
	if (N <= 0 || C % 8 || !aligned(dx) || !aligned(dxf))
		return -1;
	const size_t nv = (size_t)N * C / 8;
	dx_kernel<<<grid_for(nv), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)dx, dxf, rs, C, nv);
	return launched();
}
