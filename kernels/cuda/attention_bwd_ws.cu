// attention_bwd_ws.cu: the attention backward with a warpgroup of its own
// for dQ (Hopper, sm_90a; attention_bwd.cu launches it).
//
// A block owns BN = 64 NWG keys of one (batch, head).  NWG key warpgroups
// own 64 keys each with their dK and dV accumulators, as in
// variants/attention_bwd_fa2.cu's wgmma kernel; one more warpgroup computes
// dQ.  For query step j (BM rows) the key warpgroups compute S^T, dP^T, P^T
// and dS^T, issue dV += P^T dO and dK += dS^T Q, and write dS^T into buffer
// j % 2.  The dQ warpgroup, once that buffer is full, computes dQ = dS K in
// pieces of 64 x 64, writes each piece to shared memory, has the copy
// engine add it to the fp32 workspace (one bulk reduction), and frees the
// buffer.  So the key warpgroups never wait for dQ's products nor for its
// reduction, and meet only once a step (for the Q and dO they load by
// cp.async), where the single-role kernel met twice and then waited.
//
// Named barriers: KEYS, the key warpgroups at the top of a step; FULL[b]
// (key warpgroups arrive, the dQ warpgroup waits) and EMPTY[b] (the other
// way round) for dS buffer b; DQ, the dQ warpgroup's own.
//
// DET (--deterministic): the same kernel, but each piece is copied (not
// added) into the block's own slice of the workspace (attention_bwd.cuh,
// DQ_KEYS), with query steps of DQ_ROWS rows whatever BWS*_BM says, so
// that a slice holds exactly the tiles of the default layout.
//
// PACKED (attn_qkv_bwd_cuda): q, k, v are read where the projection
// qkv[B, T, 3, H, D] holds them (q and k rotated) and dO from [B, T, H,
// D]; dK, rotated back, and dV are stored over k and v.
//
// TMA (the default where T is a multiple of 4; LMPIPE_ATTN_BWD_TMA=0 turns
// it off): one thread of the first key warpgroup brings each query step's
// Q, dO, lse and delta by the copy engine, a step ahead, into buffers each
// guarded by a full and an empty mbarrier, instead of every key thread's
// cp.async and a barrier of both key warpgroups each step.  The 256
// threads' cp.async instructions throttled the load queue, and the
// warpgroups now wait only for their own step's data, so they may run up
// to a step apart.
#include "attention_bwd.cuh"
#include "attention_cuda.cuh"
#include "kernels/attention.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

// Query rows per step at each head dimension (-D overrides them; at 128
// rows the key warpgroups' accumulators no longer fit their registers).
#ifndef BWS64_BM
#define BWS64_BM 64
#endif
#ifndef BWS128_BM
#define BWS128_BM 64
#endif
#ifndef BWS_DQ_REGS
#define BWS_DQ_REGS 48
#endif
#ifndef BWS_DQ_N
#define BWS_DQ_N 32
#endif
// 1: at head dimension 64, each key warpgroup holds its 64 rows of K and
// V in registers as the A operand of S^T and dP^T (32 registers), so the
// tensor cores read only Q and dO from shared memory for them; 0: K and V
// from shared memory.
#ifndef BWS_KV_REGS
#define BWS_KV_REGS 1
#endif
// 1: the grid's x is the key block (a head's blocks run side by side);
// 0: x is the head.
#ifndef BWS_KB_FAST
#define BWS_KB_FAST 1
#endif

