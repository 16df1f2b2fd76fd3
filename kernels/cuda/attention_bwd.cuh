// attention_bwd.cuh: what the two wgmma attention backward kernels share
// (attention_bwd_ws.cu, the default: a warpgroup of its own for dQ;
// variants/attention_bwd_fa2.cu: warpgroups that each also compute dQ pieces): the dQ workspace's
// tiled layout, the loads of a query step, the warpgroup MMA shapes and
// one warpgroup's step over its 64 keys (S^T, dP^T, P^T, dS^T, and the dV
// and dK products issued), and the bulk reduction of a dQ piece (or its
// copy into the deterministic path's partials).
#ifndef LMPIPE_ATTENTION_BWD_CUH
#define LMPIPE_ATTENTION_BWD_CUH

#include "mma.cuh"
#include "tma.cuh"
#include "wgmma_bwd.cuh"

namespace bwd {

// Named barriers: every thread of the n waits (sync) or only counts itself
// in (arrive); n a multiple of 32.
__device__ __forceinline__ void named_bar_sync(int id, int n)
{
	asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void named_bar_arrive(int id, int n)
{
	asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

constexpr float LOG2E = 1.4426950408889634f;

// A warpgroup owns BWG_KEYS keys; dQ pieces are BWG_MROWS query rows.
constexpr int BWG_KEYS = 64, BWG_THREADS = 128, BWG_MROWS = 64;

// The dQ workspace's rows are padded to a multiple of DQ_ROWS, so that a
// bulk-reduced tile never runs past a head.  Where dQ is added by bulk
// reductions (the default kernel, or the wgmma variant's BWD_DQ_BULK) it is laid out
// in tiles of DQ_ROWS x DQ_COLS floats, tiles row-major within a head,
// each tile in the order of a 64 x 64 wgmma accumulator: float4 number
// j * 128 + thread holds c[j][0..3] of that thread of the warpgroup
// (rows 16 warp + lane / 4 and + 8, columns 8 j + 2 (lane % 4) and + 1).
constexpr int DQ_ROWS = 64, DQ_COLS = 64, DQ_TILE = DQ_ROWS * DQ_COLS;

__host__ __device__ constexpr int dq_rows_padded(int T)
{
	return (T + DQ_ROWS - 1) / DQ_ROWS * DQ_ROWS;
}

// The deterministic dQ (attn_bwd_det_cuda): the key blocks of DQ_KEYS keys
// (attention_bwd_ws.cu's BN) each store their dQ partial, instead of adding
// it, into a workspace of dq_key_blocks(T) slices, slice kb holding block
// kb's partials of every head in the tiled layout above; a second pass
// sums the slices in block order.  When causal, block kb writes only the
// query tiles from kb DQ_KEYS / DQ_ROWS on (its first query step; the
// queries before it see none of its keys), so the sum reads slice kb only
// for tiles whose last row reaches key kb DQ_KEYS: dq_blocks_for(mt)
// slices for query tile mt.
constexpr int DQ_KEYS = 2 * BWG_KEYS;

__host__ __device__ constexpr int dq_key_blocks(int T)
{
	return (T + DQ_KEYS - 1) / DQ_KEYS;
}

__host__ __device__ constexpr int dq_blocks_for(int mt, int T, int causal)
{
	const int all = dq_key_blocks(T), upto = (mt * DQ_ROWS + DQ_ROWS - 1) / DQ_KEYS + 1;
	return causal && upto < all ? upto : all;
}

// Q and dO rows m0.. as slab tiles (their rows ldq and ldo elements
// apart), and their lse and delta (0 past T), all by cp.async.
template <int D, int BM, int NT>
__device__ __forceinline__ void load_q_slabs(bf16 *sQ, bf16 *sdO, float *sL, float *sDl,
					     const bf16 *q, const bf16 *dout, const float *lse,
					     const float *delta, int m0, int T, size_t ldq = D,
					     size_t ldo = D)
{
	load_slabs<BM, D, NT>(sQ, q, m0, T, ldq);
	load_slabs<BM, D, NT>(sdO, dout, m0, T, ldo);
	for (int i = threadIdx.x; i < BM; i += NT) {
		bool valid = m0 + i < T;
		cp_async4(sL + i, lse + (valid ? m0 + i : 0), valid);
		cp_async4(sDl + i, delta + (valid ? m0 + i : 0), valid);
	}
}

// S^T (64 keys x BM queries), both operands K-major.
template <int BM>
__device__ __forceinline__ void wgb_st(float (*d)[4], uint64_t da, uint64_t db, int scale_d)
{
	if constexpr (BM == 64)
		wgb_ss_n64(d, da, db, scale_d);
	else
		wgmma_ss_n128(d, da, db, scale_d);
}

// A piece of dQ (64 queries x N) from dS (M-major) and K (N-major).
template <int N>
__device__ __forceinline__ void wgb_dq(float (*d)[4], uint64_t da, uint64_t db, int scale_d)
{
	if constexpr (N == 32)
		wgb_ss_tt_n32(d, da, db, scale_d);
	else
		wgb_ss_tt_n64(d, da, db, scale_d);
}

// P^T = exp2(S^T scale log2e - lse log2e) and dS^T = P^T (dP^T - delta)
// scale in place of the S^T and dP^T accumulators (rows: keys from key,
// columns: queries from m0; lse and delta at shared addresses ls, dl); with
// MASK, P^T = 0 for keys or queries past T and (causal) keys after the
// query.
template <int BM, bool MASK>
__device__ __forceinline__ void p_ds(float (*st)[4], float (*dpt)[4], uint32_t ls, uint32_t dl,
				     float sl2, float scale, int m0, int key, int t, int T, int causal)
{
#pragma unroll
	for (int i = 0; i < BM / 8; i++) {
		const int q = i * 8 + 2 * t;
		const float2 l = lds_f2(ls + q * sizeof(float));
		const float2 d = lds_f2(dl + q * sizeof(float));
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int qi = q + (e & 1), kr = key + (e >> 1) * 8;
			float p = exp2_ftz(fmaf(st[i][e], sl2, -LOG2E * (e & 1 ? l.y : l.x)));
			if (MASK && (kr >= T || m0 + qi >= T || (causal && m0 + qi < kr)))
				p = 0;
			st[i][e] = p;
			dpt[i][e] = p * (dpt[i][e] - (e & 1 ? d.y : d.x)) * scale;
		}
	}
}

template <int N>
__device__ __forceinline__ void zero_acc(float (*c)[4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0;
}

// d (64 keys x BM queries) = A B^T over D: A = the warpgroup's 64 rows of
// K or V (a slab tile of BN rows at aaddr), B = Q or dO (BM rows at
// baddr), both K-major; issued and committed as one group.
template <int D, int BM, int BN>
__device__ __forceinline__ void issue_t(float (*d)[4], uint32_t aaddr, uint32_t baddr)
{
	constexpr uint32_t KSTEP = 16 * sizeof(bf16);  // a k16 step within a 128-byte row
	constexpr uint32_t KSLAB = BN * SLAB_ROW_BYTES, QSLAB = BM * SLAB_ROW_BYTES;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		uint32_t ko = (kk / 4) * KSLAB + (kk % 4) * KSTEP;
		uint32_t qo = (kk / 4) * QSLAB + (kk % 4) * KSTEP;
		wgb_st<BM>(d, sw128_desc(aaddr + ko, 16, SW_ATOM_BYTES),
			   sw128_desc(baddr + qo, 16, SW_ATOM_BYTES), kk > 0);
	}
	wgmma_commit();
}

// The same product with A (the warpgroup's 64 rows of K or V, D wide) from
// registers: a[kk] is the A fragment of k16 step kk (load_a_frags).
template <int D, int BM>
__device__ __forceinline__ void issue_t_rs(float (*d)[4], const uint32_t (*a)[4], uint32_t baddr)
{
	static_assert(BM == 64, "register-held K and V: query steps of 64 rows");
	constexpr uint32_t KSTEP = 16 * sizeof(bf16);
	constexpr uint32_t QSLAB = BM * SLAB_ROW_BYTES;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		wgb_rs_n64(d, a[kk], sw128_desc(baddr + (kk / 4) * QSLAB + (kk % 4) * KSTEP, 16,
						SW_ATOM_BYTES),
			   kk > 0);
	wgmma_commit();
}

// This thread's A fragments of a warp's 16 rows of a [T, D] head (rows ld
// elements apart): rows `row` and row + 8, columns 2t, 2t + 1 and + 8 of
// each k16 step; rows past T are zeros.
template <int D>
__device__ __forceinline__ void load_a_frags(uint32_t (*a)[4], const bf16 *src, int row, int t,
					     int T, size_t ld)
{
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const bool valid = row + h * 8 < T;
		const uint32_t *r = reinterpret_cast<const uint32_t *>(src + (size_t)(row + h * 8) * ld);
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			a[kk][h] = valid ? r[kk * 8 + t] : 0;
			a[kk][h + 2] = valid ? r[kk * 8 + 4 + t] : 0;
		}
	}
}

