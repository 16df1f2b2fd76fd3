// attention_short.cu: attention for short sequences and small heads (see
// kernels/attention.h, attn_short_*): one block of 8 warps per (batch,
// head) holds the whole head in shared memory, so the flash kernels'
// per-tile prologues, and their zero padding of D = 32 to 64, are gone.
//
// The ts shape (T = 256, D = 32) is where this pays: a head is 16 KB of
// each of q, k, v; the flash kernels spent 1.5 ms a layer on it, padding
// included, for what is a few microseconds of tensor-core work per head.
//
// mma.sync m16n8k16 (mma.cuh's fragment layouts) on tiles with rows padded
// from D to D + 8 elements, which keeps ldmatrix free of bank conflicts.
// Warps take groups of 16 rows in a zigzag order (w, then 2 NW - 1 - w,
// ...), which balances the causal triangle.  A row group's chunks of keys
// (or a key group's chunks of queries) are specialised at compile time:
// whole chunks run without masks, and the chunk that holds the diagonal
// stops at its last 16-wide sub-tile and alone applies the mask (on the
// ts shape: 8 % fewer instructions in the forward, 7 % less time in each).  The backward pass is two
// passes over the shared tiles: warps owning keys accumulate dK and dV,
// then warps owning queries accumulate dQ, so nothing is summed with
// atomics and the result does not depend on scheduling.
//
// q, k, v, dq, dk, dv are [B, H, T, D]; o (and dout) are that too, or
// [B, T, H, D] (o_bthd), the layout the output projection reads, so the
// model needs no heads merge around the call.  The qkv entry points go
// further: q, k, v are read from the projection's packed rows qkv[B, T,
// 3, H, D], RoPE is applied in shared memory, and the backward pass writes
// dq, dk (rotated back in registers) and dv over qkv in place (a block has
// read its head's q, k, v whole before it writes), so the model needs no
// split, merge or RoPE kernels either.
#include "kernels/attention.h"
#include "mma.cuh"

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr int NW = 8, NT = NW * 32;

// Rows [0, Tp) of a [T, D] matrix whose rows are ld elements apart into a
// tile of stride D + 8; rows past T become zeros.
template <int D>
__device__ __forceinline__ void load_rows(bf16 *tile, const bf16 *g, int T, int Tp, int ld = D)
{
	constexpr int CPR = D / 8;
	for (int c = threadIdx.x; c < Tp * CPR; c += NT) {
		int r = c / CPR, col = (c % CPR) * 8;
		bool v = r < T;
		cp_async16(tile + r * (D + 8) + col, v ? g + (size_t)r * ld + col : g, v);
	}
}

// Where head blockIdx.x = b H + h of o (or dout) starts, and its row
// stride: [B, H, T, D], or [B, T, H, D] when bthd.
__device__ __forceinline__ size_t o_base(int T, int H, int D, int bthd)
{
	int bh = blockIdx.x;
	return bthd ? ((size_t)(bh / H) * T * H + bh % H) * D : (size_t)bh * T * D;
}

// The g-th group of round r for warp w (zigzag), or -1 past G groups.
__device__ __forceinline__ int zig(int r, int w, int G)
{
	int g = (r & 1) ? r * NW + NW - 1 - w : r * NW + w;
	return g < G ? g : -1;
}

// Where tensor w (0 q, 1 k, 2 v) of head blockIdx.x = b H + h starts:
// [B, H, T, D] each, or the packed rows qkv[B, T, 3, H, D] (row stride
// 3 H D) that the q/k/v projection writes.
__device__ __forceinline__ size_t in_base(int T, int H, int D, int packed, int w)
{
	int bh = blockIdx.x;
	return packed ? ((size_t)(bh / H) * T * 3 * H + (size_t)w * H + bh % H) * D : (size_t)bh * T * D;
}

