// attention_fwd_ws.cu: the attention forward in the FlashAttention-3
// arrangement (Hopper, sm_90a): warp specialisation and overlap of the
// softmax with the tensor cores.
//
// The grid is persistent (one block per multiprocessor); a block takes
// items of BR = 64 NWG query rows of one (batch, head) and has NWG + 1
// warpgroups.  The last one is the producer: one of its threads streams
// each item's Q and its K and V tiles of BC keys through rings of
// shared-memory buffers with the bulk tensor copy engine (TMA), each
// buffer guarded by a "full" mbarrier (bytes arrived) and an "empty" one
// (every consumer warp is done with it).  It keeps 24 registers and gives
// the rest to the NWG consumer warpgroups, each owning 64 rows of the
// item.  A consumer's loop, for tile j:
//
//   issue S_j = Q K_j^T                 (wgmma, async)
//   issue O += P_{j-1} V_{j-1}          (wgmma, async, P from registers)
//   wait for S_j; release K_j; mask, softmax -> P_j
//                                       (while P_{j-1} V_{j-1} runs)
//   wait for the P V product; release V_{j-1}; rescale O
//
// so the exponentials of one tile run under the matrix products of the
// other, and no thread ever waits on a block-wide barrier.  With two
// or more consumers (FWS_PINGPONG) they also take turns to issue their
// matrix products (named barriers), so that one warpgroup's softmax runs
// while another's products occupy the tensor cores.
//
// Two layouts: q, k, v, o [BH, T, D] (3-d tensor maps), or the packed
// projection qkv[B, T, 3, H, D] read in place through 4-d maps with o
// [B, T, H, D] (attn_fwd_ws_packed, for attn_qkv_fwd_cuda).
#include "attention_cuda.cuh"
#include "attention_fwd.cuh"
#include "kernels/attention.h"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cuda_runtime.h>

// Consumer warpgroups and buffers of Q, K and V per head dimension, and the
// ping-pong of two consumers; -D overrides them (bench/attention-notes.md).
// At D = 64 items of 128 rows (two consumers) beat 192 (three) once work
// came in units: gpt2s's causal T 1024 0.188 against 0.206 ms, T 4096
// 0.362 against 0.376 (an H100, stop 68).
#ifndef FWS64_NWG
#define FWS64_NWG 2
#endif
#ifndef FWS64_QST
#define FWS64_QST 2
#endif
#ifndef FWS64_KST
#define FWS64_KST 3
#endif
#ifndef FWS64_VST
#define FWS64_VST 3
#endif
#ifndef FWS128_NWG
#define FWS128_NWG 2
#endif
#ifndef FWS128_QST
#define FWS128_QST 2
#endif
#ifndef FWS128_KST
#define FWS128_KST 3
#endif
#ifndef FWS128_VST
#define FWS128_VST 2
#endif
#ifndef FWS_PINGPONG
#define FWS_PINGPONG 1
#endif
// 1: work dealt in units of equal cost, numbered head by head (Sched
// below); 0: items one by one, heavy first, heads fastest.
#ifndef FWS_UNITS
#define FWS_UNITS 1
#endif

namespace {

using namespace attn;

constexpr int BC = 128, WG_ROWS = 64, WG_THREADS = 128, WARPS_PER_WG = 4;
constexpr int PRODUCER_REGS = 24, REG_FILE = 65536;
constexpr int TURN_BARRIER = 1;  // named barriers 1 .. NWG: the consumers' turns

// Shared memory: QST buffers of Q (BR x D), KST of K and VST of V tiles
// (BC x D), each ring with its full and empty mbarriers.
template <int D, int NWG, int QST, int KST, int VST>
struct WsCfg {
	static constexpr int BR = WG_ROWS * NWG, NT = WG_THREADS * (NWG + 1);
	static constexpr uint32_t QBYTES = BR * D * sizeof(bf16), TILE = BC * D * sizeof(bf16);
	static constexpr int NBAR = 2 * (QST + KST + VST);
	static constexpr size_t SMEM =
		QST * (size_t)QBYTES + (KST + VST) * (size_t)TILE + NBAR * 8 + SW_ATOM_BYTES;
	// The consumers' share of the registers the block is launched with
	// (setmaxnreg moves them from the producer; asking for more than it
	// gives up would wait forever), a multiple of 8, at most 240.
	static constexpr int LAUNCH_REGS = REG_FILE / NT / 8 * 8;
	static constexpr int CR0 =
		(LAUNCH_REGS * NT - PRODUCER_REGS * WG_THREADS) / (NWG * WG_THREADS) / 8 * 8;
	static constexpr int CONSUMER_REGS = CR0 > 240 ? 240 : CR0;
};

// A ring of N buffers in shared memory.  Its u-th use (counted from 0 over
// the block's whole life) takes buffer u % N; full[] completes when the
// copy engine has written it, empty[] when every consumer warp is done.
template <int N>
struct Ring {
	bf16 *buf;
	int elems;  // per buffer
	uint64_t *full, *empty;

