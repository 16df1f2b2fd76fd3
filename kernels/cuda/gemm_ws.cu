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
#include "kernels/gemm.h"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdlib.h>

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
	static constexpr int ST = BN == 256 ? 4 : 6;  // stages
	static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, B_ROWS = BN / CL;
	static constexpr uint32_t STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
	static constexpr int SMEM = SW_ATOM_BYTES + ST * STAGE_BYTES + 2 * ST * 8;
};

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
	asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(a)
		     : "memory");
}

// The tiles of one block: the cluster takes tile pairs (row blocks 2i,
// 2i + 1 when CL = 2) n fastest; a block its rank's row block of each.
struct Walk {
	int tn, ctiles, first, step, rank, cl;
	__device__ __forceinline__ int m0(int ct) const { return (ct / tn * cl + rank) * BM; }
};

template <int BN, int CL>
__device__ __forceinline__ void produce(const CUtensorMap *ma, const CUtensorMap *mb, bf16 *sA,
					bf16 *sB, uint64_t *full, uint64_t *empty, const Walk &w,
					int kt)
{
	using C = Cfg<BN, CL>;
	uint32_t u = 0;
	for (int ct = w.first; ct < w.ctiles; ct += w.step) {
		const int m0 = w.m0(ct), n0 = ct % w.tn * BN;
		for (int ks = 0; ks < kt; ks++, u++) {
			const int s = u % C::ST;
			if (u >= (uint32_t)C::ST)
				mbar_wait(&empty[s], (u / C::ST - 1) & 1);
			mbar_expect_tx(&full[s], C::STAGE_BYTES);
			tma_load_3d(sA + s * C::A_ELEMS, ma, &full[s], ks * BK, m0, 0);
			bf16 *b = sB + s * C::B_ELEMS + w.rank * C::B_ROWS * BK;
			if constexpr (CL == 1)
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

template <int BN, int CL>
__device__ __forceinline__ void consume(bf16 *__restrict__ Cm, const bf16 *sA, const bf16 *sB,
					uint64_t *full, uint64_t *empty, int M, int N,
					const Walk &w, int kt)
{
	using Cf = Cfg<BN, CL>;
	const int wg = threadIdx.x / WG_THREADS, warp = threadIdx.x % WG_THREADS / 32;
	const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	float acc[BN / 8][4];
	uint32_t u = 0;
	for (int ct = w.first; ct < w.ctiles; ct += w.step) {
		const int m0 = w.m0(ct), n0 = ct % w.tn * BN;
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
}

template <int BN, int CL>
__global__ void __launch_bounds__(NT, 1)
gemm_tn_kernel(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
	       bf16 *__restrict__ Cm, int M, int N, int K)
{
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
	__trap();  // built without sm_90a
#else
	using C = Cfg<BN, CL>;
	extern __shared__ unsigned char smem_raw[];
	uintptr_t base = ((uintptr_t)smem_raw + SW_ATOM_BYTES - 1) & ~(uintptr_t)(SW_ATOM_BYTES - 1);
	bf16 *sA = reinterpret_cast<bf16 *>(base);
	bf16 *sB = sA + C::ST * C::A_ELEMS;
	uint64_t *full = reinterpret_cast<uint64_t *>(sB + C::ST * C::B_ELEMS);
	uint64_t *empty = full + C::ST;
	Walk w;
	w.cl = CL;
	w.tn = (N + BN - 1) / BN;
	w.ctiles = ((M + BM - 1) / BM + CL - 1) / CL * w.tn;
	w.first = blockIdx.x / CL;
	w.step = gridDim.x / CL;
	w.rank = CL == 1 ? 0 : (int)cg::this_cluster().block_rank();
	const int kt = (K + BK - 1) / BK;
	if (threadIdx.x == 0) {
		for (int i = 0; i < C::ST; i++) {
			mbar_init(&full[i], 1);
			mbar_init(&empty[i], WARPS * CL);
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
			produce<BN, CL>(&ma, &mb, sA, sB, full, empty, w, kt);
	} else {
		regs_alloc<CONSUMER_REGS>();
		consume<BN, CL>(Cm, sA, sB, full, empty, M, N, w, kt);
	}
	if constexpr (CL == 2)
		cg::this_cluster().sync();  // no block leaves while the other may still signal it
#endif
}

template <int BN, int CL>
int launch(uint16_t *Cm, const uint16_t *A, const uint16_t *B, int M, int N, int K,
	   cudaStream_t st)
{
	using C = Cfg<BN, CL>;
	static_assert(C::SMEM <= 227 * 1024, "the stages exceed a block's shared memory");
	CUtensorMap ma, mb;
	if (tma_map_3d(&ma, A, K, M, 1, BM) || tma_map_3d(&mb, B, K, N, 1, C::B_ROWS))
		return -1;
	auto kern = gemm_tn_kernel<BN, CL>;
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM))
		return -1;
	int dev, sms;
	if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
		return -1;
	const long long ctiles = (long long)(((M + BM - 1) / BM + CL - 1) / CL) * ((N + BN - 1) / BN);
	const int clusters = ctiles < sms / CL ? (int)ctiles : sms / CL;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];
	attr[0].id = cudaLaunchAttributeClusterDimension;
	attr[0].val.clusterDim.x = CL;
	attr[0].val.clusterDim.y = 1;
	attr[0].val.clusterDim.z = 1;
	cfg.gridDim = dim3(clusters * CL);
	cfg.blockDim = dim3(NT);
	cfg.dynamicSmemBytes = C::SMEM;
	cfg.stream = st;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	if (cudaLaunchKernelEx(&cfg, kern, ma, mb, (bf16 *)Cm, M, N, K) != cudaSuccess)
		return -1;
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

}  // namespace

extern "C" int gemm_tn_cuda(uint16_t *C, const uint16_t *A, const uint16_t *B, int M, int N, int K,
			    int bn, void *stream)
{
	if (M <= 0 || N <= 0 || K <= 0 || K % 8 || N % 8 || ((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) % 16)
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	const char *e = getenv("LMPIPE_GEMM_CLUSTER");
	const int cl = e && *e ? atoi(e) : 1;
	if (bn == 256)
		return cl == 2 ? launch<256, 2>(C, A, B, M, N, K, st) : launch<256, 1>(C, A, B, M, N, K, st);
	if (bn == 128)
		return cl == 2 ? launch<128, 2>(C, A, B, M, N, K, st) : launch<128, 1>(C, A, B, M, N, K, st);
	return -1;
}
