// attention_fwd_ws.cu: the attention forward in the FlashAttention-3
// arrangement (Hopper, sm_90a): warp specialisation and overlap of the
// softmax with the tensor cores.
//
// A block owns BR = 64 NWG query rows of one (batch, head) and has NWG + 1
// warpgroups.  The last one is the producer: one of its threads streams Q
// once and then K and V tiles of BC keys through STAGES shared-memory
// buffers with the bulk tensor copy engine (TMA), each buffer guarded by
// "full" mbarriers (bytes arrived) and an "empty" one (every consumer warp
// is done with it).  It keeps 24 registers and gives the rest to the NWG
// consumer warpgroups, each owning 64 rows.  A consumer's loop, for tile j:
//
//   issue S_j = Q K_j^T                 (wgmma, async)
//   issue O += P_{j-1} V_{j-1}          (wgmma, async, P from registers)
//   wait for S_j; mask, softmax -> P_j  (while P_{j-1} V_{j-1} runs)
//   wait for the P V product; release buffer j-1; rescale O
//
// so the exponentials of one tile run under the matrix products of the
// other, and no thread ever waits on a block-wide barrier.  With two
// or more consumers (FWS_PINGPONG) they also take turns to issue their
// matrix products (named barriers), so that one warpgroup's softmax runs
// while another's products occupy the tensor cores.
#include "attention.h"
#include "attention_cuda.cuh"
#include "attention_fwd.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cuda_runtime.h>

// Consumer warpgroups and pipeline depth per head dimension, and the
// ping-pong of two consumers; -D overrides them (bench/attention-notes.md).
#ifndef FWS64_NWG
#define FWS64_NWG 3
#endif
#ifndef FWS64_STAGES
#define FWS64_STAGES 3
#endif
#ifndef FWS128_NWG
#define FWS128_NWG 2
#endif
#ifndef FWS128_STAGES
#define FWS128_STAGES 3
#endif
#ifndef FWS_PINGPONG
#define FWS_PINGPONG 1
#endif

namespace {

using namespace attn;

constexpr int BC = 128, WG_ROWS = 64, WG_THREADS = 128, WARPS_PER_WG = 4;
constexpr int PRODUCER_REGS = 24, REG_FILE = 65536;
constexpr int TURN_BARRIER = 1;  // named barriers 1 .. NWG: the consumers' turns

template <int D, int NWG, int STAGES>
struct WsCfg {
	static constexpr int BR = WG_ROWS * NWG, NT = WG_THREADS * (NWG + 1);
	static constexpr uint32_t QBYTES = BR * D * sizeof(bf16), TILE = BC * D * sizeof(bf16);
	static constexpr int NBAR = 2 + 3 * STAGES;  // q full, q empty; k full, v full, empty per stage
	static constexpr size_t SMEM = QBYTES + 2 * STAGES * (size_t)TILE + NBAR * 8 + SW_ATOM_BYTES;
	// The consumers' share of the register file, a multiple of 8, at most 240.
	static constexpr int CR0 = (REG_FILE - PRODUCER_REGS * WG_THREADS) / (NWG * WG_THREADS) / 8 * 8;
	static constexpr int CONSUMER_REGS = CR0 > 240 ? 240 : CR0;
};

template <int D>
__device__ __forceinline__ void wgmma_pv(float (*acc)[4], const uint32_t a[4], uint64_t db)
{
	if constexpr (D == 64)
		wgmma_rs_n64_tb(acc, a, db);
	else
		wgmma_rs_n128_tb(acc, a, db);
}

// S (64 x BC) = Q K^T for this warpgroup's rows: both operands K-major
// slabs in shared memory.
template <int D, int BR>
__device__ __forceinline__ void issue_qk(float (&s)[BC / 8][4], uint32_t qaddr, uint32_t kaddr)
{
	constexpr uint32_t KSTEP = 16 * sizeof(bf16);  // bytes per k16 step in a row
	constexpr uint32_t QSLAB = BR * SLAB_ROW_BYTES, KSLAB = BC * SLAB_ROW_BYTES;
#pragma unroll
	for (int i = 0; i < BC / 8; i++)
		s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0;
	fence_regs<BC / 8>(s);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		uint32_t koff = (kk % 4) * KSTEP;
		uint64_t da = sw128_desc(qaddr + (kk / 4) * QSLAB + koff, 16, SW_ATOM_BYTES);
		uint64_t db = sw128_desc(kaddr + (kk / 4) * KSLAB + koff, 16, SW_ATOM_BYTES);
		wgmma_ss_n128(s, da, db, kk > 0);
	}
	wgmma_commit();
}