	__device__ __forceinline__ bf16 *at(uint32_t u) const { return buf + (u % N) * elems; }
	__device__ __forceinline__ void wait_full(uint32_t u) const
	{
		mbar_wait(&full[u % N], (u / N) & 1);
	}
	// Producer: wait until use u - N has been released.
	__device__ __forceinline__ void wait_empty(uint32_t u) const
	{
		if (u >= N)
			mbar_wait(&empty[u % N], (u / N - 1) & 1);
	}
	// Consumer warp: done with use u (one lane per warp).
	__device__ __forceinline__ void release(uint32_t u, int lane) const
	{
		if (lane == 0)
			mbar_arrive(&empty[u % N]);
	}
	__device__ __forceinline__ void init(int consumers) const
	{
		for (int i = 0; i < N; i++) {
			mbar_init(&full[i], 1);
			mbar_init(&empty[i], consumers);
		}
	}
	// Producer: load rows [row0, row0 + rows) of head bh for use u; with
	// PACKED, through a 4-d map of [B, T, ..., H, D] (head bh % H of batch
	// bh / H), else a 3-d one of [BH, T, D].
	template <bool PACKED>
	__device__ __forceinline__ void load(const CUtensorMap *map, uint32_t u, int rows, int row0,
					     int bh, int D, int H) const
	{
		bf16 *dst = at(u);
		uint64_t *bar = &full[u % N];
		mbar_expect_tx(bar, (uint32_t)(rows * D * sizeof(bf16)));
		for (int sl = 0; sl < D / SLAB_COLS; sl++) {
			if constexpr (PACKED)
				tma_load_4d(dst + sl * rows * SLAB_COLS, map, bar, sl * SLAB_COLS, bh % H,
					    row0, bh / H);
			else
				tma_load_3d(dst + sl * rows * SLAB_COLS, map, bar, sl * SLAB_COLS, row0,
					    bh);
		}
	}
};

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
		wgmma_rs_tb<D>(acc, pa[kk], sw128_desc(vaddr + kk * 16 * SLAB_ROW_BYTES, KSLAB,
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

// An item: BR query rows of one (batch, head).
struct Item {
	int bh, q0, nkv;  // head, first row, key tiles to visit
};

// The order of the items.  Block b takes units b, b + grid, ...; a unit is
// one or two items of one head.  FWS_UNITS: causal units pair row tiles
// nq-1-p and p (nq + 1 key tiles together, so every block gets the same
// work whatever units it draws; the middle tile of an odd nq alone), and
// units are numbered head by head, so that the blocks running at once
// read the K and V of a few heads, which stay in L2 (heads fastest, the
// K and V of ~132 heads at once did not: DRAM 66 % busy at T = 1024).
// Otherwise one item a unit, heavy first (the last row tiles), heads
// fastest.
template <int BR>
struct Sched {
	int BH, T, causal, nq, per_head;  // units per head
	__device__ Sched(int BH_, int T_, int causal_) : BH(BH_), T(T_), causal(causal_)
	{
		nq = (T + BR - 1) / BR;
		per_head = FWS_UNITS && causal ? (nq + 1) / 2 : nq;
	}
	__device__ long long units(void) const { return (long long)BH * per_head; }
	__device__ int items(long long u) const
	{
		if (!FWS_UNITS || !causal || (nq % 2 && u % per_head == per_head - 1))
			return 1;
		return 2;
	}
	__device__ Item item(long long u, int i) const
	{
		Item it;
		int qi;
		if (FWS_UNITS) {
			const int p = (int)(u % per_head);
			it.bh = (int)(u / per_head);
			qi = causal ? (i == 0 ? nq - 1 - p : p) : p;
		} else {
			it.bh = (int)(u % BH);
			qi = causal ? nq - 1 - (int)(u / BH) : (int)(u / BH);
		}
		it.q0 = qi * BR;
		const int kend = causal ? min(T, it.q0 + BR) : T;
		it.nkv = (kend + BC - 1) / BC;
		return it;
	}
};

// This block's items in order: units blockIdx.x, blockIdx.x + gridDim.x,
// ..., the items of each unit in turn.
template <int BR>
struct Walk {
	Sched<BR> sched;
	long long u;
	int i;
	__device__ Walk(int BH, int T, int causal) : sched(BH, T, causal), u(blockIdx.x), i(0) {}
	__device__ bool next(Item &it)
	{
		if (u >= sched.units())
			return false;
		it = sched.item(u, i);
		if (++i == sched.items(u)) {
			u += gridDim.x;
			i = 0;
		}
		return true;
	}
};

// The producer's thread: for each item of this block, Q, then its K and V
// tiles, each into the next buffer of its ring once the consumers have
// released it; the rings run on across items, so the next item's Q and
// first tiles arrive while the consumers finish the current one.
template <int QST, int KST, int VST, int BR, int D, bool PACKED>
__device__ void produce(const CUtensorMap *mq, const CUtensorMap *mk, const CUtensorMap *mv,
			const Ring<QST> &rq, const Ring<KST> &rk, const Ring<VST> &rv, int BH,
			int H, int T, int causal)
{
	Walk<BR> walk(BH, T, causal);
	uint32_t use = 0;
	Item it;
	for (uint32_t n = 0; walk.next(it); n++) {
		rq.wait_empty(n);
		rq.template load<PACKED>(mq, n, BR, it.q0, it.bh, D, H);
		for (int j = 0; j < it.nkv; j++, use++) {
			rk.wait_empty(use);
			rk.template load<PACKED>(mk, use, BC, j * BC, it.bh, D, H);
			rv.wait_empty(use);
			rv.template load<PACKED>(mv, use, BC, j * BC, it.bh, D, H);
		}
	}
}

// A consumer warpgroup: 64 query rows of each of this block's items.  K_j
// is released as soon as S_j is computed, V_j after P_j V_j, Q after the
// item's last Q K^T.  With PACKED, o is [B, T, H, D], else [BH, T, D].
template <int D, int NWG, int QST, int KST, int VST, bool PP, bool PACKED>
__device__ void consume(const Ring<QST> &rq, const Ring<KST> &rk, const Ring<VST> &rv, bf16 *o,
			float *lse, int BH, int H, int T, int causal, float scale)
{
	constexpr int BR = WG_ROWS * NWG;
	const int wg = threadIdx.x / WG_THREADS;
	const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const float sl2 = scale * LOG2E;
	Walk<BR> walk(BH, T, causal);
	uint32_t use = 0;  // as the producer counts them
	Item it;
	for (uint32_t n = 0; walk.next(it); n++) {
		const int wgrow = it.q0 + wg * WG_ROWS;                         // warpgroup's first row
		const int wrow = wgrow + (threadIdx.x % WG_THREADS) / 32 * 16;  // warp's first row
		// Causal: tiles past this warpgroup's last row are skipped (but released).
		const int kend = causal ? min(T, it.q0 + BR) : T;
		const int nj = causal ? (min(kend, wgrow + WG_ROWS) + BC - 1) / BC : it.nkv;
		const uint32_t qaddr = smem_addr(rq.at(n)) + wg * WG_ROWS * SLAB_ROW_BYTES;

		float acc[D / 8][4];
#pragma unroll
		for (int i = 0; i < D / 8; i++)
			acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0;
		float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0}, alpha[2];
		float s[BC / 8][4];
		uint32_t pa[BC / 16][4];

		rq.wait_full(n);
		rk.wait_full(use);
		Turns<PP, NWG> turn(wg, it.nkv);
		turn.begin();
		issue_qk<D, BR>(s, qaddr, smem_addr(rk.at(use)));
		turn.end();
		wgmma_wait<0>();
		fence_regs<BC / 8>(s);
		rk.release(use, lane);
		if (nj == 1)
			rq.release(n, lane);
		mask_tile<BC>(s, 0, wrow, g, t, T, causal);
		softmax_rows<BC>(s, mx, sum, alpha, sl2);
		acc_to_a<BC>(pa, s);

		for (int j = 1; j < nj; j++) {
			const uint32_t u = use + j;
			rk.wait_full(u);
			rv.wait_full(u - 1);
			turn.begin();
			issue_qk<D, BR>(s, qaddr, smem_addr(rk.at(u)));
			issue_pv<D>(acc, pa, smem_addr(rv.at(u - 1)));
			turn.end();
			wgmma_wait<1>();  // S_j is ready; P_{j-1} V_{j-1} may still run
			fence_regs<BC / 8>(s);
			rk.release(u, lane);
			if (j == nj - 1)
				rq.release(n, lane);
			mask_tile<BC>(s, j * BC, wrow, g, t, T, causal);
			softmax_rows<BC>(s, mx, sum, alpha, sl2);
			wgmma_wait<0>();
			fence_regs<D / 8>(acc);
			fence_regs_u32<BC / 16>(pa);
			rv.release(u - 1, lane);
			rescale_rows<D>(acc, alpha);
			acc_to_a<BC>(pa, s);
		}
		const uint32_t ul = use + nj - 1;
		rv.wait_full(ul);
		turn.begin();
		issue_pv<D>(acc, pa, smem_addr(rv.at(ul)));
		turn.end();
		wgmma_wait<0>();
		fence_regs<D / 8>(acc);
		rv.release(ul, lane);
		// Release the tiles skipped, each once its phase is the current
		// one, and take their (empty) turns.
		for (int j = nj; j < it.nkv; j++) {
			const uint32_t u = use + j;
			rk.wait_full(u);
			rk.release(u, lane);
			rv.wait_full(u);
			rv.release(u, lane);
			turn.begin();
			turn.end();
		}
		use += it.nkv;
		bf16 *oh = PACKED ? o + ((size_t)(it.bh / H) * T * H + it.bh % H) * D
				  : o + (size_t)it.bh * T * D;
		store_rows<D>(oh, lse + (size_t)it.bh * T, acc, mx, sum, wrow, g, t, T, scale,
			      PACKED ? (size_t)H * D : (size_t)D);
	}
}

// Persistent: one block per multiprocessor, looping over items.
template <int D, int NWG, int QST, int KST, int VST, bool PINGPONG, bool PACKED>
__global__ void __launch_bounds__(WG_THREADS *(NWG + 1), 1)
fwd_ws_kernel(const __grid_constant__ CUtensorMap mq, const __grid_constant__ CUtensorMap mk,
	      const __grid_constant__ CUtensorMap mv, bf16 *__restrict__ o,
	      float *__restrict__ lse, int BH, int H, int T, int causal, float scale)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a: refuse loudly rather than compute nothing
#else
	using C = WsCfg<D, NWG, QST, KST, VST>;
	constexpr bool PP = PINGPONG && NWG >= 2;
	constexpr int CONSUMER_WARPS = NWG * WARPS_PER_WG;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sQ = reinterpret_cast<bf16 *>(base);
	bf16 *sK = sQ + QST * C::BR * D;
	bf16 *sV = sK + KST * BC * D;
	uint64_t *bar = reinterpret_cast<uint64_t *>(sV + VST * BC * D);
	const Ring<QST> rq = {sQ, C::BR * D, bar, bar + QST};
	const Ring<KST> rk = {sK, BC * D, bar + 2 * QST, bar + 2 * QST + KST};
	const Ring<VST> rv = {sV, BC * D, bar + 2 * (QST + KST), bar + 2 * (QST + KST) + VST};

	if (threadIdx.x == 0) {
		rq.init(CONSUMER_WARPS);
		rk.init(CONSUMER_WARPS);
		rv.init(CONSUMER_WARPS);
		mbar_fence_init();
	}
	__syncthreads();

	if (threadIdx.x / WG_THREADS == NWG) {  // the producer warpgroup
		regs_dealloc<PRODUCER_REGS>();
		if (threadIdx.x % WG_THREADS == 0)
			produce<QST, KST, VST, C::BR, D, PACKED>(&mq, &mk, &mv, rq, rk, rv, BH, H, T,
								 causal);
	} else {
		regs_alloc<C::CONSUMER_REGS>();
		consume<D, NWG, QST, KST, VST, PP, PACKED>(rq, rk, rv, o, lse, BH, H, T, causal, scale);
	}
#endif
}

// H > 0: q, k, v are the parts of the packed qkv[B, T, 3, H, D] (BH = B H)
// and o is [B, T, H, D]; H = 0: all four [BH, T, D].
template <int D, int NWG, int QST, int KST, int VST>
int launch(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
	   int BH, int H, int T, int causal, float scale, cudaStream_t st)
{
	using C = WsCfg<D, NWG, QST, KST, VST>;
	static_assert(C::SMEM <= 227 * 1024, "the buffers exceed a block's shared memory");
	CUtensorMap mq, mk, mv;
	if (H > 0) {
		const uint64_t n[4] = {(uint64_t)D, (uint64_t)H, (uint64_t)T, (uint64_t)(BH / H)};
		const uint64_t row = 3 * (uint64_t)H * D, stride[3] = {(uint64_t)D, row, row * T};
		if (tma_map_4d(&mq, q, n, stride, C::BR) || tma_map_4d(&mk, k, n, stride, BC) ||
		    tma_map_4d(&mv, v, n, stride, BC))
			return ATTN_EDEVICE;
	} else if (tma_map_3d(&mq, q, D, T, BH, C::BR) || tma_map_3d(&mk, k, D, T, BH, BC) ||
		   tma_map_3d(&mv, v, D, T, BH, BC)) {
		return ATTN_EDEVICE;
	}
	auto kern = H > 0 ? fwd_ws_kernel<D, NWG, QST, KST, VST, FWS_PINGPONG, true>
			  : fwd_ws_kernel<D, NWG, QST, KST, VST, FWS_PINGPONG, false>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM))
		return ATTN_EDEVICE;
	int dev, sms;
	if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
		return ATTN_EDEVICE;
	const long long nq = (T + C::BR - 1) / C::BR;
	const long long units = BH * (FWS_UNITS && causal ? (nq + 1) / 2 : nq);
	const int grid = units < sms ? (int)units : sms;
	kern<<<grid, C::NT, C::SMEM, st>>>(mq, mk, mv, (bf16 *)o, lse, BH, H, T, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace


int attn_fwd_ws(const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
		int BH, int T, int D, int causal, float scale, cudaStream_t st)
{
	if (D == 64)
		return launch<64, FWS64_NWG, FWS64_QST, FWS64_KST, FWS64_VST>(q, k, v, o, lse, BH, 0,
									    T, causal, scale, st);
	return launch<128, FWS128_NWG, FWS128_QST, FWS128_KST, FWS128_VST>(q, k, v, o, lse, BH, 0,
									       T, causal, scale, st);
}

int attn_fwd_ws_packed(const uint16_t *qkv, uint16_t *y, float *lse, int B, int H, int T, int D,
		       float scale, cudaStream_t st)
{
	const uint16_t *q = qkv, *k = qkv + (size_t)H * D, *v = qkv + 2 * (size_t)H * D;
	if (D == 64)
		return launch<64, FWS64_NWG, FWS64_QST, FWS64_KST, FWS64_VST>(q, k, v, y, lse, B * H,
									    H, T, 1, scale, st);
	return launch<128, FWS128_NWG, FWS128_QST, FWS128_KST, FWS128_VST>(q, k, v, y, lse, B * H,
									       H, T, 1, scale, st);
}
