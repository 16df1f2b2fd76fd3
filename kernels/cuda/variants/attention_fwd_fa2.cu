// variants/attention_fwd_fa2.cu: the attention forward's FlashAttention-2
// kernels, out of the default build (kernels/cuda/attention_fwd_ws.cu is
// the default forward); `make attention-variants` builds them into
// libattn_variants.a for bench/attention.sh VARIANT=... and the notes that
// cite them (bench/attention-notes.md).
//
// Each block owns a tile of query rows of one (batch, head), each warp 16
// of them.  Key and value tiles stream through shared memory (two
// buffers, cp.async, the next tile in flight while the current one is
// used).  S = Q K^T and O += P V run on the tensor cores (bf16 in, fp32
// accumulators); the softmax is online (running max and sum per row, in
// base 2), so no T x T matrix exists anywhere.  Rows and keys past T are
// zero-filled and masked.  Two kernels: wgmma (Hopper's warpgroup MMA,
// sm_90a; ATTN_VARIANT_WGMMA, the default forward before the
// warp-specialised one) and mma.sync m16n8k16 (ATTN_VARIANT_MMA).
#include "kernels/attention.h"
#include "kernels/cuda/attention_cuda.cuh"
#include "kernels/cuda/attention_fwd.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/variants/attention_variants.h"
#include "kernels/cuda/wgmma.cuh"

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
// Warpgroups (64 query rows each) per block of the wgmma forward.
#ifndef FWD64_WG_NWG
#define FWD64_WG_NWG 3
#endif
#ifndef FWD128_WG_NWG
#define FWD128_WG_NWG 2
#endif

namespace {

using namespace attn;

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
		mask_tile<BC>(s, k0, wrow, g, t, T, causal);
		online_softmax<BC, D>(s, acc, mx, sum, sl2);
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

	store_rows<D>(o, lse + (size_t)bh * T, acc, mx, sum, wrow, g, t, T, scale);
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


// The same algorithm on Hopper's warpgroup MMA: NWG warpgroups of 128
// threads, each owning 64 query rows; S = Q K^T with both operands read by
// wgmma straight from the swizzled shared tiles, O += P V with P from
// registers (the S accumulators, rounded to bf16) and V read transposed.
// Tiles of WG_BC keys, two buffers filled by cp.async.
constexpr int WG_BC = 128, WG_ROWS = 64, WG_THREADS = 128;

template <int D, int NWG>
struct WgCfg {
	static constexpr int BR = WG_ROWS * NWG, NT = WG_THREADS * NWG;
	static constexpr size_t SMEM = (size_t)(BR * D + 4 * WG_BC * D) * sizeof(bf16) + SW_ATOM_BYTES;
};

template <int D, int NWG>
__global__ void __launch_bounds__(WG_THREADS * NWG, 1)
fwd_wgmma_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
		 const bf16 *__restrict__ v, bf16 *__restrict__ o, float *__restrict__ lse, int T,
		 int causal, float scale)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a: refuse loudly rather than compute nothing
