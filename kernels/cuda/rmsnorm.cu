// rmsnorm.cu: CUDA twin of RMSNorm (see kernels/rmsnorm.h): fp32 input (the
// residual stream; bf16 in the _bx functions, the stream kept in bf16),
// fp32 gains and rstd; bf16 output y and output gradient dy;
// the backward pass accumulates dx (fp32; bf16 in the _bdx function, the
// stream's gradient kept in bf16) and dw.  One warp a row; the
// backward's dw is summed per warp in shared memory, per block in a fixed
// order into a workspace row, and over the blocks in order by a second
// kernel: no atomics, the same bits run to run.
#include "kernels/rmsnorm.h"
#include "ops_cuda.cuh"
#include "rmsnorm_bulk.cuh"

using namespace ops;

namespace {

template <typename X>
__global__ void fwd_kernel(bf16 *y, float *rstd, const X *x, const float *w, int N, int C,
			   float eps)
{
	int lane = threadIdx.x % WARP;
	for (int n = blockIdx.x * ROW_WARPS + threadIdx.x / WARP; n < N; n += gridDim.x * ROW_WARPS) {
		const X *xr = x + (size_t)n * C;
		float ss = 0;
		for (int c = lane; c < C; c += WARP)
			ss += ld(xr + c) * ld(xr + c);
		ss = warp_sum(ss);
		float r = rsqrtf(ss / C + eps);
		if (lane == 0)
			rstd[n] = r;
		bf16 *yr = y + (size_t)n * C;
		for (int c = lane; c < C; c += WARP)
			yr[c] = to_bf16(ld(xr + c) * r * w[c]);
	}
}

// fwd_kernel for C = 256 G (G <= 4) with 16-byte accesses (bwd_vec_kernel's
// column groups); the same arithmetic.
template <int G, typename X>
__global__ void fwd_vec_kernel(bf16 *y, float *rstd, const X *x, const float *w, int N, int C,
			       float eps)
{
	int lane = threadIdx.x % WARP;
	for (int n = blockIdx.x * ROW_WARPS + threadIdx.x / WARP; n < N; n += gridDim.x * ROW_WARPS) {
		size_t row = (size_t)n * C;
		float xv[G][8];
		float ss = 0;
#pragma unroll
		for (int g = 0; g < G; g++) {
			ld8(x + row + (g * WARP + lane) * 8, xv[g]);
#pragma unroll
			for (int h = 0; h < 2; h++)
				ss += xv[g][4 * h] * xv[g][4 * h] + xv[g][4 * h + 1] * xv[g][4 * h + 1] +
				      xv[g][4 * h + 2] * xv[g][4 * h + 2] +
				      xv[g][4 * h + 3] * xv[g][4 * h + 3];
		}
		ss = warp_sum(ss);
		float r = rsqrtf(ss / C + eps);
		if (lane == 0)
			rstd[n] = r;
#pragma unroll
		for (int g = 0; g < G; g++) {
			int c = (g * WARP + lane) * 8;
			const float4 *pw = (const float4 *)(w + c);
			float4 w0 = pw[0], w1 = pw[1];
			uint4 u;
			__nv_bfloat162 *pu = (__nv_bfloat162 *)&u;
			pu[0] = __floats2bfloat162_rn(xv[g][0] * r * w0.x, xv[g][1] * r * w0.y);
			pu[1] = __floats2bfloat162_rn(xv[g][2] * r * w0.z, xv[g][3] * r * w0.w);
			pu[2] = __floats2bfloat162_rn(xv[g][4] * r * w1.x, xv[g][5] * r * w1.y);
			pu[3] = __floats2bfloat162_rn(xv[g][6] * r * w1.z, xv[g][7] * r * w1.w);
			*(uint4 *)(y + row + c) = u;
		}
	}
}

// dx for each row, and this block's partial dw: each warp sums its rows'
// dw terms into its own shared row (no atomics), then the warps' rows are
// added in a fixed order and written to partial[blockIdx.x].
template <typename X, typename DX>
__global__ void bwd_kernel(DX *dx, float *partial, const bf16 *dy, const X *x,
			   const float *w, const float *rstd, int N, int C)
{
	extern __shared__ float sdw[];
	int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	float *mine = sdw + (size_t)warp * C;
	for (int c = lane; c < C; c += WARP)
		mine[c] = 0;
	for (int n = blockIdx.x * ROW_WARPS + warp; n < N; n += gridDim.x * ROW_WARPS) {
		const X *xr = x + (size_t)n * C;
		const bf16 *dyr = dy + (size_t)n * C;
		float r = rstd[n], dot = 0;
		for (int c = lane; c < C; c += WARP)
			dot += w[c] * ld(dyr + c) * ld(xr + c);
		dot = warp_sum(dot);
		float k = r * r * r * dot / C;
		DX *dxr = dx + (size_t)n * C;
		for (int c = lane; c < C; c += WARP) {
			float g = ld(dyr + c), xc = ld(xr + c);
			st(dxr + c, ld(dxr + c) + (r * w[c] * g - k * xc));
			mine[c] += g * xc * r;
		}
	}
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0;
		for (int i = 0; i < ROW_WARPS; i++)
			t += sdw[(size_t)i * C + c];
		partial[(size_t)blockIdx.x * C + c] = t;
	}
}

