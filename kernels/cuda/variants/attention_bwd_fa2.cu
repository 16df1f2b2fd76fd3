// variants/attention_bwd_fa2.cu: the key-block kernels of the attention
// backward that the default build leaves out (its default,
// kernels/cuda/attention_bwd_ws.cu, gives dQ a warpgroup of its own);
// `make attention-variants` builds them into libattn_variants.a for
// bench/attention.sh VARIANT=... and the notes that cite them
// (bench/attention-notes.md).  They run between kernels/cuda/attention_bwd.cu's
// steps (1), delta, and (3), dq from the workspace.
//
// ATTN_VARIANT_WGMMA: the warpgroup MMA kernel whose key warpgroups also
// compute dQ (warpgroups of 64 keys; sm_90a).  ATTN_VARIANT_MMA: the
// mma.sync m16n8k16 one (warps of 16 keys), dQ added with red.v4 into a
// row-major workspace.
#include "kernels/attention.h"
#include "kernels/cuda/attention_bwd.cuh"
#include "kernels/cuda/attention_cuda.cuh"
#include "kernels/cuda/variants/attention_variants.h"

#include <cuda_runtime.h>
#include <math.h>

// Tile configurations per head dimension: query rows per step (BM), warps
// (NW; the block owns 16 NW keys), blocks per SM the registers are capped
// for, and whether K and V fragments stay in registers.  -D overrides
// them for tuning experiments (bench/attention-notes.md).
#ifndef BWD64_BM
#define BWD64_BM 64
#endif
#ifndef BWD64_NW
#define BWD64_NW 8
#endif
#ifndef BWD64_MINB
#define BWD64_MINB 1
#endif
#ifndef BWD64_KV_REGS
#define BWD64_KV_REGS true
#endif
#ifndef BWD128_BM
#define BWD128_BM 64
#endif
#ifndef BWD128_NW
#define BWD128_NW 8
#endif
#ifndef BWD128_MINB
#define BWD128_MINB 1
#endif
// 1: the wgmma backward issues dQ's products without first waiting for dV
// and dK; 0: it waits (the first wgmma version).
#ifndef BWD_DQ_QUEUED
#define BWD_DQ_QUEUED 1
#endif
// 1: the wgmma backward adds each dQ piece to the workspace by one bulk
// reduction from shared memory (the copy engine does the fp32 adds), the
// workspace in tiles of 64 x 64 in the accumulators' order (DQ_TILE
// below); 0: every thread adds its fragments with red.global.add.v4.
#ifndef BWD_DQ_BULK
#define BWD_DQ_BULK 1
#endif
// wgmma backward: query rows per step (64 or 128) and warpgroups (64 keys
// each) per block.
#ifndef BWD64_WG_BM
#define BWD64_WG_BM 128
#endif
#ifndef BWD64_WG_NWG
#define BWD64_WG_NWG 2
#endif
#ifndef BWD128_WG_BM
#define BWD128_WG_BM 64
#endif
#ifndef BWD128_WG_NWG
#define BWD128_WG_NWG 2
#endif

namespace {

using namespace bwd;

constexpr int CONVERT_THREADS = 256;

template <int D, int BM, int NW>
struct BwdCfg {
	static constexpr int BN = 16 * NW, NT = 32 * NW;
	// dQ columns per warp work item: enough items for every warp, >= 16.
	static constexpr int DQN_FIT = BM / 16 * D / NW;
	static constexpr int DQN = DQN_FIT >= D ? D : DQN_FIT >= 16 ? DQN_FIT : 16;
	static constexpr size_t SMEM = (size_t)(2 * BN * D + 4 * BM * D + BN * BM) * sizeof(bf16) +
				       (size_t)4 * BM * sizeof(float);
};

// dq = bf16(workspace), the workspace row-major [BH][Tpad][D].
__global__ void convert_kernel(const float *__restrict__ in, bf16 *__restrict__ out, size_t BH,
			       int T, int D)
{
	const size_t n = BH * T * D, tpad = dq_rows_padded(T);
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
		size_t bh = i / ((size_t)T * D), r = i % ((size_t)T * D);
		out[i] = __float2bfloat16_rn(in[bh * tpad * D + r]);
	}
}

