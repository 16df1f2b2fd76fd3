// wgmma.cuh: Hopper warpgroup matrix multiply-accumulate (sm_90a) for the
// attention forward pass and gemm_ws.cu: shared-memory matrix descriptors
// for tiles in the 128-byte swizzled layout, and the few wgmma shapes used.
//
// Tile layout ("slabs"): a tile of R rows x C bf16 columns is stored as C/64
// slabs, each R rows of 128 bytes; in row r, 16-byte chunk c sits at
// position c ^ (r % 8).  Every slab starts on a 1024-byte boundary, so the
// 8-row, 1024-byte swizzle atoms of wgmma's 128B mode line up with it.
// Accumulator fragments have the mma.sync C layout per warp: warp w of the
// warpgroup holds rows 16w + g and 16w + g + 8, d[i] columns 8i + 2t, +1.
#ifndef LMPIPE_WGMMA_CUH
#define LMPIPE_WGMMA_CUH

#include "mma.cuh"

enum { SLAB_COLS = 64, SLAB_ROW_BYTES = 128, SW_ATOM_BYTES = 1024 };

// The accumulator operands of a wgmma asm statement: fragments i ...
// of d as "+f" operands (WG_FRAGS<n>: n fragments from i).
#define WG_FRAG(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define WG_FRAGS4(d, i) \
	WG_FRAG(d, i), WG_FRAG(d, (i) + 1), WG_FRAG(d, (i) + 2), WG_FRAG(d, (i) + 3)
#define WG_FRAGS8(d, i) WG_FRAGS4(d, i), WG_FRAGS4(d, (i) + 4)
#define WG_FRAGS16(d, i) WG_FRAGS8(d, i), WG_FRAGS8(d, (i) + 8)
#define WG_FRAGS32(d, i) WG_FRAGS16(d, i), WG_FRAGS16(d, (i) + 16)

// Element offset of (row, col) in an R-row slab tile.
template <int R>
__device__ __forceinline__ int slab_off(int row, int col)
{
	return (col / SLAB_COLS) * R * SLAB_COLS + row * SLAB_COLS +
	       ((((col % SLAB_COLS) >> 3) ^ (row & 7)) << 3) + (col & 7);
}

// Copy rows [row0, row0 + R) of a [rows_total, C] bf16 matrix, its rows
// ld elements apart, into a slab tile (cp.async; rows past rows_total
// become zeros).
template <int R, int C, int NTHREADS>
__device__ __forceinline__ void load_slabs(bf16 *tile, const bf16 *g, int row0, int rows_total,
					   size_t ld = C)
{
	constexpr int CHUNKS = R * C / 8;
#pragma unroll
	for (int i = 0; i < (CHUNKS + NTHREADS - 1) / NTHREADS; i++) {
		int c = threadIdx.x + i * NTHREADS;
		if (CHUNKS % NTHREADS && c >= CHUNKS)
			break;
		int r = c / (C / 8), col = (c % (C / 8)) * 8;
		bool valid = row0 + r < rows_total;
		const bf16 *src = valid ? g + (size_t)(row0 + r) * ld + col : g;
		cp_async16(tile + slab_off<R>(r, col), src, valid);
	}
}

// Descriptor of a 128B-swizzled operand at shared address addr; lbo and
// sbo in bytes (K-major: sbo = the 8-row atom stride, lbo unused;
// MN-major: lbo = the stride between 64-column slabs, sbo = between
// 8-row atoms).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
	return (uint64_t)((addr & 0x3ffff) >> 4) | (uint64_t)((lbo & 0x3ffff) >> 4) << 16 |
	       (uint64_t)((sbo & 0x3ffff) >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Wait until at most N committed groups of this warpgroup still run.
template <int N>
__device__ __forceinline__ void wgmma_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Tie accumulator registers to this point: the compiler must not move
// reads or writes of them across an asynchronous wgmma's issue or wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (*d)[4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			asm volatile("" : "+f"(d[i][e])::"memory");
}

// The same for registers an in-flight wgmma reads (A from registers).
template <int N>
__device__ __forceinline__ void fence_regs_u32(uint32_t (*a)[4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			asm volatile("" : "+r"(a[i][e])::"memory");
}

// Make this thread's generic-proxy shared-memory writes (cp.async
// included) visible to wgmma, which reads through the async proxy.
__device__ __forceinline__ void fence_proxy_async(void)
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// d (64 x 128) = (scale_d ? d : 0) + A B; A (64 x 16, K-major) and B
// (128 x 16, K-major) from shared memory.
__device__ __forceinline__ void wgmma_ss_n128(float d[16][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
		     "%64, %65, p, 1, 1, 0, 0;\n}\n"
		     : WG_FRAGS16(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}

// d (64 x 64) += A B; A from registers (each warp its 16 rows, the
// mma.sync A layout), B (16 x 64) from shared memory, N-major.
__device__ __forceinline__ void wgmma_rs_n64_tb(float d[8][4], const uint32_t a[4], uint64_t db)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "{%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
		     : WG_FRAGS8(d, 0)
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// d (64 x 128) += A B; A from registers (each warp its 16 rows, the
// mma.sync A layout), B (16 x 128) from shared memory, N-major.
__device__ __forceinline__ void wgmma_rs_n128_tb(float d[16][4], const uint32_t a[4], uint64_t db)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
		     "{%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
		     : WG_FRAGS16(d, 0)
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// d (64 x D) += A B for D = 64 or 128 (the two above).
template <int D>
__device__ __forceinline__ void wgmma_rs_tb(float (*d)[4], const uint32_t a[4], uint64_t db)
{
	if constexpr (D == 64)
		wgmma_rs_n64_tb(d, a, db);
	else
		wgmma_rs_n128_tb(d, a, db);
}

// d (64 x 256) = (scale_d ? d : 0) + A B; A (64 x 16, K-major) and B
// (256 x 16, K-major) from shared memory (gemm_ws.cu's wide tiles).
__device__ __forceinline__ void wgmma_ss_n256(float d[32][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, "
		     "%128, %129, p, 1, 1, 0, 0;\n}\n"
		     : WG_FRAGS32(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}


// d (64 x 192) = (scale_d ? d : 0) + A B; A (64 x 16, K-major) and B
// (192 x 16, K-major) from shared memory (gemm_ws.cu's ping-pong tiles).
__device__ __forceinline__ void wgmma_ss_n192(float d[24][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, "
		     "%96, %97, p, 1, 1, 0, 0;\n}\n"
		     : WG_FRAGS16(d, 0), WG_FRAGS8(d, 16)
		     : "l"(da), "l"(db), "r"(scale_d));
}

#endif