// RoPE (kernels/rope.h: pairs (j, j + D/2), table cs[T, D/2, 2]) of the
// first T rows of a shared tile, in place; the arithmetic of rope_fwd.  A
// thread takes 8 pairs at once: 16 bytes of each half row, 64 of the table.
// The table entries of a thread's first two items (all of them up to T =
// 256) are loaded by rope_prefetch before the wait for the tiles, so that
// their latency overlaps the copies (13 % of the forward kernel's time on
// the ts shape when they were loaded after it).
struct rope_pre {
	float4 c[2][4];
};

template <int D>
__device__ __forceinline__ void rope_prefetch(rope_pre &p, int T, const float *cs)
{
	constexpr int HALF = D / 2, CH = HALF / 8;
#pragma unroll
	for (int k = 0; k < 2; k++) {
		int i = threadIdx.x + k * NT;
		if (i < T * CH) {
			int r = i / CH, j = (i % CH) * 8;
			const float4 *c4 = (const float4 *)(cs + ((size_t)r * HALF + j) * 2);
#pragma unroll
			for (int e = 0; e < 4; e++)
				p.c[k][e] = c4[e];
		}
	}
}

template <int D>
__device__ __forceinline__ void rope_item(bf16 *tile, int i, const float4 *t4)
{
	constexpr int HALF = D / 2, CH = HALF / 8;
	int r = i / CH, j = (i % CH) * 8;
	bf16 *row = tile + r * (D + 8);
	uint4 a = *(uint4 *)(row + j), b = *(uint4 *)(row + j + HALF);
	__nv_bfloat162 *pa = (__nv_bfloat162 *)&a, *pb = (__nv_bfloat162 *)&b;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float4 t = t4[e];
		float2 x0 = __bfloat1622float2(pa[e]), x1 = __bfloat1622float2(pb[e]);
		pa[e] = __floats2bfloat162_rn(x0.x * t.x - x1.x * t.y, x0.y * t.z - x1.y * t.w);
		pb[e] = __floats2bfloat162_rn(x1.x * t.x + x0.x * t.y, x1.y * t.z + x0.y * t.w);
	}
	*(uint4 *)(row + j) = a;
	*(uint4 *)(row + j + HALF) = b;
}

template <int D>
__device__ __forceinline__ void rope_tile(bf16 *tile, int T, const float *cs, const rope_pre &p)
{
	constexpr int HALF = D / 2, CH = HALF / 8;
#pragma unroll
	for (int k = 0; k < 2; k++) {
		int i = threadIdx.x + k * NT;
		if (i < T * CH)
			rope_item<D>(tile, i, p.c[k]);
	}
	for (int i = threadIdx.x + 2 * NT; i < T * CH; i += NT) {
		int r = i / CH, j = (i % CH) * 8;
		const float4 *c4 = (const float4 *)(cs + ((size_t)r * HALF + j) * 2);
		float4 t[4] = { c4[0], c4[1], c4[2], c4[3] };
		rope_item<D>(tile, i, t);
	}
}

// Sum over the four lanes of a quad (the threads sharing a row).
__device__ __forceinline__ float quad_sum(float x)
{
	x += __shfl_xor_sync(0xffffffffu, x, 1);
	return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ __forceinline__ float quad_max(float x)
{
	x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
	return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Store a warp's 16 x D accumulator rows (row0..) times f as bf16 rows of
// a [T, D] matrix, rows past T dropped.
template <int D>
__device__ __forceinline__ void store_rows(bf16 *out, const float (*c)[4], float f, int row0, int T,
					   int ld = D)
{
	int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int r = row0 + g + 8 * h;
		if (r >= T)
			continue;
#pragma unroll
		for (int nt = 0; nt < D / 8; nt++)
			*(uint32_t *)(out + (size_t)r * ld + nt * 8 + 2 * t) =
				pack_bf16(c[nt][2 * h] * f, c[nt][2 * h + 1] * f);
	}
}

// store_rows of a gradient with respect to rotated q or k, rotated back
// (rope_bwd) on the way: the pair partner of column j < D/2 is in the
// n-tile D/16 further, held by the same thread.  store_cs loads the table
// entries for rows row0.. before the loop that makes the gradient, so the
// store does not wait on them.
template <int D>
__device__ __forceinline__ void store_cs(float4 (*p)[D / 16], int row0, int T, const float *cs)
{
	constexpr int HALF = D / 2, NH = D / 16;
	int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int r = row0 + g + 8 * h;
#pragma unroll
		for (int nt = 0; nt < NH; nt++)
			p[h][nt] = r < T ? *(const float4 *)(cs + ((size_t)r * HALF + nt * 8 + 2 * t) * 2)
					 : make_float4(0, 0, 0, 0);
	}
}