#else
	constexpr int BC = WG_BC;
	using C = WgCfg<D, NWG>;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sQ = reinterpret_cast<bf16 *>(base);
	bf16 *sK = sQ + C::BR * D;   // two buffers of BC x D
	bf16 *sV = sK + 2 * BC * D;  // two buffers of BC x D

	const int bh = blockIdx.x;
	const int qb = causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
	const int q0 = qb * C::BR;
	const size_t off = (size_t)bh * T * D;
	q += off, k += off, v += off, o += off;
	const int wg = threadIdx.x / WG_THREADS, lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const int wgrow = q0 + wg * WG_ROWS;                          // warpgroup's first row
	const int wrow = wgrow + (threadIdx.x % WG_THREADS) / 32 * 16;  // warp's first row

	const int kend = causal ? min(T, q0 + C::BR) : T;
	const int nkv = (kend + BC - 1) / BC;
	load_slabs<C::BR, D, C::NT>(sQ, q, q0, T);
	load_slabs<BC, D, C::NT>(sK, k, 0, T);
	load_slabs<BC, D, C::NT>(sV, v, 0, T);
	cp_async_commit();

	float acc[D / 8][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
		acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0;
	float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};
	const float sl2 = scale * LOG2E;
	const uint32_t qaddr = smem_addr(sQ) + wg * WG_ROWS * SLAB_ROW_BYTES;
	constexpr uint32_t KSTEP = 16 * sizeof(bf16);             // bytes per k16 step in a row
	constexpr uint32_t QSLAB = C::BR * SLAB_ROW_BYTES, KSLAB = BC * SLAB_ROW_BYTES;

	for (int j = 0; j < nkv; j++) {
		cp_async_wait_all();
		fence_proxy_async();
		__syncthreads();
		if (j + 1 < nkv) {
			int nb = (j + 1) & 1;
			load_slabs<BC, D, C::NT>(sK + nb * BC * D, k, (j + 1) * BC, T);
			load_slabs<BC, D, C::NT>(sV + nb * BC * D, v, (j + 1) * BC, T);
			cp_async_commit();
		}
		const int k0 = j * BC;
		if (causal && k0 > wgrow + WG_ROWS - 1)
			continue;  // the whole warpgroup is before this tile
		const uint32_t kaddr = smem_addr(sK + (j & 1) * BC * D);
		const uint32_t vaddr = smem_addr(sV + (j & 1) * BC * D);

		float s[BC / 8][4];
#pragma unroll
		for (int i = 0; i < BC / 8; i++)
			s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0;
		fence_regs<BC / 8>(s);
		wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t koff = (kk % 4) * KSTEP;  // k16 step within a 128-byte row
			uint64_t da = sw128_desc(qaddr + (kk / 4) * QSLAB + koff, 16, SW_ATOM_BYTES);
			uint64_t db = sw128_desc(kaddr + (kk / 4) * KSLAB + koff, 16, SW_ATOM_BYTES);
			wgmma_ss_n128(s, da, db, kk > 0);
		}
		wgmma_commit();
		wgmma_wait<0>();
		fence_regs<BC / 8>(s);

		mask_tile<BC>(s, k0, wrow, g, t, T, causal);
		online_softmax<BC, D>(s, acc, mx, sum, sl2);
		uint32_t pa[BC / 16][4];
		acc_to_a<BC>(pa, s);
		fence_regs<D / 8>(acc);
		wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < BC / 16; kk++)
			wgmma_rs_tb<D>(acc, pa[kk], sw128_desc(vaddr + kk * 16 * SLAB_ROW_BYTES, KSLAB,
							    SW_ATOM_BYTES));
		wgmma_commit();
		wgmma_wait<0>();
		fence_regs<D / 8>(acc);
	}

	store_rows<D>(o, lse + (size_t)bh * T, acc, mx, sum, wrow, g, t, T, scale);
#endif
}

template <int D, int NWG>
int launch_fwd_wgmma(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
		     float *lse, int BH, int T, int causal, float scale, cudaStream_t st)
{
	using C = WgCfg<D, NWG>;
	auto kern = fwd_wgmma_kernel<D, NWG>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	dim3 grid(BH, (T + C::BR - 1) / C::BR);
	kern<<<grid, C::NT, C::SMEM, st>>>((const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
					   (bf16 *)o, lse, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace

extern "C" int attn_fwd_cuda_variant(int variant, const uint16_t *q, const uint16_t *k,
				     const uint16_t *v, uint16_t *o, float *lse, int B, int H,
				     int T, int D, int causal, float scale, void *stream)
{
	if (variant == ATTN_VARIANT_DEFAULT)
		return attn_fwd_cuda(q, k, v, o, lse, B, H, T, D, causal, scale, stream);
	int rc = attn_fwd_check(q, k, v, o, lse, B, H, T, D, scale);
	if (rc)
		return rc;
	cudaStream_t st = (cudaStream_t)stream;
	if (variant == ATTN_VARIANT_WGMMA)
		return D == 64 ? launch_fwd_wgmma<64, FWD64_WG_NWG>(q, k, v, o, lse, B * H, T, causal,
								   scale, st)
			       : launch_fwd_wgmma<128, FWD128_WG_NWG>(q, k, v, o, lse, B * H, T, causal,
								      scale, st);
	if (variant != ATTN_VARIANT_MMA)
		return ATTN_ESHAPE;
	if (D == 64)
		return launch_fwd<64, FWD64_BC, FWD64_NW, FWD64_MINB>(q, k, v, o, lse, B * H, T, causal,
								       scale, st);
	return launch_fwd<128, FWD128_BC, FWD128_NW, FWD128_MINB>(q, k, v, o, lse, B * H, T, causal,
								   scale, st);
}
