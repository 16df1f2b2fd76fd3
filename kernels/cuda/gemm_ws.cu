// gemm_ws.cu: C = A B^T on Hopper (see kernels/gemm.h) in the arrangement
// of the attention forward (attention_fwd_ws.cu): a persistent grid, one
// block per multiprocessor, three warpgroups.  The last is the producer:
// one thread streams the K slices of A (128 rows) and B (BN rows) of each
// tile through a ring of ST shared-memory stages with the bulk tensor copy
// engine, each stage guarded by a "full" mbarrier (bytes arrived) and an
// "empty" one (all eight consumer warps done with it).  The two consumer
// warpgroups own 64 rows of the tile each; per stage they issue the four
// k16 steps of wgmma m64n128k16 per 128 columns (both operands K-major,
// 128-byte swizzled), and release the stage before only once the products
// on it are done (wgmma.wait_group 1), so the tensor cores always have the
// next stage queued.  The epilogue rounds the fp32 sums to bf16 and stores
// them from registers, while the producer already loads the next tile.
//
// Tiles go n fastest: the blocks running together share A's rows, which
// leave HBM once, and B (a weight) stays in L2.
//
// Half of cuBLASLt's speed on the training shapes so far
// (bench/lm-train-gpu-notes.md, stop 52): a baseline to build on, not used
// by the model.
#include "kernels/gemm.h"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cuda_runtime.h>

namespace {

constexpr int BM = 128, BK = 64, WG_THREADS = 128, CONSUMERS = 2;
constexpr int NT = WG_THREADS * (CONSUMERS + 1);
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;

template <int BN>
struct Cfg {
	static constexpr int ST = BN == 256 ? 4 : 6;  // stages
	static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
	static constexpr uint32_t STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
	static constexpr int SMEM = SW_ATOM_BYTES + ST * STAGE_BYTES + 2 * ST * 8;
};

__device__ __forceinline__ uint32_t saddr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

template <int BN>
__device__ __forceinline__ void produce(const CUtensorMap *ma, const CUtensorMap *mb, bf16 *sA,
					bf16 *sB, uint64_t *full, uint64_t *empty, int tiles,
					int tn, int kt)
{
	using C = Cfg<BN>;
	uint32_t u = 0;
	for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
		const int m0 = tile / tn * BM, n0 = tile % tn * BN;
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % C::ST;
			if (u >= (uint32_t)C::ST)
				mbar_wait(&empty[s], (u / C::ST - 1) & 1);
			mbar_expect_tx(&full[s], C::STAGE_BYTES);
			tma_load_3d(sA + s * C::A_ELEMS, ma, &full[s], ks * BK, m0, 0);
			tma_load_3d(sB + s * C::B_ELEMS, mb, &full[s], ks * BK, n0, 0);
		}
	}
}

// Issue the four k16 steps of one stage: acc (64 x BN) (+)= A_wg B^T.
template <int BN>
__device__ __forceinline__ void issue(float (&acc)[BN / 128][16][4], uint32_t a, uint32_t b,
				      int first)
{
	constexpr uint32_t KSTEP = 16 * 2, HALF = 128 * SLAB_ROW_BYTES;
#pragma unroll
	for (int h = 0; h < BN / 128; h++)
		fence_regs<16>(acc[h]);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BK / 16; kk++) {
		const uint64_t da = sw128_desc(a + kk * KSTEP, 16, SW_ATOM_BYTES);
#pragma unroll
		for (int h = 0; h < BN / 128; h++)
			wgmma_ss_n128(acc[h], da, sw128_desc(b + h * HALF + kk * KSTEP, 16, SW_ATOM_BYTES),
				      !(first && kk == 0));
	}
	wgmma_commit();
}