template <int D>
__device__ __forceinline__ void store_rows_rope(bf16 *out, const float (*c)[4], float f, int row0,
						    int T, int ld, const float4 (*pc)[D / 16])
{
	constexpr int HALF = D / 2, NH = D / 16;
	int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int r = row0 + g + 8 * h;
		if (r >= T)
			continue;
#pragma unroll
		for (int nt = 0; nt < NH; nt++) {
			int j = nt * 8 + 2 * t;
			float4 p = pc[h][nt];
			float a0 = c[nt][2 * h] * f, a1 = c[nt][2 * h + 1] * f;
			float b0 = c[nt + NH][2 * h] * f, b1 = c[nt + NH][2 * h + 1] * f;
			*(uint32_t *)(out + (size_t)r * ld + j) =
				pack_bf16(a0 * p.x + b0 * p.y, a1 * p.z + b1 * p.w);
			*(uint32_t *)(out + (size_t)r * ld + j + HALF) =
				pack_bf16(b0 * p.x - a0 * p.y, b1 * p.z - a1 * p.w);
		}
	}
}

// c += A B^T for the warp's 16 rows: A as fragments a[D / 16] (16 x D),
// B the rows r0 + 16 NP0 .. r0 + 16 NP1 - 1 of a D-column tile; c holds
// 16 x 16 NP1 columns (the first NP0 sub-tiles untouched).
template <int D, int NP0, int NP1>
__device__ __forceinline__ void mma_abt(float (*c)[4], const uint32_t (*a)[4], const bf16 *tile, int r0)
{
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
		for (int np = NP0; np < NP1; np++) {
			uint32_t b[4];
			ldbt(b, tile, D + 8, r0 + np * 16, kk * 16);
			mma16816(c[2 * np], a[kk], b[0], b[1]);
			mma16816(c[2 * np + 1], a[kk], b[2], b[3]);
		}
}

// acc (16 x D) += P B for the warp's 16 rows: P as fragments p[K1] (its
// sub-tiles K0..K1 - 1 of 16 columns), B the rows r0 + 16 K0 .. r0 +
// 16 K1 - 1 of a D-column tile.
template <int D, int K0, int K1>
__device__ __forceinline__ void mma_ab(float (*acc)[4], const uint32_t (*p)[4], const bf16 *tile, int r0)
{
#pragma unroll
	for (int kk = K0; kk < K1; kk++)
#pragma unroll
		for (int dn = 0; dn < D / 16; dn++) {
			uint32_t b[4];
			ldb(b, tile, D + 8, r0 + kk * 16, dn * 16);
			mma16816(acc[2 * dn], p[kk], b[0], b[1]);
			mma16816(acc[2 * dn + 1], p[kk], b[2], b[3]);
		}
}