// bwd_kernel for C = 256 G (G <= 4) with 16-byte accesses: each lane holds
// G groups of 8 columns, (g 32 + lane) 8.., for every row it takes, and
// sums its dw terms in registers; optionally writes the updated dx as bf16
// too (dx_act: the residual gradient as the next product's input).
template <int G, typename X, typename DX>
__global__ void __launch_bounds__(ROW_WARPS * WARP) bwd_vec_kernel(DX *dx, bf16 *dx_act,
								   float *partial, const bf16 *dy,
								   const X *x, const float *w,
								   const float *rstd, int N, int C)
{
	extern __shared__ float sdw[];
	int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	float wl[G][8], acc[G][8];
#pragma unroll
	for (int g = 0; g < G; g++) {
		const float4 *pw = (const float4 *)(w + (g * WARP + lane) * 8);
		float4 a = pw[0], b = pw[1];
		float t[8] = { a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w };
#pragma unroll
		for (int e = 0; e < 8; e++) {
			wl[g][e] = t[e];
			acc[g][e] = 0;
		}
	}
	for (int n = blockIdx.x * ROW_WARPS + warp; n < N; n += gridDim.x * ROW_WARPS) {
		size_t row = (size_t)n * C;
		float xv[G][8], gv[G][8], dot = 0;
#pragma unroll
		for (int g = 0; g < G; g++) {
			int c = (g * WARP + lane) * 8;
			float t[8];
			ld8(x + row + c, t);
			uint4 d = *(const uint4 *)(dy + row + c);
			const __nv_bfloat162 *pd = (const __nv_bfloat162 *)&d;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 f = __bfloat1622float2(pd[e]);
				gv[g][2 * e] = f.x;
				gv[g][2 * e + 1] = f.y;
			}
#pragma unroll
			for (int e = 0; e < 8; e++) {
				xv[g][e] = t[e];
				dot += wl[g][e] * gv[g][e] * t[e];
			}
		}
		dot = warp_sum(dot);
		float r = rstd[n], k = r * r * r * dot / C;
#pragma unroll
		for (int g = 0; g < G; g++) {
			int c = (g * WARP + lane) * 8;
			float o[8];
			ld8(dx + row + c, o);
#pragma unroll
			for (int e = 0; e < 8; e++) {
				o[e] += r * wl[g][e] * gv[g][e] - k * xv[g][e];
				acc[g][e] += gv[g][e] * xv[g][e] * r;
			}
			st8(dx + row + c, o);
			if (dx_act) {
				uint4 u;
				__nv_bfloat162 *pu = (__nv_bfloat162 *)&u;
#pragma unroll
				for (int e = 0; e < 4; e++)
					pu[e] = __floats2bfloat162_rn(o[2 * e], o[2 * e + 1]);
				*(uint4 *)(dx_act + row + c) = u;
			}
		}
	}
	float *mine = sdw + (size_t)warp * C;
#pragma unroll
	for (int g = 0; g < G; g++)
