// gqa.cu: CUDA twins of grouped-query attention's layout changes (see
// kernels/gqa.h) on bf16: one thread per element of the [B, H, T, D]
// outputs (split) or of a token's q/k/v row (merge, whose kv sums run over
// the group in head order, in fp32).
#include "kernels/gqa.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void split_kernel(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int H,
			     int Hkv, int D)
{
	size_t n = (size_t)B * H * T * D, C = (size_t)H * D, KV = (size_t)Hkv * D;
	int G = H / Hkv;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int d = (int)(i % D);
		size_t r = i / D;
		int t = (int)(r % T), h = (int)(r / T % H);
		size_t b = r / T / H;
		const bf16 *src = qkv + (b * T + t) * (C + 2 * KV);
		size_t j = (size_t)(h / G) * D + d;
		q[i] = src[(size_t)h * D + d];
		k[i] = src[C + j];
		v[i] = src[C + KV + j];
	}
}

__global__ void merge_kernel(bf16 *dqkv, const bf16 *dq, const bf16 *dk, const bf16 *dv, int B,
			     int T, int H, int Hkv, int D)
{
	size_t C = (size_t)H * D, KV = (size_t)Hkv * D, W = C + 2 * KV, n = (size_t)B * T * W;
	int G = H / Hkv;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t bt = i / W, c = i % W;
		size_t b = bt / T, t = bt % T;
		if (c < C) {
			size_t h = c / D, d = c % D;
			dqkv[i] = dq[((b * H + h) * T + t) * D + d];
			continue;
		}
		const bf16 *src = c < C + KV ? dk : dv;
		size_t kc = (c - C) % KV, j = kc / D, d = kc % D;
		float s = 0;
		for (int g = 0; g < G; g++)
			s += ld(src + ((b * H + j * G + g) * T + t) * D + d);
		dqkv[i] = to_bf16(s);
	}
}

}  // namespace

extern "C" int qkv_split_gqa_cuda(uint16_t *q, uint16_t *k, uint16_t *v, const uint16_t *qkv,
				  int B, int T, int H, int Hkv, int D, void *stream)
{
	if (Hkv < 1 || H % Hkv)
		return -1;
	split_kernel<<<grid_for((size_t)B * H * T * D), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)q, (bf16 *)k, (bf16 *)v, (const bf16 *)qkv, B, T, H, Hkv, D);
	return launched();
}

extern "C" int qkv_merge_gqa_cuda(uint16_t *dqkv, const uint16_t *dq, const uint16_t *dk,
				  const uint16_t *dv, int B, int T, int H, int Hkv, int D,
				  void *stream)
{
	if (Hkv < 1 || H % Hkv)
		return -1;
	size_t n = (size_t)B * T * ((size_t)H + 2 * Hkv) * D;
	merge_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dqkv, (const bf16 *)dq, (const bf16 *)dk, (const bf16 *)dv, B, T, H, Hkv, D);
	return launched();
}
