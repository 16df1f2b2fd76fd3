// embedding.cu: CUDA twin of the embedding lookup (see kernels/embedding.h):
// fp32 table and output; the backward pass adds each row of dout into its
// token's row of dtable with atomic adds (the order of additions to one
// row, and so its last bits, may differ run to run).
#include "kernels/embedding.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

__global__ void fwd_kernel(float *out, const int32_t *ids, const float *table, int N, int C)
{
	size_t n = (size_t)N * C;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / C, c = i % C;
		out[i] = table[(size_t)ids[row] * C + c];
	}
}

__global__ void bwd_kernel(float *dtable, const int32_t *ids, const float *dout, int N, int C)
{
	size_t n = (size_t)N * C;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / C, c = i % C;
		atomicAdd(dtable + (size_t)ids[row] * C + c, dout[i]);
	}
}

}  // namespace

extern "C" int embedding_fwd_cuda(float *out, const int32_t *ids, const float *table, int N, int C,
				  void *stream)
{
	fwd_kernel<<<grid_for((size_t)N * C), BLOCK, 0, (cudaStream_t)stream>>>(out, ids, table, N, C);
	return launched();
}

extern "C" int embedding_bwd_cuda(float *dtable, const int32_t *ids, const float *dout, int N, int C,
				  void *stream)
{
	bwd_kernel<<<grid_for((size_t)N * C), BLOCK, 0, (cudaStream_t)stream>>>(dtable, ids, dout, N, C);
	return launched();
}