// Add a warp's 16 x N fp32 C fragments (rows row, row + 8) into dst
// [rows, D]: lanes t and t ^ 1 swap halves so that each holds four
// consecutive columns, then one red.v4 per row and pair of n-tiles.
template <int D, int N>
__device__ __forceinline__ void red_rows(float *dst, const float (*c)[4], int row, int c0, int t,
					 int T)
{
	const bool odd = t & 1;
	const int col = odd ? 8 + 2 * (t - 1) : 2 * t;
#pragma unroll
	for (int j = 0; j < N / 16; j++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float m0 = odd ? c[2 * j + 1][2 * h] : c[2 * j][2 * h];
			float m1 = odd ? c[2 * j + 1][2 * h + 1] : c[2 * j][2 * h + 1];
			float s0 = odd ? c[2 * j][2 * h] : c[2 * j + 1][2 * h];
			float s1 = odd ? c[2 * j][2 * h + 1] : c[2 * j + 1][2 * h + 1];
			float r0 = __shfl_xor_sync(0xffffffff, s0, 1);
			float r1 = __shfl_xor_sync(0xffffffff, s1, 1);
			int r = row + h * 8;
			if (r >= T)
				continue;
			float *p = dst + (size_t)r * D + c0 + j * 16 + col;
			if (odd)
				red_add_v4(p, r0, r1, m0, m1);
			else
				red_add_v4(p, m0, m1, r0, r1);
		}
}

template <int D, int BM, int NT>
__device__ __forceinline__ void load_q_tiles(bf16 *sQ, bf16 *sdO, float *sL, float *sDl,
					     const bf16 *q, const bf16 *dout, const float *lse,
					     const float *delta, int m0, int T)
{
	load_tile<BM, D, NT>(sQ, q, m0, T);
	load_tile<BM, D, NT>(sdO, dout, m0, T);
	for (int i = threadIdx.x; i < BM; i += NT) {
		int row = m0 + i;
		sL[i] = row < T ? lse[row] * LOG2E : INFINITY;  // exp2(s - inf) = 0: no such query
		sDl[i] = row < T ? delta[row] : 0.f;
	}
}

