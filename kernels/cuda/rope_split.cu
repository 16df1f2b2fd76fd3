// rope_split.cu: the layout change from qkv[B, T, 3, H, D] to q, k, v
// [B, H, T, D] with RoPE applied to q and k on the way (kernels/permute.h,
// qkv_rope_split_cuda), its backward, which rotates dq and dk back and writes
// dqkv, and RoPE of q and k in place in qkv (qkv_rope_cuda).  The arithmetic of
// qkv_split then rope_fwd (fp32 from bf16, rounded once), so the same bits;
// one pass over memory instead of three, in 16-byte vectors.
//
// A thread takes one head's elements [8c, 8c + 8) and their RoPE partners
// [D/2 + 8c, D/2 + 8c + 8): the "rotate half" pairs (kernels/rope.h).
#include "kernels/permute.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

// Rotate the 8 pairs (a[e], b[e]) of position t, columns j0.. of the table
// cs[T, D/2, 2], by sign times the angle.
__device__ __forceinline__ void rotate(uint4 &a, uint4 &b, const float *cs, int j0, float sign)
{
	__nv_bfloat162 *pa = (__nv_bfloat162 *)&a, *pb = (__nv_bfloat162 *)&b;
	const float4 *c4 = (const float4 *)(cs + 2 * j0);
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float4 r = c4[e];  // cos, sin of pair 2e, then of pair 2e + 1
		float2 x0 = __bfloat1622float2(pa[e]), x1 = __bfloat1622float2(pb[e]);
		float s0 = sign * r.y, s1 = sign * r.w;
		pa[e] = __floats2bfloat162_rn(x0.x * r.x - x1.x * s0, x0.y * r.z - x1.y * s1);
		pb[e] = __floats2bfloat162_rn(x1.x * r.x + x0.x * s0, x1.y * r.z + x0.y * s1);
	}
}

// One thread per (row of qkv, which of q/k/v and head: r, chunk c).
__global__ void kernel(bf16 *qkv, bf16 *q, bf16 *k, bf16 *v, const float *cs, int B, int T, int H,
		       int D, int merge)
{
	unsigned CH = D / 16, n = (unsigned)B * T * 3 * H * CH, half = D / 2;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned c = i % CH, r = i / CH, h = r % H, s = (r / H) % 3, bt = r / (3 * H);
		unsigned t = bt % T, b = bt / T;
		bf16 *row = qkv + (size_t)r * D + 8 * c;
		bf16 *o = (s == 0 ? q : s == 1 ? k : v) + (((size_t)b * H + h) * T + t) * D + 8 * c;
		bf16 *src = merge ? o : row, *dst = merge ? row : o;
		uint4 a = *(const uint4 *)src, bb = *(const uint4 *)(src + half);
		if (s < 2)
			rotate(a, bb, cs + (size_t)t * D, 8 * c, merge ? -1.0f : 1.0f);
		*(uint4 *)dst = a;
		*(uint4 *)(dst + half) = bb;
	}
}

// In place: one thread per (row, q or k and head, chunk c).
__global__ void inplace_kernel(bf16 *qkv, const float *cs, int T, int H, int D, unsigned n)
{
	unsigned CH = D / 16, half = D / 2;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned c = i % CH, r = i / CH, sh = r % (2 * H), bt = r / (2 * H);
		bf16 *p = qkv + ((size_t)bt * 3 * H + sh) * D + 8 * c;
		uint4 a = *(const uint4 *)p, b = *(const uint4 *)(p + half);
		rotate(a, b, cs + (size_t)(bt % T) * D, 8 * c, 1.0f);
		*(uint4 *)p = a;
		*(uint4 *)(p + half) = b;
	}
}

int launch(bf16 *qkv, bf16 *q, bf16 *k, bf16 *v, const float *cs, int B, int T, int H, int D,
	   int merge, void *stream)
{
	size_t n = (size_t)B * T * 3 * H * (D / 16);
	if (D % 16 || 3 * (size_t)B * T * H * D > UINT32_MAX)
		return -1;
	kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(qkv, q, k, v, cs, B, T, H, D, merge);
	return launched();
}

}  // namespace

extern "C" int qkv_rope_split_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv,
				   const float *cs, int B, int T, int H, int D, void *stream)
{
	return launch((bf16 *)qkv, (bf16 *)q, (bf16 *)k, (bf16 *)v, cs, B, T, H, D, 0, stream);
}

extern "C" int qkv_rope_cuda(uint16_t *qkv, const float *cs, int B, int T, int H, int D,
			     void *stream)
{
	size_t n = (size_t)B * T * 2 * H * (D / 16);
	if (D % 16 || 3 * (size_t)B * T * H * D > UINT32_MAX)
		return -1;
	inplace_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)qkv, cs, T, H, D,
									 (unsigned)n);
	return launched();
}

extern "C" int qkv_rope_merge_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk,
				   const uint16_t *dv, const float *cs, int B, int T, int H, int D,
				   void *stream)
{
	return launch((bf16 *)dqkv, (bf16 *)dq, (bf16 *)dk, (bf16 *)dv, cs, B, T, H, D, 1, stream);
}