namespace {

using namespace bwd;

enum { BAR_KEYS = 1, BAR_FULL = 2, BAR_EMPTY = 4, BAR_DQ = 6 };
// The dQ warpgroup's registers, and the columns of its products (a
// 64 x 64 piece in 64 / DQ_N products, to fit them).
constexpr int REG_FILE = 65536, DQ_REGS = BWS_DQ_REGS, DQ_N = BWS_DQ_N;

template <int D, int BM, int NWG>
struct WsCfg {
	static constexpr int BN = BWG_KEYS * NWG, KT = BWG_THREADS * NWG, NT = KT + BWG_THREADS;
	static constexpr int PIECES = BM / DQ_ROWS * (D / DQ_COLS);
	// K, V; two buffers each of Q, dO and dS^T; lse and delta; dQ tiles.
	static constexpr size_t SMEM = (size_t)(2 * BN * D + 4 * BM * D + 2 * BN * BM) * sizeof(bf16) +
				       (size_t)4 * BM * sizeof(float) +
				       (size_t)PIECES * DQ_TILE * sizeof(float) +
				       4 * sizeof(uint64_t) + SW_ATOM_BYTES;
	// Registers: the block is launched with LAUNCH_REGS a thread (what
	// ptxas allots for NT threads), and setmaxnreg only moves them between
	// its warpgroups, so the key warpgroups get what the dQ warpgroup
	// gives up (asking for more leaves them waiting forever): a multiple
	// of 8, at most 240.
	static constexpr int LAUNCH_REGS = REG_FILE / NT / 8 * 8;
	static constexpr int KR0 = (LAUNCH_REGS * NT - DQ_REGS * BWG_THREADS) / KT / 8 * 8;
	static constexpr int KEY_REGS = KR0 > 240 ? 240 : KR0;
	static_assert(KEY_REGS * KT + DQ_REGS * BWG_THREADS <= LAUNCH_REGS * NT, "registers");
	static_assert(BM == 64 || BM == 128, "query steps of 64 or 128 rows");
	static_assert(SMEM <= 227 * 1024, "the buffers exceed a block's shared memory");
};

// The dQ warpgroup: for each query step, once dS^T buffer j % 2 is full,
// dQ piece by piece into the workspace (rows of this head from 0), added
// or (DET) stored.
template <int D, int BM, int NWG, bool DET>
__device__ void dq_role(const bf16 *sK, const bf16 *sdS, float *sDq, float *dqacc, int mfirst,
			int nsteps)
{
	using C = WsCfg<D, BM, NWG>;
	constexpr int BN = C::BN, NT = C::NT, P = C::PIECES;
	const int wtid = threadIdx.x % BWG_THREADS;
	const uint32_t kbase = smem_addr(sK), dsbase = smem_addr(sdS);
	for (int j = 0; j < nsteps; j++) {
		const int buf = j & 1, m0 = (mfirst + j) * BM;
		named_bar_sync(BAR_FULL + buf, NT);
		const uint32_t dsaddr = wgb_opaque(dsbase + buf * BN * BM * (uint32_t)sizeof(bf16));
		for (int p = 0; p < P; p++) {
			const int rb = p / (D / DQ_COLS), c0 = p % (D / DQ_COLS) * DQ_COLS;
			// Tile p is free once its reduction of the last step has read
			// it: P - 1 groups were committed after that one.
			if (wtid == 0)
				bulk_wait_read<P - 1>();
			named_bar_sync(BAR_DQ, BWG_THREADS);
#pragma unroll
			for (int h = 0; h < DQ_COLS / DQ_N; h++) {
				float c[DQ_N / 8][4];
				issue_dq<BN, DQ_N, true>(c, dsaddr, wgb_opaque(kbase), rb, c0 + h * DQ_N);
				wgmma_wait<0>();
				fence_regs<DQ_N / 8>(c);
				dq_tile_write<DQ_N>(sDq + p * DQ_TILE, c, h * DQ_N / 8, wtid);
			}
			if (p == P - 1 && j + 2 < nsteps)
				named_bar_arrive(BAR_EMPTY + buf, NT);  // read: step j + 2 may write it
			const size_t mt = (m0 + rb * DQ_ROWS) / DQ_ROWS;
			dq_tile_reduce<DET>(dqacc + (mt * (D / DQ_COLS) + c0 / DQ_COLS) * DQ_TILE,
					    sDq + p * DQ_TILE, wtid, BAR_DQ);
		}
	}
	if (wtid == 0)
		bulk_wait_done();
}

// PACKED (H > 0), the packed layout: q, k, v (and dk, dv, the same places)
// are the parts of qkv[B, T, 3, H, D] with q and k rotated by the RoPE
// table cs, dout is [B, T, H, D], and dK is rotated back as it is stored;
// else all are [BH, T, D] and cs is unused.  dk and dv may be k and v:
// a block reads only its own keys' rows of them, before it writes them.
// The TMA form's tensor maps: Q and dO (3-d [BH, T, D], or 4-d over the
// packed rows), lse and delta ([BH, T] fp32).
struct BwdMaps {
	CUtensorMap q, o, l, d;
};

// The TMA form: query step use u's Q, dO, lse and delta (rows m0.., head
// bh) into buffer u % 2, completing on full[u % 2].
template <int D, int BM, bool PACKED>
__device__ __forceinline__ void tma_step(const BwdMaps *maps, bf16 *sQ, bf16 *sdO, float *sL,
					 float *sDl, uint64_t *full, int u, int m0, int bh, int H)
{
	const int b = u & 1;
	uint64_t *bar = &full[b];
	mbar_expect_tx(bar, (uint32_t)(2 * BM * D * sizeof(bf16) + 2 * BM * sizeof(float)));
#pragma unroll
	for (int sl = 0; sl < D / SLAB_COLS; sl++) {
		bf16 *dq = sQ + b * BM * D + sl * BM * SLAB_COLS, *ddo = sdO + b * BM * D + sl * BM * SLAB_COLS;
		if constexpr (PACKED) {
			tma_load_4d(dq, &maps->q, bar, sl * SLAB_COLS, bh % H, m0, bh / H);
			tma_load_4d(ddo, &maps->o, bar, sl * SLAB_COLS, bh % H, m0, bh / H);
		} else {
			tma_load_3d(dq, &maps->q, bar, sl * SLAB_COLS, m0, bh);
			tma_load_3d(ddo, &maps->o, bar, sl * SLAB_COLS, m0, bh);
		}
	}
	tma_load_3d(sL + b * BM, &maps->l, bar, m0, bh, 0);
	tma_load_3d(sDl + b * BM, &maps->d, bar, m0, bh, 0);
}

template <int D, int BM, int NWG, bool DET, bool PACKED, bool KB_FAST, bool TMA>
__global__ void __launch_bounds__(WsCfg<D, BM, NWG>::NT, 1)
bwd_ws_kernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *__restrict__ dout,
	      const float *__restrict__ lse, const float *__restrict__ delta,
	      float *__restrict__ dqacc, bf16 *dk, bf16 *dv, int H, const float *__restrict__ cs,
	      int T, int causal, float scale, const __grid_constant__ BwdMaps maps)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a: refuse loudly rather than compute nothing
