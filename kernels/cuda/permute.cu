// permute.cu: CUDA twin of the layout changes around attention (see
// kernels/permute.h), on bf16: qkv[B, T, 3, H, D] <-> q, k, v [B, H, T, D],
// and o[B, H, T, D] <-> y[B, T, H, D].  One thread per element of the
// [B, H, T, D] side.
#include "kernels/permute.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

// The index in a [B, T, S, H, D] tensor of element i of a [B, H, T, D] one
// (32-bit arithmetic: 64-bit divisions cost several times more; the
// launchers refuse tensors of 2^32 elements or more).
__device__ __forceinline__ unsigned btshd(unsigned i, unsigned T, unsigned S, unsigned s,
					  unsigned H, unsigned D)
{
	unsigned d = i % D, r = i / D, t = r % T, bh = r / T, h = bh % H, b = bh / H;
	return (((b * T + t) * S + s) * H + h) * D + d;
}

__global__ void split_kernel(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int H, int D)
{
	unsigned n = (unsigned)B * H * T * D;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		q[i] = qkv[btshd(i, T, 3, 0, H, D)];
		k[i] = qkv[btshd(i, T, 3, 1, H, D)];
		v[i] = qkv[btshd(i, T, 3, 2, H, D)];
	}
}

__global__ void merge_kernel(bf16 *qkv, const bf16 *q, const bf16 *k, const bf16 *v, int B, int T,
			     int H, int D)
{
	unsigned n = (unsigned)B * H * T * D;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		qkv[btshd(i, T, 3, 0, H, D)] = q[i];
		qkv[btshd(i, T, 3, 1, H, D)] = k[i];
		qkv[btshd(i, T, 3, 2, H, D)] = v[i];
	}
}

// to_bthd: y[B, T, H, D] = o[B, H, T, D]; else the inverse.
__global__ void heads_kernel(bf16 *dst, const bf16 *src, int B, int T, int H, int D, int to_bthd)
{
	unsigned n = (unsigned)B * H * T * D;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned j = btshd(i, T, 1, 0, H, D);
		if (to_bthd)
			dst[j] = src[i];
		else
			dst[i] = src[j];
	}
}

// heads_kernel in 16-byte vectors of 8 elements (D a multiple of 8).
__global__ void heads_vec_kernel(uint4 *dst, const uint4 *src, int B, int T, int H, int D8,
				 int to_bthd)
{
	unsigned n = (unsigned)B * H * T * D8;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned j = btshd(i, T, 1, 0, H, D8);
		if (to_bthd)
			dst[j] = src[i];
		else
			dst[i] = src[j];
	}
}

int heads(bf16 *dst, const bf16 *src, int B, int T, int H, int D, int to_bthd, void *stream)
{
	if (D % 8 == 0 && !((uintptr_t)dst & 15) && !((uintptr_t)src & 15)) {
		size_t n = (size_t)B * T * H * (D / 8);
		heads_vec_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(
			(uint4 *)dst, (const uint4 *)src, B, T, H, D / 8, to_bthd);
	} else {
		heads_kernel<<<grid_for((size_t)B * T * H * D), BLOCK, 0, (cudaStream_t)stream>>>(
			dst, src, B, T, H, D, to_bthd);
	}
	return launched();
}

size_t elems(int B, int T, int H, int D) { return (size_t)B * T * H * D; }

// The kernels index in 32 bits.
int too_big(int B, int T, int H, int D) { return 3 * elems(B, T, H, D) > UINT32_MAX; }

}  // namespace

extern "C" int qkv_split_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv, int B,
			      int T, int H, int D, void *stream)
{
	if (too_big(B, T, H, D))
		return -1;
	split_kernel<<<grid_for(elems(B, T, H, D)), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)q, (bf16 *)k, (bf16 *)v, (const bf16 *)qkv, B, T, H, D);
	return launched();
}

extern "C" int qkv_merge_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk,
			      const uint16_t *dv, int B, int T, int H, int D, void *stream)
{
	if (too_big(B, T, H, D))
		return -1;
	merge_kernel<<<grid_for(elems(B, T, H, D)), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dqkv, (const bf16 *)dq, (const bf16 *)dk, (const bf16 *)dv, B, T, H, D);
	return launched();
}

extern "C" int heads_merge_cuda(uint16_t *y, const uint16_t *o, int B, int T, int H, int D,
				void *stream)
{
	if (too_big(B, T, H, D))
		return -1;
	return heads((bf16 *)y, (const bf16 *)o, B, T, H, D, 1, stream);
}

extern "C" int heads_split_cuda(uint16_t *dO, const uint16_t *dy, int B, int T, int H, int D,
				void *stream)
{
	if (too_big(B, T, H, D))
		return -1;
	return heads((bf16 *)dO, (const bf16 *)dy, B, T, H, D, 0, stream);
}

namespace {

// dst[r, 0..Dp) = src[r, 0..D) then zeros (pad), or dst[r, 0..D) =
// src[r, 0..Dp) (unpad: D < Dp, src padded).
__global__ void pad_kernel(bf16 *dst, int Dd, const bf16 *src, int Ds, size_t rows)
{
	size_t n = rows * Dd;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / Dd;
		int d = (int)(i % Dd);
		dst[i] = d < Ds ? src[r * Ds + d] : __float2bfloat16(0.0f);
	}
}

}  // namespace

extern "C" int rows_pad_cuda(uint16_t *dst, int Dd, const uint16_t *src, int Ds, size_t rows,
			     void *stream)
{
	pad_kernel<<<grid_for(rows * Dd), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dst, Dd, (const bf16 *)src, Ds, rows);
	return launched();
}
