// tma.cuh: Hopper's asynchronous data movement for warp-specialised
// kernels, as inline PTX: shared-memory mbarriers (init, expected bytes,
// arrive, wait on a phase), bulk tensor copies global -> shared through a
// tensor map (TMA), completing on an mbarrier, and shared -> global (tensor
// stores, in bulk groups); setmaxnreg to move registers from the producer
// warpgroup to the consumers; bulk reductions shared -> global (fp32 adds
// done by the copy engine, in bulk groups), and bulk copies the same way.
// Host side:
// tma_map_3d builds the tensor map of a [n2][n1][n0] bf16 array whose boxes
// land in shared memory in the 128-byte swizzled layout wgmma reads
// (wgmma.cuh's slabs); tma_map_4d that of a strided 4-d one.  bulk_load
// copies plain bytes, without a map.
#ifndef LMPIPE_TMA_CUH
#define LMPIPE_TMA_CUH

#include <cuda.h>
#include <stdint.h>

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
			     (uint32_t)__cvta_generic_to_shared(bar)),
		     "r"(count));
}

// Make the barriers' initialisation visible to the copy engine.
__device__ __forceinline__ void mbar_fence_init(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive and announce that `bytes` more will complete on this phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
			     (uint32_t)__cvta_generic_to_shared(bar)),
		     "r"(bytes)
		     : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
			     (uint32_t)__cvta_generic_to_shared(bar))
		     : "memory");
}

// Wait until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
	asm volatile("{\n.reg .pred done;\n"
		     "WAIT_%=:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
		     "@!done bra WAIT_%=;\n}\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
		     "r"(parity)
		     : "memory");
}

// Copy bytes (a multiple of 16; both addresses 16-byte aligned) from
// global memory to shared memory at dst, completing on bar: a plain bulk
// copy, no tensor map.
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1], %2, [%3];\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
		     "l"(src), "r"(bytes), "r"((uint32_t)__cvta_generic_to_shared(bar))
		     : "memory");
}

// Copy the box at (c0, c1, c2) of a 3-d tensor map into shared memory at
// dst; its bytes complete on bar.  Elements outside the tensor arrive as 0.
__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar,
					    int c0, int c1, int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
			     (uint32_t)__cvta_generic_to_shared(dst)),
		     "l"(map), "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(c0), "r"(c1),
		     "r"(c2)
		     : "memory");
}

// The same for a 4-d tensor map, box at (c0, c1, c2, c3).
__device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar,
					    int c0, int c1, int c2, int c3)
{
	asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(
			     (uint32_t)__cvta_generic_to_shared(dst)),
		     "l"(map), "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(c0), "r"(c1),
		     "r"(c2), "r"(c3)
		     : "memory");
}

// Copy the box at (c0, c1, c2) of a 3-d tensor map from shared memory at
// src (the layout tma_load_3d leaves) to global memory, in the issuing
// thread's bulk group (bulk_commit, bulk_wait_read); elements outside the
// tensor are not written.  The writers of src fence (fence_proxy_async)
// and meet at a barrier first.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap *map, const void *src, int c0, int c1,
					     int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
		     " [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
		     "r"((uint32_t)__cvta_generic_to_shared(src)), "r"(c0), "r"(c1), "r"(c2)
		     : "memory");
}

// Register budgets per warpgroup (sm_90a): the producer gives registers
// back, the consumers take them.  N is a multiple of 8 in [24, 256].
template <int N>
__device__ __forceinline__ void regs_dealloc(void)
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int N>
__device__ __forceinline__ void regs_alloc(void)
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// dst[0 .. bytes/4) += src[...] in fp32, read from shared memory by the
// copy engine: one thread issues it, after the writers' proxy fence and a
// barrier.  Addresses 16-byte aligned, bytes a multiple of 16.  Then
// bulk_commit() closes the group.
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, const float *src, uint32_t bytes)
{
	asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
		     ::"l"(dst), "r"((uint32_t)__cvta_generic_to_shared(src)), "r"(bytes)
		     : "memory");
}

// dst[0 .. bytes/4) = src[...]: the same as bulk_reduce_add_f32 (one
// thread, after the fence and barrier; in bulk groups), a plain copy.
__device__ __forceinline__ void bulk_store(float *dst, const float *src, uint32_t bytes)
{
	asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
		     ::"l"(dst), "r"((uint32_t)__cvta_generic_to_shared(src)), "r"(bytes)
		     : "memory");
}

__device__ __forceinline__ void bulk_commit(void)
{
	asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// All but the last N of the issuing thread's bulk groups have read their
// shared source (it may be written again); bulk_wait_done: all groups
// are complete, their writes too.
template <int N = 0>
__device__ __forceinline__ void bulk_wait_read(void)
{
	asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bulk_wait_done(void)
{
	asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// The tensor map of a bf16 array [n2][n1][n0] (n0 contiguous) read in
// boxes of 64 x rows x 1: 128-byte rows, swizzled as wgmma's 128B mode
// expects.  0 on success, -1 if the driver refuses.
int tma_map_3d(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t n2,
	       uint32_t rows);
// The same for a [n1][n0] bf16 array whose rows lie ld elements apart
// (ld >= n0; a column range of a wider matrix), as a 3-d map of one plane.
int tma_map_rows(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t ld,
		 uint32_t rows);
// The same as tma_map_rows in boxes of 32 x rows x 1: 64-byte rows,
// swizzled in the 64-byte mode (16-byte chunk c of row r at c ^ (r / 2 % 4),
// the box's shared-memory base 512-byte aligned).
int tma_map_rows32(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t ld,
		   uint32_t rows);
// The same for a 4-d bf16 array of sizes n[0..3] (n[0] contiguous) whose
// dimensions 1..3 lie stride[0..2] elements apart, read in boxes of
// 64 x 1 x rows x 1 (a head's rows of a packed [B, T, ..., H, D] tensor:
// n = {D, H, T, B}); the box lands as the 3-d map's does.
int tma_map_4d(CUtensorMap *map, const void *base, const uint64_t n[4], const uint64_t stride[3],
	       uint32_t rows);
// The tensor map of an fp32 array [n1][n0] (n0 contiguous, n0 * 4 a
// multiple of 16, base 16-byte aligned) as a 3-d map of one plane, read
// in boxes of width x 1 x 1 (unswizzled; tma_load_3d at (c0, row, 0);
// elements past n0 arrive as 0).
int tma_map_f32_rows(CUtensorMap *map, const float *base, uint64_t n0, uint64_t n1,
		     uint32_t width);

#endif