// O += P V: P from registers (bf16, the A layout), V N-major in shared.
template <int D>
__device__ __forceinline__ void issue_pv(float (&acc)[D / 8][4], uint32_t (&pa)[BC / 16][4],
					 uint32_t vaddr)
{
	constexpr uint32_t KSLAB = BC * SLAB_ROW_BYTES;
	fence_regs<D / 8>(acc);
	fence_regs_u32<BC / 16>(pa);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BC / 16; kk++)
		wgmma_pv<D>(acc, pa[kk], sw128_desc(vaddr + kk * 16 * SLAB_ROW_BYTES, KSLAB,
						    SW_ATOM_BYTES));
	wgmma_commit();
}

// Turns of the consumer warpgroups (FA3's ping-pong, round robin for more
// than two): wait for this one's turn to issue matrix products, then hand
// the turn to the next.  Barrier TURN_BARRIER + w is consumer w's; each
// counts the 128 threads that wait on it and the 128 that arrive.
template <bool ON>
__device__ __forceinline__ void turn_wait(int wg)
{
	if constexpr (ON)
		asm volatile("bar.sync %0, %1;\n" ::"r"(TURN_BARRIER + wg), "n"(2 * WG_THREADS)
			     : "memory");
}

template <bool ON, int NWG>
__device__ __forceinline__ void turn_pass(int wg)
{
	if constexpr (ON)
		asm volatile("bar.arrive %0, %1;\n" ::"r"(TURN_BARRIER + (wg + 1) % NWG),
			     "n"(2 * WG_THREADS)
			     : "memory");
}

// One consumer's turns over an item: every consumer takes the same number
// (one per key tile of the item, plus one), so the round robin closes; the
// last consumer's last pass is left out (nobody waits for it).
template <bool ON, int NWG>
struct Turns {
	int wg, left;
	__device__ __forceinline__ Turns(int wg_, int nkv) : wg(wg_), left(nkv + 1)
	{
		if (wg == NWG - 1)
			turn_pass<ON, NWG>(wg);  // consumer 0 goes first
	}
	__device__ __forceinline__ void begin(void) { turn_wait<ON>(wg); }
	__device__ __forceinline__ void end(void)
	{
		if (--left > 0 || wg != NWG - 1)
			turn_pass<ON, NWG>(wg);
	}
};

// Round the probabilities to bf16 A fragments.
__device__ __forceinline__ void to_pa(uint32_t (&pa)[BC / 16][4], const float (&s)[BC / 8][4])
{
#pragma unroll
	for (int kk = 0; kk < BC / 16; kk++) {
		pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
		pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
		pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
		pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
	}
}

// One unit of work: BR query rows of one (batch, head).  Items are
// numbered heavy first (causal: the last row tiles, which see the most
// keys), heads fastest.
struct Item {
	int bh, q0, nkv;  // head, first row, key tiles to visit
};

template <int BR>
__device__ __forceinline__ Item item_at(long long w, int BH, int T, int causal)
{
	const int nq = (T + BR - 1) / BR;
	const int qi = (int)(w / BH);
	Item it;
	it.bh = (int)(w % BH);
	it.q0 = (causal ? nq - 1 - qi : qi) * BR;
	const int kend = causal ? min(T, it.q0 + BR) : T;
	it.nkv = (kend + BC - 1) / BC;
	return it;
}

// The producer's thread: for each item of this block, Q once (when the
// consumers have issued their last product with the previous item's), then the K and V tiles
// through the ring of STAGES buffers, whose use count `use` runs on
// across items so the ring never drains between them.
template <int D, int NWG, int STAGES>
__device__ void produce(const CUtensorMap *mq, const CUtensorMap *mk, const CUtensorMap *mv,
			bf16 *sQ, bf16 *sK, bf16 *sV, uint64_t *qfull, uint64_t *qempty,
			uint64_t *kfull, uint64_t *vfull, uint64_t *empty, int BH, int T,
			int causal)
{
	using C = WsCfg<D, NWG, STAGES>;
	const long long items = (long long)BH * ((T + C::BR - 1) / C::BR);
	uint32_t use = 0, n = 0;
	for (long long w = blockIdx.x; w < items; w += gridDim.x, n++) {
		const Item it = item_at<C::BR>(w, BH, T, causal);
		if (n > 0)
			mbar_wait(qempty, (n - 1) & 1);
		mbar_expect_tx(qfull, C::QBYTES);
#pragma unroll
		for (int sl = 0; sl < D / SLAB_COLS; sl++)
			tma_load_3d(sQ + sl * C::BR * SLAB_COLS, mq, qfull, sl * SLAB_COLS, it.q0, it.bh);
		for (int j = 0; j < it.nkv; j++, use++) {
			const int s = use % STAGES;
			if (use >= STAGES)
				mbar_wait(&empty[s], (use / STAGES - 1) & 1);
			mbar_expect_tx(&kfull[s], C::TILE);
#pragma unroll
			for (int sl = 0; sl < D / SLAB_COLS; sl++)
				tma_load_3d(sK + s * BC * D + sl * BC * SLAB_COLS, mk, &kfull[s],
					    sl * SLAB_COLS, j * BC, it.bh);
			mbar_expect_tx(&vfull[s], C::TILE);
#pragma unroll
			for (int sl = 0; sl < D / SLAB_COLS; sl++)
				tma_load_3d(sV + s * BC * D + sl * BC * SLAB_COLS, mv, &vfull[s],
					    sl * SLAB_COLS, j * BC, it.bh);
		}
	}
}

