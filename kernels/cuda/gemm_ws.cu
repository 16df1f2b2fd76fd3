// gemm_ws.cu: C = A B^T on Hopper (see kernels/gemm.h) in the arrangement
// of the attention forward (attention_fwd_ws.cu): a persistent grid, one
// block per multiprocessor, three warpgroups.  The last is the producer:
// one thread streams the K slices of A (128 rows) and B (BN rows) of each
// tile through a ring of ST shared-memory stages with the bulk tensor copy
// engine, each stage guarded by a "full" mbarrier (bytes arrived) and an
// "empty" one (all eight consumer warps done with it).  The two consumer
// warpgroups own 64 rows of the tile each; per stage they issue the four
// k16 steps of wgmma m64nBNk16 (both operands K-major, 128-byte
// swizzled), and release the stage before only once the products
// on it are done (wgmma.wait_group 1), so the tensor cores always have the
// next stage queued.  The epilogue rounds the fp32 sums to bf16, while the
// producer already loads the next tile, and stores them (EPI = 1, the
// default) through shared memory: each consumer warpgroup writes 64 x 64
// pieces into two buffers of its own in turn, and one of its threads has
// the copy engine store each piece (a tensor store), so the warpgroup goes
// on to the next piece and the next tile while the stores run; or (EPI =
// 0, LMPIPE_GEMM_EPI=reg, for comparing) from registers, 4 bytes a thread
// and row.  EPI = 2 (LMPIPE_GEMM_EPI=pp at BN = 128; always at BN = 192)
// is the ping-pong arrangement (consume_pp): the consumer warpgroups take
// alternate tiles, so one's epilogue runs while the other's products keep
// the tensor cores busy.
// EPI = 3 (gemm_swiglu_cuda, 256 wide) stores h and SwiGLU's output
// (store_swiglu); EPI = 4 (192 wide) does so in ping-pong tiles, in sets
// of three 32-column pieces (store_swiglu32).  EPI = 5 (gemm_exp_cuda,
// 192 wide, ping-pong) stores exp of the sums and each row's sum of them
// over the tile (store_exp).  EPI = 6 (gemm_rope_cuda, 192 wide,
// ping-pong) turns the q and k heads' columns by RoPE's angles before
// rounding (rope_turn).  A launch given a guard (gemm_tn_guarded_cuda)
// returns at once unless the guard is set.
// With LMPIPE_GEMM_CLUSTER=2, two blocks on neighbouring row blocks share
// B's slice: each loads half of it into both (multicast), and every stage
// is released in both blocks.
//
// Tiles go n fastest when A is the larger operand (the blocks running
// together share A's rows, which leave HBM once, and B, a weight, stays in
// L2), m fastest when B is (the LM head).
#include "kernels/gemm.h"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

namespace {

constexpr int BM = 128, BK = 64, WG_THREADS = 128, CONSUMERS = 2, WARPS = CONSUMERS * 4;
constexpr int NT = WG_THREADS * (CONSUMERS + 1);
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;

// BN columns a tile, CL blocks a cluster (1 or 2: two blocks of
// neighbouring row blocks share B's slice, each loading half of it for
// both through the copy engine's multicast).
template <int BN, int CL>
struct Cfg {
	static constexpr int ST = BN == 128 ? 6 : 4;  // stages
	static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, B_ROWS = BN / CL;
	static constexpr uint32_t STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
	// The epilogue's pieces: two buffers a consumer warpgroup, of 64 x 64
	// (192 wide: of three 64 x 32 pieces, SwiGLU's sets; the other
	// epilogues use the first 64 x 64 of each).
	static constexpr int PIECE = BN == 192 ? 3 * 64 * 32 : 64 * 64;
	static constexpr int C_ELEMS = CONSUMERS * 2 * PIECE;
	static constexpr int SMEM = SW_ATOM_BYTES + ST * STAGE_BYTES + C_ELEMS * 2 + 2 * ST * 8;
};

// The epilogues: 0 from registers, 1 through shared memory and tensor
// stores, 2 ping-pong, 3 SwiGLU (gemm_swiglu_cuda, cooperative), 4
// ping-pong with SwiGLU (gemm_swiglu_cuda at 192), 5 ping-pong with the
// exponential (gemm_exp_cuda), 6 ping-pong with RoPE (gemm_rope_cuda).
__host__ __device__ constexpr bool glu(int epi) { return epi == 3 || epi == 4; }
__host__ __device__ constexpr bool pingpong(int epi) { return epi >= 4 || epi == 2; }

// EPI = 6's arguments: RoPE's frequencies f_i = theta^(-2i/64), i < 32, as
// fh + fl (fl the rest of the double, so p f keeps ~44 bits: see
// rope_sincos), the sequence length (a row's position is row % T), and
// the columns that turn (the q and k heads: those below cols).
struct Rope {
	float fh[32], fl[32];
	int T, cols;
};
constexpr int ROPE_D = GEMM_ROPE_D;  // a 192-wide tile is 3 heads

// Named barriers: 1 + w, warpgroup w's own (its epilogue); BAR_ORDER + w
// (ping-pong), warpgroup w may start its next tile.
enum { BAR_ORDER = 3 };

__device__ __forceinline__ void wg_bar_sync(int id)
{
	asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(WG_THREADS) : "memory");
}

// Both consumer warpgroups meet at barrier id: one waits (wait = true),
// the other only arrives.
__device__ __forceinline__ void pair_bar(int id, bool wait)
{
	if (wait)
		asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(2 * WG_THREADS) : "memory");
	else
		asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(2 * WG_THREADS) : "memory");
}

__device__ __forceinline__ uint32_t saddr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