template <int D, int BM, int NW, int MINB, bool KV_REGS>
__global__ void __launch_bounds__(32 * NW, MINB)
bwd_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k, const bf16 *__restrict__ v,
	   const bf16 *__restrict__ dout, const float *__restrict__ lse,
	   const float *__restrict__ delta, float *__restrict__ dqacc, bf16 *__restrict__ dk,
	   bf16 *__restrict__ dv, int T, int causal, float scale)
{
	using C = BwdCfg<D, BM, NW>;
	extern __shared__ __align__(128) unsigned char smem_raw[];
	bf16 *sK = reinterpret_cast<bf16 *>(smem_raw);
	bf16 *sV = sK + C::BN * D;
	bf16 *sQ = sV + C::BN * D;      // two buffers of BM x D
	bf16 *sdO = sQ + 2 * BM * D;    // two buffers of BM x D
	bf16 *sdS = sdO + 2 * BM * D;   // BN x BM, [key][query]
	float *sL = reinterpret_cast<float *>(sdS + C::BN * BM);  // two buffers of BM
	float *sDl = sL + 2 * BM;                                   // two buffers of BM

	const int bh = blockIdx.x, k0 = blockIdx.y * C::BN;
	const size_t off = (size_t)bh * T * D;
	q += off, k += off, v += off, dout += off, dk += off, dv += off;
	dqacc += (size_t)bh * dq_rows_padded(T) * D;
	lse += (size_t)bh * T, delta += (size_t)bh * T;
	const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const int krow = warp * 16;  // this warp's first key, within the tile
	const float sl2 = scale * LOG2E;

	const int mfirst = causal ? k0 / BM : 0, nmb = (T + BM - 1) / BM;
	load_tile<C::BN, D, C::NT>(sK, k, k0, T);
	load_tile<C::BN, D, C::NT>(sV, v, k0, T);
	load_q_tiles<D, BM, C::NT>(sQ, sdO, sL, sDl, q, dout, lse, delta, mfirst * BM, T);
	cp_async_commit();

	// With KV_REGS the warp's K and V rows stay in registers as A fragments.
	uint32_t ka[KV_REGS ? D / 16 : 1][4], va[KV_REGS ? D / 16 : 1][4];
	if constexpr (KV_REGS) {
		cp_async_wait_all();
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			ld_a<D>(ka[kk], sK, krow, kk * 16);
			ld_a<D>(va[kk], sV, krow, kk * 16);
		}
	}
	float adk[D / 8][4], adv[D / 8][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			adk[i][e] = adv[i][e] = 0;

	for (int mb = mfirst; mb < nmb; mb++) {
		const int buf = (mb - mfirst) & 1, m0 = mb * BM;
		cp_async_wait_all();
		__syncthreads();
		if (mb + 1 < nmb) {
			int nb = buf ^ 1;
			load_q_tiles<D, BM, C::NT>(sQ + nb * BM * D, sdO + nb * BM * D, sL + nb * BM,
						   sDl + nb * BM, q, dout, lse, delta, m0 + BM, T);
			cp_async_commit();
		}
		const bf16 *cQ = sQ + buf * BM * D, *cdO = sdO + buf * BM * D;
		const float *cL = sL + buf * BM, *cDl = sDl + buf * BM;

		float st[BM / 8][4], dpt[BM / 8][4];
#pragma unroll
		for (int i = 0; i < BM / 8; i++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				st[i][e] = dpt[i][e] = 0;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t a[4], av[4];
			if constexpr (KV_REGS) {
				for (int e = 0; e < 4; e++)
					a[e] = ka[kk][e], av[e] = va[kk][e];
			} else {
				ld_a<D>(a, sK, krow, kk * 16);
				ld_a<D>(av, sV, krow, kk * 16);
			}
#pragma unroll
			for (int nt = 0; nt < BM / 16; nt++) {
				uint32_t b[4];
				ld_bt<D>(b, cQ, nt * 16, kk * 16);
				mma16816(st[2 * nt], a, b[0], b[1]);
				mma16816(st[2 * nt + 1], a, b[2], b[3]);
				ld_bt<D>(b, cdO, nt * 16, kk * 16);
				mma16816(dpt[2 * nt], av, b[0], b[1]);
				mma16816(dpt[2 * nt + 1], av, b[2], b[3]);
			}
		}
		const bool mask = k0 + C::BN > T || (causal && m0 < k0 + C::BN);
#pragma unroll
		for (int nt = 0; nt < BM / 8; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int qi = nt * 8 + 2 * t + (e & 1), key = k0 + krow + g + (e >> 1) * 8;
				float p = exp2f(fmaf(st[nt][e], sl2, -cL[qi]));
				if (mask && (key >= T || (causal && m0 + qi < key)))
					p = 0;
				st[nt][e] = p;
				dpt[nt][e] = p * (dpt[nt][e] - cDl[qi]) * scale;  // dS^T
			}
#pragma unroll
		for (int kk = 0; kk < BM / 16; kk++) {
			uint32_t ap[4] = {pack_bf16(st[2 * kk][0], st[2 * kk][1]),
					  pack_bf16(st[2 * kk][2], st[2 * kk][3]),
					  pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]),
					  pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3])};
			uint32_t as[4] = {pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]),
					  pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]),
					  pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
					  pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
			*reinterpret_cast<uint32_t *>(sdS + swz<BM>(krow + g, kk * 16 + 2 * t)) = as[0];
			*reinterpret_cast<uint32_t *>(sdS + swz<BM>(krow + g + 8, kk * 16 + 2 * t)) = as[1];
			*reinterpret_cast<uint32_t *>(sdS + swz<BM>(krow + g, kk * 16 + 8 + 2 * t)) = as[2];
			*reinterpret_cast<uint32_t *>(sdS + swz<BM>(krow + g + 8, kk * 16 + 8 + 2 * t)) = as[3];