// A consumer warpgroup: 64 query rows of each of this block's items.
template <int D, int NWG, int STAGES, bool PP>
__device__ void consume(bf16 *sQ, bf16 *sK, bf16 *sV, uint64_t *qfull, uint64_t *qempty,
			uint64_t *kfull, uint64_t *vfull, uint64_t *empty, bf16 *o, float *lse,
			int BH, int T, int causal, float scale)
{
	using C = WsCfg<D, NWG, STAGES>;
	const int wg = threadIdx.x / WG_THREADS;
	const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const uint32_t qaddr = smem_addr(sQ) + wg * WG_ROWS * SLAB_ROW_BYTES;
	const float sl2 = scale * LOG2E;
	const long long items = (long long)BH * ((T + C::BR - 1) / C::BR);
	uint32_t use = 0, n = 0;  // as the producer counts them
	for (long long w = blockIdx.x; w < items; w += gridDim.x, n++) {
		const Item it = item_at<C::BR>(w, BH, T, causal);
		const int wgrow = it.q0 + wg * WG_ROWS;                         // warpgroup's first row
		const int wrow = wgrow + (threadIdx.x % WG_THREADS) / 32 * 16;  // warp's first row
		// Causal: tiles past this warpgroup's last row are skipped (but released).
		const int kend = causal ? min(T, it.q0 + C::BR) : T;
		const int nj = causal ? (min(kend, wgrow + WG_ROWS) + BC - 1) / BC : it.nkv;

		float acc[D / 8][4];
#pragma unroll
		for (int i = 0; i < D / 8; i++)
			acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0;
		float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0}, alpha[2];
		float s[BC / 8][4];
		uint32_t pa[BC / 16][4];

		mbar_wait(qfull, n & 1);
		mbar_wait(&kfull[use % STAGES], (use / STAGES) & 1);
		Turns<PP, NWG> turn(wg, it.nkv);
		turn.begin();
		issue_qk<D, C::BR>(s, qaddr, smem_addr(sK + use % STAGES * BC * D));
		turn.end();
		wgmma_wait0();
		fence_regs<BC / 8>(s);
		if (nj == 1 && lane == 0)
			mbar_arrive(qempty);  // Q read for the last time: the next item's may come
		mask_tile<BC>(s, 0, wrow, g, t, T, causal);
		softmax_rows<BC>(s, mx, sum, alpha, sl2);
		to_pa(pa, s);

		for (int j = 1; j < nj; j++) {
			const uint32_t u = use + j;
			const int st = u % STAGES, pst = (u - 1) % STAGES;
			mbar_wait(&kfull[st], (u / STAGES) & 1);
			mbar_wait(&vfull[pst], ((u - 1) / STAGES) & 1);
			turn.begin();
			issue_qk<D, C::BR>(s, qaddr, smem_addr(sK + st * BC * D));
			issue_pv<D>(acc, pa, smem_addr(sV + pst * BC * D));
			turn.end();
			wgmma_wait1();  // S_j is ready; P_{j-1} V_{j-1} may still run
			fence_regs<BC / 8>(s);
			if (j == nj - 1 && lane == 0)
				mbar_arrive(qempty);
			mask_tile<BC>(s, j * BC, wrow, g, t, T, causal);
			softmax_rows<BC>(s, mx, sum, alpha, sl2);
			wgmma_wait0();
			fence_regs<D / 8>(acc);
			fence_regs_u32<BC / 16>(pa);
			if (lane == 0)
				mbar_arrive(&empty[pst]);
			rescale_rows<D>(acc, alpha);
			to_pa(pa, s);
		}
		const uint32_t ul = use + nj - 1;
		mbar_wait(&vfull[ul % STAGES], (ul / STAGES) & 1);
		turn.begin();
		issue_pv<D>(acc, pa, smem_addr(sV + ul % STAGES * BC * D));
		turn.end();
		wgmma_wait0();
		fence_regs<D / 8>(acc);
		if (lane == 0)
			mbar_arrive(&empty[ul % STAGES]);
		// Release the tiles skipped, each once its phase is the current
		// one, and take their (empty) turns.
		for (int j = nj; j < it.nkv; j++) {
			const uint32_t u = use + j;
			mbar_wait(&vfull[u % STAGES], (u / STAGES) & 1);
			if (lane == 0)
				mbar_arrive(&empty[u % STAGES]);
			turn.begin();
			turn.end();
		}
		use += it.nkv;
		store_rows<D>(o + (size_t)it.bh * T * D, lse + (size_t)it.bh * T, acc, mx, sum, wrow,
			      g, t, T, scale);
	}
}

