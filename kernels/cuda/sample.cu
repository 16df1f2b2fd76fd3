// sample.cu: the device sampler (see kernels/sample.h): one block per
// sequence, each thread a contiguous run of ids, the top-k and top-p
// thresholds found by radix selection over the probabilities' float bits
// (four passes of a 256-bin shared histogram), and the draw placed by a
// block-wide prefix sum of integer masses in id order.
//
// A block has 1024 threads when there are fewer sequences than SMs (a
// decoding step at batch 1 waits on this kernel's serial passes), else
// 256.  A thread's run is an odd number of ids long, so that a warp's
// reads of the cached probabilities, a run apart, fall in distinct shared
// memory banks.  The histograms' 64-bit sums are added as two 32-bit
// words with the carry (native shared atomics, where a 64-bit one is a
// compare-and-swap loop that the many threads adding to one bin wait on).
#include "kernels/sample.h"
#include "ops_cuda.cuh"

#include <math.h>

using namespace ops;

namespace {

enum { THREADS = 256, THREADS_FEW = 1024, MAX_WARPS = THREADS_FEW / WARP };

// Probabilities cached in shared memory up to this many bytes (a vocabulary
// of 50,000; larger ones recompute them in every pass).
enum { CACHE_BYTES = 200 * 1024 };

struct shared {
	double d[MAX_WARPS];
	float f[MAX_WARPS];
	int i[MAX_WARPS];
	long long ll[MAX_WARPS];
};

__device__ __forceinline__ int n_warps() { return (int)(blockDim.x / WARP); }

__device__ double warp_sum_d(double x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

// The block's sum (every thread gets it); a fixed order of additions.
__device__ double block_sum_d(double x, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	x = warp_sum_d(x);
	__syncthreads();
	if (l == 0)
		sh.d[w] = x;
	__syncthreads();
	double s = l < n_warps() ? sh.d[l] : 0.0;
	return warp_sum_d(s);
}

__device__ long long block_scan_ll(long long x, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	long long inc = x;
	for (int o = 1; o < WARP; o *= 2) {
		long long y = __shfl_up_sync(0xffffffffu, inc, o);
		if (l >= o)
			inc += y;
	}
	__syncthreads();
	if (l == WARP - 1)
		sh.ll[w] = inc;
	__syncthreads();
	long long base = 0;
	for (int j = 0; j < w; j++)
		base += sh.ll[j];
	return base + inc - x;
}

// The largest value (and lowest index holding it) over the block.
__device__ void block_argmax(float *v, int *at, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	for (int o = WARP / 2; o > 0; o /= 2) {
		float v2 = __shfl_xor_sync(0xffffffffu, *v, o);
		int a2 = __shfl_xor_sync(0xffffffffu, *at, o);
		if (v2 > *v || (v2 == *v && a2 < *at)) {
			*v = v2;
			*at = a2;
		}
	}
	__syncthreads();
	if (l == 0) {
		sh.f[w] = *v;
		sh.i[w] = *at;
	}
	__syncthreads();
	*v = sh.f[0];
	*at = sh.i[0];
	for (int j = 1; j < n_warps(); j++)
		if (sh.f[j] > *v || (sh.f[j] == *v && sh.i[j] < *at)) {
			*v = sh.f[j];
			*at = sh.i[j];
		}
}

__device__ __forceinline__ unsigned fbits(float x) { return __float_as_uint(x); }

__device__ __forceinline__ unsigned long long q_of(float p)
{
	return (unsigned long long)(p * SAMPLE_MASS_ONE);
}

// The set: q > 0 and bits above tau, or at tau among the first `ties`.
struct cut {
	unsigned tau;
	unsigned long long ties;
};

struct row_view {
	const float *l;
	const float *pc;  // the probabilities, computed once, in shared memory (or NULL)
	int lo, hi;       // this thread's ids (contiguous; threads in id order)
	float mx, inv_t;
};

__device__ __forceinline__ float prob(const row_view &r, int j)
{
	return r.pc ? r.pc[j] : expf((r.l[j] - r.mx) * r.inv_t);
}

__device__ unsigned long long warp_sum_u(unsigned long long x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

__device__ unsigned long long block_sum_u(unsigned long long x, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	x = warp_sum_u(x);
	__syncthreads();
	if (l == 0)
		sh.ll[w] = (long long)x;
	__syncthreads();
	unsigned long long s = l < n_warps() ? (unsigned long long)sh.ll[l] : 0;
	return warp_sum_u(s);
}

// This thread's ties at c.tau before its first id (the rank of its first).
__device__ unsigned long long tie_base(const row_view &r, cut c, shared &sh)
{
	long long n = 0;
	for (int j = r.lo; j < r.hi; j++) {
		float p = prob(r, j);
		n += fbits(p) == c.tau && q_of(p) > 0;
	}
	return (unsigned long long)block_scan_ll(n, sh);
}

__device__ __forceinline__ bool in_cut(float p, unsigned long long *rank, cut c)
{
	unsigned pb = fbits(p);
	if (!q_of(p) || pb < c.tau)
		return false;
	return pb > c.tau || (*rank)++ < c.ties;
}

// The members' mass (and count) over the block.
__device__ unsigned long long mass_of(const row_view &r, cut c, unsigned long long base,
				      unsigned long long *count, shared &sh)
{
	unsigned long long m = 0, k = 0, rank = base;
	for (int j = r.lo; j < r.hi; j++) {
		float p = prob(r, j);
		if (in_cut(p, &rank, c)) {
			m += q_of(p);
			k++;
		}
	}
	m = block_sum_u(m, sh);
	if (count)
		*count = block_sum_u(k, sh);
	return m;
}

// A 64-bit bin of a histogram, as two words (low, high).
struct bin64 {
	unsigned lo, hi;
};

__device__ __forceinline__ void bin_add(bin64 *b, unsigned long long v)
{
	unsigned lo = (unsigned)v, hi = (unsigned)(v >> 32);
	unsigned old = atomicAdd(&b->lo, lo);
	hi += old + lo < old; /* the low word's carry */
	if (hi)
		atomicAdd(&b->hi, hi);
}

__device__ __forceinline__ unsigned long long bin_get(const bin64 *b)
{
	return ((unsigned long long)b->hi << 32) | b->lo;
}

// kernels/cpu/sample.c's radix_select over the block: a 256-bin histogram
// per pass in shared memory (integer atomics: the same sums in any order).
__device__ unsigned radix_select(const row_view &r, cut c, unsigned long long base,
				 unsigned long long want, bool by_mass, unsigned long long *left,
				 bin64 *hist, unsigned *pick)
{
	unsigned prefix = 0, mask = 0;
	unsigned long long need = want;
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int b = threadIdx.x; b < 256; b += blockDim.x)
			hist[b] = bin64{ 0, 0 };
		__syncthreads();
		// a thread's neighbouring ids mostly share the high bits' bin:
		// add runs, not elements, so few atomics contend for one bin
		unsigned long long rank = base, run = 0;
		int bin = -1;
		for (int j = r.lo; j < r.hi; j++) {
			float p = prob(r, j);
			if (!in_cut(p, &rank, c) || (fbits(p) & mask) != prefix)
				continue;
			int b = (fbits(p) >> shift) & 255;
			if (b != bin) {
				if (bin >= 0)
					bin_add(&hist[bin], run);
				bin = b;
				run = 0;
			}
			run += by_mass ? q_of(p) : 1ull;
		}
		if (bin >= 0)
			bin_add(&hist[bin], run);
		__syncthreads();
		// warp 0 finds the bin: lane l holds bins 255 - 8l down to 248 - 8l
		if (threadIdx.x < WARP) {
			int l = threadIdx.x;
			unsigned long long mine = 0;
			for (int k = 0; k < 8; k++)
				mine += bin_get(&hist[255 - 8 * l - k]);
			unsigned long long inc = mine;
			for (int o = 1; o < WARP; o *= 2) {
				unsigned long long y = __shfl_up_sync(0xffffffffu, inc, o);
				if (l >= o)
					inc += y;
			}
			unsigned hit = __ballot_sync(0xffffffffu, inc >= need);
			int L = hit ? __ffs(hit) - 1 : WARP - 1;
			if (l == L) {
				unsigned long long nd = need - (inc - mine);
				int b = 255 - 8 * l;
				for (int k = 0; k < 8; k++) {
					b = 255 - 8 * l - k;
					if (b == 0 || bin_get(&hist[b]) >= nd)
						break;
					nd -= bin_get(&hist[b]);
				}
				pick[0] = (unsigned)b;
				pick[1] = (unsigned)(nd >> 32);
				pick[2] = (unsigned)nd;
			}
		}
		__syncthreads();
		prefix |= pick[0] << shift;
		mask |= 255u << shift;
		need = ((unsigned long long)pick[1] << 32) | pick[2];
		__syncthreads();
	}
	*left = need;
	return prefix;
}

template <int NT>
__global__ void __launch_bounds__(NT) sample_kernel(int32_t *tok, float *lp, const float *logits,
						    const int32_t *row, const float *u,
						    const int32_t *forced, int V, sample_args a,
						    int cache)
{
	pdl_begin();
	extern __shared__ float pc[];
	__shared__ shared sh;
	__shared__ bin64 hist[256];
	__shared__ unsigned sel[3];
	__shared__ int pick;
	int i = blockIdx.x;
	const float *l = logits + (size_t)row[i] * V;
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	int per = (V + NT - 1) / NT | 1;
	int lo = threadIdx.x * per, hi = min(V, lo + per);
	// max over all, the drawable max and its lowest id, bad values, and
	// the sum of exponentials (online: rescaled when the max grows).  The
	// passes over the logits in global memory take ids THREADS apart, so a
	// warp's loads are one coalesced line; the selection below keeps each
	// thread's contiguous run of ids, which its in-order ranks need.
	float mx = -INFINITY, mxall = -INFINITY;
	int am = n, bad = 0;
	double se = 0;
	for (int j = threadIdx.x; j < V; j += NT) {
		float x = l[j];
		bad |= isnan(x) || x == INFINITY;
		if (x > mxall) {
			se = se * (double)expf(mxall - x) + 1.0;
			mxall = x;
		} else {
			se += (double)expf(x - mxall);
		}
		if (j < n && x > mx) {
			mx = x;
			am = j;
		}
	}
	bad = __syncthreads_or(bad);
	float mine_max = mxall;
	int dummy = 0;
	block_argmax(&mxall, &dummy, sh);
	block_argmax(&mx, &am, sh);
	if (bad || mx == -INFINITY) {
		if (threadIdx.x == 0) {
			tok[i] = -1;
			lp[i] = NAN;
		}
		return;
	}
	se = block_sum_d(mine_max == -INFINITY ? 0.0 : se * (double)expf(mine_max - mxall), sh);
	int32_t t = am;
	int32_t f = forced ? forced[i] : -1;
	if (f >= 0 && f < V) {
		t = f;
	} else if (a.temperature > 0) {
		row_view r = { l, NULL, lo, min(hi, n), mx, 1.0f / a.temperature };
		if (r.hi < r.lo)
			r.hi = r.lo;
		if (cache) {
			// filled in coalesced order, read back in each thread's run
			for (int j = threadIdx.x; j < n; j += NT)
				pc[j] = prob(r, j);
			__syncthreads();
			r.pc = pc;
		}
		cut c = { 0, 0 };
		unsigned long long base = 0, members, left;
		unsigned long long mass = mass_of(r, c, 0, &members, sh);
		if (a.top_k > 0 && (unsigned long long)a.top_k < members) {
			unsigned tau = radix_select(r, c, 0, (unsigned long long)a.top_k, false, &left,
						    hist, sel);
			c = cut{ tau, left };
			base = tie_base(r, c, sh);
			mass = mass_of(r, c, base, NULL, sh);
		}
		if (a.top_p < 1) {
			unsigned long long target = (unsigned long long)((double)a.top_p * (double)mass);
			target = target ? target : 1;
			unsigned tau = radix_select(r, c, base, target, true, &left, hist, sel);
			unsigned long long qt = q_of(__uint_as_float(tau)), m = (left + qt - 1) / qt;
			c = cut{ tau, m ? m : 1 };
			base = tie_base(r, c, sh);
			mass = mass_of(r, c, base, NULL, sh);
		}
		// the draw: this thread's members' mass, placed by a prefix sum
		unsigned long long want = (unsigned long long)((double)u[i] * (double)mass);
		if (want >= mass)
			want = mass - 1;
		long long mine = 0;
		unsigned long long rank = base;
		for (int j = r.lo; j < r.hi; j++) {
			float p = prob(r, j);
			if (in_cut(p, &rank, c))
				mine += (long long)q_of(p);
		}
		unsigned long long before = (unsigned long long)block_scan_ll(mine, sh);
		if (mine > 0 && want >= before && want < before + (unsigned long long)mine) {
			unsigned long long acc = before;
			rank = base;
			for (int j = r.lo; j < r.hi; j++) {
				float p = prob(r, j);
				if (in_cut(p, &rank, c)) {
					acc += q_of(p);
					if (acc > want) {
						pick = j;
						break;
					}
				}
			}
		}
		__syncthreads();
		t = pick;
	}
	if (threadIdx.x == 0) {
		tok[i] = t;
		lp[i] = (float)((double)l[t] - ((double)mxall + log(se)));
	}
}

}  // namespace

extern "C" int sample_rows_cuda(int32_t *tok, float *lp, const float *logits, const int32_t *row,
				const float *u, const int32_t *forced, int n, int V, sample_args a,
				void *stream)
{
	if (n <= 0)
		return 0;
	// the probabilities in shared memory when they fit beside the rest
	size_t bytes = (size_t)V * sizeof(float);
	int cache = bytes <= CACHE_BYTES;
	static int sms, raised;
	if (!sms) {
		int dev = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
			return -1;
	}
	if (cache && bytes > 48 * 1024 && !raised) {
		if (cudaFuncSetAttribute(sample_kernel<THREADS>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, CACHE_BYTES) !=
			    cudaSuccess ||
		    cudaFuncSetAttribute(sample_kernel<THREADS_FEW>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, CACHE_BYTES) !=
			    cudaSuccess)
			return -1;
		raised = 1;
	}
	if (n < sms)
		return launch_pdl(sample_kernel<THREADS_FEW>, n, THREADS_FEW, cache ? bytes : 0, stream,
				  tok, lp, logits, row, u, forced, V, a, cache);
	return launch_pdl(sample_kernel<THREADS>, n, THREADS, cache ? bytes : 0, stream, tok, lp,
			  logits, row, u, forced, V, a, cache);
}