// The box at (c0, c1, 0) into dst of every block of the cluster in mask,
// completing on the barrier at bar's offset in each.
__device__ __forceinline__ void tma_load_mc(void *dst, const CUtensorMap *map, uint64_t *bar,
					    int c0, int c1, uint16_t mask)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     ".multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(saddr(dst)),
		     "l"(map), "r"(saddr(bar)), "r"(c0), "r"(c1), "r"(0), "h"(mask)
		     : "memory");
}

// Arrive on the barrier at bar's offset in block `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_remote(uint64_t *bar, uint32_t rank)
{
	uint32_t a;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(saddr(bar)), "r"(rank));
	// cta scope, as for the local arrive: the stage was read by this
	// warp's wgmma, which wgmma.wait_group has seen complete, so no
	// cluster-wide fence is needed (ncu: one made the consumers stall on
	// a memory barrier 31 % of their cycles)
	asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(a) : "memory");
}

// The kernel's tensor maps: A; B (EPI = 3: the gate rows of the weight)
// and b2 (EPI = 3: its up rows); the output (EPI = 3: the gate columns of
// h, its up columns, and silu(gate) up).
struct Maps {
	CUtensorMap a, b, b2, c[3];
};

// The tiles of one block: the cluster takes tile pairs (row blocks 2i,
// 2i + 1 when CL = 2), a block its rank's row block of each.  Tiles go n
// fastest (mfast = 0) when A is the larger operand: the blocks running
// together share A's rows, which leave HBM once, and B stays in L2; m
// fastest when B is (the LM head's weight), the other way round.
struct Walk {
	int tm, tn, ctiles, first, step, rank, cl, mfast;
	__device__ __forceinline__ int m0(int ct) const
	{
		return ((mfast ? ct % tm : ct / tn) * cl + rank) * BM;
	}
	__device__ __forceinline__ int ni(int ct) const { return mfast ? ct / tm : ct % tn; }
};

// glu(EPI): B's slice is BN / 2 gate rows of features n0 ... then the up
// rows of the same features (CL = 2: block r loads the gates if r = 0, else
// the ups, for both).
template <int BN, int CL, int EPI>
__device__ __forceinline__ void produce(const Maps &mp, bf16 *sA, bf16 *sB, uint64_t *full,
					uint64_t *empty, const Walk &w, int kt)
{
	using C = Cfg<BN, CL>;
	const CUtensorMap *ma = &mp.a, *mb = &mp.b;
	uint32_t u = 0;
	for (int ct = w.first; ct < w.ctiles; ct += w.step) {
		const int m0 = w.m0(ct), n0 = w.ni(ct) * (glu(EPI) ? BN / 2 : BN);
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % C::ST;
			if (u >= (uint32_t)C::ST)
				mbar_wait(&empty[s], (u / C::ST - 1) & 1);
			mbar_expect_tx(&full[s], C::STAGE_BYTES);
			tma_load_3d(sA + s * C::A_ELEMS, ma, &full[s], ks * BK, m0, 0);
			bf16 *b = sB + s * C::B_ELEMS + w.rank * C::B_ROWS * BK;
			if constexpr (glu(EPI) && CL == 1) {
				tma_load_3d(b, mb, &full[s], ks * BK, n0, 0);
				tma_load_3d(b + BN / 2 * BK, &mp.b2, &full[s], ks * BK, n0, 0);
			} else if constexpr (glu(EPI)) {
				tma_load_mc(b, w.rank ? &mp.b2 : mb, &full[s], ks * BK, n0, (1 << CL) - 1);
			} else if constexpr (CL == 1)
				tma_load_3d(b, mb, &full[s], ks * BK, n0, 0);
			else
				tma_load_mc(b, mb, &full[s], ks * BK, n0 + w.rank * C::B_ROWS,
					    (1 << CL) - 1);
		}
	}
}

// Issue the four k16 steps of one stage: acc (64 x BN) (+)= A_wg B^T.
template <int BN>
__device__ __forceinline__ void issue(float (&acc)[BN / 8][4], uint32_t a, uint32_t b, int first)
{
	constexpr uint32_t KSTEP = 16 * 2;
	fence_regs<BN / 8>(acc);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BK / 16; kk++) {
		const uint64_t da = sw128_desc(a + kk * KSTEP, 16, SW_ATOM_BYTES);
		const uint64_t db = sw128_desc(b + kk * KSTEP, 16, SW_ATOM_BYTES);
		if constexpr (BN == 256)
			wgmma_ss_n256(acc, da, db, !(first && kk == 0));
		else
			wgmma_ss_n128(acc, da, db, !(first && kk == 0));
	}
	wgmma_commit();
}

// This warp is done with stage s: tell every block of the cluster, whose
// producers may write it (CL = 2: half of B comes from the other block).
template <int CL>
__device__ __forceinline__ void release(uint64_t *empty, int s, int lane, int rank)
{
	if (lane == 0) {
		mbar_arrive(&empty[s]);
		if constexpr (CL == 2)
			mbar_arrive_remote(&empty[s], rank ^ 1);
	}
}

// The epilogue's pieces: a consumer warpgroup writes 64 x 64 outputs into
// one of its two buffers (its piece number j, counted over the whole
// kernel, into buffer j % 2: a tile's count of pieces may be odd), and its
// thread 0 has the copy engine store them at column c0, row r0 of a tensor
// map.  buf_open waits until the buffer's previous piece has been read out;
// the warpgroup then writes its fragment (piece_put: row 16 w + g and the
// row 8 below it, columns 8 ii + 2 t, +1), and buf_close stores it.
// (buf_open and buf_close take SIZE elements a buffer and store NMAPS parts
// of one, SIZE / NMAPS apart, each by its map, in one bulk group: SwiGLU's
// sets below use them too.)
template <int SIZE = 64 * 64>
__device__ __forceinline__ bf16 *buf_open(bf16 *buf, int j)
{
	if (threadIdx.x % WG_THREADS == 0)
		bulk_wait_read<1>();  // the piece before last, from this buffer, is read
	wg_bar_sync(1 + threadIdx.x / WG_THREADS);
	return buf + (j & 1) * SIZE;
}

