// relu2.cu: CUDA twin of the squared ReLU (see kernels/relu2.h) on bf16,
// computed in fp32, a grid-stride loop.
#include "kernels/relu2.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void fwd_kernel(bf16 *out, const bf16 *h, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float r = fmaxf(ld(h + i), 0.0f);
		out[i] = to_bf16(r * r);
	}
}

__global__ void bwd_kernel(bf16 *dh, const bf16 *dout, const bf16 *h, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float r = fmaxf(ld(h + i), 0.0f);
		dh[i] = to_bf16(2.0f * r * ld(dout + i));
	}
}

}  // namespace

extern "C" int relu2_fwd_cuda(uint16_t *out, const uint16_t *h, size_t n, void *stream)
{
	fwd_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)out, (const bf16 *)h, n);
	return launched();
}

extern "C" int relu2_bwd_cuda(uint16_t *dh, const uint16_t *dout, const uint16_t *h, size_t n,
			      void *stream)
{
	bwd_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)dh, (const bf16 *)dout,
								    (const bf16 *)h, n);
	return launched();
}