// One warpgroup's query step: its 64 keys (first key `wkey`, this
// thread's rows from `key`; K and V rows at kaddr, vaddr within tiles of
// BN rows) against BM queries from m0 (Q, dO at qaddr, doaddr; lse and
// delta at ls, dl).  S^T and dP^T, P^T and dS^T into pa and sa as bf16 A
// fragments, then dV += P^T dO and dK += dS^T Q issued as two groups, not
// waited for.  Causal steps wholly before the keys give pa = sa = 0 and
// issue nothing.  With ka and va (the warpgroup's K and V rows as A
// fragments, load_a_frags), S^T and dP^T take A from them, not from kaddr
// and vaddr.
template <int D, int BM, int BN>
__device__ __forceinline__ void kv_step(float (*adk)[4], float (*adv)[4], uint32_t (*pa)[4],
					uint32_t (*sa)[4], uint32_t kaddr, uint32_t vaddr,
					uint32_t qaddr, uint32_t doaddr, uint32_t ls, uint32_t dl,
					float sl2, float scale, int m0, int wkey, int key, int t, int T,
					int causal, const uint32_t (*ka)[4] = nullptr,
					const uint32_t (*va)[4] = nullptr)
{
	constexpr uint32_t ROWS16 = 16 * SLAB_ROW_BYTES;  // 16 rows of a slab
	constexpr uint32_t QSLAB = BM * SLAB_ROW_BYTES;
	if (causal && wkey > m0 + BM - 1) {
		// Every query of this step comes before the warpgroup's keys.
#pragma unroll
		for (int kk = 0; kk < BM / 16; kk++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				pa[kk][e] = sa[kk][e] = 0;
		return;
	}
	float st[BM / 8][4], dpt[BM / 8][4];
	fence_regs<BM / 8>(st);
	fence_regs<BM / 8>(dpt);
	wgmma_fence();
	if constexpr (BM == 64) {
		if (ka) {
			issue_t_rs<D, BM>(st, ka, qaddr);
			issue_t_rs<D, BM>(dpt, va, doaddr);
		} else {
			issue_t<D, BM, BN>(st, kaddr, qaddr);
			issue_t<D, BM, BN>(dpt, vaddr, doaddr);
		}
	} else {
		issue_t<D, BM, BN>(st, kaddr, qaddr);
		issue_t<D, BM, BN>(dpt, vaddr, doaddr);
	}
	wgmma_wait<0>();
	fence_regs<BM / 8>(st);
	fence_regs<BM / 8>(dpt);

	// P^T and dS^T; the masked version only where some key or query is
	// past T or (causal) the tile crosses the diagonal.
	if (wkey + BWG_KEYS > T || m0 + BM > T || (causal && m0 < wkey + BWG_KEYS))
		p_ds<BM, true>(st, dpt, ls, dl, sl2, scale, m0, key, t, T, causal);
	else
		p_ds<BM, false>(st, dpt, ls, dl, sl2, scale, m0, key, t, T, causal);
	acc_to_a<BM>(pa, st);
	acc_to_a<BM>(sa, dpt);
	fence_regs<D / 8>(adv);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BM / 16; kk++)
		wgmma_rs_tb<D>(adv, pa[kk], sw128_desc(doaddr + kk * ROWS16, QSLAB, SW_ATOM_BYTES));
	wgmma_commit();
	fence_regs<D / 8>(adk);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BM / 16; kk++)
		wgmma_rs_tb<D>(adk, sa[kk], sw128_desc(qaddr + kk * ROWS16, QSLAB, SW_ATOM_BYTES));
	wgmma_commit();
}

