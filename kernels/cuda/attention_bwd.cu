// attention_bwd.cu: FlashAttention-2 backward on tensor cores (see
// attention.h): the entry point and the steps around the key blocks.
//
// Three launches: (1) delta = rowsum(dout * o) per query row; (2) one
// block per tile of keys, its warpgroups owning the keys' dK, dV
// accumulators in registers, walking over the query tiles (from the
// diagonal on when causal): it recomputes P^T = exp(K Q^T scale - lse),
// then dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta) scale,
// dK += dS^T Q, and adds dQ += dS K into an fp32 workspace by bulk
// reductions (attention_bwd_ws.cu, sm_90a, gives dQ a warpgroup of its
// own); (3) dq = bf16(workspace).  The kernels of step (2) it replaced (a
// wgmma one whose key warpgroups also compute dQ, and an mma.sync one)
// are out of the default build, in variants/attention_bwd_fa2.cu, which
// runs them between this file's steps (1) and (3).
//
// The deterministic version (attn_bwd_det_cuda, --deterministic): step (2)
// stores each key block's dQ partial in a slice of its own instead of
// adding it (attention_bwd.cuh, DQ_KEYS), and step (3) sums the slices in
// key-block order before it converts, so no sum depends on which block
// finishes first.  dK and dV are sums within one block either way.
//
// attn_qkv_bwd_cuda runs the same three steps on the packed layout
// (kernels/attention.h): delta from y and dy [B, T, H, D], the key blocks
// reading qkv in place, and a conversion that rotates dQ back into qkv.
#include "attention_bwd.cuh"
#include "attention_cuda.cuh"
#include "kernels/attention.h"

#include <cuda_runtime.h>
#include <math.h>

namespace {

using namespace bwd;

constexpr int DELTA_THREADS = 256;  // delta kernel
constexpr int CONVERT_THREADS = 256;

// delta[row] = sum_d dout[row, d] o[row, d]: D / 8 lanes a row (8 or 16:
// attn_cuda_check allows D = 64 and 128), 16 bytes of o and of dout a lane,
// summed by shuffles within the row's lanes.  A warp a row, 4 bytes a lane,
// kept too few bytes in flight: 1 TB/s on gpt2s's 100 MB.  With H > 0, o
// and dout are [B, T, H, D] and row (b T + t) H + h's sum goes to
// delta[(b H + h) T + t], the [B, H, T] order of lse.
__global__ void delta_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ dout,
			     float *__restrict__ delta, size_t rows, int D, int H, int T)
{
	const int lanes = D / 8;
	const size_t i = (size_t)blockIdx.x * DELTA_THREADS + threadIdx.x;
	const size_t row = i / lanes;
	const int part = (int)(i % lanes);
	float s = 0;
	if (row < rows) {
		const uint4 a = *reinterpret_cast<const uint4 *>(o + row * D + part * 8);
		const uint4 b = *reinterpret_cast<const uint4 *>(dout + row * D + part * 8);
		const __nv_bfloat162 *pa = reinterpret_cast<const __nv_bfloat162 *>(&a);
		const __nv_bfloat162 *pb = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const float2 x = __bfloat1622float2(pa[e]), y = __bfloat1622float2(pb[e]);
			s += x.x * y.x + x.y * y.y;
		}
	}
	for (int m = lanes / 2; m; m >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, m);
	if (row >= rows || part)
		return;
	size_t at = row;
	if (H > 0) {
		const size_t bt = row / H, b = bt / T;
		at = (b * H + row % H) * T + bt % T;
	}
	delta[at] = s;
}

// Where float4 number i of the tiled workspace (attention_bwd.cuh) lies:
// head bh, query tile mt, and the first of its two rows (row, row + 8) and
// columns (col, col + 1).  tiles_row, tiles_head: tiles across a row and in
// a head.
struct tile_pos {
	size_t bh;
	int mt, row, col;
};