// One chunk of the forward: the warp's 16 queries q0.. (Q as A fragments
// qa) against keys j0.., NSUB sub-tiles of 16 of them, into the running
// max m, sum ls and output acc of its two rows.  MASK: -inf for keys at
// or past T and (causal) past the row; only a row's last chunk needs it,
// and its sub-tiles stop at the diagonal one.
template <int D, int NSUB, bool MASK>
__device__ __forceinline__ void chunk_f(float (*acc)[4], float *m, float *ls, const uint32_t (*qa)[4],
					const bf16 *Ks, const bf16 *Vs, int j0, int q0, int T, int causal,
					float sl2)
{
	int l = threadIdx.x & 31, gr = l >> 2, t = l & 3;
	float s[2 * NSUB][4] = {};
	mma_abt<D, 0, NSUB>(s, qa, Ks, j0);
	if (MASK) {
#pragma unroll
		for (int nt = 0; nt < 2 * NSUB; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int key = j0 + nt * 8 + 2 * t + (e & 1), row = q0 + gr + 8 * (e >> 1);
				if (key >= T || (causal && key > row))
					s[nt][e] = -INFINITY;
			}
	}
#pragma unroll
	for (int h = 0; h < 2; h++) {
		float mx = -INFINITY;
#pragma unroll
		for (int nt = 0; nt < 2 * NSUB; nt++)
			mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
		mx = fmaxf(quad_max(mx), m[h]);
		float ms = mx == -INFINITY ? 0.0f : mx * sl2;
		float alpha = exp2_ftz(m[h] * sl2 - ms), sum = 0;
		m[h] = mx;
#pragma unroll
		for (int nt = 0; nt < 2 * NSUB; nt++) {
			s[nt][2 * h] = exp2_ftz(fmaf(s[nt][2 * h], sl2, -ms));
			s[nt][2 * h + 1] = exp2_ftz(fmaf(s[nt][2 * h + 1], sl2, -ms));
			sum += s[nt][2 * h] + s[nt][2 * h + 1];
		}
		ls[h] = ls[h] * alpha + sum;
#pragma unroll
		for (int nt = 0; nt < D / 8; nt++) {
			acc[nt][2 * h] *= alpha;
			acc[nt][2 * h + 1] *= alpha;
		}
	}
	uint32_t pa[NSUB][4];
	acc_to_a<16 * NSUB>(pa, s);
	mma_ab<D, 0, NSUB>(acc, pa, Vs, j0);
}

template <int D>
__global__ void __launch_bounds__(NT, 2) fwd_kernel(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o,
						 float *lse, int T, int Tp, int H, int bthd,
						 int packed, const float *cs, int causal, float scale)
{
	constexpr int S = D + 8, KS = 64;
	extern __shared__ __align__(16) unsigned char smem[];
	bf16 *Qs = (bf16 *)smem, *Ks = Qs + Tp * S, *Vs = Ks + Tp * S;
	int ldi = packed ? 3 * H * D : D;
	load_rows<D>(Qs, q + in_base(T, H, D, packed, 0), T, Tp, ldi);
	load_rows<D>(Ks, k + in_base(T, H, D, packed, 1), T, Tp, ldi);
	cp_async_commit();
	load_rows<D>(Vs, v + in_base(T, H, D, packed, 2), T, Tp, ldi);
	cp_async_commit();
	rope_pre pre;
	if (cs)
		rope_prefetch<D>(pre, T, cs);
	cp_async_wait_group<1>();
	__syncthreads();
	if (cs) {
		rope_tile<D>(Qs, T, cs, pre);
		rope_tile<D>(Ks, T, cs, pre);
	}
	cp_async_wait_all();
	__syncthreads();
	int w = threadIdx.x >> 5, l = threadIdx.x & 31, gr = l >> 2, t = l & 3;
	float sl2 = scale * LOG2E;
	int G = (T + 15) / 16;
	for (int r = 0; r * NW < G; r++) {
		int grp = zig(r, w, G);
		if (grp < 0)
			continue;
		int q0 = grp * 16;
		uint32_t qa[D / 16][4];
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++)
			lda(qa[kk], Qs, S, q0, kk * 16);
		float acc[D / 8][4] = {};
		float m[2] = { -INFINITY, -INFINITY }, ls[2] = { 0, 0 };
		// Whole chunks of KS keys, then the row's last, of 16-key
		// sub-tiles up to kend, masked.
		const int kend = causal ? q0 + 16 : T, jlast = (kend - 1) / KS * KS;
		for (int j0 = 0; j0 < jlast; j0 += KS)
			chunk_f<D, KS / 16, false>(acc, m, ls, qa, Ks, Vs, j0, q0, T, causal, sl2);
		switch ((kend - jlast + 15) / 16) {
		case 1: chunk_f<D, 1, true>(acc, m, ls, qa, Ks, Vs, jlast, q0, T, causal, sl2); break;
		case 2: chunk_f<D, 2, true>(acc, m, ls, qa, Ks, Vs, jlast, q0, T, causal, sl2); break;
		case 3: chunk_f<D, 3, true>(acc, m, ls, qa, Ks, Vs, jlast, q0, T, causal, sl2); break;
		default: chunk_f<D, KS / 16, true>(acc, m, ls, qa, Ks, Vs, jlast, q0, T, causal, sl2); break;
		}
		float inv[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float sum = quad_sum(ls[h]);
			inv[h] = 1.0f / sum;
			int row = q0 + gr + 8 * h;
			if (t == 0 && row < T)
				lse[(size_t)blockIdx.x * T + row] = m[h] * scale + logf(sum);
		}
		size_t ob = o_base(T, H, D, bthd);
		int ld = bthd ? H * D : D;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			int row = q0 + gr + 8 * h;
			if (row >= T)
				continue;
#pragma unroll
			for (int nt = 0; nt < D / 8; nt++)
				*(uint32_t *)(o + ob + (size_t)row * ld + nt * 8 + 2 * t) =
					pack_bf16(acc[nt][2 * h] * inv[h], acc[nt][2 * h + 1] * inv[h]);
		}
	}
}

