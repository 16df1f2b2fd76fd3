// convert.cu: fp32 <-> bf16 conversions and the fp32 addition into bf16
// (see kernels/convert.h).
#include "kernels/convert.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void to_bf16_kernel(bf16 *d, const float *s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		d[i] = to_bf16(s[i]);
}

__global__ void to_f32_kernel(float *d, const bf16 *s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		d[i] = ld(s + i);
}

__global__ void add_kernel(bf16 *d, const float *s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		d[i] = to_bf16(ld(d + i) + s[i]);
}

}  // namespace

extern "C" int f32_to_bf16_cuda(uint16_t *dst, const float *src, size_t n, void *stream)
{
	to_bf16_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)dst, src, n);
	return launched();
}

extern "C" int bf16_to_f32_cuda(float *dst, const uint16_t *src, size_t n, void *stream)
{
	to_f32_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(dst, (const bf16 *)src, n);
	return launched();
}

extern "C" int bf16_add_f32_cuda(uint16_t *dst, const float *src, size_t n, void *stream)
{
	add_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>((bf16 *)dst, src, n);
	return launched();
}
