// attention.cu: FlashAttention-2 forward on tensor cores (see attention.h),
// and the launch checks both passes share.
//
// One block of NW warps owns BR = 16 NW query rows of one (batch, head);
// each warp owns 16 of them.  Key and value tiles of BC rows stream
// through shared memory (two buffers, cp.async, the next tile in flight
// while the current one is used).  S = Q K^T and O += P V run on
// mma.sync m16n8k16 (bf16 in, fp32 accumulators); the softmax is online
// (running max and sum per row, in base 2), so no T x T matrix exists
// anywhere.  Rows and keys past T are zero-filled and masked.
#include "attention.h"
#include "attention_cuda.cuh"
#include "mma.cuh"

#include <cuda_runtime.h>
#include <math.h>

// Tile configurations per head dimension: keys per tile (BC), warps (NW;
// the block owns 16 NW query rows) and blocks per SM the registers are
// capped for.  -D overrides them for tuning (bench/attention-notes.md).
#ifndef FWD64_BC
#define FWD64_BC 64
#endif
#ifndef FWD64_NW
#define FWD64_NW 4
#endif
#ifndef FWD64_MINB
#define FWD64_MINB 3
#endif
#ifndef FWD128_BC
#define FWD128_BC 64
#endif
#ifndef FWD128_NW
#define FWD128_NW 8
#endif
#ifndef FWD128_MINB
#define FWD128_MINB 1
#endif

namespace {

constexpr float LOG2E = 1.4426950408889634f;

template <int D, int BC, int NW>
struct FwdCfg {
	static constexpr int BR = 16 * NW, NT = 32 * NW;
	static constexpr size_t SMEM = (size_t)(BR * D + 4 * BC * D) * sizeof(bf16);
};

template <int D, int BC, int NW, int MINB>
__global__ void __launch_bounds__(32 * NW, MINB)
fwd_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k, const bf16 *__restrict__ v,
	   bf16 *__restrict__ o, float *__restrict__ lse, int T, int causal, float scale)
{
	using C = FwdCfg<D, BC, NW>;
	extern __shared__ __align__(128) unsigned char smem_raw[];
	bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw);
	bf16 *sK = sQ + C::BR * D;     // two buffers of BC x D
	bf16 *sV = sK + 2 * BC * D;    // two buffers of BC x D

	const int bh = blockIdx.x;
	const int qb = causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y;  // heavy blocks first
	const int q0 = qb * C::BR;
	const size_t off = (size_t)bh * T * D;
	q += off, k += off, v += off, o += off;
	const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const int wrow = q0 + warp * 16;  // first query row of this warp

	const int kend = causal ? min(T, q0 + C::BR) : T;
	const int nkv = (kend + BC - 1) / BC;
	load_tile<C::BR, D, C::NT>(sQ, q, q0, T);
	load_tile<BC, D, C::NT>(sK, k, 0, T);
	load_tile<BC, D, C::NT>(sV, v, 0, T);
	cp_async_commit();

	float acc[D / 8][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
		acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0;
	float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};
	const float sl2 = scale * LOG2E;

	for (int j = 0; j < nkv; j++) {
		cp_async_wait_all();
		__syncthreads();
		if (j + 1 < nkv) {
			int nb = (j + 1) & 1;
			load_tile<BC, D, C::NT>(sK + nb * BC * D, k, (j + 1) * BC, T);
			load_tile<BC, D, C::NT>(sV + nb * BC * D, v, (j + 1) * BC, T);
			cp_async_commit();
		}
		const bf16 *cK = sK + (j & 1) * BC * D, *cV = sV + (j & 1) * BC * D;
		const int k0 = j * BC;
		if (causal && k0 > wrow + 15)
			continue;  // every key of this tile is in this warp's future

		float s[BC / 8][4];
#pragma unroll
		for (int i = 0; i < BC / 8; i++)
			s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t a[4];
			ld_a<D>(a, sQ, warp * 16, kk * 16);
#pragma unroll
			for (int nt = 0; nt < BC / 16; nt++) {
				uint32_t b[4];
				ld_bt<D>(b, cK, nt * 16, kk * 16);
				mma16816(s[2 * nt], a, b[0], b[1]);
				mma16816(s[2 * nt + 1], a, b[2], b[3]);
			}
		}
		if (k0 + BC > T || (causal && k0 + BC - 1 > wrow)) {
#pragma unroll
			for (int nt = 0; nt < BC / 8; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					int key = k0 + nt * 8 + 2 * t + (e & 1);
					int row = wrow + g + (e >> 1) * 8;
					if (key >= T || (causal && key > row))
						s[nt][e] = -INFINITY;
				}
		}
