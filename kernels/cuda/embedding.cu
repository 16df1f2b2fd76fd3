// embedding.cu: CUDA twin of the embedding lookup (see kernels/embedding.h):
// fp32 table and output.  The backward pass adds each row of dout into its
// token's row of dtable with atomic adds (the order of additions to one
// row, and so its last bits, may differ run to run); its deterministic
// version sorts the positions by token (a stable radix sort: positions of
// one token stay in order), then one block per distinct token sums that
// token's rows in position order and adds the sum once, as the CPU does.
#include <cub/device/device_radix_sort.cuh>

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

__global__ void iota_kernel(int32_t *pos, int N)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
		pos[i] = i;
}

// Block j: if sorted position j starts a run of one token, that run's rows
// summed in position order, added once into the token's row.
__global__ void run_sum_kernel(float *dtable, const int32_t *tok, const int32_t *pos,
			       const float *dout, int N, int C)
{
	int j = blockIdx.x;
	int32_t id = tok[j];
	if (j > 0 && tok[j - 1] == id)
		return;
	int end = j + 1;
	while (end < N && tok[end] == id)
		end++;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float acc = 0.0f;
		for (int p = j; p < end; p++)
			acc += dout[(size_t)pos[p] * C + c];
		dtable[(size_t)id * C + c] += acc;
	}
}

// The workspace: sorted ids, positions in and out, then CUB's own.
struct det_layout {
	size_t tok_out, pos_in, pos_out, cub, cub_bytes, total;
};

det_layout layout(int N)
{
	det_layout l;
	size_t a = ((size_t)N * sizeof(int32_t) + 255) / 256 * 256;
	l.tok_out = 0;
	l.pos_in = a;
	l.pos_out = 2 * a;
	l.cub = 3 * a;
	l.cub_bytes = 0;
	cub::DeviceRadixSort::SortPairs(nullptr, l.cub_bytes, (const int32_t *)nullptr,
					(int32_t *)nullptr, (const int32_t *)nullptr, (int32_t *)nullptr, N);
	l.total = l.cub + l.cub_bytes;
	return l;
}

}  // namespace

extern "C" size_t embedding_bwd_det_cuda_workspace(int N)
{
	return layout(N).total;
}

extern "C" int embedding_bwd_det_cuda(float *dtable, const int32_t *ids, const float *dout, int N,
				      int C, void *ws, void *stream)
{
	if (N <= 0)
		return 0;
	cudaStream_t st = (cudaStream_t)stream;
	det_layout l = layout(N);
	char *w = (char *)ws;
	int32_t *tok = (int32_t *)(w + l.tok_out), *pin = (int32_t *)(w + l.pos_in);
	int32_t *pout = (int32_t *)(w + l.pos_out);
	size_t cub_bytes = l.cub_bytes;
	iota_kernel<<<grid_for((size_t)N), BLOCK, 0, st>>>(pin, N);
	if (cub::DeviceRadixSort::SortPairs(w + l.cub, cub_bytes, ids, tok, pin, pout, N, 0,
					    (int)(8 * sizeof(int32_t)), st) != cudaSuccess)
		return -1;
	run_sum_kernel<<<N, BLOCK, 0, st>>>(dtable, tok, pout, dout, N, C);
	return launched();
}

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
