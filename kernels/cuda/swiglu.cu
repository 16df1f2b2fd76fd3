// swiglu.cu: CUDA twin of the SwiGLU gate (see kernels/swiglu.h) on bf16,
// computed in fp32.
#include "kernels/swiglu.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void fwd_kernel(bf16 *out, const bf16 *h, int N, int F)
{
	size_t n = (size_t)N * F;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / F, j = i % F;
		float g = ld(h + row * 2 * F + j), u = ld(h + row * 2 * F + F + j);
		float sig = 1.0f / (1.0f + __expf(-g));
		out[i] = to_bf16(g * sig * u);
	}
}

__global__ void bwd_kernel(bf16 *dh, const bf16 *dout, const bf16 *h, int N, int F)
{
	size_t n = (size_t)N * F;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / F, j = i % F;
		float g = ld(h + row * 2 * F + j), u = ld(h + row * 2 * F + F + j), d = ld(dout + i);
		float sig = 1.0f / (1.0f + __expf(-g));
		dh[row * 2 * F + F + j] = to_bf16(d * g * sig);
		dh[row * 2 * F + j] = to_bf16(d * u * sig * (1.0f + g * (1.0f - sig)));
	}
}

}  // namespace

extern "C" int swiglu_fwd_cuda(uint16_t *out, const uint16_t *h, int N, int F, void *stream)
{
	fwd_kernel<<<grid_for((size_t)N * F), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)out, (const bf16 *)h, N, F);
	return launched();
}

extern "C" int swiglu_bwd_cuda(uint16_t *dh, const uint16_t *dout, const uint16_t *h, int N, int F,
			       void *stream)
{
	bwd_kernel<<<grid_for((size_t)N * F), BLOCK, 0, (cudaStream_t)stream>>>(
		(bf16 *)dh, (const bf16 *)dout, (const bf16 *)h, N, F);
	return launched();
}