__device__ __forceinline__ void piece_put(bf16 *p, int ii, uint32_t top, uint32_t bottom)
{
	const int lane = threadIdx.x % 32, row = threadIdx.x % WG_THREADS / 32 * 16 + lane / 4;
	const int col = ii * 8 + 2 * (lane % 4);
	*(uint32_t *)(p + slab_off<64>(row, col)) = top;
	*(uint32_t *)(p + slab_off<64>(row + 8, col)) = bottom;
}

template <int SIZE = 64 * 64, int NMAPS = 1>
__device__ __forceinline__ void buf_close(const CUtensorMap *map, bf16 *p, int c0, int r0,
					  bool inside)
{
	fence_proxy_async();
	wg_bar_sync(1 + threadIdx.x / WG_THREADS);
	if (threadIdx.x % WG_THREADS == 0) {
		if (inside)
			for (int k = 0; k < NMAPS; k++)
				tma_store_3d(map + k, p + k * (SIZE / NMAPS), c0, r0, 0);
		bulk_commit();
	}
}

// Store this warpgroup's 64 x BN sums at (r0, n0) through its two piece
// buffers (EPI = 1).
template <int BN>
__device__ __forceinline__ void store_pieces(const CUtensorMap *mc, bf16 *buf,
					     float (&acc)[BN / 8][4], int r0, int n0, int M, int N,
					     int &np)
{
#pragma unroll
	for (int j = 0; j < BN / 64; j++) {
		bf16 *p = buf_open(buf, np++);
#pragma unroll
		for (int ii = 0; ii < 8; ii++)
			piece_put(p, ii, pack_bf16(acc[j * 8 + ii][0], acc[j * 8 + ii][1]),
				  pack_bf16(acc[j * 8 + ii][2], acc[j * 8 + ii][3]));
		buf_close(mc, p, n0 + j * 64, r0, n0 + j * 64 < N && r0 < M);
	}
}

// EPI = 5: as store_pieces, but exp of each sum, rounded to bf16; and the
// sum of the exponentials (fp32, before rounding) over the tile's columns
// below N, of each of the warpgroup's 64 rows below M, into part[row * ntn
// + n0 / BN].  A row's 192 columns are spread over the four threads of a
// quad (t), which add theirs up by shuffles.
template <int BN>
__device__ __forceinline__ void store_exp(const CUtensorMap *mc, bf16 *buf, float (&acc)[BN / 8][4],
					  int r0, int n0, int M, int N, int &np, float *part, int ntn)
{
	const int lane = threadIdx.x % 32, t = lane % 4;
	const int lim = N - n0 - 2 * t;  // the pair at column 8 c + 2 t of the tile is inside if 8 c < lim
	float s0 = 0.0f, s1 = 0.0f;      // rows r and r + 8
#pragma unroll
	for (int j = 0; j < BN / 64; j++) {
		bf16 *p = buf_open(buf, np++);
#pragma unroll
		for (int ii = 0; ii < 8; ii++) {
			float *a = acc[j * 8 + ii];  // dead once stored: exp in place
#pragma unroll
			for (int e = 0; e < 4; e++)
				a[e] = __expf(a[e]);
			// N is a multiple of 8: the pair's second column is below N with its first
			if (j * 64 + ii * 8 < lim) {
				s0 += a[0] + a[1];
				s1 += a[2] + a[3];
			}
			piece_put(p, ii, pack_bf16(a[0], a[1]), pack_bf16(a[2], a[3]));
		}
		buf_close(mc, p, n0 + j * 64, r0, n0 + j * 64 < N && r0 < M);
	}
	s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
	s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
	s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
	s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
	const int r = r0 + threadIdx.x % WG_THREADS / 32 * 16 + lane / 4;
	if (t == 0 && r < M)
		part[(size_t)r * ntn + n0 / BN] = s0;
	if (t == 0 && r + 8 < M)
		part[(size_t)(r + 8) * ntn + n0 / BN] = s1;
}

// cos and sin of the angle p (fh + fl), for a position p below 2^17 and
// f = fh + fl <= 1.  The product p fh keeps its rounding error (an fma);
// the angle is reduced by 2 pi in two parts, k 2pi_hi first, which is
// exact (a and k 2pi_hi are multiples of 2^-22 or coarser, and their
// difference is below 8); then __sincosf on the remainder (|r| <= pi plus
// a hundredth; its error there is 2^-21.4).  Within 6e-7 of rope_table's
// values (computed in double, rounded to fp32).
__device__ __forceinline__ void rope_sincos(float p, float fh, float fl, float *s, float *c)
{
	const float TWO_PI_HI = 6.28318548202514648f;  // fp32(2 pi), 1.7e-7 above it
	const float TWO_PI_LO = -1.74845553e-7f;       // 2 pi - TWO_PI_HI
	const float INV_2PI = 0.159154943f;
	const float a = p * fh;
	const float lo = fmaf(p, fl, fmaf(p, fh, -a));
	const float k = rintf(a * INV_2PI);
	const float r = fmaf(-k, TWO_PI_LO, fmaf(-k, TWO_PI_HI, a)) + lo;
	__sincosf(r, s, c);
}