#else
	using C = WsCfg<D, BM, NWG>;
	constexpr int BN = C::BN, KT = C::KT, NT = C::NT;
	static_assert(!DET || (BM == DQ_ROWS && BN == DQ_KEYS), "the partials' layout");
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sK = reinterpret_cast<bf16 *>(base);
	bf16 *sV = sK + BN * D;
	bf16 *sQ = sV + BN * D;        // two buffers of BM x D
	bf16 *sdO = sQ + 2 * BM * D;   // two buffers of BM x D
	bf16 *sdS = sdO + 2 * BM * D;  // two buffers of dS^T: BN keys x BM queries
	float *sL = reinterpret_cast<float *>(sdS + 2 * BN * BM);  // two buffers of BM
	float *sDl = sL + 2 * BM;                                    // two buffers of BM
	float *sDq = sDl + 2 * BM;                                   // PIECES tiles
	// TMA: full[2], empty[2] for the query steps' buffers
	uint64_t *full = reinterpret_cast<uint64_t *>(sDq + C::PIECES * DQ_TILE), *empty = full + 2;

	// KB_FAST: the key blocks of a head are neighbours in the grid (x), so
	// the blocks running at once share the Q and dO of a few heads in L2;
	// else heads are x (for more heads than grid.y takes).
	const int bh = KB_FAST ? blockIdx.y : blockIdx.x, kb = KB_FAST ? blockIdx.x : blockIdx.y;
	const int nbh = KB_FAST ? gridDim.y : gridDim.x, k0 = kb * BN;
	// a head's first row in q, k, v (dk, dv) and in dout, and their row strides
	const size_t off = PACKED ? ((size_t)(bh / H) * T * 3 * H + bh % H) * D : (size_t)bh * T * D;
	const size_t offo = PACKED ? ((size_t)(bh / H) * T * H + bh % H) * D : off;
	const size_t ld = PACKED ? 3 * (size_t)H * D : D, ldo = PACKED ? (size_t)H * D : D;
	const int mfirst = causal ? k0 / BM : 0, nmb = (T + BM - 1) / BM;
	const int wg = threadIdx.x / BWG_THREADS;
	if constexpr (TMA) {
		if (threadIdx.x == 0) {
			for (int b = 0; b < 2; b++) {
				mbar_init(&full[b], 1);
				mbar_init(&empty[b], NWG);
			}
			mbar_fence_init();
		}
		__syncthreads();
	}
	if (wg == NWG) {
		regs_dealloc<DQ_REGS>();
		// DET: slice kb of nbh heads
		const size_t head = DET ? (size_t)kb * nbh + bh : (size_t)bh;
		dq_role<D, BM, NWG, DET>(sK, sdS, sDq, dqacc + head * dq_rows_padded(T) * D, mfirst,
					 nmb - mfirst);
		return;
	}
	regs_alloc<C::KEY_REGS>();
	q += off, k += off, v += off, dout += offo;
	lse += (size_t)bh * T, delta += (size_t)bh * T;
	const int warp = threadIdx.x % BWG_THREADS / 32;
	const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const int wkey = k0 + wg * BWG_KEYS;         // the warpgroup's first key
	const int krow = wg * BWG_KEYS + warp * 16;  // this warp's first key, within the block
	const float sl2 = scale * LOG2E;

	// KVR: K and V as A fragments; V then has no use in shared memory
	// (the dQ warpgroup reads K there).
	constexpr bool KVR = BWS_KV_REGS && D == 64 && BM == 64;
	uint32_t ka[KVR ? D / 16 : 1][4], va[KVR ? D / 16 : 1][4];
	load_slabs<BN, D, KT>(sK, k, k0, T, ld);
	if constexpr (KVR) {
		load_a_frags<D>(ka, k, k0 + krow + g, t, T, ld);
		load_a_frags<D>(va, v, k0 + krow + g, t, T, ld);
	} else {
		load_slabs<BN, D, KT>(sV, v, k0, T, ld);
	}
	if constexpr (TMA) {
		if (threadIdx.x == 0)
			tma_step<D, BM, PACKED>(&maps, sQ, sdO, sL, sDl, full, 0, mfirst * BM, bh, H);
		cp_async_commit();
		cp_async_wait_all();  // K (and V) in shared memory once, for the whole block
		fence_proxy_async();
		named_bar_sync(BAR_KEYS, KT);
	} else {
		load_q_slabs<D, BM, KT>(sQ, sdO, sL, sDl, q, dout, lse, delta, mfirst * BM, T, ld,
					ldo);
		cp_async_commit();
	}

	float adk[D / 8][4], adv[D / 8][4];
	zero_acc<D / 8>(adk);
	zero_acc<D / 8>(adv);
	const uint32_t kbase = smem_addr(sK), vbase = smem_addr(sV), dsbase = smem_addr(sdS);
	const uint32_t wgoff = wg * BWG_KEYS * SLAB_ROW_BYTES;  // the warpgroup's rows of sK, sV

	for (int mb = mfirst; mb < nmb; mb++) {
		const int j = mb - mfirst, buf = j & 1, m0 = mb * BM;
		if constexpr (TMA) {
			if (threadIdx.x == 0 && mb + 1 < nmb) {
				// buffer j + 1 once both warpgroups are done with use j - 1
				if (j >= 1)
					mbar_wait(&empty[buf ^ 1], ((j - 1) >> 1) & 1);
				tma_step<D, BM, PACKED>(&maps, sQ, sdO, sL, sDl, full, j + 1, m0 + BM, bh,
							H);
			}
			mbar_wait(&full[buf], (j >> 1) & 1);
		} else {
			cp_async_wait_all();
			fence_proxy_async();
			named_bar_sync(BAR_KEYS, KT);
			if (mb + 1 < nmb) {
				int nb = buf ^ 1;
				load_q_slabs<D, BM, KT>(sQ + nb * BM * D, sdO + nb * BM * D, sL + nb * BM,
							sDl + nb * BM, q, dout, lse, delta, m0 + BM, T,
							ld, ldo);
				cp_async_commit();
			}
		}
		const uint32_t qaddr = smem_addr(sQ + buf * BM * D);
		const uint32_t doaddr = smem_addr(sdO + buf * BM * D);
		const uint32_t kaddr = wgb_opaque(kbase), vaddr = wgb_opaque(vbase);
		const uint32_t dsaddr = wgb_opaque(dsbase + buf * BN * BM * (uint32_t)sizeof(bf16));
		uint32_t pa[BM / 16][4], sa[BM / 16][4];
		kv_step<D, BM, BN>(adk, adv, pa, sa, kaddr + wgoff, vaddr + wgoff, qaddr, doaddr,
				   smem_addr(sL + buf * BM), smem_addr(sDl + buf * BM), sl2, scale, m0,
				   wkey, k0 + krow + g, t, T, causal, KVR ? ka : nullptr,
				   KVR ? va : nullptr);
		if (j >= 2)
			named_bar_sync(BAR_EMPTY + buf, NT);  // dQ of step j - 2 has read it
		store_ds<BM, BN>(dsaddr, sa, krow + g, t);
		fence_proxy_async();
		named_bar_arrive(BAR_FULL + buf, NT);
		wgmma_wait<0>();  // dV, dK done: pa, sa and this step's Q, dO free
		fence_regs_u32<BM / 16>(pa);
		fence_regs_u32<BM / 16>(sa);
		fence_regs<D / 8>(adk);
		fence_regs<D / 8>(adv);
		if (TMA && threadIdx.x % BWG_THREADS == 0)
			mbar_arrive(&empty[buf]);  // this warpgroup is done with use j
	}
	store_dkdv<D>(dk + off, dv + off, adk, adv, k0 + krow + g, t, T, ld, PACKED ? cs : nullptr);
