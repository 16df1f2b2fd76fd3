// decode_step.cu: a decoding step of one token as one persistent kernel
// (see kernels/decode_step.h).  Run op by op, such a step is a chain of
// about 27 small kernels, each a few microseconds of dependent latency (a
// wait for the kernel before, a first load, a reduction).  Here one block
// per multiprocessor runs five phases a layer:
//   q/k/v      the RMSNorm'd q/k/v products, a warp per pair of rows that
//              RoPE rotates together: the rotated query into y, the
//              rotated key and the value into the cache;
//   attention  a block per key/value head: its query heads' attention
//              over the cache, 128 threads a head, each output over its
//              query;
//   output     x2 = x + y Wo^T;
//   gate/up    sw = swiglu(RMSNorm(x2) Wgu^T);
//   down       x = x2 + sw Wd^T;
// then the head's logits into the token's row.  Between phases the grid
// meets at a barrier in device memory (a counter every block adds to and
// waits on).  What keeps a phase short is that its critical path is one
// load of its activations, by each warp that needs them:
//   - a phase's outputs are dealt to the blocks first and their warps
//     second, so every block has a few;
//   - each warp copies the weight rows of its outputs into a region of
//     shared memory kept for that phase (cp.async) a layer ahead, and the
//     attention's cached keys and values a phase ahead;
//   - a warp reads an RMSNorm's input row into registers and finds its
//     statistic alone (its lanes hold the whole row), with no barrier of
//     the block.
// What one block writes and another reads after a barrier is read with
// plain loads: the barrier's acquire invalidates the reading
// multiprocessor's L1, and the warps of a block that read the same
// activations then share its L1 lines instead of each asking L2.
//
// A row's products are summed in another order than the op-by-op kernels
// (matmul_small.cu): the results agree within rounding, not bit for bit
// (tests/gpu/test_decode.c compares the two).
#include "kernels/decode_step.h"
#include "decode_dev.cuh"
#include "mma.cuh"

using namespace ops;

namespace {

enum {
	THREADS = 512,
	WARPS = THREADS / WARP,
	GROUPS = THREADS / ATTN_THREADS,   // query heads attended to at once by a block
	SMEM_MAX = 226 * 1024,             // dynamic shared memory, at most
	ROWS_MAX = 32 * 1024,              // staged rows of a phase, at most
	HEAD_MAX = 96 * 1024,              // staged rows of the head, at most
	KV_MAX = 64 * 1024,                // the staged keys and values, at most
	AHEAD = 4,                         // cp.async groups committed after a phase's own
	XC_MAX = 4,                        // pieces of 8 of a row a lane holds: C <= 1024
};

// Every block waits here until all gridDim.x blocks have arrived: the
// target'th arrival overall (targets grow by gridDim.x a barrier).  Thread
// 0 adds with release semantics (the block barrier before orders the
// block's writes before it) and acquire semantics (the last to arrive
// polls no more), and polls with acquire loads: an acquire also drops the
// multiprocessor's L1 lines, so that the block's plain loads after the
// barrier see what the other blocks wrote before it.
__device__ __forceinline__ void grid_sync(unsigned *count, unsigned target)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned v;
		asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(v) : "l"(count) : "memory");
		while (v + 1 < target) {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
			v--;
		}
	}
	__syncthreads();
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__host__ __device__ __forceinline__ size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }
__host__ __device__ __forceinline__ size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

// The phases of a layer (and the head), each with a shared-memory region
// for its staged rows (the attention's: its cached keys and values).
enum phase { P_QKV, P_ATTN, P_OUT, P_GATE_UP, P_DOWN, P_HEAD, PHASES };

// The dynamic shared memory, in byte offsets (the same in every block):
// the regions, then the attention's queries, scratch and scores.
struct layout {
	size_t reg[PHASES], room[PHASES];  // a region's offset and size
	size_t q, am, sc, bytes;
	bool kv_staged;
};

__host__ __device__ inline size_t attn_smem_bytes(int D)
{
	return D == 32 ? sizeof(attn_smem<32>) : D == 64 ? sizeof(attn_smem<64>) : sizeof(attn_smem<128>);
}

// Slots (outputs, or for q/k/v pairs of rows) of block b of G in a phase
// of n: b, b + G, b + 2G, ...
__host__ __device__ __forceinline__ size_t slots(size_t n, size_t b, size_t G)
{
	return n > b ? (n - b + G - 1) / G : 0;
}