// EPI = 6: turn the warpgroup's 64 x BN sums (rows r0 ..., columns n0 ...)
// by RoPE before they are rounded, in the heads below ro.cols: rope.h's
// rotate-half pairs (i, i + 32) of each 64-column head, by the angle
// position f_i.  A thread holds columns 8 ii + 2 t, +1 of each head in
// fragments ii < 4 and their partners in ii + 4, of rows r and r + 8: 16
// angles, each turning the pairs of the tile's three heads, one angle at a
// time (the registers of the sums are all live).
template <int BN>
__device__ __forceinline__ void rope_turn(float (&acc)[BN / 8][4], const float *sf, const Rope &ro,
					  int r0, int n0)
{
	constexpr int HEADS = BN / ROPE_D;
	const int nh = (ro.cols - n0) / ROPE_D;  // the tile's heads that turn (the same in every thread)
	if (nh <= 0)
		return;
	const int lane = threadIdx.x % 32, t = lane % 4;
	const int r = r0 + threadIdx.x % WG_THREADS / 32 * 16 + lane / 4;
	const float pos[2] = {(float)(r % ro.T), (float)((r + 8) % ro.T)};
#pragma unroll
	for (int ii = 0; ii < 4; ii++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int i = ii * 8 + 2 * t + e;
			const float fh = sf[i], fl = sf[32 + i];
#pragma unroll
			for (int below = 0; below < 2; below++) {  // rows r, r + 8
				float sn, cs;
				rope_sincos(pos[below], fh, fl, &sn, &cs);
				const int x = 2 * below + e;
#pragma unroll
				for (int h = 0; h < HEADS; h++)
					if (h < nh) {
						float *a = acc[h * 8 + ii], *b = acc[h * 8 + ii + 4];
						const float x0 = a[x], x1 = b[x];
						a[x] = x0 * cs - x1 * sn;
						b[x] = x1 * cs + x0 * sn;
					}
			}
		}
}

// silu(g) u of two bf16-rounded pairs, rounded: swiglu_fwd_cuda's arithmetic.
__device__ __forceinline__ uint32_t swiglu2(float g0, float g1, float u0, float u1)
{
	g0 = __bfloat162float(__float2bfloat16_rn(g0));
	g1 = __bfloat162float(__float2bfloat16_rn(g1));
	u0 = __bfloat162float(__float2bfloat16_rn(u0));
	u1 = __bfloat162float(__float2bfloat16_rn(u1));
	const float s0 = 1.0f / (1.0f + __expf(-g0)), s1 = 1.0f / (1.0f + __expf(-g1));
	return pack_bf16(g0 * s0 * u0, g1 * s1 * u1);
}

// silu(g) u of two pairs already rounded and packed as h stores them (bf16
// x 2, the lower half first), rounded.  The sigmoid's reciprocal is the
// approximate one (__fdividef: within 2 ulp of fp32, below bf16's step by
// far); the exact division (reciprocal, two Newton steps, a range check
// and its branch) was about a fifth of the 128-wide epilogue's added
// instructions (ncu, stop 57).
__device__ __forceinline__ uint32_t swiglu_packed(uint32_t g, uint32_t u)
{
	const float g0 = __uint_as_float(g << 16), g1 = __uint_as_float(g & 0xffff0000u);
	const float u0 = __uint_as_float(u << 16), u1 = __uint_as_float(u & 0xffff0000u);
	const float s0 = __fdividef(1.0f, 1.0f + __expf(-g0));
	const float s1 = __fdividef(1.0f, 1.0f + __expf(-g1));
	return pack_bf16(g0 * s0 * u0, g1 * s1 * u1);
}

// EPI = 3 (gemm_swiglu_cuda): the tile's first BN / 2 columns are gates of
// features f0 ..., the others the ups of the same features.  Stores the
// gates (map mg), the ups (mu), then silu(gate) up (mo), each at column f0.
template <int BN>
__device__ __forceinline__ void store_swiglu(const CUtensorMap *mg, const CUtensorMap *mu,
					     const CUtensorMap *mo, bf16 *buf,
					     float (&acc)[BN / 8][4], int r0, int f0, int M, int F,
					     int &np)
{
	constexpr int U = BN / 16, Q = BN / 128;  // the ups' first fragment; pieces a part
#pragma unroll
	for (int j = 0; j < 3 * Q; j++) {
		const int part = j / Q, q = j % Q, c0 = f0 + q * 64;
		bf16 *p = buf_open(buf, np++);
#pragma unroll
		for (int ii = 0; ii < 8; ii++) {
			const float *g = acc[q * 8 + ii], *u = acc[U + q * 8 + ii];
			if (part == 0)
				piece_put(p, ii, pack_bf16(g[0], g[1]), pack_bf16(g[2], g[3]));
			else if (part == 1)
				piece_put(p, ii, pack_bf16(u[0], u[1]), pack_bf16(u[2], u[3]));
			else
				piece_put(p, ii, swiglu2(g[0], g[1], u[0], u[1]),
					  swiglu2(g[2], g[3], u[2], u[3]));
		}
		buf_close(part == 0 ? mg : part == 1 ? mu : mo, p, c0, r0, c0 < F && r0 < M);
	}
}

// SwiGLU's sets (EPI = 4 at BN = 192: 96 features a tile, which 64-column
// pieces do not divide): three 64 x 32 pieces, the gates, the ups and
// silu(gate) up of 32 features, each swizzled in the 64-byte mode of
// tma_map_rows32.  A warpgroup's sets alternate between its two buffers as
// its pieces do (buf_open and buf_close for the three, stored in one bulk
// group).
constexpr int P32 = 64 * 32;

// Row 16 w + g and the row 8 below it, columns 8 ii + 2 t, +1 of a 64 x 32
// piece: 64-byte rows, chunk ii at ii ^ (row / 2 % 4), so a warp's 32
// stores fall in 32 banks.
__device__ __forceinline__ void put32(bf16 *p, int ii, uint32_t top, uint32_t bottom)
{
	const int lane = threadIdx.x % 32, row = threadIdx.x % WG_THREADS / 32 * 16 + lane / 4;
	const int c = 2 * (lane % 4);
	*(uint32_t *)(p + row * 32 + ((ii ^ (row >> 1 & 3)) << 3) + c) = top;
	*(uint32_t *)(p + (row + 8) * 32 + ((ii ^ ((row + 8) >> 1 & 3)) << 3) + c) = bottom;
}

