// rope.cu: CUDA twin of the rotary embedding (see kernels/rope.h), in place
// on bf16 [B, H, T, D] with the fp32 table cs[T, D/2, 2]; the backward pass
// rotates by the opposite angle.
#include "kernels/rope.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void rope_kernel(bf16 *x, const float *cs, int BH, int T, int D, float sign)
{
	unsigned half = D / 2, n = (unsigned)BH * T * half;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned row = i / half, j = i % half, t = row % T;
		bf16 *r = x + (size_t)row * D;
		float c = cs[((size_t)t * half + j) * 2], s = sign * cs[((size_t)t * half + j) * 2 + 1];
		float x0 = ld(r + j), x1 = ld(r + j + half);
		r[j] = to_bf16(x0 * c - x1 * s);
		r[j + half] = to_bf16(x1 * c + x0 * s);
	}
}

int apply(uint16_t *x, const float *cs, int B, int H, int T, int D, float sign, void *stream)
{
	size_t n = (size_t)B * H * T * (D / 2);
	if (n > UINT32_MAX)
		return -1;
	rope_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)x, cs, B * H, T, D, sign);
	return launched();
}

}  // namespace

extern "C" int rope_fwd_cuda(uint16_t *x, const float *cs, int B, int H, int T, int D, void *stream)
{
	return apply(x, cs, B, H, T, D, 1.0f, stream);
}

extern "C" int rope_bwd_cuda(uint16_t *dx, const float *cs, int B, int H, int T, int D, void *stream)
{
	return apply(dx, cs, B, H, T, D, -1.0f, stream);
}