// Persistent: one block per multiprocessor, looping over items.
template <int D, int NWG, int STAGES, bool PINGPONG>
__global__ void __launch_bounds__(WG_THREADS *(NWG + 1), 1)
fwd_ws_kernel(const __grid_constant__ CUtensorMap mq, const __grid_constant__ CUtensorMap mk,
	      const __grid_constant__ CUtensorMap mv, bf16 *__restrict__ o,
	      float *__restrict__ lse, int BH, int T, int causal, float scale)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a: refuse loudly rather than compute nothing
#else
	using C = WsCfg<D, NWG, STAGES>;
	constexpr bool PP = PINGPONG && NWG >= 2;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sQ = reinterpret_cast<bf16 *>(base);
	bf16 *sK = sQ + C::BR * D;        // STAGES buffers of BC x D
	bf16 *sV = sK + STAGES * BC * D;  // STAGES buffers of BC x D
	uint64_t *qfull = reinterpret_cast<uint64_t *>(sV + STAGES * BC * D);
	uint64_t *qempty = qfull + 1, *kfull = qempty + 1, *vfull = kfull + STAGES,
		 *empty = vfull + STAGES;

	if (threadIdx.x == 0) {
		mbar_init(qfull, 1);
		mbar_init(qempty, NWG * WARPS_PER_WG);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(&kfull[s], 1);
			mbar_init(&vfull[s], 1);
			mbar_init(&empty[s], NWG * WARPS_PER_WG);
		}
		mbar_fence_init();
	}
	__syncthreads();

	if (threadIdx.x / WG_THREADS == NWG) {  // the producer warpgroup
		regs_dealloc<PRODUCER_REGS>();
		if (threadIdx.x % WG_THREADS == 0)
			produce<D, NWG, STAGES>(&mq, &mk, &mv, sQ, sK, sV, qfull, qempty, kfull, vfull,
						empty, BH, T, causal);
	} else {
		regs_alloc<C::CONSUMER_REGS>();
		consume<D, NWG, STAGES, PP>(sQ, sK, sV, qfull, qempty, kfull, vfull, empty, o, lse, BH,
					    T, causal, scale);
	}
#endif
}

template <int D, int NWG, int STAGES>
int launch(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
	   int BH, int T, int causal, float scale, cudaStream_t st)
{
	using C = WsCfg<D, NWG, STAGES>;
	CUtensorMap mq, mk, mv;
	if (tma_map_3d(&mq, q, D, T, BH, C::BR) || tma_map_3d(&mk, k, D, T, BH, BC) ||
	    tma_map_3d(&mv, v, D, T, BH, BC))
		return ATTN_EDEVICE;
	auto kern = fwd_ws_kernel<D, NWG, STAGES, FWS_PINGPONG>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	int dev, sms;
	if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
		return ATTN_EDEVICE;
	const long long items = (long long)BH * ((T + C::BR - 1) / C::BR);
	const int grid = items < sms ? (int)items : sms;
	kern<<<grid, C::NT, C::SMEM, st>>>(mq, mk, mv, (bf16 *)o, lse, BH, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace


int attn_fwd_ws(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
		int BH, int T, int D, int causal, float scale, cudaStream_t st)
{
	if (D == 64)
		return launch<64, FWS64_NWG, FWS64_STAGES>(q, k, v, o, lse, BH, T, causal, scale, st);
	return launch<128, FWS128_NWG, FWS128_STAGES>(q, k, v, o, lse, BH, T, causal, scale, st);
}
