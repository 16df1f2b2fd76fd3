// matmul_small.cu: the forward product for a few rows (a decoding step:
// N of 1 to MATMUL_SMALL_N tokens), where cuBLASLt's tiled kernels spend
// their time starting up: one warp per output feature reads its weight row
// once, in 16-byte pieces, and takes its dot product with every input row
// (8 at a time, kept in registers; more rows re-read the weight row from
// L2), fp32 accumulation, the warp's lanes summed by shuffles.
#include "kernels/matmul.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { ROWS = 8, WARPS_PER_BLOCK = 8 };

__device__ __forceinline__ void fma8(float *acc, uint4 w, uint4 x)
{
	const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&w, *x2 = (const __nv_bfloat162 *)&x;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float2 a = __bfloat1622float2(w2[i]), b = __bfloat1622float2(x2[i]);
		*acc += a.x * b.x + a.y * b.y;
	}
}

__global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP) small_kernel(void *out, const float *addend,
								      const bf16 *inp, const bf16 *w,
								      int N, int IN, int OUT)
{
	int o = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
	if (o >= OUT)
		return;
	const uint4 *wr = (const uint4 *)(w + (size_t)o * IN);
	int chunks = IN / 8;
	for (int r0 = 0; r0 < N; r0 += ROWS) {
		float acc[ROWS] = { 0 };
		int nr = min(ROWS, N - r0);
		for (int c = lane; c < chunks; c += WARP) {
			uint4 wv = wr[c];
#pragma unroll
			for (int r = 0; r < ROWS; r++)
				if (r < nr)
					fma8(&acc[r], wv, ((const uint4 *)(inp + (size_t)(r0 + r) * IN))[c]);
		}
#pragma unroll
		for (int r = 0; r < ROWS; r++) {
			float s = warp_sum(acc[r]);
			if (lane == 0 && r < nr) {
				size_t at = (size_t)(r0 + r) * OUT + o;
				if (addend)
					((float *)out)[at] = addend[at] + s;
				else
					((bf16 *)out)[at] = to_bf16(s);
			}
		}
	}
}

}  // namespace

extern "C" int matmul_small_applies(const void *inp, const void *w, int N, int IN)
{
	return N >= 1 && N <= MATMUL_SMALL_N && IN % 8 == 0 && !((uintptr_t)inp % 16) &&
	       !((uintptr_t)w % 16);
}

extern "C" int matmul_fwd_small_cuda(void *out, const float *addend, const uint16_t *inp,
				     const uint16_t *w, int N, int IN, int OUT, void *stream)
{
	unsigned blocks = (unsigned)((OUT + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
	small_kernel<<<blocks, WARPS_PER_BLOCK * WARP, 0, (cudaStream_t)stream>>>(
		out, addend, (const bf16 *)inp, (const bf16 *)w, N, IN, OUT);
	return launched();
}