// For a grid of G blocks (block 0 has the most slots).  A phase's rows
// past its region's room are read from global memory instead.
__host__ __device__ inline layout layout_of(const decode_step_args &a, int G)
{
	const decode_shape &s = a.s;
	size_t D = s.D, C = a.C, F = a.F;
	size_t pairs = (size_t)(s.H + 2 * s.Hkv) * (D / 2);
	size_t want[PHASES] = {
		slots(pairs, 0, G) * 2 * C * 2,
		2 * (size_t)s.n_ctx * D * 2,
		slots(C, 0, G) * C * 2,
		slots(F, 0, G) * 2 * C * 2,
		slots(C, 0, G) * F * 2,
		slots(a.V, 0, G) * C * 2,
	};
	layout L;
	L.kv_staged = want[P_ATTN] <= KV_MAX;
	size_t at = 0;
	for (int p = 0; p < PHASES; p++) {
		size_t cap = p == P_HEAD ? HEAD_MAX : p == P_ATTN ? (L.kv_staged ? KV_MAX : 0) : ROWS_MAX;
		L.room[p] = up16(smaller(want[p], cap));
		L.reg[p] = at;
		at += L.room[p];
	}
	L.q = at;
	L.am = L.q + up16((size_t)s.H / s.Hkv * D * 2);
	L.sc = L.am + up16(GROUPS * attn_smem_bytes(s.D));
	L.bytes = L.sc + (size_t)GROUPS * s.n_ctx * sizeof(float);
	return L;
}

__device__ __forceinline__ size_t cache_off(const decode_step_args &a, int l, int g, int p)
{
	const decode_shape &s = a.s;
	return ((((size_t)l * a.n_slots + a.slot[0]) * s.Hkv + g) * s.n_ctx + (size_t)p) * s.D;
}

// One piece: w (8 bf16) . x (8 fp32).
__device__ __forceinline__ float dot8(uint4 wv, float4 xa, float4 xb)
{
	const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)&wv;
	float2 f0 = __bfloat1622float2(w2[0]), f1 = __bfloat1622float2(w2[1]);
	float2 f2 = __bfloat1622float2(w2[2]), f3 = __bfloat1622float2(w2[3]);
	return f0.x * xa.x + f0.y * xa.y + f1.x * xa.z + f1.y * xa.w + f2.x * xb.x + f2.y * xb.y +
	       f3.x * xb.z + f3.y * xb.w;
}

// A lane's pieces c = lane, lane + WARP, ... of an RMSNorm'd row of n
// (<= 8 WARP XC) in registers: a warp holds the whole row.
template <int XC> struct xrow {
	float4 v[XC][2];
	// Row x (fp32 [n]) times the gains g; returns its rstd (RMSNorm with
	// eps), found by this warp alone.
	__device__ __forceinline__ float load(const float *x, const float *g, int n, float eps)
	{
		int lane = threadIdx.x % WARP;
		float ss = 0;
#pragma unroll
		for (int j = 0; j < XC; j++) {
			int c = lane + j * WARP;
			if (c < n / 8) {
				float4 xa = ((const float4 *)x)[2 * c], xb = ((const float4 *)x)[2 * c + 1];
				float4 ga = ((const float4 *)g)[2 * c], gb = ((const float4 *)g)[2 * c + 1];
				ss += xa.x * xa.x + xa.y * xa.y + xa.z * xa.z + xa.w * xa.w + xb.x * xb.x + xb.y * xb.y +
				      xb.z * xb.z + xb.w * xb.w;
				v[j][0] = make_float4(xa.x * ga.x, xa.y * ga.y, xa.z * ga.z, xa.w * ga.w);
				v[j][1] = make_float4(xb.x * gb.x, xb.y * gb.y, xb.z * gb.z, xb.w * gb.w);
			}
		}
		return rsqrtf(warp_sum(ss) / n + eps);
	}
	// The lane's part of row w (bf16 [n], shared or global memory) . x.
	__device__ __forceinline__ float dot(const bf16 *w, int n) const
	{
		int lane = threadIdx.x % WARP;
		float acc = 0;
#pragma unroll
		for (int j = 0; j < XC; j++) {
			int c = lane + j * WARP;
			if (c < n / 8)
				acc += dot8(((const uint4 *)w)[c], v[j][0], v[j][1]);
		}
		return acc;
	}
};