// EPI = 4 at BN = 192: the tile's first 96 columns are the gates of
// features f0 ..., the others the ups; 32 features at a time (a set), the
// gates (map mc[0]), ups (mc[1]) and silu(gate) up (mc[2]) at column f0 +
// 32 q, so that each group's registers are free once it is stored.
template <int BN>
__device__ __forceinline__ void store_swiglu32(const CUtensorMap *mc, bf16 *buf,
					       float (&acc)[BN / 8][4], int r0, int f0, int M, int F,
					       int &np)
{
	constexpr int U = BN / 16, G = BN / 64;  // the ups' first fragment; sets a tile
#pragma unroll
	for (int q = 0; q < G; q++) {
		bf16 *set = buf_open<3 * P32>(buf, np++);
#pragma unroll
		for (int ii = 0; ii < 4; ii++) {
			const float *g = acc[q * 4 + ii], *u = acc[U + q * 4 + ii];
			const uint32_t gt = pack_bf16(g[0], g[1]), gb = pack_bf16(g[2], g[3]);
			const uint32_t ut = pack_bf16(u[0], u[1]), ub = pack_bf16(u[2], u[3]);
			put32(set, ii, gt, gb);
			put32(set + P32, ii, ut, ub);
			put32(set + 2 * P32, ii, swiglu_packed(gt, ut), swiglu_packed(gb, ub));
		}
		buf_close<3 * P32, 3>(mc, set, f0 + q * 32, r0, f0 + q * 32 < F && r0 < M);
	}
}

// Ping-pong (EPI = 2, BN = 128 or 192; EPI = 4: SwiGLU's epilogue, EPI =
// 5: the exponential's, BN = 192): each consumer warpgroup takes every other tile of the block,
// all 128 x BN of it (two m64nBNk16 products a k16 step, BN sums a
// thread), so that one warpgroup's epilogue runs while the other's
// products keep the tensor cores busy.  The producer's order
// is unchanged: tile j of the block fills stages j kt ... j kt + kt - 1,
// and only its warpgroup (4 warps) releases them.  A warpgroup starts
// tile j only once the other has seen every stage of tile j - 1 arrive
// (named barriers ORDER + w): a "full" barrier's parity tells its phases
// apart only one lap of the ring ahead, and with more k-slices than
// stages tile j's first stages are a lap ahead of tile j - 1's.
template <int BN, int CL, int EPI>
__device__ __forceinline__ void consume_pp(const Maps &mp, const bf16 *sA, const bf16 *sB,
					   bf16 *sC, uint64_t *full, uint64_t *empty, int M, int N,
					   const Walk &w, int kt, float *part, const float *sf,
					   const Rope &ro)
{
	const CUtensorMap *mc = mp.c;
	constexpr bool GLU = glu(EPI);
	static_assert(BN == 128 || BN == 192, "ping-pong tiles are 128 or 192 wide");
	static_assert((!GLU && EPI < 5) || BN == 192,
		      "SwiGLU's, exp's and RoPE's ping-pong tiles: 192 wide");
	using Cf = Cfg<BN, CL>;
	constexpr uint32_t KSTEP = 16 * 2, HALF = 64 * SLAB_ROW_BYTES;
	const int wg = threadIdx.x / WG_THREADS, lane = threadIdx.x % 32;
	float acc[2][BN / 8][4];
	int np = 0;  // pieces stored
	for (int j = wg;; j += CONSUMERS) {
		const int ct = w.first + j * w.step;
		if (ct >= w.ctiles)
			break;
		const int m0 = w.m0(ct), n0 = w.ni(ct) * BN;  // GLU: features from n0 / 2
		// The last tile's sums are dead: the products' asm reads its
		// accumulators ("+f", even where scale-d drops them), so without
		// this the compiler keeps them live through the epilogue and spills
		// (ptxas: 88-168 bytes in the 192-wide kernels; with it 0, and 4-16
		// in the head's exp kernel).
#pragma unroll
		for (int h = 0; h < 2; h++)
#pragma unroll
			for (int i = 0; i < BN / 8; i++)
				acc[h][i][0] = acc[h][i][1] = acc[h][i][2] = acc[h][i][3] = 0.0f;
		if (j > 0)  // the other warpgroup has waited for all of tile j - 1
			pair_bar(BAR_ORDER + wg, true);
		uint32_t u = (uint32_t)j * kt;
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % Cf::ST;
			mbar_wait(&full[s], (u / Cf::ST) & 1);
			const uint32_t a = saddr(sA + s * Cf::A_ELEMS), b = saddr(sB + s * Cf::B_ELEMS);
			fence_regs<BN / 8>(acc[0]);
			fence_regs<BN / 8>(acc[1]);
			wgmma_fence();
#pragma unroll
			for (int kk = 0; kk < BK / 16; kk++) {
				const uint64_t db = sw128_desc(b + kk * KSTEP, 16, SW_ATOM_BYTES);
				const uint64_t da0 = sw128_desc(a + kk * KSTEP, 16, SW_ATOM_BYTES);
				const uint64_t da1 = sw128_desc(a + HALF + kk * KSTEP, 16, SW_ATOM_BYTES);
				const int acc_in = !(ks == 0 && kk == 0);
				if constexpr (BN == 192) {
					wgmma_ss_n192(acc[0], da0, db, acc_in);
					wgmma_ss_n192(acc[1], da1, db, acc_in);
				} else {
					wgmma_ss_n128(acc[0], da0, db, acc_in);
					wgmma_ss_n128(acc[1], da1, db, acc_in);
				}
			}
			wgmma_commit();
			if (ks > 0) {
				wgmma_wait<1>();
				release<CL>(empty, (u - 1) % Cf::ST, lane, w.rank);
			}
		}
		if (ct + w.step < w.ctiles)  // the other warpgroup has tile j + 1
			pair_bar(BAR_ORDER + (wg ^ 1), false);
		wgmma_wait<0>();
		fence_regs<BN / 8>(acc[0]);
		fence_regs<BN / 8>(acc[1]);
		release<CL>(empty, (u - 1) % Cf::ST, lane, w.rank);
		bf16 *buf = sC + wg * 2 * Cf::PIECE;
		if constexpr (GLU) {
			store_swiglu32<BN>(mc, buf, acc[0], m0, n0 / 2, M, N, np);
			store_swiglu32<BN>(mc, buf, acc[1], m0 + 64, n0 / 2, M, N, np);
		} else if constexpr (EPI == 5) {
			store_exp<BN>(mc, buf, acc[0], m0, n0, M, N, np, part, w.tn);
			store_exp<BN>(mc, buf, acc[1], m0 + 64, n0, M, N, np, part, w.tn);
		} else if constexpr (EPI == 6) {
			rope_turn<BN>(acc[0], sf, ro, m0, n0);
			store_pieces<BN>(mc, buf, acc[0], m0, n0, M, N, np);
			rope_turn<BN>(acc[1], sf, ro, m0 + 64, n0);
			store_pieces<BN>(mc, buf, acc[1], m0 + 64, n0, M, N, np);
		} else {
			store_pieces<BN>(mc, buf, acc[0], m0, n0, M, N, np);
			store_pieces<BN>(mc, buf, acc[1], m0 + 64, n0, M, N, np);
		}
	}
	if (threadIdx.x % WG_THREADS == 0)
		bulk_wait_done();
}