__device__ __forceinline__ tile_pos tile_at(size_t i, int tiles_row, int tiles_head)
{
	const size_t tile = i / (DQ_TILE / 4);
	const int within = (int)(i % (DQ_TILE / 4)), j = within / 128, thr = within % 128;
	const int th = (int)(tile % tiles_head), ct = th % tiles_row, lane = thr % 32;
	tile_pos p;
	p.bh = tile / tiles_head;
	p.mt = th / tiles_row;
	p.row = p.mt * DQ_ROWS + thr / 32 * 16 + lane / 4;
	p.col = ct * DQ_COLS + j * 8 + 2 * (lane % 4);
	return p;
}

// Float4 number i of the workspace holds v: its two bf16 pairs into dq
// [BH, T, D], the rows below T.
__device__ __forceinline__ void store_tile_f4(bf16 *out, float4 v, size_t i, int T, int D,
					      int tiles_row, int tiles_head)
{
	const tile_pos p = tile_at(i, tiles_row, tiles_head);
	bf16 *o = out + (p.bh * T + p.row) * D + p.col;
	if (p.row < T)
		*reinterpret_cast<uint32_t *>(o) = pack_bf16(v.x, v.y);
	if (p.row + 8 < T)
		*reinterpret_cast<uint32_t *>(o + 8 * D) = pack_bf16(v.z, v.w);
}

// dq = bf16(workspace), the workspace in attention_bwd.cuh's tiles: one
// float4 of a tile per thread, two bf16 pairs out.
__global__ void convert_tiles_kernel(const float4 *__restrict__ in, bf16 *__restrict__ out,
				     size_t BH, int T, int D)
{
	const int tiles_row = D / DQ_COLS, tiles_head = dq_rows_padded(T) / DQ_ROWS * tiles_row;
	const size_t n = BH * tiles_head * (DQ_TILE / 4);
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		store_tile_f4(out, in[i], i, T, D, tiles_row, tiles_head);
}

// The deterministic dq: the sum of the key blocks' slices of partials
// (attention_bwd.cuh, DQ_KEYS), slice 0 first, each float4 of a tile over
// the slices that wrote its query tile (dq_blocks_for), then as above.
__global__ void sum_convert_tiles_kernel(const float4 *__restrict__ in, bf16 *__restrict__ out,
					 size_t BH, int T, int D, int causal)
{
	const int tiles_row = D / DQ_COLS, tiles_head = dq_rows_padded(T) / DQ_ROWS * tiles_row;
	const size_t n = BH * tiles_head * (DQ_TILE / 4);  // float4s in a slice
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const int mt = (int)(i / (DQ_TILE / 4) % tiles_head) / tiles_row;
		const int nb = dq_blocks_for(mt, T, causal);
		float4 s = in[i];
		for (int kb = 1; kb < nb; kb++) {
			const float4 p = in[(size_t)kb * n + i];
			s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
		}
		store_tile_f4(out, s, i, T, D, tiles_row, tiles_head);
	}
}

// Float4 i of a slice of the workspace, or (DET) the sum over the slices
// that wrote its query tile, as sum_convert_tiles_kernel adds them.
template <bool DET>
__device__ __forceinline__ float4 dq_at(const float4 *in, size_t i, size_t n, int mt, int T,
					int causal)
{
	float4 s = in[i];
	if (DET) {
		const int nb = dq_blocks_for(mt, T, causal);
		for (int kb = 1; kb < nb; kb++) {
			const float4 p = in[(size_t)kb * n + i];
			s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
		}
	}
	return s;
}