// dS^T (sa: A fragments of this thread's rows from `row` of the block's
// BN keys, BM queries) into the slab tile at dsaddr: fragment e is row + 8
// for odd e and column + 8 for e >= 2.
template <int BM, int BN>
__device__ __forceinline__ void store_ds(uint32_t dsaddr, const uint32_t (*sa)[4], int row, int t)
{
#pragma unroll
	for (int kk = 0; kk < BM / 16; kk++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int r = row + (e & 1) * 8, col = kk * 16 + (e >> 1) * 8 + 2 * t;
			sts_u32(dsaddr + slab_off<BN>(r, col) * sizeof(bf16), sa[kk][e]);
		}
}

// The dQ piece of 64 query rows from rb * 64 and N columns from c0: c =
// dS K over the block's BN keys (dS^T tile at dsaddr read M-major, K tile
// at kaddr read N-major); issued and committed as one group.  LEAN: each
// step's descriptors formed just before its instruction, not all ahead
// (for a warpgroup with few registers).
template <int BN, int N, bool LEAN = false>
__device__ __forceinline__ void issue_dq(float (*c)[4], uint32_t dsaddr, uint32_t kaddr, int rb,
					 int c0)
{
	constexpr uint32_t ROWS16 = 16 * SLAB_ROW_BYTES;  // 16 rows of a slab
	constexpr uint32_t KSLAB = BN * SLAB_ROW_BYTES;
	uint32_t a = dsaddr + rb * KSLAB;
	uint32_t b = kaddr + c0 / SLAB_COLS * KSLAB + c0 % SLAB_COLS * sizeof(bf16);
	zero_acc<N / 8>(c);
	fence_regs<N / 8>(c);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BN / 16; kk++) {
		if (LEAN) {
			a = wgb_opaque(a);
			b = wgb_opaque(b);
		}
		wgb_dq<N>(c, sw128_desc(a + kk * ROWS16, KSLAB, SW_ATOM_BYTES),
			  sw128_desc(b + kk * ROWS16, KSLAB, SW_ATOM_BYTES), kk > 0);
	}
	wgmma_commit();
}