#endif
}

// LMPIPE_ATTN_BWD_TMA=0: the cp.async form everywhere, for comparing.
bool use_tma(void)
{
	static int on = -1;
	if (on < 0) {
		const char *e = getenv("LMPIPE_ATTN_BWD_TMA");
		on = !(e && !strcmp(e, "0"));
	}
	return on;
}

// The TMA form's maps, where its alignments hold (lse and delta rows of
// T floats as 16-byte multiples); false where they do not, or the driver
// refuses one.
bool tma_maps(BwdMaps *m, const uint16_t *q, const uint16_t *dout, const float *lse,
	      const float *delta, int BH, int H, int T, int D, int BM)
{
	if (T % 4 || (uintptr_t)lse % 16 || (uintptr_t)delta % 16)
		return false;
	if (H > 0) {
		const uint64_t n[4] = {(uint64_t)D, (uint64_t)H, (uint64_t)T, (uint64_t)(BH / H)};
		const uint64_t rq = 3 * (uint64_t)H * D, ro = (uint64_t)H * D;
		const uint64_t sq[3] = {(uint64_t)D, rq, rq * T}, so[3] = {(uint64_t)D, ro, ro * T};
		if (tma_map_4d(&m->q, q, n, sq, BM) || tma_map_4d(&m->o, dout, n, so, BM))
			return false;
	} else if (tma_map_3d(&m->q, q, D, T, BH, BM) || tma_map_3d(&m->o, dout, D, T, BH, BM)) {
		return false;
	}
	return !tma_map_f32_rows(&m->l, lse, T, BH, BM) && !tma_map_f32_rows(&m->d, delta, T, BH, BM);
}

