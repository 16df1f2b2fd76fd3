// embedding.cu: CUDA twin of the embedding lookup (see kernels/embedding.h):
// fp32 table and output (or bf16 output: the residual stream kept in bf16; and
// a bf16 output gradient, the stream's gradient kept in bf16).  The backward
// pass adds each row of dout into its token's row of dtable with atomic adds,
// four floats at a time where the rows allow (the order of additions to one
// row, and so its last bits, may differ run to run); its deterministic version
// sorts the positions by token (a stable radix sort: positions of one token
// stay in order), then one block per distinct token sums that token's rows in
// position order and adds the sum once, as the CPU does.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/embedding.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

template <typename O>
__global__ void fwd_kernel(O *out, const int32_t *ids, const float *table, int N, int C)
{
	pdl_begin();
	size_t n = (size_t)N * C;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / C, c = i % C;
		st(out + i, table[(size_t)ids[row] * C + c]);
	}
}

template <typename D>
__global__ void bwd_kernel(float *dtable, const int32_t *ids, const D *dout, int N, int C)
{
	size_t n = (size_t)N * C;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t row = i / C, c = i % C;
		atomicAdd(dtable + (size_t)ids[row] * C + c, ld(dout + i));
	}
}

// The same with 16-byte atomics (sm_90's float4 atomicAdd), a quarter of
// the atomic operations, for C a multiple of 4 and aligned rows; 32-bit
// indices (n4 < 2^31).
template <typename D>
__global__ void bwd4_kernel(float4 *dtable, const int32_t *ids, const D *dout, int n4, int C4)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
		int row = i / C4, c = i - row * C4;
		float t[4];
		ld4(dout, i, t);
		float4 v = make_float4(t[0], t[1], t[2], t[3]);
#if __CUDA_ARCH__ >= 900
		atomicAdd(dtable + (size_t)ids[row] * C4 + c, v);
#else
		float *d = (float *)(dtable + (size_t)ids[row] * C4 + c);
		atomicAdd(d, v.x);
		atomicAdd(d + 1, v.y);
		atomicAdd(d + 2, v.z);
		atomicAdd(d + 3, v.w);
#endif
	}
}

__global__ void iota_kernel(int32_t *pos, int N)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
		pos[i] = i;
}

// Block j: if sorted position j starts a run of one token, that run's rows
// summed in position order, added once into the token's row.
template <typename D>
__global__ void run_sum_kernel(float *dtable, const int32_t *tok, const int32_t *pos,
			       const D *dout, int N, int C)
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
			acc += ld(dout + (size_t)pos[p] * C + c);
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

template <typename D>
int bwd_det(float *dtable, const int32_t *ids, const D *dout, int N, int C, void *ws,
	    cudaStream_t st)
{
	if (N <= 0)
		return 0;
	det_layout l = layout(N);
	char *w = (char *)ws;
	int32_t *tok = (int32_t *)(w + l.tok_out), *pin = (int32_t *)(w + l.pos_in);
	int32_t *pout = (int32_t *)(w + l.pos_out);
	size_t cub_bytes = l.cub_bytes;
	iota_kernel<<<grid_for((size_t)N), BLOCK, 0, st>>>(pin, N);
	if (cub::DeviceRadixSort::SortPairs(w + l.cub, cub_bytes, ids, tok, pin, pout, N, 0,
					    (int)(8 * sizeof(int32_t)), st) != cudaSuccess)
		return -1;
	run_sum_kernel<D><<<N, BLOCK, 0, st>>>(dtable, tok, pout, dout, N, C);
	return launched();
}

template <typename D>
int bwd(float *dtable, const int32_t *ids, const D *dout, int N, int C, cudaStream_t st)
{
	size_t n = (size_t)N * C;
	if (C % 4 == 0 && n / 4 < (size_t)1 << 31 && !((uintptr_t)dtable & 15) &&
	    !((uintptr_t)dout & (4 * sizeof(D) - 1))) {
		bwd4_kernel<D><<<grid_for(n / 4), BLOCK, 0, st>>>((float4 *)dtable, ids, dout,
								 (int)(n / 4), C / 4);
		return launched();
	}
	bwd_kernel<D><<<grid_for(n), BLOCK, 0, st>>>(dtable, ids, dout, N, C);
	return launched();
}

}  // namespace

extern "C" size_t embedding_bwd_det_cuda_workspace(int N)
{
	return layout(N).total;
}

extern "C" int embedding_bwd_det_cuda(float *dtable, const int32_t *ids, const float *dout, int N,
				      int C, void *ws, void *stream)
{
	return bwd_det(dtable, ids, dout, N, C, ws, (cudaStream_t)stream);
}

extern "C" int embedding_bwd_det_bf16_cuda(float *dtable, const int32_t *ids, const uint16_t *dout,
					   int N, int C, void *ws, void *stream)
{
	return bwd_det(dtable, ids, (const bf16 *)dout, N, C, ws, (cudaStream_t)stream);
}

extern "C" int embedding_fwd_cuda(float *out, const int32_t *ids, const float *table, int N, int C,
				  void *stream)
{
	return launch_pdl(fwd_kernel<float>, grid_for((size_t)N * C), BLOCK, 0, stream, out, ids, table,
			  N, C);
}

extern "C" int embedding_fwd_bf16_cuda(uint16_t *out, const int32_t *ids, const float *table, int N,
				       int C, void *stream)
{
	return launch_pdl(fwd_kernel<bf16>, grid_for((size_t)N * C), BLOCK, 0, stream, (bf16 *)out,
			  ids, table, N, C);
}

extern "C" int embedding_bwd_cuda(float *dtable, const int32_t *ids, const float *dout, int N, int C,
				  void *stream)
{
	return bwd(dtable, ids, dout, N, C, (cudaStream_t)stream);
}

extern "C" int embedding_bwd_bf16_cuda(float *dtable, const int32_t *ids, const uint16_t *dout,
				       int N, int C, void *stream)
{
	return bwd(dtable, ids, (const bf16 *)dout, N, C, (cudaStream_t)stream);
}