// The packed layout's dq (attn_qkv_bwd_cuda): the workspace's dQ is the
// gradient of the rotated queries; rotated back by the RoPE table cs
// (kernels/rope.h) it becomes the q part of dqkv[B, T, 3, H, D].  A thread
// takes a float4 of columns c, c + 1 < D/2 and the one of their partners
// c + D/2, c + D/2 + 1 (same rows), and writes both.  In the workspace a
// band of a head's tiles_row tiles (DQ_ROWS rows, all D columns) holds the
// columns below D/2 in its first half (D = 64: the first four of a tile's
// eight column groups; D = 128: its first tile), the partners half a band
// on, so the threads go over half-bands only.
template <bool DET>
__global__ void convert_tiles_packed_kernel(const float4 *__restrict__ in, bf16 *__restrict__ dqkv,
					    const float *__restrict__ cs, size_t BH, int H, int T,
					    int D, int causal)
{
	const int tiles_row = D / DQ_COLS, tiles_head = dq_rows_padded(T) / DQ_ROWS * tiles_row;
	const size_t n = BH * tiles_head * (DQ_TILE / 4);
	const size_t half = (size_t)tiles_row * (DQ_TILE / 4) / 2;
	const size_t ld = 3 * (size_t)H * D;
	size_t h = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; h < n / 2; h += (size_t)gridDim.x * blockDim.x) {
		const size_t i = h / half * 2 * half + h % half;
		const tile_pos p = tile_at(i, tiles_row, tiles_head);
		if (p.row >= T)
			continue;
		const float4 a = dq_at<DET>(in, i, n, p.mt, T, causal);
		const float4 b = dq_at<DET>(in, i + half, n, p.mt, T, causal);
		const int row = p.row, col = p.col;
		bf16 *o = dqkv + ((p.bh / H) * T * 3 * H + p.bh % H) * (size_t)D + (size_t)row * ld + col;
		const float4 r = *reinterpret_cast<const float4 *>(cs + ((size_t)row * (D / 2) + col) * 2);
		*reinterpret_cast<uint32_t *>(o) = pack_bf16(a.x * r.x + b.x * r.y, a.y * r.z + b.y * r.w);
		*reinterpret_cast<uint32_t *>(o + D / 2) =
			pack_bf16(b.x * r.x - a.x * r.y, b.y * r.z - a.y * r.w);
		if (row + 8 < T) {
			const float4 r8 = *reinterpret_cast<const float4 *>(
				cs + ((size_t)(row + 8) * (D / 2) + col) * 2);
			*reinterpret_cast<uint32_t *>(o + 8 * ld) =
				pack_bf16(a.z * r8.x + b.z * r8.y, a.w * r8.z + b.w * r8.w);
			*reinterpret_cast<uint32_t *>(o + 8 * ld + D / 2) =
				pack_bf16(b.z * r8.x - a.z * r8.y, b.w * r8.z - a.w * r8.w);
		}
	}
}

// Blocks of CONVERT_THREADS for n float4s, at most 65536 (they stride).
unsigned convert_grid(size_t n)
{
	size_t blocks = (n / 4 + CONVERT_THREADS - 1) / CONVERT_THREADS;
	return (unsigned)(blocks < 65536 ? blocks : 65536);
}

// Check the arguments, set *acc to the start of the workspace and *delta
// after its acc_floats, zero the first (zero set) and compute delta.
int begin(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
	  const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv, int B,
	  int H, int T, int D, float scale, void *workspace, size_t acc_floats, int zero,
	  cudaStream_t st, float **acc, float **delta, int packed = 0)
{
	const void *ptrs[] = {q, k, v, o, dout, dq, dk, dv, workspace};
	int rc = attn_cuda_check(B, H, T, D, ptrs, 9, lse);
	if (rc)
		return rc;
	if (!(scale > 0 && scale < INFINITY))
		return ATTN_ESHAPE;
	const size_t rows = (size_t)B * H * T;
	*acc = (float *)workspace, *delta = *acc + acc_floats;
	if (zero && cudaMemsetAsync(*acc, 0, acc_floats * sizeof(float), st))
		return ATTN_EDEVICE;
	const size_t threads = rows * (size_t)(D / 8);
	delta_kernel<<<(unsigned)((threads + DELTA_THREADS - 1) / DELTA_THREADS), DELTA_THREADS, 0,
		       st>>>((const bf16 *)o, (const bf16 *)dout, *delta, rows, D, packed ? H : 0, T);
	return cudaGetLastError() ? ATTN_EDEVICE : ATTN_OK;
}

// Floats of one slice of dQ accumulators: every head's padded rows.
size_t dq_floats(int B, int H, int T, int D)
{
	return (size_t)B * H * dq_rows_padded(T) * D;
}

}  // namespace

extern "C" size_t attn_bwd_cuda_workspace(int B, int H, int T, int D)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return 0;
	return (dq_floats(B, H, T, D) + (size_t)B * H * T) * sizeof(float);
}