template <int D, int BM, int NWG, bool DET = false>
int launch(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
	   const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv, int BH,
	   int H, const float *cs, int T, int causal, float scale, cudaStream_t st)
{
	using C = WsCfg<D, BM, NWG>;
	const int nkb = (T + C::BN - 1) / C::BN;
	const bool kb_fast = BWS_KB_FAST && BH <= 65535;  // grid.y's limit
	BwdMaps maps = {};
	const bool tma = kb_fast && use_tma() && tma_maps(&maps, q, dout, lse, delta, BH, H, T, D, BM);
	auto kern = H > 0 ? (tma ? bwd_ws_kernel<D, BM, NWG, DET, true, true, true>
			     : kb_fast ? bwd_ws_kernel<D, BM, NWG, DET, true, true, false>
				       : bwd_ws_kernel<D, BM, NWG, DET, true, false, false>)
			  : (tma ? bwd_ws_kernel<D, BM, NWG, DET, false, true, true>
			     : kb_fast ? bwd_ws_kernel<D, BM, NWG, DET, false, true, false>
				       : bwd_ws_kernel<D, BM, NWG, DET, false, false, false>);
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	dim3 grid = kb_fast ? dim3(nkb, BH) : dim3(BH, nkb);
	kern<<<grid, C::NT, C::SMEM, st>>>((const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
					   (const bf16 *)dout, lse, delta, dqacc, (bf16 *)dk,
					   (bf16 *)dv, H, cs, T, causal, scale, maps);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace

int attn_bwd_ws_any(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
		    const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv,
		    int BH, int H, const float *cs, int T, int D, int causal, float scale, int det,
		    cudaStream_t st)
{
	if (det && D == 64)
		return launch<64, DQ_ROWS, 2, true>(q, k, v, dout, lse, delta, dqacc, dk, dv, BH, H,
						    cs, T, causal, scale, st);
	if (det)
		return launch<128, DQ_ROWS, 2, true>(q, k, v, dout, lse, delta, dqacc, dk, dv, BH, H,
						     cs, T, causal, scale, st);
	if (D == 64)
		return launch<64, BWS64_BM, 2>(q, k, v, dout, lse, delta, dqacc, dk, dv, BH, H, cs, T,
					      causal, scale, st);
	return launch<128, BWS128_BM, 2>(q, k, v, dout, lse, delta, dqacc, dk, dv, BH, H, cs, T,
					 causal, scale, st);
}

int attn_bwd_ws(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
		const float *lse, const float *delta, float *dqacc, uint16_t *dk, uint16_t *dv,
		int BH, int T, int D, int causal, float scale, int det, cudaStream_t st)
{
	return attn_bwd_ws_any(q, k, v, dout, lse, delta, dqacc, dk, dv, BH, 0, nullptr, T, D,
			       causal, scale, det, st);
}