template <int BN, int CL, int EPI>
__device__ __forceinline__ void consume(bf16 *__restrict__ Cm, const CUtensorMap *mc,
					const bf16 *sA, const bf16 *sB, bf16 *sC, uint64_t *full,
					uint64_t *empty, int M, int N, const Walk &w, int kt)
{
	using Cf = Cfg<BN, CL>;
	const int wg = threadIdx.x / WG_THREADS, warp = threadIdx.x % WG_THREADS / 32;
	const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	float acc[BN / 8][4];
	int np = 0;  // pieces stored
	uint32_t u = 0;
	for (int ct = w.first; ct < w.ctiles; ct += w.step) {
		const int m0 = w.m0(ct), n0 = w.ni(ct) * BN;
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % Cf::ST;
			mbar_wait(&full[s], (u / Cf::ST) & 1);
			issue<BN>(acc, saddr(sA + s * Cf::A_ELEMS) + wg * 64 * SLAB_ROW_BYTES,
				  saddr(sB + s * Cf::B_ELEMS), ks == 0);
			if (ks > 0) {
				wgmma_wait<1>();
				release<CL>(empty, (u - 1) % Cf::ST, lane, w.rank);
			}
		}
		wgmma_wait<0>();
		fence_regs<BN / 8>(acc);
		release<CL>(empty, (u - 1) % Cf::ST, lane, w.rank);
		if constexpr (EPI == 1) {
			store_pieces<BN>(mc, sC + wg * 2 * Cf::PIECE, acc, m0 + wg * 64, n0, M, N, np);
			continue;
		}
		if constexpr (EPI == 3) {
			store_swiglu<BN>(mc, mc + 1, mc + 2, sC + wg * 2 * Cf::PIECE, acc, m0 + wg * 64,
					 n0 / 2, M, N, np);
			continue;
		}
		const int r = m0 + wg * 64 + warp * 16 + g;
#pragma unroll
		for (int i = 0; i < BN / 8; i++) {
			const int c = n0 + i * 8 + 2 * t;
			if (c >= N)
				continue;
			if (r < M)
				*(uint32_t *)(Cm + (size_t)r * N + c) = pack_bf16(acc[i][0], acc[i][1]);
			if (r + 8 < M)
				*(uint32_t *)(Cm + (size_t)(r + 8) * N + c) =
					pack_bf16(acc[i][2], acc[i][3]);
		}
	}
	if (EPI != 0 && threadIdx.x % WG_THREADS == 0)
		bulk_wait_done();  // the last pieces are stored before the block leaves
}

// glu(EPI): N is the number of features F (h has 2 F columns).  EPI = 5:
// the rows' sums into part, and *flag zeroed; otherwise flag, if not NULL,
// is a guard: the product is made only if it is set.  EPI = 6: RoPE as ro
// says (its frequencies copied to shared memory: indexed by lane, a
// parameter would be copied to local memory).
template <int BN, int CL, int EPI>
__global__ void __launch_bounds__(NT, 1)
gemm_tn_kernel(const __grid_constant__ Maps mp, bf16 *__restrict__ Cm, int M, int N, int K,
	       int mfast, float *part, int *flag, const __grid_constant__ Rope ro)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a