// The lane's part of row w (bf16 [n]) . act (bf16 [n], written by other
// blocks).
__device__ __forceinline__ float act_dot(const bf16 *w, const bf16 *act, int n)
{
	int lane = threadIdx.x % WARP;
	float acc = 0;
#pragma unroll 4
	for (int c = lane; c < n / 8; c += WARP)
		fma8(&acc, ((const uint4 *)w)[c], ((const uint4 *)act)[c]);
	return acc;
}

// cp.async of rows k = 0 .. count-1 of `bytes` each (a multiple of 16)
// from rowp(k) to buf, `per` rows a slot: slot k's rows by the warp that
// computes with them, warp k % WARPS, which so waits for no other warp
// (the caller commits the group).
template <typename P> __device__ void stage_rows(char *buf, int count, int per, int bytes, P rowp)
{
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	for (int k = warp * per; k < count; k += WARPS * per)
		for (int r = k; r < k + per && r < count; r++) {
			const char *src = (const char *)rowp(r);
			char *dst = buf + (size_t)r * bytes;
			for (int c = lane * 16; c < bytes; c += WARP * 16)
				cp_async16(dst + c, src + c, true);
		}
}

// The output of this block's slot k.
__device__ __forceinline__ int out_of(int k) { return (int)blockIdx.x + (int)gridDim.x * k; }

// The rows of this block's slots of a phase of n (per rows a slot, of
// `bytes`) that fit in region p.
__device__ __forceinline__ int staged(const layout &L, int p, int n, int per, int bytes)
{
	int rows = (int)slots(n, blockIdx.x, gridDim.x) * per;
	int fit = (int)(L.room[p] / ((size_t)bytes * per)) * per;
	return rows < fit ? rows : fit;
}

// Row k of this block's staged rows in region p (of `bytes`), or else row
// `row` of W.
__device__ __forceinline__ const bf16 *row_at(char *dyn, const layout &L, int p, int k, int st, int bytes,
					      const uint16_t *W, size_t row)
{
	return k < st ? (const bf16 *)(dyn + L.reg[p] + (size_t)k * bytes) : (const bf16 *)W + row * (bytes / 2);
}

// A rotation pair's rows of Wqkv: pair j is head j / (D/2), element
// j % (D/2), rows (of that head's) d and d + D/2.
__device__ __forceinline__ int pair_row(int j, int D, int second)
{
	int half = D / 2;
	return (j / half) * D + j % half + second * half;
}

// Phase p's weight rows of layer l for this block into its region (for the
// attention: the cached keys and values of its key/value head at the
// positions before the token's), as one cp.async group: an empty one for
// p = PHASES or a layer past the last.
template <int p, int D> __device__ void stage(const decode_step_args &a, int l, char *dyn, const layout &L)
{
	const decode_shape &s = a.s;
	int C = a.C, F = a.F;
	char *buf = dyn + L.reg[p < PHASES ? p : 0];
	if constexpr (p == P_HEAD) {
		stage_rows(buf, staged(L, p, a.V, 1, C * 2), 1, C * 2,
			   [&](int k) { return a.head + (size_t)out_of(k) * C; });
	} else if constexpr (p < PHASES) {
		const decode_step_layer &ly = a.layer[l < a.L ? l : 0];
		if (l >= a.L) {
		} else if constexpr (p == P_QKV) {
			int pairs = (s.H + 2 * s.Hkv) * (D / 2);
			stage_rows(buf, staged(L, p, pairs, 2, C * 2), 2, C * 2,
				   [&](int k) { return ly.wqkv + (size_t)pair_row(out_of(k / 2), D, k % 2) * C; });
		} else if constexpr (p == P_ATTN) {
			int g = blockIdx.x;
			if (L.kv_staged && g < s.Hkv) {
				size_t half = (size_t)s.n_ctx * D * 2;
				const char *K = (const char *)(a.kc + cache_off(a, l, g, 0));
				const char *V = (const char *)(a.vc + cache_off(a, l, g, 0));
				int chunks = a.pos[0] * D * 2 / 16;
				for (int t = threadIdx.x; t < 2 * chunks; t += THREADS) {
					bool v = t >= chunks;
					size_t c = (size_t)(v ? t - chunks : t) * 16;
					cp_async16(buf + (v ? half : 0) + c, (v ? V : K) + c, true);
				}
			}
		} else if constexpr (p == P_OUT) {
			stage_rows(buf, staged(L, p, C, 1, C * 2), 1, C * 2,
				   [&](int k) { return ly.wo + (size_t)out_of(k) * C; });
		} else if constexpr (p == P_GATE_UP) {
			// slot k's gate row into row 2k, its up row into row 2k + 1
			stage_rows(buf, staged(L, p, F, 2, C * 2), 2, C * 2,
				   [&](int k) { return ly.wgu + ((size_t)out_of(k / 2) + (k % 2) * F) * C; });
		} else {
			stage_rows(buf, staged(L, p, C, 1, F * 2), 1, F * 2,
				   [&](int k) { return ly.wdown + (size_t)out_of(k) * F; });
		}
	}
	cp_async_commit();
}

