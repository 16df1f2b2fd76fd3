// sample.cu: the device sampler (see kernels/sample.h): one block per
// sequence, each thread a contiguous run of ids, the top-k and top-p
// thresholds found by bisection over the probabilities' float bits with a
// block-wide count or sum per round, and the draw placed by a block-wide
// prefix sum in id order.
#include "kernels/sample.h"
#include "ops_cuda.cuh"

#include <math.h>

using namespace ops;

namespace {

enum { THREADS = 1024, WARPS = THREADS / WARP, ONE_BITS = 0x3f800000 };

struct shared {
	double d[WARPS];
	float f[WARPS];
	int i[WARPS];
	long long ll[WARPS];
};

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
	double s = l < WARPS ? sh.d[l] : 0.0;
	return warp_sum_d(s);
}

// Exclusive prefix sum over threads (in thread order) and the total.
__device__ double block_scan_d(double x, double *total, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	double inc = x;
	for (int o = 1; o < WARP; o *= 2) {
		double y = __shfl_up_sync(0xffffffffu, inc, o);
		if (l >= o)
			inc += y;
	}
	__syncthreads();
	if (l == WARP - 1)
		sh.d[w] = inc;
	__syncthreads();
	double base = 0, all = 0;
	for (int j = 0; j < WARPS; j++) {
		if (j < w)
			base += sh.d[j];
		all += sh.d[j];
	}
	*total = all;
	return base + inc - x;
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
	for (int j = 1; j < WARPS; j++)
		if (sh.f[j] > *v || (sh.f[j] == *v && sh.i[j] < *at)) {
			*v = sh.f[j];
			*at = sh.i[j];
		}
}

__device__ __forceinline__ unsigned fbits(float x) { return __float_as_uint(x); }

// The set: bits above tau, and the first `ties` at tau in id order.
struct cut {
	unsigned tau;
	long long ties;
};

struct row_view {
	const float *l;
	int lo, hi;       // this thread's ids
	float mx, inv_t;
};

__device__ __forceinline__ float prob(const row_view &r, int j)
{
	return expf((r.l[j] - r.mx) * r.inv_t);
}

// This thread's ties at c.tau before its first id, for membership.
__device__ long long tie_base(const row_view &r, cut c, shared &sh)
{
	long long n = 0;
	for (int j = r.lo; j < r.hi; j++)
		n += fbits(prob(r, j)) == c.tau;
	return block_scan_ll(n, sh);
}

// Mass (count when `count`) of the set's members with bits >= t, over the block.
__device__ double mass_from(const row_view &r, cut c, long long base, unsigned t, bool count,
			    shared &sh)
{
	double s = 0;
	long long rank = base;
	for (int j = r.lo; j < r.hi; j++) {
		float p = prob(r, j);
		unsigned pb = fbits(p);
		bool in = pb > c.tau || (pb == c.tau && rank++ < c.ties);
		if (in && pb >= t)
			s += count ? 1.0 : (double)p;
	}
	return block_sum_d(s, sh);
}

__device__ unsigned bisect(const row_view &r, cut c, long long base, unsigned lo, unsigned hi,
			   double want, bool count, shared &sh)
{
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;
		if (mass_from(r, c, base, mid, count, sh) >= want)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

__global__ void __launch_bounds__(THREADS) sample_kernel(int32_t *tok, float *lp,
							 const float *logits, const int32_t *row,
							 const float *u, const int32_t *forced, int V,
							 sample_args a)
{
	__shared__ shared sh;
	int i = blockIdx.x;
	const float *l = logits + (size_t)row[i] * V;
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	int per = (V + THREADS - 1) / THREADS;
	int lo = threadIdx.x * per, hi = min(V, lo + per);
	// max over all, the drawable max and its lowest id, bad values
	float mx = -INFINITY, mxall = -INFINITY;
	int am = n, bad = 0;
	for (int j = lo; j < hi; j++) {
		float x = l[j];
		bad |= isnan(x) || x == INFINITY;
		mxall = fmaxf(mxall, x);
		if (j < n && x > mx) {
			mx = x;
			am = j;
		}
	}
	bad = __syncthreads_or(bad);
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
	double se = 0;
	for (int j = lo; j < hi; j++)
		se += (double)expf(l[j] - mxall);
	se = block_sum_d(se, sh);
	int32_t t = am;
	int32_t f = forced ? forced[i] : -1;
	if (f >= 0 && f < V) {
		t = f;
	} else if (a.temperature > 0) {
		row_view r = { l, lo, min(hi, n), mx, 1.0f / a.temperature };
		if (r.hi < r.lo)
			r.hi = r.lo;
		cut c = { 0, 0 };
		double npos = mass_from(r, c, 0, 1, true, sh);
		long long base = 0;
		if (a.top_k > 0 && a.top_k < npos) {
			unsigned tau = bisect(r, c, 0, 1, ONE_BITS + 1, a.top_k, true, sh);
			long long gt = (long long)mass_from(r, c, 0, tau + 1, true, sh);
			c = cut{ tau, a.top_k - gt };
			base = tie_base(r, c, sh);
		}
		double mass = mass_from(r, c, base, 0, false, sh);
		if (a.top_p < 1) {
			double target = (double)a.top_p * mass;
			unsigned tau = bisect(r, c, base, c.tau ? c.tau : 1, ONE_BITS + 1, target, false, sh);
			double gt = mass_from(r, c, base, tau + 1, false, sh);
			long long m = (long long)ceil((target - gt) / (double)__uint_as_float(tau));
			if (m < 1)
				m = 1;
			if (tau == c.tau && m > c.ties)
				m = c.ties;
			c = cut{ tau, m };
			base = tie_base(r, c, sh);
			mass = mass_from(r, c, base, 0, false, sh);
		}
		// the draw: this thread's members' mass, placed by a prefix sum
		double mine = 0;
		int last = -1;
		long long rank = base;
		for (int j = r.lo; j < r.hi; j++) {
			float p = prob(r, j);
			unsigned pb = fbits(p);
			if (pb > c.tau || (pb == c.tau && rank++ < c.ties)) {
				mine += (double)p;
				last = j;
			}
		}
		double total, before = block_scan_d(mine, &total, sh);
		double want = (double)u[i] * mass;
		// the thread whose run holds `want` walks it; past the end (rounding)
		// the last member is taken
		__shared__ int pick;
		float neg = last >= 0 ? (float)last : -1.0f;
		int lastid = 0;
		block_argmax(&neg, &lastid, sh);
		if (threadIdx.x == 0)
			pick = (int)neg;
		__syncthreads();
		if (mine > 0 && want >= before && want < before + mine) {
			double acc = before;
			rank = base;
			for (int j = r.lo; j < r.hi; j++) {
				float p = prob(r, j);
				unsigned pb = fbits(p);
				if (pb > c.tau || (pb == c.tau && rank++ < c.ties)) {
					acc += (double)p;
					if (want < acc) {
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
	sample_kernel<<<n, THREADS, 0, (cudaStream_t)stream>>>(tok, lp, logits, row, u, forced, V, a);
	return launched();
}
