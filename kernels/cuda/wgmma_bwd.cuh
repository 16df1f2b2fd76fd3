// wgmma_bwd.cuh: the warpgroup MMA shapes and shared-memory helpers the
// attention backward needs beyond wgmma.cuh (sm_90a): S^T = K Q^T as m64n64
// with both operands K-major; dQ = dS K with A = dS read M-major (the tile
// holds dS^T) and B = K read N-major, as m64n32 and m64n64.  Tiles use
// wgmma.cuh's 128-byte swizzled slab layout and sw128_desc.
#ifndef LMPIPE_WGMMA_BWD_CUH
#define LMPIPE_WGMMA_BWD_CUH

#include "wgmma.cuh"

// 4 bytes global -> shared; when !valid the destination becomes 0 and
// nothing is read (src must still be a valid address).
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
		     :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0));
}

// Shared-memory accesses by address (the compiler cannot always tell that
// a pointer into dynamic shared memory is one, and then emits slower
// generic loads and stores).
__device__ __forceinline__ float2 lds_f2(uint32_t addr)
{
	float2 v;
	asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
	return v;
}

__device__ __forceinline__ void sts_u32(uint32_t addr, uint32_t v)
{
	asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}

// v, hidden from loop-invariant code motion: descriptors built from it
// inside a loop are formed where used instead of held in registers
// across the whole loop.
__device__ __forceinline__ uint32_t wgb_opaque(uint32_t v)
{
	asm volatile("" : "+r"(v));
	return v;
}

// d (64 x 64) = (scale_d ? d : 0) + A B; A (64 x 16) and B (64 x 16, i.e.
// B^T) both K-major in shared memory.
__device__ __forceinline__ void wgb_ss_n64(float d[8][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "%32, %33, p, 1, 1, 0, 0;\n}\n"
		     : WG_FRAGS8(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}

// d (64 x 32) = (scale_d ? d : 0) + A B; A (64 x 16) M-major and B
// (16 x 32) N-major in shared memory.
__device__ __forceinline__ void wgb_ss_tt_n32(float d[4][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
		     "%16, %17, p, 1, 1, 1, 1;\n}\n"
		     : WG_FRAGS4(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}

// d (64 x 64) = (scale_d ? d : 0) + A B; A (64 x 16) M-major and B
// (16 x 64) N-major in shared memory.
__device__ __forceinline__ void wgb_ss_tt_n64(float d[8][4], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "%32, %33, p, 1, 1, 1, 1;\n}\n"
		     : WG_FRAGS8(d, 0)
		     : "l"(da), "l"(db), "r"(scale_d));
}

// d (64 x 64) = (scale_d ? d : 0) + A B; A (64 x 16) from registers (each
// warp its 16 rows, the mma.sync A layout), B (64 x 16, i.e. B^T) K-major
// in shared memory: S^T = K Q^T and dP^T = V dO^T with the warpgroup's K
// and V rows held in registers for the whole block.
__device__ __forceinline__ void wgb_rs_n64(float d[8][4], const uint32_t a[4], uint64_t db,
					   int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
		     "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
		     : WG_FRAGS8(d, 0)
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

#endif