// This warp's staged rows have arrived (the AHEAD cp.async groups
// committed after its phase's may still be in flight).
__device__ __forceinline__ void rows_ready()
{
	cp_async_wait_group<AHEAD>();
	__syncwarp();
}

// The q/k/v phase: per pair slot the two rows' products with RMSNorm(x),
// rounded to bf16; RoPE on a query or key pair; the query into y (the
// attention reads it and writes its output over it), the key and the value
// into the cache.
template <int D, int XC> __device__ void phase_qkv(const decode_step_args &a, int l, char *dyn, const layout &L)
{
	const decode_shape &s = a.s;
	const decode_step_layer &ly = a.layer[l];
	int C = a.C, half = D / 2, pairs = (s.H + 2 * s.Hkv) * half, p = a.pos[0];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int st = staged(L, P_QKV, pairs, 2, C * 2);
	xrow<XC> x;
	float rs = x.load(a.x, ly.ln1, C, a.eps);
	rows_ready();
	for (int k = warp;; k += WARPS) {
		int j = out_of(k);
		if (j >= pairs)
			break;
		int hh = j / half, d = j % half;
		bool rotated = hh < s.H + s.Hkv;
		float2 cs = lane == 0 && rotated ? *(const float2 *)(a.cs + ((size_t)p * half + d) * 2)
						 : make_float2(0, 0);
		float s0 = warp_sum(x.dot(row_at(dyn, L, P_QKV, 2 * k, st, C * 2, ly.wqkv, pair_row(j, D, 0)), C));
		float s1 = warp_sum(x.dot(row_at(dyn, L, P_QKV, 2 * k + 1, st, C * 2, ly.wqkv, pair_row(j, D, 1)), C));
		if (lane)
			continue;
		bf16 v0 = to_bf16(s0 * rs), v1 = to_bf16(s1 * rs);
		bf16 *o = hh < s.H	      ? (bf16 *)a.y + (size_t)hh * D
			  : hh < s.H + s.Hkv ? (bf16 *)a.kc + cache_off(a, l, hh - s.H, p)
					      : (bf16 *)a.vc + cache_off(a, l, hh - s.H - s.Hkv, p);
		if (rotated) {
			rope_pair(o + d, o + d + half, __bfloat162float(v0), __bfloat162float(v1), cs.x, cs.y);
		} else {
			o[d] = v0;
			o[d + half] = v1;
		}
	}
}

// The attention phase: per key/value head g (a block each) the attention
// of its query heads (their rotated queries in y) over the cache, each
// head's output over its query.  The block's first head has its keys and
// values staged; the token's own (written by other blocks) join them.
template <int D> __device__ void phase_attn(const decode_step_args &a, int l, char *dyn, const layout &L)
{
	const decode_shape &s = a.s;
	int qh = s.H / s.Hkv, tg = threadIdx.x / ATTN_THREADS, p = a.pos[0];
	float *sc = (float *)(dyn + L.sc) + (size_t)tg * s.n_ctx;
	bf16 *q = (bf16 *)(dyn + L.q);
	attn_smem<D> *am = (attn_smem<D> *)(dyn + L.am);
	cp_async_wait_group<AHEAD>();
	for (int g = blockIdx.x; g < s.Hkv; g += gridDim.x) {
		bool kvs = g == (int)blockIdx.x && L.kv_staged;
		const bf16 *Kc = (const bf16 *)a.kc + cache_off(a, l, g, 0);
		const bf16 *Vc = (const bf16 *)a.vc + cache_off(a, l, g, 0);
		bf16 *ks = (bf16 *)(dyn + L.reg[P_ATTN]), *vs = ks + (size_t)s.n_ctx * D;
		bf16 *y = (bf16 *)a.y + (size_t)g * qh * D;
		for (int t = threadIdx.x; t < qh * D / 8; t += THREADS)
			((uint4 *)q)[t] = ((const uint4 *)y)[t];
		if (kvs)
			for (int t = threadIdx.x; t < D / 4; t += THREADS) {
				int c = t % (D / 8);
				bf16 *dst = (t < D / 8 ? ks : vs) + (size_t)p * D;
				((uint4 *)dst)[c] = ((const uint4 *)((t < D / 8 ? Kc : Vc) + (size_t)p * D))[c];
			}
		__syncthreads();
		const bf16 *K = kvs ? ks : Kc, *V = kvs ? vs : Vc;
		for (int j = tg; j < qh; j += GROUPS)
			attn_row<D>(y + (size_t)j * D, q + j * D, K, V, p + 1, a.scale, am[tg], sc,
				    threadIdx.x % ATTN_THREADS, 1 + tg);
		__syncthreads();
	}
}