// One chunk of the backward's pass A: the warp's 16 keys k0.. (K, V as A
// fragments ka, va) against queries q0..q0 + QS - 1, into dK (gk) and dV
// (gv).  NP0 leading 16-query sub-tiles are skipped (causal: all of them
// before k0, so they see none of the keys); MASK applies the causal mask
// (only the chunk that starts before k0 + 16 needs it).  Queries at or
// past T need no mask (lse2 = inf there gives p = 0), nor do keys at or
// past T (their rows of dK and dV are never stored).
template <int D, int QS, int NP0, bool MASK>
__device__ __forceinline__ void chunk_a(float (*gk)[4], float (*gv)[4], const uint32_t (*ka)[4],
					const uint32_t (*va)[4], const bf16 *Qs, const bf16 *Ds,
					const float *lse2, const float *delta, int q0, int k0, float sl2)
{
	int l = threadIdx.x & 31, gr = l >> 2, t = l & 3;
	float st[QS / 8][4] = {}, dp[QS / 8][4] = {};
	mma_abt<D, NP0, QS / 16>(st, ka, Qs, q0);
	mma_abt<D, NP0, QS / 16>(dp, va, Ds, q0);
#pragma unroll
	for (int nt = 2 * NP0; nt < QS / 8; nt++) {
		const int qc = q0 + nt * 8 + 2 * t;
		const float2 l2 = *(const float2 *)(lse2 + qc), dl = *(const float2 *)(delta + qc);
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float p = exp2_ftz(fmaf(st[nt][e], sl2, -((e & 1) ? l2.y : l2.x)));
			if (MASK && qc + (e & 1) < k0 + gr + 8 * (e >> 1))
				p = 0.0f;
			st[nt][e] = p;
			dp[nt][e] = p * (dp[nt][e] - ((e & 1) ? dl.y : dl.x));
		}
	}
	uint32_t pa[QS / 16][4], da[QS / 16][4];
	acc_to_a<QS>(pa, st);
	acc_to_a<QS>(da, dp);
	mma_ab<D, NP0, QS / 16>(gv, pa, Ds, q0);
	mma_ab<D, NP0, QS / 16>(gk, da, Qs, q0);
}