extern "C" size_t attn_bwd_det_cuda_workspace(int B, int H, int T, int D)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return 0;
	return ((size_t)dq_key_blocks(T) * dq_floats(B, H, T, D) + (size_t)B * H * T) * sizeof(float);
}

int attn_bwd_begin(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		   const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
		   int B, int H, int T, int D, float scale, void *workspace, cudaStream_t st,
		   float **dqacc, float **delta)
{
	return begin(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, scale, workspace,
		     dq_floats(B, H, T, D), 1, st, dqacc, delta);
}

int attn_bwd_convert_tiles(const float *dqacc, uint16_t *dq, int B, int H, int T, int D,
			   cudaStream_t st)
{
	convert_tiles_kernel<<<convert_grid(dq_floats(B, H, T, D)), CONVERT_THREADS, 0, st>>>(
		(const float4 *)dqacc, (bf16 *)dq, (size_t)B * H, T, D);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

extern "C" int attn_bwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v,
			     const uint16_t *o, const uint16_t *dout, const float *lse, uint16_t *dq,
			     uint16_t *dk, uint16_t *dv, int B, int H, int T, int D, int causal,
			     float scale, void *workspace, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	float *dqacc, *delta;
	int rc = attn_bwd_begin(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, scale, workspace, st,
				&dqacc, &delta);
	if (rc == ATTN_OK)
		rc = attn_bwd_ws(q, k, v, dout, lse, delta, dqacc, dk, dv, B * H, T, D, causal, scale,
				 0, st);
	if (rc == ATTN_OK)
		rc = attn_bwd_convert_tiles(dqacc, dq, B, H, T, D, st);
	return rc;
}

extern "C" int attn_bwd_det_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v,
				 const uint16_t *o, const uint16_t *dout, const float *lse,
				 uint16_t *dq, uint16_t *dk, uint16_t *dv, int B, int H, int T, int D,
				 int causal, float scale, void *workspace, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	float *part, *delta;
	const size_t slice = dq_floats(B > 0 ? B : 1, H > 0 ? H : 1, T > 0 ? T : 1, D > 0 ? D : 1);
	// every slice's tiles that the sum reads are written: nothing to zero
	int rc = begin(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, scale, workspace,
		       (size_t)dq_key_blocks(T > 0 ? T : 1) * slice, 0, st, &part, &delta);
	if (rc == ATTN_OK)
		rc = attn_bwd_ws(q, k, v, dout, lse, delta, part, dk, dv, B * H, T, D, causal, scale,
				 1, st);
	if (rc == ATTN_OK) {
		sum_convert_tiles_kernel<<<convert_grid(slice), CONVERT_THREADS, 0, st>>>(
			(const float4 *)part, (bf16 *)dq, (size_t)B * H, T, D, causal ? 1 : 0);
		rc = cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
	}
	return rc;
}

extern "C" int attn_qkv_bwd_cuda(uint16_t *qkv, const float *cs, const uint16_t *y,
				 const uint16_t *dy, const float *lse, int B, int H, int T, int D,
				 float scale, int det, void *workspace, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	uint16_t *k = qkv + (size_t)H * D, *v = qkv + 2 * (size_t)H * D;
	const void *ptrs[] = {qkv, y, dy, cs};
	int rc = attn_cuda_check(B, H, T, D, ptrs, 4, lse);
	if (rc)
		return rc;
	const size_t slice = dq_floats(B, H, T, D);
	float *acc, *delta;
	rc = begin(qkv, k, v, y, dy, lse, qkv, k, v, B, H, T, D, scale, workspace,
		   det ? (size_t)dq_key_blocks(T) * slice : slice, !det, st, &acc, &delta, 1);
	if (rc == ATTN_OK)
		rc = attn_bwd_ws_any(qkv, k, v, dy, lse, delta, acc, k, v, B * H, H, cs, T, D, 1,
				     scale, det, st);
	if (rc == ATTN_OK) {
		auto kern = det ? convert_tiles_packed_kernel<true> : convert_tiles_packed_kernel<false>;
		kern<<<convert_grid(slice / 2), CONVERT_THREADS, 0, st>>>((const float4 *)acc, (bf16 *)qkv,
								      cs, (size_t)B * H, H, T, D, 1);
		rc = cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
	}
	return rc;
}
