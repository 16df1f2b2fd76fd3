// rmsnorm_bulk.cu: RMSNorm's backward pass (rmsnorm_bwd_act_cuda's 16-byte
// path, C = 256 G) with its rows brought into shared memory by the copy
// engine (Hopper, sm_90).
//
// rmsnorm.cu's bwd_vec_kernel keeps one row a warp in flight: its loads of x
// and dy, then, after the row's dot product, its load of dx, each a round
// trip to memory with nothing else outstanding; its registers allow two
// blocks of eight warps a multiprocessor.  It ran at 3.6 TB/s on an H200.
// Here each warp owns a ring of ns row slots in shared memory (x and dx in
// fp32, dy in bf16: 10 C bytes a row; 8 C with x in bf16, 6 C with dx too),
// and its lane 0 keeps the next rows' bulk copies in flight, a slot's three
// copies completing on the slot's mbarrier: a multiprocessor has 8 ns rows
// (180 KB at C = 768) on their way while it computes, whatever its registers.
// The arithmetic, dx's bf16 copy and dw's fixed-order partial sums (one
// workspace row a block) are bwd_vec_kernel's; the columns a lane takes
// differ (16-byte chunks k 32 + lane of the row, so that a warp's reads of a
// slot meet no bank conflicts), and so does the order of the dot product's
// additions.  Measured in gpt2s's step on an H100 (--profile 4): 0.1446 ms a
// call against 0.1481 (2.78 against 2.72 TB/s); not yet on an H200.  In a few
// blocks beside a product (bench/overlap.sh) it keeps its pace far better
// than the register-fed kernel (16 blocks: 0.28 against 0.67 ms).  On by
// default; LMPIPE_RMSNORM_BULK=0 gives the register-fed kernel (bulk_on).
#include "rmsnorm_bulk.cuh"
#include "ops_cuda.cuh"
#include "tma.cuh"

using namespace ops;

namespace {

constexpr int BULK_WARPS = 8, MAX_NS = 4;
constexpr size_t BAR_BYTES = BULK_WARPS * MAX_NS * sizeof(uint64_t);
constexpr size_t SMEM_MAX = 200 << 10;  // of the 227 KB a block may take

// Generic-proxy reads of a slot before the copy engine writes it again.
__device__ __forceinline__ void proxy_fence(void)
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int G, typename X, typename DX>
__global__ void __launch_bounds__(BULK_WARPS * WARP, 1)
	bwd_bulk_kernel(DX *dx, bf16 *dx_act, float *partial, const bf16 *dy, const X *x,
			const float *w, const float *rstd, int N, int C, int ns)
{
	constexpr int K = 2 * G;  // chunks of 4 columns a lane
	extern __shared__ __align__(128) unsigned char smem[];
	const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	const uint32_t xb = (uint32_t)(C * sizeof(X)), fb = (uint32_t)(C * sizeof(DX)),
		       hb = (uint32_t)C * 2;
	const size_t slot = (size_t)xb + fb + hb;
	uint64_t *bar = (uint64_t *)smem + warp * MAX_NS;
	unsigned char *ring = smem + BAR_BYTES + (size_t)warp * ns * slot;
	const int first = blockIdx.x * BULK_WARPS + warp, stride = gridDim.x * BULK_WARPS;
	// slot s <- row n: x, dx, dy
	auto fetch = [&](int n, int s) {
		unsigned char *p = ring + s * slot;
		const size_t row = (size_t)n * C;
		mbar_expect_tx(&bar[s], (uint32_t)slot);
		bulk_load(p, x + row, xb, &bar[s]);
		bulk_load(p + xb, dx + row, fb, &bar[s]);
		bulk_load(p + xb + fb, dy + row, hb, &bar[s]);
	};
	if (lane == 0) {
		for (int s = 0; s < ns; s++)
			mbar_init(&bar[s], 1);
		mbar_fence_init();
		for (int s = 0; s < ns && first + s * stride < N; s++)
			fetch(first + s * stride, s);
	}
	__syncwarp();
	float wl[K][4], acc[K][4];
#pragma unroll
	for (int k = 0; k < K; k++) {
		const float4 a = ((const float4 *)w)[k * WARP + lane];
		wl[k][0] = a.x, wl[k][1] = a.y, wl[k][2] = a.z, wl[k][3] = a.w;
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[k][e] = 0;
	}
	int i = 0;  // rows taken
	for (int n = first; n < N; n += stride, i++) {
		const int s = i % ns;
		const float r = rstd[n];
		mbar_wait(&bar[s], (uint32_t)(i / ns) & 1);
		const unsigned char *sp = ring + s * slot;
		const X *xs = (const X *)sp;
		const DX *ds = (const DX *)(sp + xb);
		const bf16 *gs = (const bf16 *)(sp + xb + fb);
		float xv[K][4], gv[K][4], o[K][4], dot = 0;
#pragma unroll
		for (int k = 0; k < K; k++) {
			ld4(xs, k * WARP + lane, xv[k]);
			ld4(ds, k * WARP + lane, o[k]);
			ld4(gs, k * WARP + lane, gv[k]);
#pragma unroll
			for (int e = 0; e < 4; e++)
				dot += wl[k][e] * gv[k][e] * xv[k][e];
		}
		__syncwarp();  // the slot is read: its next row may come
		if (lane == 0 && n + ns * stride < N) {
			proxy_fence();
			fetch(n + ns * stride, s);
		}
		dot = warp_sum(dot);
		const float kf = r * r * r * dot / C;
		const size_t row = (size_t)n * C;
#pragma unroll
		for (int k = 0; k < K; k++) {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				o[k][e] += r * wl[k][e] * gv[k][e] - kf * xv[k][e];
				acc[k][e] += gv[k][e] * xv[k][e] * r;
			}
			const int c = (k * WARP + lane) * 4;
			st4(dx + row + c, o[k]);
			if (dx_act) {
				const __nv_bfloat162 p0 = __floats2bfloat162_rn(o[k][0], o[k][1]);
				const __nv_bfloat162 p1 = __floats2bfloat162_rn(o[k][2], o[k][3]);
				uint2 u;
				u.x = *(const uint32_t *)&p0;
				u.y = *(const uint32_t *)&p1;
				*(uint2 *)(dx_act + row + c) = u;
			}
		}
	}
	// Every copy this warp issued has been waited for; the ring is free.
	__syncthreads();
	float *sdw = (float *)(smem + BAR_BYTES);
#pragma unroll
	for (int k = 0; k < K; k++)
		*(float4 *)(sdw + (size_t)warp * C + (k * WARP + lane) * 4) =
			make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0;
		for (int v = 0; v < BULK_WARPS; v++)
			t += sdw[(size_t)v * C + c];
		partial[(size_t)blockIdx.x * C + c] = t;
	}
}