#pragma unroll
		for (int r = 0; r < 2; r++) {
			float m = mx[r];
#pragma unroll
			for (int nt = 0; nt < BC / 8; nt++)
				m = fmaxf(m, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
			m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
			m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
			// A row with no key yet keeps max -inf: offset 0 keeps exp2 at 0.
			float ms = m == -INFINITY ? 0.f : m * sl2;
			float alpha = exp2f(mx[r] * sl2 - ms);
			mx[r] = m;
			float ls = 0;
#pragma unroll
			for (int nt = 0; nt < BC / 8; nt++) {
				s[nt][2 * r] = exp2f(fmaf(s[nt][2 * r], sl2, -ms));
				s[nt][2 * r + 1] = exp2f(fmaf(s[nt][2 * r + 1], sl2, -ms));
				ls += s[nt][2 * r] + s[nt][2 * r + 1];
			}
			sum[r] = sum[r] * alpha + ls;
#pragma unroll
			for (int dt = 0; dt < D / 8; dt++) {
				acc[dt][2 * r] *= alpha;
				acc[dt][2 * r + 1] *= alpha;
			}
		}
#pragma unroll
		for (int kk = 0; kk < BC / 16; kk++) {
			uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
					 pack_bf16(s[2 * kk][2], s[2 * kk][3]),
					 pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
					 pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
			for (int dt = 0; dt < D / 16; dt++) {
				uint32_t b[4];
				ld_b<D>(b, cV, kk * 16, dt * 16);
				mma16816(acc[2 * dt], a, b[0], b[1]);
				mma16816(acc[2 * dt + 1], a, b[2], b[3]);
			}
		}
	}

#pragma unroll
	for (int r = 0; r < 2; r++) {
		sum[r] += __shfl_xor_sync(0xffffffff, sum[r], 1);
		sum[r] += __shfl_xor_sync(0xffffffff, sum[r], 2);
		int row = wrow + g + r * 8;
		if (row >= T)
			continue;
		float inv = 1.f / sum[r];
		bf16 *orow = o + (size_t)row * D;
#pragma unroll
		for (int dt = 0; dt < D / 8; dt++)
			*reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) =
				pack_bf16(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
		if (t == 0)
			lse[(size_t)bh * T + row] = mx[r] * scale + logf(sum[r]);
	}
}

template <int D, int BC, int NW, int MINB>
int launch_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
	       int BH, int T, int causal, float scale, cudaStream_t st)
{
	using C = FwdCfg<D, BC, NW>;
	auto kern = fwd_kernel<D, BC, NW, MINB>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	dim3 grid(BH, (T + C::BR - 1) / C::BR);
	kern<<<grid, C::NT, C::SMEM, st>>>((const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
					   (bf16 *)o, lse, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace

int attn_cuda_check(int B, int H, int T, int D, const void *const *ptrs, int nptrs,
		    const float *f32)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return ATTN_ESHAPE;
	if ((long long)B * H > ATTN_CUDA_MAX_BH || T > ATTN_CUDA_MAX_T)
		return ATTN_ESHAPE;
	if (D != 64 && D != 128)
		return ATTN_EHEADDIM;
	for (int i = 0; i < nptrs; i++)
		if (!ptrs[i] || ((uintptr_t)ptrs[i] & (ATTN_CUDA_ALIGN - 1)))
			return ATTN_EALIGN;
	if (!f32 || ((uintptr_t)f32 & (sizeof *f32 - 1)))
		return ATTN_EALIGN;
	return ATTN_OK;
}

extern "C" int attn_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
			     float *lse, int B, int H, int T, int D, int causal, float scale,
			     void *stream)
{
	const void *ptrs[] = {q, k, v, o};
	int rc = attn_cuda_check(B, H, T, D, ptrs, 4, lse);
	if (rc)
		return rc;
	if (!(scale > 0 && scale < INFINITY))  // the running max assumes scores keep their order
		return ATTN_ESHAPE;
	cudaStream_t st = (cudaStream_t)stream;
	if (D == 64)
		return launch_fwd<64, FWD64_BC, FWD64_NW, FWD64_MINB>(q, k, v, o, lse, B * H, T, causal,
								       scale, st);
	return launch_fwd<128, FWD128_BC, FWD128_NW, FWD128_MINB>(q, k, v, o, lse, B * H, T, causal,
								   scale, st);
}