template <int BN>
__device__ __forceinline__ void consume(bf16 *__restrict__ Cm, const bf16 *sA, const bf16 *sB,
					uint64_t *full, uint64_t *empty, int M, int N, int tiles,
					int tn, int kt)
{
	using Cf = Cfg<BN>;
	const int wg = threadIdx.x / WG_THREADS, warp = threadIdx.x % WG_THREADS / 32;
	const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	float acc[BN / 128][16][4];
	uint32_t u = 0;
	for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
		const int m0 = tile / tn * BM, n0 = tile % tn * BN;
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % Cf::ST;
			mbar_wait(&full[s], (u / Cf::ST) & 1);
			issue<BN>(acc, saddr(sA + s * Cf::A_ELEMS) + wg * 64 * SLAB_ROW_BYTES,
				  saddr(sB + s * Cf::B_ELEMS), ks == 0);
			if (ks > 0) {
				wgmma_wait<1>();
				if (lane == 0)
					mbar_arrive(&empty[(u - 1) % Cf::ST]);
			}
		}
		wgmma_wait<0>();
#pragma unroll
		for (int h = 0; h < BN / 128; h++)
			fence_regs<16>(acc[h]);
		if (lane == 0)
			mbar_arrive(&empty[(u - 1) % Cf::ST]);
		const int r = m0 + wg * 64 + warp * 16 + g;
#pragma unroll
		for (int h = 0; h < BN / 128; h++)
#pragma unroll
			for (int i = 0; i < 16; i++) {
				const int c = n0 + h * 128 + i * 8 + 2 * t;
				if (c >= N)
					continue;
				if (r < M)
					*(uint32_t *)(Cm + (size_t)r * N + c) =
						pack_bf16(acc[h][i][0], acc[h][i][1]);
				if (r + 8 < M)
					*(uint32_t *)(Cm + (size_t)(r + 8) * N + c) =
						pack_bf16(acc[h][i][2], acc[h][i][3]);
			}
	}
}

template <int BN>
__global__ void __launch_bounds__(NT, 1)
gemm_tn_kernel(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
	       bf16 *__restrict__ Cm, int M, int N, int K)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a
#else
	using C = Cfg<BN>;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sA = reinterpret_cast<bf16 *>(base);
	bf16 *sB = sA + C::ST * C::A_ELEMS;
	uint64_t *full = reinterpret_cast<uint64_t *>(sB + C::ST * C::B_ELEMS);
	uint64_t *empty = full + C::ST;
	const int tn = (N + BN - 1) / BN, tiles = (M + BM - 1) / BM * tn, kt = (K + BK - 1) / BK;
	if (threadIdx.x == 0) {
		for (int i = 0; i < C::ST; i++) {
			mbar_init(&full[i], 1);
			mbar_init(&empty[i], CONSUMERS * 4);
		}
		mbar_fence_init();
	}
	__syncthreads();
	if (threadIdx.x / WG_THREADS == CONSUMERS) {
		regs_dealloc<PRODUCER_REGS>();
		if (threadIdx.x % WG_THREADS == 0)
			produce<BN>(&ma, &mb, sA, sB, full, empty, tiles, tn, kt);
	} else {
		regs_alloc<CONSUMER_REGS>();
		consume<BN>(Cm, sA, sB, full, empty, M, N, tiles, tn, kt);
	}
#endif
}

template <int BN>
int launch(uint16_t *Cm, const uint16_t *A, const uint16_t *B, int M, int N, int K,
	   cudaStream_t st)
{
	using C = Cfg<BN>;
	static_assert(C::SMEM <= 227 * 1024, "the stages exceed a block's shared memory");
	CUtensorMap ma, mb;
	if (tma_map_3d(&ma, A, K, M, 1, BM) || tma_map_3d(&mb, B, K, N, 1, BN))
		return -1;
	auto kern = gemm_tn_kernel<BN>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM))
		return -1;
	int dev, sms;
	if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
		return -1;
	const long long tiles = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
	const int grid = tiles < sms ? (int)tiles : sms;
	kern<<<grid, NT, C::SMEM, st>>>(ma, mb, (bf16 *)Cm, M, N, K);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

}  // namespace

extern "C" int gemm_tn_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K,
			    int bn, void *stream)
{
	if (M <= 0 || N <= 0 || K <= 0 || K % 8 || N % 8 || ((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) % 16)
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	if (bn == 256)
		return launch<256>(C, A, B, M, N, K, st);
	if (bn == 128)
		return launch<128>(C, A, B, M, N, K, st);
	return -1;
}