// One chunk of pass B: the warp's 16 queries (Q, dO as A fragments qa,
// oa) against keys j0.., NSUB sub-tiles of 16 of them, into dQ (gq).
// MASK: p = 0 for keys past lim[h] (row h of the thread's two): the
// causal mask on the chunk that holds the diagonal, or keys at or past T
// when not causal (their rows of K are zero, but p there is not bounded).
template <int D, int NSUB, bool MASK>
__device__ __forceinline__ void chunk_b(float (*gq)[4], const uint32_t (*qa)[4],
					const uint32_t (*oa)[4], const bf16 *Ks, const bf16 *Vs,
					const float *l2r, const float *dr, const int *lim, int j0,
					float sl2)
{
	int l = threadIdx.x & 31, t = l & 3;
	float s[2 * NSUB][4] = {}, dp[2 * NSUB][4] = {};
	mma_abt<D, 0, NSUB>(s, qa, Ks, j0);
	mma_abt<D, 0, NSUB>(dp, oa, Vs, j0);
#pragma unroll
	for (int nt = 0; nt < 2 * NSUB; nt++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float p = exp2_ftz(fmaf(s[nt][e], sl2, -l2r[e >> 1]));
			if (MASK && j0 + nt * 8 + 2 * t + (e & 1) > lim[e >> 1])
				p = 0.0f;
			dp[nt][e] = p * (dp[nt][e] - dr[e >> 1]);
		}
	uint32_t da[NSUB][4];
	acc_to_a<16 * NSUB>(da, dp);
	mma_ab<D, 0, NSUB>(gq, da, Ks, j0);
}

template <int D>
__global__ void __launch_bounds__(NT, 2) bwd_kernel(const bf16 *q, const bf16 *k, const bf16 *v,
						 const bf16 *o, const bf16 *dout, const float *lse,
						 bf16 *dq, bf16 *dk, bf16 *dv, int T, int Tp,
						 int H, int bthd, int packed, const float *cs,
						 int causal, float scale)
{
	constexpr int S = D + 8, QS = 32;
	extern __shared__ __align__(16) unsigned char smem[];
	bf16 *Qs = (bf16 *)smem, *Ks = Qs + Tp * S, *Vs = Ks + Tp * S, *Ds = Vs + Tp * S;
	float *lse2 = (float *)(Ds + Tp * S), *delta = lse2 + Tp;
	int ldi = packed ? 3 * H * D : D;
	load_rows<D>(Qs, q + in_base(T, H, D, packed, 0), T, Tp, ldi);
	load_rows<D>(Ks, k + in_base(T, H, D, packed, 1), T, Tp, ldi);
	load_rows<D>(Vs, v + in_base(T, H, D, packed, 2), T, Tp, ldi);
	size_t ob = o_base(T, H, D, bthd);
	int ld = bthd ? H * D : D;
	load_rows<D>(Ds, dout + ob, T, Tp, ld);
	cp_async_commit();
	rope_pre pre;
	if (cs)
		rope_prefetch<D>(pre, T, cs);
	// delta = rowsum(dO . O), lse in base 2; rows past T contribute nothing
	for (int r = threadIdx.x; r < Tp; r += NT) {
		float d = 0;
		if (r < T) {
			const uint4 *po = (const uint4 *)(o + ob + (size_t)r * ld);
			const uint4 *pd = (const uint4 *)(dout + ob + (size_t)r * ld);
#pragma unroll
			for (int c = 0; c < D / 8; c++) {
				uint4 a = po[c], b = pd[c];
				const __nv_bfloat162 *x = (const __nv_bfloat162 *)&a, *y = (const __nv_bfloat162 *)&b;
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float2 fx = __bfloat1622float2(x[e]), fy = __bfloat1622float2(y[e]);
					d = fmaf(fx.x, fy.x, fmaf(fx.y, fy.y, d));
				}
			}
		}
		delta[r] = d;
		lse2[r] = r < T ? lse[(size_t)blockIdx.x * T + r] * LOG2E : INFINITY;
	}
	cp_async_wait_all();
	__syncthreads();
	if (cs) {
		rope_tile<D>(Qs, T, cs, pre);
		rope_tile<D>(Ks, T, cs, pre);
		__syncthreads();
	}
	int w = threadIdx.x >> 5, gr = (threadIdx.x & 31) >> 2;
	float sl2 = scale * LOG2E;
	int G = (T + 15) / 16;

	// Pass A: warps own 16 keys; dK, dV over the queries that see them.
	for (int r = 0; r * NW < G; r++) {
		int grp = zig(r, w, G);
		if (grp < 0)
			continue;
		int k0 = grp * 16;
		uint32_t ka[D / 16][4], va[D / 16][4];
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			lda(ka[kk], Ks, S, k0, kk * 16);
			lda(va[kk], Vs, S, k0, kk * 16);
		}
		float gk[D / 8][4] = {}, gv[D / 8][4] = {};
		float4 pcs[2][D / 16];
		if (cs)
			store_cs<D>(pcs, k0, T, cs);
		for (int q0 = causal ? k0 & ~(QS - 1) : 0; q0 < T; q0 += QS) {
			if (!causal || q0 >= k0 + 16)
				chunk_a<D, QS, 0, false>(gk, gv, ka, va, Qs, Ds, lse2, delta, q0, k0, sl2);
			else if (q0 + 16 <= k0)
				chunk_a<D, QS, 1, true>(gk, gv, ka, va, Qs, Ds, lse2, delta, q0, k0, sl2);
			else
				chunk_a<D, QS, 0, true>(gk, gv, ka, va, Qs, Ds, lse2, delta, q0, k0, sl2);
		}
		if (cs)
			store_rows_rope<D>(dk + in_base(T, H, D, packed, 1), gk, scale, k0, T, ldi, pcs);
		else
			store_rows<D>(dk + in_base(T, H, D, packed, 1), gk, scale, k0, T, ldi);
		store_rows<D>(dv + in_base(T, H, D, packed, 2), gv, 1.0f, k0, T, ldi);
	}

	// Pass B: warps own 16 queries; dQ over the keys they see.
	for (int r = 0; r * NW < G; r++) {
		int grp = zig(r, w, G);
		if (grp < 0)
			continue;
		int q0 = grp * 16;
		uint32_t qa[D / 16][4], oa[D / 16][4];
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			lda(qa[kk], Qs, S, q0, kk * 16);
			lda(oa[kk], Ds, S, q0, kk * 16);
		}
		float l2r[2], dr[2];
