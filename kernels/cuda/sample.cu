// sample.cu: the device sampler (see kernels/sample.h): one block per
// sequence, each thread a contiguous run of ids, the top-k and top-p
// thresholds found by radix selection over the probabilities' float bits
// (four passes of a 256-bin shared histogram, two barriers each, the
// first built beside the probabilities when no top-k cut comes before),
// and the draw placed by one block-wide prefix sum of integer masses in id
// order, which also gives the cut's mass.
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

#include <limits.h>
#include <math.h>

using namespace ops;

namespace {

enum { THREADS = 256, THREADS_FEW = 1024, MAX_WARPS = THREADS_FEW / WARP };

// Probabilities cached in shared memory up to this many bytes (a vocabulary
// of 50,000; larger ones recompute them in every pass).
enum { CACHE_BYTES = 200 * 1024 };

struct shared {
	double d[MAX_WARPS];
	float f[MAX_WARPS], g[MAX_WARPS];
	int i[MAX_WARPS];
	unsigned long long u[MAX_WARPS], v[MAX_WARPS];
};

__device__ __forceinline__ int n_warps() { return (int)(blockDim.x / WARP); }

__device__ __forceinline__ void max_at(float *v, int *at, float v2, int a2)
{
	if (v2 > *v || (v2 == *v && a2 < *at)) {
		*v = v2;
		*at = a2;
	}
}

// Over the block (every thread gets them): the largest *all, and the largest
// *v with the lowest index *at holding it.
__device__ void block_max_argmax(float *all, float *v, int *at, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	for (int o = WARP / 2; o > 0; o /= 2) {
		*all = fmaxf(*all, __shfl_xor_sync(0xffffffffu, *all, o));
		float v2 = __shfl_xor_sync(0xffffffffu, *v, o);
		int a2 = __shfl_xor_sync(0xffffffffu, *at, o);
		max_at(v, at, v2, a2);
	}
	__syncthreads();
	if (l == 0) {
		sh.f[w] = *all;
		sh.g[w] = *v;
		sh.i[w] = *at;
	}
	__syncthreads();
	// every warp reduces the warps' values by shuffles (lane j holds warp
	// j's): the same maximum and lowest index as a serial pass over them
	bool in = l < n_warps();
	*all = in ? sh.f[l] : -INFINITY;
	*v = in ? sh.g[l] : -INFINITY;
	*at = in ? sh.i[l] : INT_MAX;
	for (int o = WARP / 2; o > 0; o /= 2) {
		*all = fmaxf(*all, __shfl_xor_sync(0xffffffffu, *all, o));
		float v2 = __shfl_xor_sync(0xffffffffu, *v, o);
		int a2 = __shfl_xor_sync(0xffffffffu, *at, o);
		max_at(v, at, v2, a2);
	}
}

// The warp's sum (every lane gets it), in a fixed order of additions.
template <typename T> __device__ T warp_sum(T x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

// Inclusive prefix sums of a and b over the warp's lanes.
__device__ void warp_scan2(unsigned long long *a, unsigned long long *b)
{
	int l = threadIdx.x % WARP;
	for (int o = 1; o < WARP; o *= 2) {
		unsigned long long ya = __shfl_up_sync(0xffffffffu, *a, o);
		unsigned long long yb = __shfl_up_sync(0xffffffffu, *b, o);
		if (l >= o) {
			*a += ya;
			*b += yb;
		}
	}
}

// The block's sums of x (a fixed order of additions), m and k, in one
// reduction (every thread gets them).
__device__ void block_sum3(double *x, unsigned long long *m, unsigned long long *k, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	*x = warp_sum(*x);
	*m = warp_sum(*m);
	*k = warp_sum(*k);
	__syncthreads();
	if (l == 0) {
		sh.d[w] = *x;
		sh.u[w] = *m;
		sh.v[w] = *k;
	}
	__syncthreads();
	bool in = l < n_warps();
	*x = warp_sum(in ? sh.d[l] : 0.0);
	*m = warp_sum(in ? sh.u[l] : 0ull);
	*k = warp_sum(in ? sh.v[l] : 0ull);
}

// Exclusive prefix sums over the threads of a and b (*ea, *eb) and their
// totals (*ta, *tb).
__device__ void block_scan2(unsigned long long a, unsigned long long b, unsigned long long *ea,
			    unsigned long long *eb, unsigned long long *ta, unsigned long long *tb,
			    shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	unsigned long long ia = a, ib = b;
	warp_scan2(&ia, &ib);
	__syncthreads();
	if (l == WARP - 1) {
		sh.u[w] = ia;
		sh.v[w] = ib;
	}
	__syncthreads();
	// the warps' totals scanned by each warp's lanes
	bool in = l < n_warps();
	unsigned long long sa = in ? sh.u[l] : 0, sb = in ? sh.v[l] : 0;
	warp_scan2(&sa, &sb);
	unsigned long long pa = __shfl_sync(0xffffffffu, sa, w > 0 ? w - 1 : 0);
	unsigned long long pb = __shfl_sync(0xffffffffu, sb, w > 0 ? w - 1 : 0);
	*ea = (w > 0 ? pa : 0) + ia - a;
	*eb = (w > 0 ? pb : 0) + ib - b;
	*ta = __shfl_sync(0xffffffffu, sa, WARP - 1);
	*tb = __shfl_sync(0xffffffffu, sb, WARP - 1);
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

// p of id j from the logits, and (CACHED: from the copy in shared memory;
// a compile-time choice, so that the passes over the copy hold no
// predicated global path beside it) as the selection passes read it.
__device__ __forceinline__ float prob_of(const row_view &r, int j)
{
	return expf((r.l[j] - r.mx) * r.inv_t);
}

template <bool CACHED> __device__ __forceinline__ float prob(const row_view &r, int j)
{
	return CACHED ? r.pc[j] : prob_of(r, j);
}

// q_of(p) > 0, by a compare: p * 2^40 is exact, and truncates to 0 below 1.
__device__ __forceinline__ bool has_mass(float p) { return p >= 0x1p-40f; }

__device__ __forceinline__ bool in_cut(float p, unsigned long long *rank, cut c)
{
	unsigned pb = fbits(p);
	if (!has_mass(p) || pb < c.tau)
		return false;
	return pb > c.tau || (*rank)++ < c.ties;
}

// A cut's sums for this thread: the rank of its first tie at tau (base),
// the members' mass before its ids (before) and in them (mine), and the
// members' mass over the block.  Every tie at tau has the same p and so
// the same q: the members' mass is the mass above tau and q(tau) for each
// of the first `ties` ties, so one scan of (mass above tau, ties) gives
// all of it.
struct cut_sums {
	unsigned long long base, before, mine, mass;
};

template <bool CACHED> __device__ cut_sums cut_scan(const row_view &r, cut c, shared &sh)
{
	unsigned long long above = 0, at = 0;
	for (int j = r.lo; j < r.hi; j++) {
		float p = prob<CACHED>(r, j);
		unsigned pb = fbits(p);
		if (pb > c.tau)
			above += q_of(p); /* 0 where p has no mass */
		else if (pb == c.tau && has_mass(p))
			at++;
	}
	unsigned long long ea, eb, ta, tb;
	block_scan2(above, at, &ea, &eb, &ta, &tb, sh);
	unsigned long long qt = q_of(__uint_as_float(c.tau));
	unsigned long long m0 = min(c.ties, eb), m1 = min(c.ties, eb + at);
	return cut_sums{ eb, ea + qt * m0, above + qt * (m1 - m0), ta + qt * min(c.ties, tb) };
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

// A thread's neighbouring ids mostly share the high bits' bin: it adds
// runs, not elements, so that few atomics contend for one bin.
struct run_acc {
	int bin;
	unsigned long long run;
};

__device__ __forceinline__ void run_add(bin64 *h, run_acc *ra, int b, unsigned long long v)
{
	if (b != ra->bin) {
		if (ra->bin >= 0)
			bin_add(&h[ra->bin], ra->run);
		ra->bin = b;
		ra->run = 0;
	}
	ra->run += v;
}

__device__ __forceinline__ void run_end(bin64 *h, const run_acc *ra)
{
	if (ra->bin >= 0)
		bin_add(&h[ra->bin], ra->run);
}

enum { BINS = 256 };

// kernels/cpu/sample.c's radix_select over the block: a 256-bin histogram
// per pass in shared memory (integer atomics: the same sums in any order).
// hist holds two histograms, a pass's and the next one's, which it clears
// (so a pass waits on two barriers, not four); hist[0 .. BINS) is zero on
// entry and on return.  With built, the first pass's histogram is there
// already (made beside the mass, for a cut of every q > 0).
template <bool CACHED>
__device__ unsigned radix_select(const row_view &r, cut c, unsigned long long base,
				 unsigned long long want, bool by_mass, bool built,
				 unsigned long long *left, bin64 *hist, unsigned (*pick)[3])
{
	unsigned prefix = 0, mask = 0;
	unsigned long long need = want;
	for (int pass = 0; pass < 4; pass++) {
		int shift = 24 - 8 * pass, cur = pass & 1;
		bin64 *h = hist + cur * BINS, *next = hist + (cur ^ 1) * BINS;
		for (int b = threadIdx.x; b < BINS; b += blockDim.x)
			next[b] = bin64{ 0, 0 };
		if (!(pass == 0 && built)) {
			unsigned long long rank = base;
			run_acc ra = { -1, 0 };
			for (int j = r.lo; j < r.hi; j++) {
				float p = prob<CACHED>(r, j);
				if (in_cut(p, &rank, c) && (fbits(p) & mask) == prefix)
					run_add(h, &ra, (fbits(p) >> shift) & 255, by_mass ? q_of(p) : 1ull);
			}
			run_end(h, &ra);
			__syncthreads();
		}
		// warp 0 finds the bin: lane l holds bins 255 - 8l down to 248 - 8l
		if (threadIdx.x < WARP) {
			int l = threadIdx.x;
			unsigned long long mine = 0;
			for (int k = 0; k < 8; k++)
				mine += bin_get(&h[255 - 8 * l - k]);
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
					if (b == 0 || bin_get(&h[b]) >= nd)
						break;
					nd -= bin_get(&h[b]);
				}
				pick[cur][0] = (unsigned)b;
				pick[cur][1] = (unsigned)(nd >> 32);
				pick[cur][2] = (unsigned)nd;
			}
		}
		__syncthreads();
		prefix |= pick[cur][0] << shift;
		mask |= 255u << shift;
		need = ((unsigned long long)pick[cur][1] << 32) | pick[cur][2];
	}
	// (the last pass cleared hist[0 .. BINS) before its barrier)
	*left = need;
	return prefix;
}

// Row i's token t on to the next step (sample.h's feed), by the whole block.
__device__ __forceinline__ void feed_next(const sample_feed &f, int i, int32_t t)
{
	if (!f.ids)
		return;
	if (threadIdx.x == 0) {
		f.ids[i] = t;
		f.pos[i]++;
	}
	if (f.x) {
		const float *src = f.table + (size_t)t * f.C;
		float *dst = f.x + (size_t)i * f.C;
		for (int c = threadIdx.x; c < f.C; c += blockDim.x)
			dst[c] = src[c];
	}
}

template <int NT, bool CACHED>
__global__ void __launch_bounds__(NT) sample_kernel(int32_t *tok, float *lp, const float *logits,
						    const int32_t *row, const float *u,
						    const int32_t *forced, sample_feed feed, int V,
						    sample_args a)
{
	pdl_begin();
	extern __shared__ float pc[];
	__shared__ shared sh;
	__shared__ bin64 hist[2 * BINS];
	__shared__ unsigned sel[2][3];
	__shared__ int pick;
	int i = blockIdx.x;
	const float *l = logits + (size_t)row[i] * V;
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	int per = (V + NT - 1) / NT | 1;
	int lo = threadIdx.x * per, hi = min(V, lo + per);
	for (int b = threadIdx.x; b < 2 * BINS; b += NT)
		hist[b] = bin64{ 0, 0 };
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
	block_max_argmax(&mxall, &mx, &am, sh);
	if (bad || mx == -INFINITY) {
		if (threadIdx.x == 0) {
			tok[i] = -1;
			lp[i] = NAN;
		}
		feed_next(feed, i, 0);
		return;
	}
	se = mine_max == -INFINITY ? 0.0 : se * (double)expf(mine_max - mxall);
	int32_t t = am;
	int32_t f = forced ? forced[i] : -1;
	bool draw = !(f >= 0 && f < V) && a.temperature > 0;
	row_view r = { l, NULL, lo, min(hi, n), mx, 1.0f / a.temperature };
	if (r.hi < r.lo)
		r.hi = r.lo;
	// the probabilities (in shared memory when they fit), their mass and
	// count, and for a nucleus of every q > 0 the first pass's histogram of
	// the top-p selection, in one pass, summed with the exponentials
	bool built = draw && a.top_k <= 0 && a.top_p < 1;
	unsigned long long mass = 0, members = 0;
	if (draw) {
		run_acc ra = { -1, 0 };
		for (int j = threadIdx.x; j < n; j += NT) {
			float p = prob_of(r, j);
			if (CACHED)
				pc[j] = p;
			unsigned long long q = q_of(p);
			mass += q;
			members += q > 0;
			if (built && q)
				run_add(hist, &ra, fbits(p) >> 24, q);
		}
		run_end(hist, &ra);
		if (CACHED)
			r.pc = pc;
	}
	block_sum3(&se, &mass, &members, sh);
	if (f >= 0 && f < V) {
		t = f;
	} else if (draw) {
		cut c = { 0, 0 };
		cut_sums cs = { 0, 0, 0, mass };
		bool scanned = false;
		if (a.top_k > 0 && (unsigned long long)a.top_k < members) {
			unsigned long long left;
			unsigned tau = radix_select<CACHED>(r, c, 0, (unsigned long long)a.top_k, false, false,
						    &left, hist, sel);
			c = cut{ tau, left };
			cs = cut_scan<CACHED>(r, c, sh);
			scanned = true;
		}
		if (a.top_p < 1) {
			unsigned long long left;
			unsigned long long target =
				(unsigned long long)((double)a.top_p * (double)cs.mass);
			target = target ? target : 1;
			unsigned tau = radix_select<CACHED>(r, c, cs.base, target, true, built, &left, hist,
						    sel);
			unsigned long long qt = q_of(__uint_as_float(tau)), m = (left + qt - 1) / qt;
			c = cut{ tau, m ? m : 1 };
			scanned = false;
		}
		if (!scanned)
			cs = cut_scan<CACHED>(r, c, sh);
		// the draw: the thread whose members' mass holds it walks its ids
		unsigned long long want = (unsigned long long)((double)u[i] * (double)cs.mass);
		if (want >= cs.mass)
			want = cs.mass - 1;
		if (cs.mine > 0 && want >= cs.before && want < cs.before + cs.mine) {
			unsigned long long acc = cs.before, rank = cs.base;
			for (int j = r.lo; j < r.hi; j++) {
				float p = prob<CACHED>(r, j);
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
	feed_next(feed, i, t);
}

}  // namespace

extern "C" int sample_rows_cuda(int32_t *tok, float *lp, const float *logits, const int32_t *row,
				const float *u, const int32_t *forced, const sample_feed *feed,
				int n, int V, sample_args a, void *stream)
{
	if (n <= 0)
		return 0;
	sample_feed fd = feed ? *feed : sample_feed{ NULL, NULL, NULL, NULL, 0 };
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
		if (cudaFuncSetAttribute(sample_kernel<THREADS, true>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, CACHE_BYTES) !=
			    cudaSuccess ||
		    cudaFuncSetAttribute(sample_kernel<THREADS_FEW, true>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, CACHE_BYTES) !=
			    cudaSuccess)
			return -1;
		raised = 1;
	}
	if (cache)
		return n < sms ? launch_pdl(sample_kernel<THREADS_FEW, true>, n, THREADS_FEW, bytes, stream,
					    tok, lp, logits, row, u, forced, fd, V, a)
			       : launch_pdl(sample_kernel<THREADS, true>, n, THREADS, bytes, stream, tok,
					    lp, logits, row, u, forced, fd, V, a);
	return n < sms ? launch_pdl(sample_kernel<THREADS_FEW, false>, n, THREADS_FEW, 0, stream, tok,
				    lp, logits, row, u, forced, fd, V, a)
		       : launch_pdl(sample_kernel<THREADS, false>, n, THREADS, 0, stream, tok, lp, logits,
				    row, u, forced, fd, V, a);
}