#pragma unroll
			for (int dt = 0; dt < D / 16; dt++) {
				uint32_t b[4];
				ld_b<D>(b, cdO, kk * 16, dt * 16);
				mma16816(adv[2 * dt], ap, b[0], b[1]);
				mma16816(adv[2 * dt + 1], ap, b[2], b[3]);
				ld_b<D>(b, cQ, kk * 16, dt * 16);
				mma16816(adk[2 * dt], as, b[0], b[1]);
				mma16816(adk[2 * dt + 1], as, b[2], b[3]);
			}
		}
		__syncthreads();
		// dQ[m0.., :] += dS K, in pieces of 16 rows x DQN columns shared
		// among the warps, added with 16-byte reductions.
		constexpr int DQN = C::DQN, ITEMS = BM / 16 * (D / DQN);
		for (int it = warp; it < ITEMS; it += NW) {
			const int rt = it / (D / DQN), c0 = it % (D / DQN) * DQN;
			float c[DQN / 8][4];
#pragma unroll
			for (int i = 0; i < DQN / 8; i++)
				c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0;
#pragma unroll
			for (int kk = 0; kk < C::BN / 16; kk++) {
				uint32_t a[4];
				ld_at<BM>(a, sdS, rt * 16, kk * 16);
#pragma unroll
				for (int j = 0; j < DQN / 16; j++) {
					uint32_t b[4];
					ld_b<D>(b, sK, kk * 16, c0 + j * 16);
					mma16816(c[2 * j], a, b[0], b[1]);
					mma16816(c[2 * j + 1], a, b[2], b[3]);
				}
			}
			red_rows<D, DQN>(dqacc, c, m0 + rt * 16 + g, c0, t, T);
		}
	}

#pragma unroll
	for (int h = 0; h < 2; h++) {
		int key = k0 + krow + g + h * 8;
		if (key >= T)
			continue;
#pragma unroll
		for (int dt = 0; dt < D / 8; dt++) {
			size_t x = (size_t)key * D + dt * 8 + 2 * t;
			*reinterpret_cast<uint32_t *>(dk + x) = pack_bf16(adk[dt][2 * h], adk[dt][2 * h + 1]);
			*reinterpret_cast<uint32_t *>(dv + x) = pack_bf16(adv[dt][2 * h], adv[dt][2 * h + 1]);
		}
	}
}