#pragma unroll
		for (int h = 0; h < 2; h++) {
			l2r[h] = lse2[q0 + gr + 8 * h];
			dr[h] = delta[q0 + gr + 8 * h];
		}
		float gq[D / 8][4] = {};
		float4 pcs[2][D / 16];
		if (cs)
			store_cs<D>(pcs, q0, T, cs);
		// causal: keys past the row; full: keys at or past T
		const int lim[2] = {causal ? q0 + gr : T - 1, causal ? q0 + gr + 8 : T - 1};
		const int kend = causal ? q0 + 16 : T;
		for (int j0 = 0; j0 < kend; j0 += QS) {
			if (j0 + QS < kend || (!causal && j0 + QS == kend))
				chunk_b<D, QS / 16, false>(gq, qa, oa, Ks, Vs, l2r, dr, lim, j0, sl2);
			else if (kend - j0 <= 16)
				chunk_b<D, 1, true>(gq, qa, oa, Ks, Vs, l2r, dr, lim, j0, sl2);
			else
				chunk_b<D, QS / 16, true>(gq, qa, oa, Ks, Vs, l2r, dr, lim, j0, sl2);
		}
		if (cs)
			store_rows_rope<D>(dq + in_base(T, H, D, packed, 0), gq, scale, q0, T, ldi, pcs);
		else
			store_rows<D>(dq + in_base(T, H, D, packed, 0), gq, scale, q0, T, ldi);
	}
}

int padded_T(int T)
{
	return (T + 63) / 64 * 64;
}

size_t fwd_smem(int D, int Tp)
{
	return 3 * (size_t)Tp * (D + 8) * sizeof(bf16);
}

size_t bwd_smem(int D, int Tp)
{
	return 4 * (size_t)Tp * (D + 8) * sizeof(bf16) + 2 * (size_t)Tp * sizeof(float);
}

bool aligned(const void *p)
{
	return p && ((uintptr_t)p & 15) == 0;
}

}  // namespace

extern "C" int attn_short_applies(int D, int T)
{
	return D == 32 && T >= 1 && T <= ATTN_SHORT_T_MAX;
}

