// mma.cuh: the tensor-core building blocks the CUDA kernels share, as
// inline PTX: 16-byte asynchronous copies global -> shared (zero-filled
// past the end), ldmatrix (plain and transposed), mma.sync m16n8k16 bf16
// with fp32 accumulators, and a swizzled tile layout that keeps ldmatrix
// free of bank conflicts.
//
// Fragment layouts (g = lane / 4, t = lane % 4), m16n8k16:
//   A 16x16: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8 : b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C 16x8 : c0,c1 (g, 2t..2t+1)   c2,c3 (g+8, 2t..2t+1)
#ifndef LMPIPE_MMA_CUH
#define LMPIPE_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

// Element offset of (row, col) in a tile whose rows hold `cols` bf16
// (a multiple of 64): each 16-byte chunk's index is XORed with row % 8, so
// the 8 rows one ldmatrix phase reads fall in 8 different bank groups.
template <int COLS>
__device__ __forceinline__ int swz(int row, int col)
{
	static_assert(COLS % 64 == 0, "swizzled tiles need rows of >= 8 chunks");
	return row * COLS + ((((col >> 3) ^ row) & 7) | ((col >> 3) & ~7)) * 8 + (col & 7);
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared; when !valid the destination is zero-filled
// and nothing is read (src must still be a valid address).
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_async_wait_all(void)
{
	asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const bf16 *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const bf16 *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

// c += a b (m16n8k16, bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// *p += (a, b, c, d) in global memory, one 16-byte reduction (sm_90).
__device__ __forceinline__ void red_add_v4(float *p, float a, float b, float c, float d)
{
	asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};\n"
		     :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// Two floats as a bf16 pair, lo in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return *reinterpret_cast<uint32_t *>(&v);
}

// Copy rows [row0, row0 + ROWS) of a [rows_total, COLS] bf16 matrix into a
// swizzled shared tile; rows past rows_total become zeros.
template <int ROWS, int COLS, int NTHREADS>
__device__ __forceinline__ void load_tile(bf16 *tile, const bf16 *g, int row0, int rows_total)
{
	constexpr int CHUNKS = ROWS * COLS / 8;
	static_assert(CHUNKS % NTHREADS == 0, "tile chunks must divide among threads");
#pragma unroll
	for (int i = 0; i < CHUNKS / NTHREADS; i++) {
		int c = threadIdx.x + i * NTHREADS;
		int r = c / (COLS / 8), col = (c % (COLS / 8)) * 8;
		bool valid = row0 + r < rows_total;
		const bf16 *src = valid ? g + (size_t)(row0 + r) * COLS + col : g;
		cp_async16(tile + swz<COLS>(r, col), src, valid);
	}
}

// A fragment of the 16x16 block at (r0, c0) of a swizzled row-major tile.
template <int COLS>
__device__ __forceinline__ void ld_a(uint32_t a[4], const bf16 *tile, int r0, int c0)
{
	int l = threadIdx.x & 31;
	ldsm_x4(a, tile + swz<COLS>(r0 + (l & 7) + ((l >> 3) & 1) * 8, c0 + (l >> 4) * 8));
}

// B fragments for two n-tiles (rows n0..n0+15 of a [n][k] tile, i.e. B =
// tile^T), k chunk c0..c0+15: b[0],b[1] for n0..n0+7, b[2],b[3] for n0+8...
template <int COLS>
__device__ __forceinline__ void ld_bt(uint32_t b[4], const bf16 *tile, int n0, int c0)
{
	int l = threadIdx.x & 31;
	ldsm_x4(b, tile + swz<COLS>(n0 + (l & 7) + (l >> 4) * 8, c0 + ((l >> 3) & 1) * 8));
}

// B fragments for two n-tiles from a [k][n] tile (B = tile): k rows
// k0..k0+15, columns n0..n0+15: b[0],b[1] for n0..n0+7, b[2],b[3] for n0+8...
template <int COLS>
__device__ __forceinline__ void ld_b(uint32_t b[4], const bf16 *tile, int k0, int n0)
{
	int l = threadIdx.x & 31;
	ldsm_x4_t(b, tile + swz<COLS>(k0 + (l & 7) + ((l >> 3) & 1) * 8, n0 + (l >> 4) * 8));
}

// The same fragments from a plain row-major tile of row stride S elements
// (no swizzle; attention_short.cu and matmul_rows.cu pad rows to S = width
// + 8, which keeps an ldmatrix phase's 8 rows in distinct bank groups).
__device__ __forceinline__ void lda(uint32_t a[4], const bf16 *t, int S, int r0, int c0)
{
	int l = threadIdx.x & 31;
	ldsm_x4(a, t + (r0 + (l & 7) + ((l >> 3) & 1) * 8) * S + c0 + (l >> 4) * 8);
}

__device__ __forceinline__ void ldbt(uint32_t b[4], const bf16 *t, int S, int n0, int c0)
{
	int l = threadIdx.x & 31;
	ldsm_x4(b, t + (n0 + (l & 7) + (l >> 4) * 8) * S + c0 + ((l >> 3) & 1) * 8);
}

__device__ __forceinline__ void ldb(uint32_t b[4], const bf16 *t, int S, int k0, int n0)
{
	int l = threadIdx.x & 31;
	ldsm_x4_t(b, t + (k0 + (l & 7) + ((l >> 3) & 1) * 8) * S + n0 + (l >> 4) * 8);
}

// A fragment of the 16x16 block (rows r0.., cols c0..) of tile^T, where
// the tile is stored [col][row] (swizzled rows of COLS).
template <int COLS>
__device__ __forceinline__ void ld_at(uint32_t a[4], const bf16 *tile, int r0, int c0)
{
	int l = threadIdx.x & 31;
	ldsm_x4_t(a, tile + swz<COLS>(c0 + (l & 7) + (l >> 4) * 8, r0 + ((l >> 3) & 1) * 8));
}

// 2^x on the special-function unit, results below 2^-126 flushed to 0
// (exp2f's non-flushing form wraps each MUFU.EX2 in denormal handling).
__device__ __forceinline__ float exp2_ftz(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

// Accumulator fragments c (16 rows a warp x N columns, the C layout) as
// bf16 A fragments of a product with k = N (four bf16 pairs per k16 step):
// how P or dS feeds the next product from registers.
template <int N>
__device__ __forceinline__ void acc_to_a(uint32_t (*a)[4], const float (*c)[4])
{
#pragma unroll
	for (int kk = 0; kk < N / 16; kk++) {
		a[kk][0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
		a[kk][1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
		a[kk][2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
		a[kk][3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
	}
}

#endif