// This thread's rows of dK and dV (from key `key` and + 8, columns 2t, 2t+1
// of every n-tile) as bf16 into the head's [T, D] arrays, rows ld
// elements apart.  With cs (a RoPE table [T, D/2, 2], kernels/rope.h), dK
// is the gradient of rotated keys: it is rotated back by the key's angle
// first (column c and c + D/2 are this thread's n-tiles dt and dt + D/16).
template <int D>
__device__ __forceinline__ void store_dkdv(bf16 *dk, bf16 *dv, const float (*adk)[4],
					   const float (*adv)[4], int key, int t, int T,
					   size_t ld = D, const float *cs = nullptr)
{
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = key + h * 8;
		if (row >= T)
			continue;
#pragma unroll
		for (int dt = 0; dt < D / 8; dt++) {
			size_t x = (size_t)row * ld + dt * 8 + 2 * t;
			*reinterpret_cast<uint32_t *>(dv + x) = pack_bf16(adv[dt][2 * h], adv[dt][2 * h + 1]);
			if (!cs)
				*reinterpret_cast<uint32_t *>(dk + x) =
					pack_bf16(adk[dt][2 * h], adk[dt][2 * h + 1]);
		}
		if (!cs)
			continue;
#pragma unroll
		for (int dt = 0; dt < D / 16; dt++) {
			const int c = dt * 8 + 2 * t;
			const float4 r = *reinterpret_cast<const float4 *>(cs + ((size_t)row * (D / 2) + c) * 2);
			const float a0 = adk[dt][2 * h], a1 = adk[dt][2 * h + 1];
			const float b0 = adk[dt + D / 16][2 * h], b1 = adk[dt + D / 16][2 * h + 1];
			size_t x = (size_t)row * ld + c;
			*reinterpret_cast<uint32_t *>(dk + x) =
				pack_bf16(a0 * r.x + b0 * r.y, a1 * r.z + b1 * r.w);
			*reinterpret_cast<uint32_t *>(dk + x + D / 2) =
				pack_bf16(b0 * r.x - a0 * r.y, b1 * r.z - a1 * r.w);
		}
	}
}

// Columns 8 j0 .. 8 j0 + N - 1 of a warpgroup's 64 x 64 dQ piece (c holds
// them) into its shared tile, in the workspace's order (DQ_TILE).
template <int N>
__device__ __forceinline__ void dq_tile_write(float *tile, const float (*c)[4], int j0, int wtid)
{
	float4 *t4 = reinterpret_cast<float4 *>(tile);
#pragma unroll
	for (int j = 0; j < N / 8; j++)
		t4[(j0 + j) * BWG_THREADS + wtid] = make_float4(c[j][0], c[j][1], c[j][2], c[j][3]);
}

// Once the warpgroup's threads have all written the tile (named barrier
// `bar`), thread 0 adds it to dst (a workspace tile) by one bulk
// reduction, or with STORE (the deterministic partials) copies it there.
// The tile may be written again after that thread's bulk_wait_read().
template <bool STORE = false>
__device__ __forceinline__ void dq_tile_reduce(float *dst, float *tile, int wtid, int bar)
{
	fence_proxy_async();
	named_bar_sync(bar, BWG_THREADS);
	if (wtid == 0) {
		if constexpr (STORE)
			bulk_store(dst, tile, DQ_TILE * sizeof(float));
		else
			bulk_reduce_add_f32(dst, tile, DQ_TILE * sizeof(float));
		bulk_commit();
	}
}

}  // namespace bwd

#endif