#pragma unroll
		for (int e = 0; e < 8; e++)
			mine[(g * WARP + lane) * 8 + e] = acc[g][e];
	__syncthreads();
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float t = 0;
		for (int i = 0; i < ROW_WARPS; i++)
			t += sdw[(size_t)i * C + c];
		partial[(size_t)blockIdx.x * C + c] = t;
	}
}

// dx as bf16 (the scalar path's dx_act).
__global__ void act_kernel(bf16 *dst, const float *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		dst[i] = to_bf16(src[i]);
}

// dw[c] += the blocks' partials, in block order.
__global__ void dw_kernel(float *dw, const float *partial, int blocks, int C)
{
	for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
		float t = 0;
		for (int b = 0; b < blocks; b++)
			t += partial[(size_t)b * C + c];
		dw[c] += t;
	}
}

// Few blocks for the backward pass, each over many rows: each block writes
// one row of dw partials.  Shared memory past SMEM_DEFAULT needs opting in.
enum { BWD_BLOCKS = 2 * 132, SMEM_DEFAULT = 48 << 10 };

unsigned row_grid(int N)
{
	unsigned g = grid_for((size_t)N, ROW_WARPS);
	return g < BWD_BLOCKS ? g : BWD_BLOCKS;
}

template <int G, typename X, typename DX>
int launch_vec(DX *dx, bf16 *dx_act, float *ws, const bf16 *dy, const X *x, const float *w,
	       const float *rstd, int N, int C, unsigned g, size_t smem, cudaStream_t st)
{
	if (smem > SMEM_DEFAULT &&
	    cudaFuncSetAttribute(bwd_vec_kernel<G, X, DX>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
		return -1;
	bwd_vec_kernel<G, X, DX><<<g, ROW_WARPS * WARP, smem, st>>>(dx, dx_act, ws, dy, x, w, rstd, N,
								      C);
	return 0;
}

bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

template <typename X>
int fwd(uint16_t *y, float *rstd, const X *x, const float *w, int N, int C, float eps,
	cudaStream_t st)
{
	unsigned g = grid_for((size_t)N, ROW_WARPS);
	int G = C % 256 == 0 ? C / 256 : 0;
	bf16 *yb = (bf16 *)y;
	if (G < 1 || G > 4 || !aligned16(y) || !aligned16(x) || !aligned16(w))
		fwd_kernel<X><<<g, ROW_WARPS * WARP, 0, st>>>(yb, rstd, x, w, N, C, eps);
	else if (G == 1)
		fwd_vec_kernel<1, X><<<g, ROW_WARPS * WARP, 0, st>>>(yb, rstd, x, w, N, C, eps);
	else if (G == 2)
		fwd_vec_kernel<2, X><<<g, ROW_WARPS * WARP, 0, st>>>(yb, rstd, x, w, N, C, eps);
	else if (G == 3)
		fwd_vec_kernel<3, X><<<g, ROW_WARPS * WARP, 0, st>>>(yb, rstd, x, w, N, C, eps);
	else
		fwd_vec_kernel<4, X><<<g, ROW_WARPS * WARP, 0, st>>>(yb, rstd, x, w, N, C, eps);
	return launched();
}

// dx_act only where DX is fp32.
template <typename X, typename DX>
int bwd(DX *dx, uint16_t *dx_act, float *dw, const uint16_t *dy, const X *x, const float *w,
	const float *rstd, int N, int C, void *ws, unsigned blocks, cudaStream_t st)
{
	size_t smem = (size_t)ROW_WARPS * C * sizeof(float);
	unsigned g = row_grid(N);
	if (blocks && blocks < g)
		g = blocks;
	int G = C % 256 == 0 ? C / 256 : 0, rc = 0;
	bool vec = G >= 1 && G <= 4 && aligned16(dx) && aligned16(dy) && aligned16(x) &&
		   aligned16(w) && (!dx_act || aligned16(dx_act));
	const bf16 *d = (const bf16 *)dy;
	bf16 *da = (bf16 *)dx_act;
	if (vec) {
		/* rows by bulk copies where possible, unless LMPIPE_RMSNORM_BULK=0 (rmsnorm_bulk.cu) */
		rc = rmsnorm_bwd_bulk(dx, dx_act, (float *)ws, dy, x, w, rstd, N, C, g, &g, st);
		if (rc <= 0) {
			if (rc)
				return rc;
			dw_kernel<<<grid_for((size_t)C), BLOCK, 0, st>>>(dw, (const float *)ws, (int)g, C);
			return launched();
		}
		rc = G == 1 ? launch_vec<1>(dx, da, (float *)ws, d, x, w, rstd, N, C, g, smem, st)
		   : G == 2 ? launch_vec<2>(dx, da, (float *)ws, d, x, w, rstd, N, C, g, smem, st)
		   : G == 3 ? launch_vec<3>(dx, da, (float *)ws, d, x, w, rstd, N, C, g, smem, st)
			    : launch_vec<4>(dx, da, (float *)ws, d, x, w, rstd, N, C, g, smem, st);
		if (rc)
			return rc;
	} else {
		if (smem > SMEM_DEFAULT &&
		    cudaFuncSetAttribute(bwd_kernel<X, DX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					 (int)smem) != cudaSuccess)
			return -1;
		bwd_kernel<X, DX><<<g, ROW_WARPS * WARP, smem, st>>>(dx, (float *)ws, d, x, w, rstd, N, C);
		if (dx_act && sizeof(DX) == sizeof(float))
			act_kernel<<<grid_for((size_t)N * C), BLOCK, 0, st>>>(da, (const float *)dx,
									      (size_t)N * C);
	}
	dw_kernel<<<grid_for((size_t)C), BLOCK, 0, st>>>(dw, (const float *)ws, (int)g, C);
	return launched();
}

}  // namespace

extern "C" int rmsnorm_fwd_cuda(uint16_t *y, float *rstd, const float *x, const float *w, int N,
				int C, float eps, void *stream)
{
	return fwd(y, rstd, x, w, N, C, eps, (cudaStream_t)stream);
}

extern "C" int rmsnorm_fwd_bx_cuda(uint16_t *y, float *rstd, const uint16_t *x, const float *w,
				   int N, int C, float eps, void *stream)
{
	return fwd(y, rstd, (const bf16 *)x, w, N, C, eps, (cudaStream_t)stream);
}

extern "C" size_t rmsnorm_bwd_cuda_workspace(int N, int C)
{
	return (size_t)row_grid(N) * C * sizeof(float);
}

extern "C" int rmsnorm_bwd_cuda(float *dx, float *dw, const uint16_t *dy, const float *x,
				const float *w, const float *rstd, int N, int C, void *ws, void *stream)
{
	return rmsnorm_bwd_act_cuda(dx, NULL, dw, dy, x, w, rstd, N, C, ws, stream);
}

extern "C" int rmsnorm_bwd_act_cuda(float *dx, uint16_t *dx_act, float *dw, const uint16_t *dy,
				    const float *x, const float *w, const float *rstd, int N, int C,
				    void *ws, void *stream)
{
	return rmsnorm_bwd_act_cuda_blocks(dx, dx_act, dw, dy, x, w, rstd, N, C, ws, 0, stream);
}

extern "C" int rmsnorm_bwd_act_cuda_blocks(float *dx, uint16_t *dx_act, float *dw,
					   const uint16_t *dy, const float *x, const float *w,
					   const float *rstd, int N, int C, void *ws,
					   unsigned blocks, void *stream)
{
	return bwd(dx, dx_act, dw, dy, x, w, rstd, N, C, ws, blocks, (cudaStream_t)stream);
}

extern "C" int rmsnorm_bwd_act_bx_cuda_blocks(float *dx, uint16_t *dx_act, float *dw,
					      const uint16_t *dy, const uint16_t *x, const float *w,
					      const float *rstd, int N, int C, void *ws,
					      unsigned blocks, void *stream)
{
	return bwd(dx, dx_act, dw, dy, (const bf16 *)x, w, rstd, N, C, ws, blocks,
		   (cudaStream_t)stream);
}

extern "C" int rmsnorm_bwd_bx_bdx_cuda_blocks(uint16_t *dx, float *dw, const uint16_t *dy,
					      const uint16_t *x, const float *w, const float *rstd,
					      int N, int C, void *ws, unsigned blocks, void *stream)
{
	return bwd((bf16 *)dx, NULL, dw, dy, (const bf16 *)x, w, rstd, N, C, ws, blocks,
		   (cudaStream_t)stream);
}