// The path's switch: on unless LMPIPE_RMSNORM_BULK=0, read at each call
// (test_backend tries both, its rings wrapping included).
bool bulk_on()
{
	const char *v = getenv("LMPIPE_RMSNORM_BULK");
	return !(v && *v == '0');
}

template <int G, typename X, typename DX>
int launch(DX *dx, bf16 *dx_act, float *ws, const bf16 *dy, const X *x, const float *w,
	   const float *rstd, int N, int C, unsigned grid, int ns, size_t smem, cudaStream_t st)
{
	if (cudaFuncSetAttribute(bwd_bulk_kernel<G, X, DX>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
		return -1;
	bwd_bulk_kernel<G, X, DX><<<grid, BULK_WARPS * WARP, smem, st>>>(dx, dx_act, ws, dy, x, w,
									 rstd, N, C, ns);
	return cudaPeekAtLastError() == cudaSuccess ? 0 : -1;
}

template <typename X, typename DX>
int bulk(DX *dx, uint16_t *dx_act, float *ws, const uint16_t *dy, const X *x, const float *w,
	 const float *rstd, int N, int C, unsigned max_blocks, unsigned *blocks, cudaStream_t st)
{
	static int sms = 0, major = 0;
	if (!sms) {
		int dev;
		if (cudaGetDevice(&dev) ||
		    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ||
		    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
			return -1;
	}
	const int G = C / 256;
	const size_t slot = (size_t)C * (sizeof(X) + sizeof(DX) + 2);
	int ns = (int)((SMEM_MAX - BAR_BYTES) / (BULK_WARPS * slot));
	ns = ns > MAX_NS ? MAX_NS : ns;
	if (!bulk_on() || major < 9 || C % 256 || G < 1 || G > 4 || ns < 2 || N < 1)
		return 1;
	unsigned grid = (unsigned)((N + BULK_WARPS - 1) / BULK_WARPS);
	grid = grid < (unsigned)sms ? grid : (unsigned)sms;
	grid = grid < max_blocks ? grid : max_blocks;
	*blocks = grid;
	// the ring, and at the end dw's rows of the block's warps
	size_t smem = BAR_BYTES + (size_t)BULK_WARPS * ns * slot;
	const bf16 *d = (const bf16 *)dy;
	bf16 *a = (bf16 *)dx_act;
	float *p = ws;
	return G == 1 ? launch<1>(dx, a, p, d, x, w, rstd, N, C, grid, ns, smem, st)
	     : G == 2 ? launch<2>(dx, a, p, d, x, w, rstd, N, C, grid, ns, smem, st)
	     : G == 3 ? launch<3>(dx, a, p, d, x, w, rstd, N, C, grid, ns, smem, st)
		      : launch<4>(dx, a, p, d, x, w, rstd, N, C, grid, ns, smem, st);
}

}  // namespace

int rmsnorm_bwd_bulk(float *dx, uint16_t *dx_act, float *ws, const uint16_t *dy, const float *x,
		     const float *w, const float *rstd, int N, int C, unsigned max_blocks,
		     unsigned *blocks, cudaStream_t st)
{
	return bulk(dx, dx_act, ws, dy, x, w, rstd, N, C, max_blocks, blocks, st);
}

int rmsnorm_bwd_bulk(float *dx, uint16_t *dx_act, float *ws, const uint16_t *dy, const bf16 *x,
		     const float *w, const float *rstd, int N, int C, unsigned max_blocks,
		     unsigned *blocks, cudaStream_t st)
{
	return bulk(dx, dx_act, ws, dy, x, w, rstd, N, C, max_blocks, blocks, st);
}

int rmsnorm_bwd_bulk(bf16 *dx, uint16_t *dx_act, float *ws, const uint16_t *dy, const bf16 *x,
		     const float *w, const float *rstd, int N, int C, unsigned max_blocks,
		     unsigned *blocks, cudaStream_t st)
{
	return bulk(dx, dx_act, ws, dy, x, w, rstd, N, C, max_blocks, blocks, st);
}