template <int D, int BM, int NW, int MINB, bool KV_REGS>
int launch_bwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
	       const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv,
	       int BH, int T, int causal, float scale, cudaStream_t st)
{
	using C = BwdCfg<D, BM, NW>;
	auto kern = bwd_kernel<D, BM, NW, MINB, KV_REGS>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	dim3 grid(BH, (T + C::BN - 1) / C::BN);
	kern<<<grid, C::NT, C::SMEM, st>>>((const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
					   (const bf16 *)dout, lse, delta, dqacc, (bf16 *)dk,
					   (bf16 *)dv, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

// The same algorithm on Hopper's warpgroup MMA (sm_90a).  NWG warpgroups
// of 128 threads, each owning 64 of the block's BN = 64 NWG keys with their
// dK and dV as wgmma accumulators in registers.  Per step of BM query
// rows: S^T = K Q^T and dP^T = V dO^T (both operands read from the
// swizzled shared tiles), P^T and dS^T in registers, dV += P^T dO and
// dK += dS^T Q (A from registers, B = dO or Q read N-major); dS^T goes to
// shared memory, and after a barrier each warpgroup computes pieces of 64
// rows x DQN columns of dQ = dS K (A read M-major from that tile, B = K
// read N-major) and adds them to the fp32 workspace: each piece written to
// shared memory and added by one bulk reduction that the copy engine
// carries out while the warpgroups go on (BWD_DQ_BULK), or with red.v4 by
// every thread.  Q, dO, lse and delta: two buffers filled by cp.async.

template <int D, int BM, int NWG>
struct BwdWgCfg {
	static constexpr int BN = BWG_KEYS * NWG, NT = BWG_THREADS * NWG;
	// dQ pieces of 64 rows x DQN columns: enough for every warpgroup.
	static constexpr int DQN = D * (BM / BWG_MROWS) / NWG >= 64 ? 64 : 32;
	static constexpr int DQ_PIECES = BM / BWG_MROWS * (D / DQN);
	// dQ pieces go to the workspace by bulk reduction (one shared tile
	// each) where they are workspace tiles.
	static constexpr bool BULK = BWD_DQ_BULK && DQN == DQ_COLS && BWG_MROWS == DQ_ROWS;
	static constexpr size_t SMEM = (size_t)(2 * BN * D + 4 * BM * D + BN * BM) * sizeof(bf16) +
				       (size_t)4 * BM * sizeof(float) +
				       (BULK ? (size_t)DQ_PIECES * DQ_TILE * sizeof(float) : 0) +
				       SW_ATOM_BYTES;
	static_assert(BM == 64 || BM == 128, "query steps of 64 or 128 rows");
};



template <int D, int BM, int NWG>
__global__ void __launch_bounds__(BWG_THREADS * NWG, 1)
bwd_wgmma_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
		 const bf16 *__restrict__ v, const bf16 *__restrict__ dout,
		 const float *__restrict__ lse, const float *__restrict__ delta,
		 float *__restrict__ dqacc, bf16 *__restrict__ dk, bf16 *__restrict__ dv, int T,
		 int causal, float scale)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a: refuse loudly rather than compute nothing
#else
	using C = BwdWgCfg<D, BM, NWG>;
	constexpr int BN = C::BN, NT = C::NT, DQN = C::DQN;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sK = reinterpret_cast<bf16 *>(base);
	bf16 *sV = sK + BN * D;
	bf16 *sQ = sV + BN * D;        // two buffers of BM x D
	bf16 *sdO = sQ + 2 * BM * D;   // two buffers of BM x D
	bf16 *sdS = sdO + 2 * BM * D;  // dS^T: BN keys x BM queries
	float *sL = reinterpret_cast<float *>(sdS + BN * BM);  // two buffers of BM
	float *sDl = sL + 2 * BM;                                // two buffers of BM
	float *sDq = sDl + 2 * BM;  // BULK: a tile per dQ piece

	const int bh = blockIdx.x, k0 = blockIdx.y * BN;
	const size_t off = (size_t)bh * T * D;
	q += off, k += off, v += off, dout += off;
	dqacc += (size_t)bh * dq_rows_padded(T) * D;
	lse += (size_t)bh * T, delta += (size_t)bh * T;
	const int wg = threadIdx.x / BWG_THREADS, warp = threadIdx.x % BWG_THREADS / 32;
	const int wtid = threadIdx.x % BWG_THREADS;
	const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const int wkey = k0 + wg * BWG_KEYS;         // the warpgroup's first key
	const int krow = wg * BWG_KEYS + warp * 16;  // this warp's first key, within the block
	const float sl2 = scale * LOG2E;

	const int mfirst = causal ? k0 / BM : 0, nmb = (T + BM - 1) / BM;
	load_slabs<BN, D, NT>(sK, k, k0, T);
	load_slabs<BN, D, NT>(sV, v, k0, T);
	load_q_slabs<D, BM, NT>(sQ, sdO, sL, sDl, q, dout, lse, delta, mfirst * BM, T);
	cp_async_commit();

	float adk[D / 8][4], adv[D / 8][4];
	zero_acc<D / 8>(adk);
	zero_acc<D / 8>(adv);
	const uint32_t kbase = smem_addr(sK), vbase = smem_addr(sV), dsbase = smem_addr(sdS);
	const uint32_t wgoff = wg * BWG_KEYS * SLAB_ROW_BYTES;  // the warpgroup's rows of sK, sV

	for (int mb = mfirst; mb < nmb; mb++) {
		const int buf = (mb - mfirst) & 1, m0 = mb * BM;
		cp_async_wait_all();
		fence_proxy_async();
		__syncthreads();
		if (mb + 1 < nmb) {
			int nb = buf ^ 1;
			load_q_slabs<D, BM, NT>(sQ + nb * BM * D, sdO + nb * BM * D, sL + nb * BM,
						sDl + nb * BM, q, dout, lse, delta, m0 + BM, T);
			cp_async_commit();
		}
		const uint32_t qaddr = smem_addr(sQ + buf * BM * D);
		const uint32_t doaddr = smem_addr(sdO + buf * BM * D);
		const uint32_t kaddr = wgb_opaque(kbase), vaddr = wgb_opaque(vbase);
		const uint32_t dsaddr = wgb_opaque(dsbase);
		const float *cL = sL + buf * BM, *cDl = sDl + buf * BM;
		uint32_t pa[BM / 16][4], sa[BM / 16][4];
		kv_step<D, BM, BN>(adk, adv, pa, sa, kaddr + wgoff, vaddr + wgoff, qaddr, doaddr,
				   smem_addr(cL), smem_addr(cDl), sl2, scale, m0, wkey,
				   k0 + krow + g, t, T, causal);
		// dS^T into its tile, then the whole block's dS is there for dQ.
		store_ds<BM, BN>(dsaddr, sa, krow + g, t);
		fence_proxy_async();
		if (C::BULK && wtid == 0)
			bulk_wait_read();  // the last step's dQ tiles were read: free
		__syncthreads();
		if (!BWD_DQ_QUEUED) {
			wgmma_wait<0>();  // dV, dK done: pa, sa free
			fence_regs_u32<BM / 16>(pa);
			fence_regs_u32<BM / 16>(sa);
			fence_regs<D / 8>(adk);
			fence_regs<D / 8>(adv);
		}

		// dQ's products queue behind dV's and dK's (BWD_DQ_QUEUED): one wait
		// for all three.
		for (int p = wg; p < C::DQ_PIECES; p += NWG) {
			const int rb = p / (D / DQN), c0 = p % (D / DQN) * DQN;
			float c[DQN / 8][4];
			issue_dq<BN, DQN>(c, dsaddr, kaddr, rb, c0);
			wgmma_wait<0>();
			fence_regs<DQN / 8>(c);
			if constexpr (C::BULK) {
				const size_t mt = (m0 + rb * BWG_MROWS) / DQ_ROWS;
				dq_tile_write<DQN>(sDq + p * DQ_TILE, c, 0, wtid);
				dq_tile_reduce(dqacc + (mt * (D / DQ_COLS) + c0 / DQ_COLS) * DQ_TILE,
					       sDq + p * DQ_TILE, wtid, 1 + wg);
			} else {
				red_rows<D, DQN>(dqacc, c, m0 + rb * BWG_MROWS + warp * 16 + g, c0, t, T);
			}
		}
		if (BWD_DQ_QUEUED) {
			wgmma_wait<0>();  // (a warpgroup without a dQ piece) dV, dK done
			fence_regs_u32<BM / 16>(pa);
			fence_regs_u32<BM / 16>(sa);
			fence_regs<D / 8>(adk);
			fence_regs<D / 8>(adv);
		}
	}
	fence_regs<D / 8>(adk);
	fence_regs<D / 8>(adv);
	if (C::BULK && wtid == 0)
		bulk_wait_done();

	store_dkdv<D>(dk + off, dv + off, adk, adv, k0 + krow + g, t, T);
#endif
}

template <int D, int BM, int NWG>
int launch_bwd_wgmma(const uint16_t *q, const uint16_t *k, const uint16_t *v,
		     const uint16_t *dout, const float *lse, const float *delta, float *dqacc,
		     uint16_t *dk, uint16_t *dv, int BH, int T, int causal, float scale,
		     cudaStream_t st)
{
	using C = BwdWgCfg<D, BM, NWG>;
	auto kern = bwd_wgmma_kernel<D, BM, NWG>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	dim3 grid(BH, (T + C::BN - 1) / C::BN);
	kern<<<grid, C::NT, C::SMEM, st>>>((const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
					   (const bf16 *)dout, lse, delta, dqacc, (bf16 *)dk,
					   (bf16 *)dv, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace

extern "C" int attn_bwd_cuda_variant(int variant, const uint16_t *q, const uint16_t *k,
				     const uint16_t *v, const uint16_t *o, const uint16_t *dout,
				     const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
				     int B, int H, int T, int D, int causal, float scale,
				     void *workspace, void *stream)
{
	if (variant == ATTN_VARIANT_DEFAULT)
		return attn_bwd_cuda(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, causal, scale,
				     workspace, stream);
	if (variant != ATTN_VARIANT_WGMMA && variant != ATTN_VARIANT_MMA)
		return ATTN_ESHAPE;
	cudaStream_t st = (cudaStream_t)stream;
	float *dqacc, *delta;
	int rc = attn_bwd_begin(q, k, v, o, dout, lse, dq, dk, dv, B, H, T, D, scale, workspace, st,
				&dqacc, &delta);
	if (rc)
		return rc;
	if (variant == ATTN_VARIANT_WGMMA)
		rc = D == 64 ? launch_bwd_wgmma<64, BWD64_WG_BM, BWD64_WG_NWG>(
				       q, k, v, dout, lse, delta, dqacc, dk, dv, B * H, T, causal, scale, st)
			     : launch_bwd_wgmma<128, BWD128_WG_BM, BWD128_WG_NWG>(
				       q, k, v, dout, lse, delta, dqacc, dk, dv, B * H, T, causal, scale, st);
	else if (D == 64)
		rc = launch_bwd<64, BWD64_BM, BWD64_NW, BWD64_MINB, BWD64_KV_REGS>(
			q, k, v, dout, lse, delta, dqacc, dk, dv, B * H, T, causal, scale, st);
	else
		rc = launch_bwd<128, BWD128_BM, BWD128_NW, BWD128_MINB, false>(
			q, k, v, dout, lse, delta, dqacc, dk, dv, B * H, T, causal, scale, st);
	if (rc)
		return rc;
	const bool tiled = variant == ATTN_VARIANT_WGMMA &&
			   (D == 64 ? BwdWgCfg<64, BWD64_WG_BM, BWD64_WG_NWG>::BULK
				    : BwdWgCfg<128, BWD128_WG_BM, BWD128_WG_NWG>::BULK);
	if (tiled)
		return attn_bwd_convert_tiles(dqacc, dq, B, H, T, D, st);
	const size_t BH = (size_t)B * H, rows = BH * T;
	size_t blocks = (rows * D + CONVERT_THREADS - 1) / CONVERT_THREADS;
	unsigned grid = (unsigned)(blocks < 65536 ? blocks : 65536);
	convert_kernel<<<grid, CONVERT_THREADS, 0, st>>>(dqacc, (bf16 *)dq, BH, T, D);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}