#else
	if constexpr (EPI == 5) {
		if (blockIdx.x == 0 && threadIdx.x == 0)
			*flag = 0;
	} else if (flag && !*(volatile int *)flag) {
		return;  // every block of a cluster reads the same guard
	}
	using C = Cfg<BN, CL>;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sA = reinterpret_cast<bf16 *>(base);
	bf16 *sB = sA + C::ST * C::A_ELEMS;
	bf16 *sC = sB + C::ST * C::B_ELEMS;
	uint64_t *full = reinterpret_cast<uint64_t *>(sC + C::C_ELEMS);
	uint64_t *empty = full + C::ST;
	float *sf = reinterpret_cast<float *>(empty + C::ST);  // EPI = 6: fh, then fl
	if constexpr (EPI == 6)
		if (threadIdx.x < 64)
			sf[threadIdx.x] = threadIdx.x < 32 ? ro.fh[threadIdx.x] : ro.fl[threadIdx.x - 32];
	Walk w;
	w.cl = CL;
	constexpr int TN = glu(EPI) ? BN / 2 : BN;  // output columns (features) a tile
	w.tn = (N + TN - 1) / TN;
	w.tm = ((M + BM - 1) / BM + CL - 1) / CL;
	w.ctiles = w.tm * w.tn;
	w.mfast = mfast;
	w.first = blockIdx.x / CL;
	w.step = gridDim.x / CL;
	w.rank = CL == 1 ? 0 : (int)cg::this_cluster().block_rank();
	const int kt = (K + BK - 1) / BK;
	if (threadIdx.x == 0) {
		for (int i = 0; i < C::ST; i++) {
			mbar_init(&full[i], 1);
			mbar_init(&empty[i], (pingpong(EPI) ? 4 : WARPS) * CL);
		}
		mbar_fence_init();
	}
	if constexpr (CL == 1)
		__syncthreads();
	else
		cg::this_cluster().sync();  // the other block's barriers exist before we use them
	if (threadIdx.x / WG_THREADS == CONSUMERS) {
		regs_dealloc<PRODUCER_REGS>();
		if (threadIdx.x % WG_THREADS == 0)
			produce<BN, CL, EPI>(mp, sA, sB, full, empty, w, kt);
	} else {
		regs_alloc<CONSUMER_REGS>();
		if constexpr (pingpong(EPI))
			consume_pp<BN, CL, EPI>(mp, sA, sB, sC, full, empty, M, N, w, kt, part, sf, ro);
		else
			consume<BN, CL, EPI>(Cm, mp.c, sA, sB, sC, full, empty, M, N, w, kt);
	}
	if constexpr (CL == 2)
		cg::this_cluster().sync();  // no block leaves while the other may still signal it
#endif
}

// Launch over the maps in mp: M rows, N output columns (glu(EPI): N
// features).
template <int BN, int CL, int EPI>
int launch(const Maps &mp, uint16_t *Cm, int M, int N, int K, cudaStream_t st,
	   float *part = nullptr, int *flag = nullptr, const Rope *rope = nullptr)
{
	using C = Cfg<BN, CL>;
	constexpr int SMEM = C::SMEM + (EPI == 6 ? 64 * sizeof(float) : 0);
	static_assert(SMEM <= 227 * 1024, "the stages exceed a block's shared memory");
	const Rope ro = rope ? *rope : Rope{};
	auto kern = gemm_tn_kernel<BN, CL, EPI>;
	int dev;
	if (cudaGetDevice(&dev))
		return -1;
	const int tn = glu(EPI) ? BN / 2 : BN;
	const long long ctiles = (long long)(((M + BM - 1) / BM + CL - 1) / CL) * ((N + tn - 1) / tn);
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];
	attr[0].id = cudaLaunchAttributeClusterDimension;
	attr[0].val.clusterDim.x = CL;
	attr[0].val.clusterDim.y = 1;
	attr[0].val.clusterDim.z = 1;
	cfg.blockDim = dim3(NT);
	cfg.dynamicSmemBytes = SMEM;
	cfg.stream = st;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	// Set up once per device (launches come from one host thread): the
	// shared memory attribute, the number of multiprocessors, and of
	// clusters resident at once, asked with this launch's configuration.
	// A persistent grid must be resident all at once: clusters of two
	// blocks fill a GPC's multiprocessors in pairs, so fewer of them may
	// fit than sms / 2, and the rest would run as a second wave.
	static int dev_set = -1, sms, fit;
	if (dev != dev_set) {
		if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) ||
		    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
			return -1;
		fit = sms / CL;
		cfg.gridDim = dim3(sms / CL * CL);
		if (CL > 1 && (cudaOccupancyMaxActiveClusters(&fit, kern, &cfg) != cudaSuccess || fit < 1)) {
			cudaGetLastError();
			fit = sms / CL;
		}
		dev_set = dev;
	}
	const int clusters = ctiles < fit ? (int)ctiles : fit;
	cfg.gridDim = dim3(clusters * CL);
	// m fastest when B (N rows; EPI = 3: 2 N) outweighs A (M rows), or as
	// LMPIPE_GEMM_RASTER says ("m" or "n"), for measuring.
	static const char *r = getenv("LMPIPE_GEMM_RASTER");
	const int mfast = r && !strcmp(r, "m") ? 1 : r && !strcmp(r, "n") ? 0
				 : (long long)N * (glu(EPI) ? 2 : 1) > M;
	if (cudaLaunchKernelEx(&cfg, kern, mp, (bf16 *)Cm, M, N, K, mfast, part, flag, ro) !=
	    cudaSuccess)
		return -1;
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

// The cluster size asked for (LMPIPE_GEMM_CLUSTER, 1 or 2).
int cluster_env(void)
{
	const char *e = getenv("LMPIPE_GEMM_CLUSTER");
	return e && !strcmp(e, "2") ? 2 : 1;
}

}  // namespace