// out = res + act . W^T, an output a slot: the output projection (act y,
// res x, out x2) and the down projection (act sw, res x2, out x).
template <int p>
__device__ void phase_proj(const decode_step_args &a, char *dyn, const layout &L, const uint16_t *W,
			   const bf16 *act, const float *res, float *out, int n)
{
	int C = a.C, warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int st = staged(L, p, C, 1, n * 2);
	rows_ready();
	for (int k = warp;; k += WARPS) {
		int o = out_of(k);
		if (o >= C)
			break;
		float r = lane == 0 ? res[o] : 0;
		float sum = warp_sum(act_dot(row_at(dyn, L, p, k, st, n * 2, W, o), act, n));
		if (lane == 0)
			out[o] = r + sum;
	}
}

// sw = swiglu(RMSNorm(x2) Wgu^T), the gate and up values rounded to bf16
// first (as the op-by-op path stores them).
template <int XC> __device__ void phase_gate_up(const decode_step_args &a, int l, char *dyn, const layout &L)
{
	int C = a.C, F = a.F, warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	const uint16_t *W = a.layer[l].wgu;
	int st = staged(L, P_GATE_UP, F, 2, C * 2);
	xrow<XC> x;
	float rs = x.load(a.x2, a.layer[l].ln2, C, a.eps);
	rows_ready();
	for (int k = warp;; k += WARPS) {
		int f = out_of(k);
		if (f >= F)
			break;
		float sg = warp_sum(x.dot(row_at(dyn, L, P_GATE_UP, 2 * k, st, C * 2, W, f), C));
		float su = warp_sum(x.dot(row_at(dyn, L, P_GATE_UP, 2 * k + 1, st, C * 2, W, (size_t)F + f), C));
		if (lane == 0)
			((bf16 *)a.sw)[f] =
				glu_act(__bfloat162float(to_bf16(sg * rs)), __bfloat162float(to_bf16(su * rs)));
	}
}

// The logits: the final RMSNorm and the head, rounded to bf16 (as the op-
// by-op path's logits are), into the token's row of rows as fp32.
template <int XC> __device__ void phase_head(const decode_step_args &a, char *dyn, const layout &L)
{
	int C = a.C, V = a.V, warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int st = staged(L, P_HEAD, V, 1, C * 2);
	float *row = a.rows + (size_t)a.row[0] * V;
	xrow<XC> x;
	float rs = x.load(a.x, a.lnf, C, a.eps);
	cp_async_wait_all();
	__syncwarp();
	for (int k = warp;; k += WARPS) {
		int o = out_of(k);
		if (o >= V)
			break;
		float sum = warp_sum(x.dot(row_at(dyn, L, P_HEAD, k, st, C * 2, a.head, o), C));
		if (lane == 0)
			row[o] = __bfloat162float(to_bf16(sum * rs));
	}
}