namespace {

int fwd(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *o, float *lse, int B, int H, int T,
	int D, int causal, float scale, int o_bthd, int packed, const float *cs, void *stream)
{
	if (!attn_short_applies(D, T))
		return ATTN_EHEADDIM;
	if (B < 1 || H < 1 || !(scale > 0))
		return ATTN_ESHAPE;
	if (!aligned(q) || !aligned(k) || !aligned(v) || !aligned(o) || !lse)
		return ATTN_EALIGN;
	int Tp = padded_T(T);
	size_t sm = fwd_smem(D, Tp);
	if (cudaFuncSetAttribute(fwd_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))
		return ATTN_EDEVICE;
	fwd_kernel<32><<<B * H, NT, sm, (cudaStream_t)stream>>>(q, k, v, o, lse, T, Tp, H, o_bthd != 0,
								packed, cs, causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

int bwd(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *o, const bf16 *dout,
	const float *lse, bf16 *dq, bf16 *dk, bf16 *dv, int B, int H, int T, int D, int causal,
	float scale, int o_bthd, int packed, const float *cs, void *stream)
{
	if (!attn_short_applies(D, T))
		return ATTN_EHEADDIM;
	if (B < 1 || H < 1 || !(scale > 0))
		return ATTN_ESHAPE;
	if (!aligned(q) || !aligned(k) || !aligned(v) || !aligned(o) || !aligned(dout) ||
	    !aligned(dq) || !aligned(dk) || !aligned(dv) || !lse)
		return ATTN_EALIGN;
	int Tp = padded_T(T);
	size_t sm = bwd_smem(D, Tp);
	if (cudaFuncSetAttribute(bwd_kernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm))
		return ATTN_EDEVICE;
	bwd_kernel<32><<<B * H, NT, sm, (cudaStream_t)stream>>>(q, k, v, o, dout, lse, dq, dk, dv, T,
								Tp, H, o_bthd != 0, packed, cs,
								causal, scale);
	return cudaGetLastError() == cudaSuccess ? ATTN_OK : ATTN_EDEVICE;
}

}  // namespace

extern "C" int attn_short_fwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v,
				   uint16_t *o, float *lse, int B, int H, int T, int D, int causal,
				   float scale, int o_bthd, void *stream)
{
	return fwd((const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (bf16 *)o, lse, B, H, T, D,
		   causal, scale, o_bthd, 0, NULL, stream);
}

extern "C" int attn_short_bwd_cuda(const uint16_t *q, const uint16_t *k, const uint16_t *v,
				   const uint16_t *o, const uint16_t *dout, const float *lse,
				   uint16_t *dq, uint16_t *dk, uint16_t *dv, int B, int H, int T, int D,
				   int causal, float scale, int o_bthd, void *stream)
{
	return bwd((const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (const bf16 *)o,
		   (const bf16 *)dout, lse, (bf16 *)dq, (bf16 *)dk, (bf16 *)dv, B, H, T, D, causal,
		   scale, o_bthd, 0, NULL, stream);
}

extern "C" int attn_short_qkv_fwd_cuda(const uint16_t *qkv, const float *cs, uint16_t *y,
				       float *lse, int B, int H, int T, int D, float scale,
				       void *stream)
{
	if (!cs || ((uintptr_t)cs & 15))
		return ATTN_EALIGN;
	const bf16 *p = (const bf16 *)qkv;
	return fwd(p, p, p, (bf16 *)y, lse, B, H, T, D, 1, scale, 1, 1, cs, stream);
}

extern "C" int attn_short_qkv_bwd_cuda(uint16_t *qkv, const float *cs, const uint16_t *y,
				       const uint16_t *dy, const float *lse, int B, int H, int T,
				       int D, float scale, void *stream)
{
	if (!cs || ((uintptr_t)cs & 15))
		return ATTN_EALIGN;
	bf16 *p = (bf16 *)qkv;
	return bwd(p, p, p, (const bf16 *)y, (const bf16 *)dy, lse, p, p, p, B, H, T, D, 1, scale, 1,
		   1, cs, stream);
}