extern "C" int gemm_tn_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K,
			    int bn, void *stream)
{
	if (M <= 0 || N <= 0 || K <= 0 || K % 8 || N % 8 || ((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) % 16 ||
	    (bn != 128 && bn != 192 && bn != 256))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	const char *p = getenv("LMPIPE_GEMM_EPI");
	// 192 wide: ping-pong only (two 128 x 192 tiles' sums fit no warpgroup)
	const int cl = cluster_env(), reg = p && !strcmp(p, "reg");
	const int pp = bn == 192 || (p && !strcmp(p, "pp"));
	if (pp && bn == 256)
		return -1;
	Maps mp = {};
	if (tma_map_3d(&mp.a, A, K, M, 1, BM) || tma_map_3d(&mp.b, B, K, N, 1, bn / cl) ||
	    tma_map_3d(&mp.c[0], C, N, M, 1, 64))
		return -1;
	mp.b2 = mp.b;
	mp.c[1] = mp.c[2] = mp.c[0];
	if (pp && bn == 192)
		return cl == 2 ? launch<192, 2, 2>(mp, C, M, N, K, st) : launch<192, 1, 2>(mp, C, M, N, K, st);
	if (pp)
		return cl == 2 ? launch<128, 2, 2>(mp, C, M, N, K, st) : launch<128, 1, 2>(mp, C, M, N, K, st);
	if (bn == 256 && cl == 2)
		return reg ? launch<256, 2, 0>(mp, C, M, N, K, st) : launch<256, 2, 1>(mp, C, M, N, K, st);
	if (bn == 256)
		return reg ? launch<256, 1, 0>(mp, C, M, N, K, st) : launch<256, 1, 1>(mp, C, M, N, K, st);
	if (cl == 2)
		return reg ? launch<128, 2, 0>(mp, C, M, N, K, st) : launch<128, 2, 1>(mp, C, M, N, K, st);
	return reg ? launch<128, 1, 0>(mp, C, M, N, K, st) : launch<128, 1, 1>(mp, C, M, N, K, st);
}

extern "C" int gemm_swiglu_cuda(uint16_t *h, uint16_t *out, const uint16_t *A, const uint16_t *W,
				int M, int F, int K, int bn, void *stream)
{
	if (M <= 0 || F <= 0 || K <= 0 || K % 8 || F % 8 || (bn != 128 && bn != 192 && bn != 256) ||
	    ((uintptr_t)h | (uintptr_t)out | (uintptr_t)A | (uintptr_t)W) % 16)
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	const int cl = cluster_env();
	Maps mp = {};
	if (tma_map_3d(&mp.a, A, K, M, 1, BM) || tma_map_3d(&mp.b, W, K, F, 1, bn / 2) ||
	    tma_map_3d(&mp.b2, W + (size_t)F * K, K, F, 1, bn / 2))
		return -1;
	if (bn == 192) {  // ping-pong, 96 features a tile, stored 32 at a time
		if (tma_map_rows32(&mp.c[0], h, F, M, 2 * (uint64_t)F, 64) ||
		    tma_map_rows32(&mp.c[1], h + F, F, M, 2 * (uint64_t)F, 64) ||
		    tma_map_rows32(&mp.c[2], out, F, M, F, 64))
			return -1;
		return cl == 2 ? launch<192, 2, 4>(mp, h, M, F, K, st) : launch<192, 1, 4>(mp, h, M, F, K, st);
	}
	if (tma_map_rows(&mp.c[0], h, F, M, 2 * (uint64_t)F, 64) ||
	    tma_map_rows(&mp.c[1], h + F, F, M, 2 * (uint64_t)F, 64) ||
	    tma_map_3d(&mp.c[2], out, F, M, 1, 64))
		return -1;
	if (bn == 256)
		return cl == 2 ? launch<256, 2, 3>(mp, h, M, F, K, st) : launch<256, 1, 3>(mp, h, M, F, K, st);
	return cl == 2 ? launch<128, 2, 3>(mp, h, M, F, K, st) : launch<128, 1, 3>(mp, h, M, F, K, st);
}

// The LM head's products and the q/k/v product with RoPE (kernels/gemm.h):
// 192-wide ping-pong tiles.
namespace {

int pp_maps(Maps *mp, uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K,
	      int cl)
{
	if (M <= 0 || N <= 0 || K <= 0 || K % 8 || N % 8 || (cl != 1 && cl != 2) ||
	    ((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) % 16)
		return -1;
	*mp = Maps{};
	if (tma_map_3d(&mp->a, A, K, M, 1, BM) || tma_map_3d(&mp->b, B, K, N, 1, GEMM_EXP_BN / cl) ||
	    tma_map_3d(&mp->c[0], C, N, M, 1, 64))
		return -1;
	mp->b2 = mp->b;
	mp->c[1] = mp->c[2] = mp->c[0];
	return 0;
}

}  // namespace

extern "C" int gemm_exp_cuda(uint16_t *E, float *part, int *flag, const uint16_t *A,
			     const uint16_t *B, int M, int N, int K, int cl, void *stream)
{
	Maps mp;
	if (!part || !flag || pp_maps(&mp, E, A, B, M, N, K, cl))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	return cl == 2 ? launch<192, 2, 5>(mp, E, M, N, K, st, part, flag)
		       : launch<192, 1, 5>(mp, E, M, N, K, st, part, flag);
}

extern "C" int gemm_tn_guarded_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M,
				    int N, int K, int cl, const int *guard, void *stream)
{
	Maps mp;
	if (!guard || pp_maps(&mp, C, A, B, M, N, K, cl))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	int *g = (int *)guard;  // read only: the kernel's flag is written by EPI = 5 alone
	return cl == 2 ? launch<192, 2, 2>(mp, C, M, N, K, st, nullptr, g)
		       : launch<192, 1, 2>(mp, C, M, N, K, st, nullptr, g);
}

extern "C" int gemm_rope_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N,
			      int K, int T, int cols, double theta, int cl, void *stream)
{
	Maps mp;
	if (T < 1 || T > GEMM_ROPE_MAX_T || cols < 0 || cols > N || cols % ROPE_D || N % ROPE_D ||
	    !(theta > 1 && theta < INFINITY) || pp_maps(&mp, C, A, B, M, N, K, cl))
		return -1;
	Rope ro;
	for (int i = 0; i < ROPE_D / 2; i++) {  // rope_table's frequencies
		const double f = pow(theta, -2.0 * i / ROPE_D);
		ro.fh[i] = (float)f;
		ro.fl[i] = (float)(f - (double)ro.fh[i]);
	}
	ro.T = T;
	ro.cols = cols;
	cudaStream_t st = (cudaStream_t)stream;
	return cl == 2 ? launch<192, 2, 6>(mp, C, M, N, K, st, nullptr, nullptr, &ro)
		       : launch<192, 1, 6>(mp, C, M, N, K, st, nullptr, nullptr, &ro);
}