// XC: the pieces of 8 of a row a lane holds (C <= 256 XC).
// (L: layout_of(a, gridDim.x), a parameter so that it stays in constant
// memory rather than registers.)
template <int D, int XC>
__global__ void __launch_bounds__(THREADS, 1) step_kernel(const __grid_constant__ decode_step_args a,
							  const __grid_constant__ layout L)
{
	extern __shared__ __align__(16) char dyn[];
	int C = a.C, F = a.F;
	// Each phase's rows for layer l + 1 are copied in right after its run
	// at layer l (the head's after the last q/k/v phase), so that they
	// arrive during the phases between; a phase then waits for all but
	// the AHEAD groups committed after its own.  The first weights need
	// nothing from the kernels before; the cache at the position they
	// pass on does.
	stage<P_QKV, D>(a, 0, dyn, L);
	pdl_wait();
	stage<P_ATTN, D>(a, 0, dyn, L);
	stage<P_OUT, D>(a, 0, dyn, L);
	stage<P_GATE_UP, D>(a, 0, dyn, L);
	stage<P_DOWN, D>(a, 0, dyn, L);
	unsigned target = 0, G = gridDim.x;
	for (int l = 0; l < a.L; l++) {
		const decode_step_layer &ly = a.layer[l];
		phase_qkv<D, XC>(a, l, dyn, L);
		if (l + 1 < a.L)
			stage<P_QKV, D>(a, l + 1, dyn, L);
		else
			stage<P_HEAD, D>(a, 0, dyn, L);
		grid_sync(a.sync, target += G);
		phase_attn<D>(a, l, dyn, L);
		stage<P_ATTN, D>(a, l + 1, dyn, L);
		grid_sync(a.sync, target += G);
		phase_proj<P_OUT>(a, dyn, L, ly.wo, (const bf16 *)a.y, a.x, a.x2, C);
		stage<P_OUT, D>(a, l + 1, dyn, L);
		grid_sync(a.sync, target += G);
		phase_gate_up<XC>(a, l, dyn, L);
		stage<P_GATE_UP, D>(a, l + 1, dyn, L);
		grid_sync(a.sync, target += G);
		phase_proj<P_DOWN>(a, dyn, L, ly.wdown, (const bf16 *)a.sw, a.x2, a.x, F);
		stage<P_DOWN, D>(a, l + 1, dyn, L);
		grid_sync(a.sync, target += G);
	}
	pdl_trigger();
	phase_head<XC>(a, dyn, L);
	// every block has passed the last barrier once it counts itself out
	// here: the last one leaves the words zero for the next step
	if (threadIdx.x == 0 && atomicAdd(a.sync + 1, 1u) == G - 1) {
		a.sync[0] = 0;
		a.sync[1] = 0;
	}
}

static int aligned(const void *p) { return !((uintptr_t)p % 16); }

// The multiprocessors of the current device (the grid), or 0.
static int sm_count(void)
{
	static int sms;
	int dev;
	if (!sms && (cudaGetDevice(&dev) != cudaSuccess ||
		     cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess))
		sms = 0;
	return sms;
}

// The kernel of D and XC on one block per multiprocessor; its shared
// memory limit raised, and a block's fit checked, once per size.
template <int D, int XC> static int launch(const decode_step_args *a, void *stream)
{
	static size_t raised;
	int sms = sm_count();
	layout L = layout_of(*a, sms);
	size_t smem = L.bytes;
	auto k = step_kernel<D, XC>;
	if (smem > raised) {
		int fit = 0;
		if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
			    cudaSuccess ||
		    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, k, THREADS, smem) != cudaSuccess ||
		    fit < 1)
			return -1;
		raised = smem;
	}
	return launch_pdl(k, sms, THREADS, smem, stream, *a, L);
}

template <int D> static int launch_d(const decode_step_args *a, void *stream)
{
	return a->C <= 2 * 8 * WARP ? launch<D, 2>(a, stream) : launch<D, XC_MAX>(a, stream);
}

}  // namespace

extern "C" int decode_step_applies(const decode_step_args *a)
{
	const decode_shape *s = &a->s;
	if (s->N != 1 || a->L < 1 || a->L > DECODE_STEP_MAX_LAYERS || s->Hkv < 1 || s->H % s->Hkv ||
	    (s->D != 32 && s->D != 64 && s->D != 128) || a->C != s->H * s->D || a->C % 8 ||
	    a->C > 8 * WARP * XC_MAX || a->F % 8 || a->F < 8 || a->V < 1 || s->n_ctx < 1 || !sm_count() ||
	    layout_of(*a, sm_count()).bytes > SMEM_MAX)
		return 0;
	if (!aligned(a->x) || !aligned(a->x2) || !aligned(a->y) || !aligned(a->sw) || !aligned(a->lnf) ||
	    !aligned(a->head) || !aligned(a->kc) || !aligned(a->vc) || !aligned(a->cs))
		return 0;
	for (int l = 0; l < a->L; l++) {
		const decode_step_layer *y = &a->layer[l];
		if (!aligned(y->ln1) || !aligned(y->ln2) || !aligned(y->wqkv) || !aligned(y->wo) ||
		    !aligned(y->wgu) || !aligned(y->wdown))
			return 0;
	}
	return 1;
}

extern "C" int decode_step_cuda(const decode_step_args *a, void *stream)
{
	if (!decode_step_applies(a))
		return -1;
	switch (a->s.D) {
	case 32:
		return launch_d<32>(a, stream);
	case 64:
		return launch_d<64>(a, stream);
	default:
		return launch_d<128>(a, stream);
	}
}
