// sample.cu: the device sampler (see kernels/sample.h): one block, or a
// cluster of CL blocks, per sequence, each thread a contiguous run of ids,
// the top-k and top-p thresholds found by radix selection over the
// probabilities' float bits (four passes of a 256-bin shared histogram,
// two barriers each, the first built beside the probabilities when no
// top-k cut comes before), and the draw placed by one prefix sum of
// integer masses in id order, which also gives the cut's mass.
//
// A large vocabulary takes a cluster of blocks a sequence (2, 4 or 8,
// cluster_for below: the fewest whose slices hold at most 6144 ids, while
// the clusters fit on the SMs), block r of it the r-th slice of the ids:
// each reduction, histogram and scan is made per block as before, then
// the blocks' results are read from each other's shared memory (DSMEM)
// after a cluster barrier and combined in rank order, so every block holds
// the same sums, bins and thresholds.  The masses are integers, so the
// token is the one a single block draws (the log-prob's sum of
// exponentials is summed in another order).  Blocks have 1024 threads
// when there are fewer of them than SMs (a decoding step at batch 1 waits
// on this kernel's serial passes), else 256; LMPIPE_SAMPLE_CLUSTER caps
// the cluster (1: none) and LMPIPE_SAMPLE_THREADS sets the threads (256,
// 512, 1024), for measuring.  The logits are read 8 a thread at a time
// and kept in shared memory for the probabilities' pass when they fit.
//
// Where sample_rejects() says so (top-p, no top-k, few rows expected to
// fall back), the kernel instantiated with REJECT draws the nucleus by
// rejection (sample.h): the SAMPLE_DRAWS draws on all the mass (one scan,
// each thread walking its run for the draws that fall in it), then one
// reduction of as many sums (the mass ranked before each drawn id) tells
// which are in the nucleus; only when none is (at most (1 - top_p)^3 of
// the rows) are the radix passes made, then a scan and a sum to place the
// last draw.  This leaves out three of the four radix passes and the
// first one's histogram (~40 % of the kernel's cycles in the single-block
// breakdown of bench/lm-sample-gpu-notes.md), and with three draws a row
// even 64 rows rarely have one that falls back (the slowest row sets the
// kernel's time).
//
// A thread's run is an odd number of ids long, so that a warp's
// reads of the cached probabilities, a run apart, fall in distinct shared
// memory banks.  The histograms' 64-bit sums are added as two 32-bit
// words with the carry (native shared atomics, where a 64-bit one is a
// compare-and-swap loop that the many threads adding to one bin wait on).
#include "kernels/sample.h"
#include "ops_cuda.cuh"

#include <cooperative_groups.h>
#include <limits.h>
#include <math.h>

using namespace ops;

namespace {

namespace cg = cooperative_groups;

enum { THREADS = 256, THREADS_FEW = 1024, MAX_WARPS = THREADS_FEW / WARP };

// Probabilities cached in shared memory up to this many bytes (a vocabulary
// of 50,000; larger ones recompute them in every pass).
enum { CACHE_BYTES = 200 * 1024 };

struct shared {
	double d[MAX_WARPS];
	float f[MAX_WARPS], g[MAX_WARPS];
	int i[MAX_WARPS];
	unsigned long long u[MAX_WARPS], v[MAX_WARPS];
	unsigned long long dr[SAMPLE_DRAWS][MAX_WARPS];
};

// ---- a sequence over a cluster of CL blocks ----

// What a block shows the others of its cluster at one exchange: its
// maxima and bad values, then its sums, then its scan totals.  Exchanges
// alternate between two slots: a block writes slot k & 1 for exchange k
// only after the barrier of exchange k - 1, which every block reaches
// after its reads of exchange k - 2, the last ones of that slot.
struct xslot {
	float all, v;
	int at, bad;
	double se;
	unsigned long long a, b;
	int ats[SAMPLE_DRAWS];                // the draws' ids, or -1
	unsigned long long bs[SAMPLE_DRAWS];  // their bits, or their sums
};

template <int CL> __device__ __forceinline__ unsigned cl_rank()
{
	if constexpr (CL == 1)
		return 0;
	else
		return cg::this_cluster().block_rank();
}

// Every thread of every block of the cluster: the shared memory writes
// before it are seen by the reads after it, in any block.
template <int CL> __device__ __forceinline__ void cl_sync()
{
	if constexpr (CL > 1)
		cg::this_cluster().sync();
}

// The copy of *p in block r of the cluster.
template <typename T> __device__ __forceinline__ const T *cl_at(const T *p, unsigned r)
{
	return cg::this_cluster().map_shared_rank(const_cast<T *>(p), r);
}

// Sums and scans over a cluster's blocks, each warp reading the CL slots
// by its lanes (lane r: block r's) and combining them by shuffles in a
// fixed order, so every thread of every block gets the same bits.
template <int CL> struct cl_ex {
	xslot *slot;  // [2], this block's
	int k;        // exchanges so far

	__device__ xslot &mine() { return slot[k & 1]; }
	// After thread 0 filled mine(): the barrier, then block (lane) r's slot.
	__device__ const xslot *sync_read()
	{
		cl_sync<CL>();
		const xslot *x = cl_at(&slot[k & 1], (threadIdx.x % WARP) % CL);
		k++;
		return x;
	}
};

template <int CL, typename T> __device__ __forceinline__ T cl_lanes_sum(T x)
{
	for (int o = CL / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

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

// The block's sum of v (every thread gets it).
__device__ unsigned long long block_sum_u64(unsigned long long v, shared &sh)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
	v = warp_sum(v);
	__syncthreads();
	if (l == 0)
		sh.u[w] = v;
	__syncthreads();
	return warp_sum(l < n_warps() ? sh.u[l] : 0ull);
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

// block_scan2 over the cluster's blocks, in id order (the blocks before
// this one come first).
template <int CL>
__device__ void cluster_scan2(unsigned long long a, unsigned long long b, unsigned long long *ea,
			      unsigned long long *eb, unsigned long long *ta, unsigned long long *tb,
			      shared &sh, cl_ex<CL> &x)
{
	block_scan2(a, b, ea, eb, ta, tb, sh);
	if constexpr (CL > 1) {
		if (threadIdx.x == 0) {
			x.mine().a = *ta;
			x.mine().b = *tb;
		}
		const xslot *y = x.sync_read();
		const unsigned long long oa = y->a, ob = y->b;
		unsigned long long ia = oa, ib = ob;
		int l = threadIdx.x % WARP;
		for (int o = 1; o < CL; o *= 2) {
			unsigned long long ya = __shfl_up_sync(0xffffffffu, ia, o, CL);
			unsigned long long yb = __shfl_up_sync(0xffffffffu, ib, o, CL);
			if (l % CL >= o) {
				ia += ya;
				ib += yb;
			}
		}
		unsigned rk = cl_rank<CL>();
		*ea += __shfl_sync(0xffffffffu, ia - oa, rk, CL);
		*eb += __shfl_sync(0xffffffffu, ib - ob, rk, CL);
		*ta = __shfl_sync(0xffffffffu, ia, CL - 1, CL);
		*tb = __shfl_sync(0xffffffffu, ib, CL - 1, CL);
	}
}

template <int CL, bool CACHED>
__device__ cut_sums cut_scan(const row_view &r, cut c, shared &sh, cl_ex<CL> &x)
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
	cluster_scan2<CL>(above, at, &ea, &eb, &ta, &tb, sh, x);
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


// kernels/cpu/sample.c's radix_select over the block (or cluster): a
// 256-bin histogram per pass in shared memory (integer atomics: the same
// sums in any order).  hist holds two histograms, a pass's and the next
// one's, which it clears (so a pass waits on two barriers, not four);
// hist[0 .. BINS) is zero on entry and on return.  With built, the first
// pass's histogram is there already (made beside the mass, for a cut of
// every q > 0; on a cluster, a cluster barrier after it).  On a cluster,
// each pass's histograms are summed from every block into comb after a
// cluster barrier, and the next histogram is cleared only then: the other
// blocks read this block's previous one before they reached it.
template <int CL, bool CACHED>
__device__ unsigned radix_select(const row_view &r, cut c, unsigned long long base,
				 unsigned long long want, bool by_mass, bool built,
				 unsigned long long *left, bin64 *hist, bin64 *comb,
				 unsigned (*pick)[3])
{
	unsigned prefix = 0, mask = 0;
	unsigned long long need = want;
	for (int pass = 0; pass < 4; pass++) {
		int shift = 24 - 8 * pass, cur = pass & 1;
		bin64 *h = hist + cur * BINS, *next = hist + (cur ^ 1) * BINS;
		if constexpr (CL == 1)
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
			cl_sync<CL>();
		}
		const bin64 *hh = h;
		if constexpr (CL > 1) {
			for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
				unsigned long long sum = 0;
#pragma unroll
				for (int k = 0; k < CL; k++)
					sum += bin_get(cl_at(h, k) + b);
				comb[b] = bin64{ (unsigned)sum, (unsigned)(sum >> 32) };
				next[b] = bin64{ 0, 0 };
			}
			__syncthreads();
			hh = comb;
		}
		// warp 0 finds the bin: lane l holds bins 255 - 8l down to 248 - 8l
		if (threadIdx.x < WARP) {
			int l = threadIdx.x;
			unsigned long long mine = 0;
			for (int k = 0; k < 8; k++)
				mine += bin_get(&hh[255 - 8 * l - k]);
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
					if (b == 0 || bin_get(&hh[b]) >= nd)
						break;
					nd -= bin_get(&hh[b]);
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
	// (the last pass cleared hist[0 .. BINS))
	*left = need;
	return prefix;
}

// The sum of v over the cluster's threads (every thread gets it).
template <int CL>
__device__ unsigned long long cluster_sum_u64(unsigned long long v, shared &sh, cl_ex<CL> &x)
{
	v = block_sum_u64(v, sh);
	if constexpr (CL > 1) {
		if (threadIdx.x == 0)
			x.mine().a = v;
		v = cl_lanes_sum<CL>(x.sync_read()->a);
	}
	return v;
}

// u placed on a mass, and a rejected draw w of the rejected mass placed on
// the kept mass (sample.h): the twin's doubles.
__device__ __forceinline__ unsigned long long want_of(float u, unsigned long long mass)
{
	unsigned long long w = (unsigned long long)((double)u * (double)mass);
	return w < mass ? w : mass - 1;
}

__device__ __forceinline__ unsigned long long reject_want(unsigned long long w,
							  unsigned long long rejected,
							  unsigned long long kept)
{
	unsigned long long v =
		rejected ? (unsigned long long)((double)w / (double)rejected * (double)kept) : 0;
	return v < kept ? v : kept - 1;
}

// The member of c at want (cs: c's sums in this thread): the thread whose
// members' mass holds want walks its ids and writes the row id to *at and
// p's bits to *bits (shared).
template <bool CACHED>
__device__ void walk_to(const row_view &r, cut c, const cut_sums &cs, unsigned long long want,
			int s0, int *at, unsigned *bits)
{
	if (cs.mine > 0 && want >= cs.before && want < cs.before + cs.mine) {
		unsigned long long acc = cs.before, rank = cs.base;
		for (int j = r.lo; j < r.hi; j++) {
			float p = prob<CACHED>(r, j);
			if (in_cut(p, &rank, c)) {
				acc += q_of(p);
				if (acc > want) {
					*at = s0 + j;
					*bits = fbits(p);
					break;
				}
			}
		}
	}
}

// walk_to's members of every draw (want[k]) in every thread of every
// block, in one exchange (at[k], bits[k] shared: -1 where not drawn here).
template <int CL, bool CACHED>
__device__ __forceinline__ void draw_members(const row_view &r, const cut_sums &cs,
					     const unsigned long long *want, int s0, int *at,
					     unsigned *bits, int *xa, unsigned *xb, cl_ex<CL> &x)
{
	const cut c = { 0, 0 };
#pragma unroll
	for (int k = 0; k < SAMPLE_DRAWS; k++)
		walk_to<CACHED>(r, c, cs, want[k], s0, &at[k], &bits[k]);
	__syncthreads();
#pragma unroll
	for (int k = 0; k < SAMPLE_DRAWS; k++) {
		xa[k] = at[k];
		xb[k] = bits[k];
	}
	if constexpr (CL > 1) {
		// one block drew each; the others hold -1
		if (threadIdx.x == 0)
			for (int k = 0; k < SAMPLE_DRAWS; k++) {
				x.mine().ats[k] = at[k];
				x.mine().bs[k] = bits[k];
			}
		const xslot *y = x.sync_read();
#pragma unroll
		for (int k = 0; k < SAMPLE_DRAWS; k++) {
			int a = y->ats[k];
			unsigned long long b = y->bs[k];
			for (int o = CL / 2; o > 0; o /= 2) {
				int a2 = __shfl_xor_sync(0xffffffffu, a, o);
				unsigned long long b2 = __shfl_xor_sync(0xffffffffu, b, o);
				if (a2 > a) {
					a = a2;
					b = b2;
				}
			}
			xa[k] = a;
			xb[k] = (unsigned)b;
		}
	}
}

// The sums of v[k] and, unless d is NULL, of *d (its additions in a fixed
// order) over the cluster's threads, in one exchange (every thread gets
// them).
template <int CL>
__device__ __forceinline__ void cluster_sum_draws(unsigned long long *v, double *d, shared &sh,
						  cl_ex<CL> &x)
{
	int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
#pragma unroll
	for (int k = 0; k < SAMPLE_DRAWS; k++)
		v[k] = warp_sum(v[k]);
	if (d)
		*d = warp_sum(*d);
	__syncthreads();
	if (l == 0) {
		for (int k = 0; k < SAMPLE_DRAWS; k++)
			sh.dr[k][w] = v[k];
		if (d)
			sh.d[w] = *d;
	}
	__syncthreads();
	bool in = l < n_warps();
#pragma unroll
	for (int k = 0; k < SAMPLE_DRAWS; k++)
		v[k] = warp_sum(in ? sh.dr[k][l] : 0ull);
	if (d)
		*d = warp_sum(in ? sh.d[l] : 0.0);
	if constexpr (CL > 1) {
		if (threadIdx.x == 0) {
			for (int k = 0; k < SAMPLE_DRAWS; k++)
				x.mine().bs[k] = v[k];
			if (d)
				x.mine().se = *d;
		}
		const xslot *y = x.sync_read();
#pragma unroll
		for (int k = 0; k < SAMPLE_DRAWS; k++)
			v[k] = cl_lanes_sum<CL>(y->bs[k]);
		if (d)
			*d = cl_lanes_sum<CL>(y->se);
	}
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

// A sequence over CL blocks: block r of its cluster (CL consecutive
// blocks) takes the ids [r span, (r + 1) span) of the row, span a multiple
// of 32 ids.  Ids are local to the slice inside row_view; the maximum's
// id, the forced and the drawn token are the row's.
template <int NT, int CL, bool CACHED, bool REJECT>
__global__ void __launch_bounds__(NT) sample_kernel(int32_t *tok, float *lp, const float *logits,
						    const int32_t *row, const float *u,
						    const int32_t *forced, sample_feed feed, int V,
						    int span, sample_args a)
{
	pdl_begin();
	extern __shared__ float pc[];
	__shared__ shared sh;
	__shared__ bin64 hist[2 * BINS];
	__shared__ bin64 comb[CL > 1 ? BINS : 1];
	__shared__ xslot slots[2];
	__shared__ unsigned sel[2][3];
	// the token and the x_k (sample.h), -1 where not drawn here
	__shared__ int pick, xat[SAMPLE_DRAWS];
	__shared__ unsigned pbits, xpb[SAMPLE_DRAWS];
	cl_ex<CL> x = { slots, 0 };
	const int i = blockIdx.x / CL;
	const unsigned rk = cl_rank<CL>();
	const float *l = logits + (size_t)row[i] * V;
	int n = a.limit > 0 && a.limit < V ? a.limit : V;
	// this block's slice [s0, s0 + Vs), of which [s0, s0 + ns) drawable
	const int s0 = min(V, (int)rk * span), Vs = min(V - s0, span), ns = max(0, min(n - s0, Vs));
	const float *ls = l + s0;
	int per = (Vs + NT - 1) / NT | 1;
	int lo = threadIdx.x * per, hi = min(Vs, lo + per);
	for (int b = threadIdx.x; b < 2 * BINS; b += NT)
		hist[b] = bin64{ 0, 0 };
	if (threadIdx.x == 0) {
		pick = -1;
		for (int k = 0; k < SAMPLE_DRAWS; k++) {
			xat[k] = -1;
			xpb[k] = 0;
		}
	}
	// max over all, the drawable max and its lowest id, bad values, and
	// the sum of exponentials (online: rescaled when the max grows).  The
	// passes over the logits in global memory take ids THREADS apart, so a
	// warp's loads are one coalesced line; the selection below keeps each
	// thread's contiguous run of ids, which its in-order ranks need.
	float mx = -INFINITY, mxall = -INFINITY;
	int am = n, bad = 0;
	double se = 0;
	// (eight loads in flight a thread: the loop's body waits on each;
	// the logits kept in shared memory for the probabilities' pass)
	enum { LOADS = 8 };
	for (int j0 = threadIdx.x; j0 < Vs; j0 += LOADS * NT) {
		float vk[LOADS];
#pragma unroll
		for (int k = 0; k < LOADS; k++)
			vk[k] = j0 + k * NT < Vs ? ls[j0 + k * NT] : -INFINITY;
#pragma unroll
		for (int k = 0; k < LOADS; k++) {
			int j = j0 + k * NT;
			if (j >= Vs)
				break;
			float v = vk[k];
			if (CACHED)
				pc[j] = v;
			bad |= isnan(v) || v == INFINITY;
			if (v > mxall) {
				se = se * (double)expf(mxall - v) + 1.0;
				mxall = v;
			} else {
				se += (double)expf(v - mxall);
			}
			if (j < ns && v > mx) {
				mx = v;
				am = s0 + j;
			}
		}
	}
	bad = __syncthreads_or(bad);
	float mine_max = mxall;
	block_max_argmax(&mxall, &mx, &am, sh);
	if constexpr (CL > 1) {
		if (threadIdx.x == 0)
			x.mine() = xslot{ mxall, mx, am, bad, 0, 0, 0 };
		const xslot *y = x.sync_read();
		float all = y->all, v = y->v;
		int at = y->at, bd = y->bad;
		for (int o = CL / 2; o > 0; o /= 2) {
			all = fmaxf(all, __shfl_xor_sync(0xffffffffu, all, o));
			float v2 = __shfl_xor_sync(0xffffffffu, v, o);
			int a2 = __shfl_xor_sync(0xffffffffu, at, o);
			max_at(&v, &at, v2, a2);
			bd |= __shfl_xor_sync(0xffffffffu, bd, o);
		}
		mxall = all;
		mx = v;
		am = at;
		bad = bd;
	}
	if (bad || mx == -INFINITY) {
		if (rk == 0) {
			if (threadIdx.x == 0) {
				tok[i] = -1;
				lp[i] = NAN;
			}
			feed_next(feed, i, 0);
		}
		cl_sync<CL>(); /* no block leaves while another may read its slots */
		return;
	}
	se = mine_max == -INFINITY ? 0.0 : se * (double)expf(mine_max - mxall);
	int32_t t = am;
	int32_t f = forced ? forced[i] : -1;
	// a temperature whose reciprocal overflows is greedy (the twin's rule;
	// gen/model_decode.c passes 0 for one anyway)
	bool draw = !(f >= 0 && f < V) && a.temperature > 0 && !isinf(1.0f / a.temperature);
	row_view r = { ls, NULL, lo, min(hi, ns), mx, 1.0f / a.temperature };
	if (r.hi < r.lo)
		r.hi = r.lo;
	// the probabilities (in shared memory when they fit), their mass and
	// count, and for a nucleus of every q > 0 the first pass's histogram of
	// the top-p selection, in one pass, summed with the exponentials
	bool built = !REJECT && draw && a.top_k <= 0 && a.top_p < 1;
	unsigned long long mass = 0, members = 0;
	// the rejection's draw on all the mass needs the mass scanned in id
	// order: with the probabilities in shared memory, each thread makes
	// those of its own run of ids, and one scan gives the sums and the
	// draw's place (the sum of exponentials waits for the next reduction)
	const bool fused = REJECT && CACHED && draw;
	cut_sums all_cs = { 0, 0, 0, 0 };
	if (fused) {
		unsigned long long mine = 0;
		for (int j = r.lo; j < r.hi; j++) {
			float p = expf((pc[j] - r.mx) * r.inv_t);
			pc[j] = p;
			mine += q_of(p);
		}
		r.pc = pc;
		unsigned long long ea, eb, ta, tb;
		cluster_scan2<CL>(mine, 0, &ea, &eb, &ta, &tb, sh, x);
		all_cs = cut_sums{ 0, ea, mine, ta };
		mass = ta;
	} else if (draw) {
		run_acc ra = { -1, 0 };
		for (int j = threadIdx.x; j < ns; j += NT) {
			float p = CACHED ? expf((pc[j] - r.mx) * r.inv_t) : prob_of(r, j);
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
	if (!fused) {
		block_sum3(&se, &mass, &members, sh);
		if constexpr (CL > 1) {
			if (threadIdx.x == 0) {
				x.mine().se = se;
				x.mine().a = mass;
				x.mine().b = members;
			}
			const xslot *y = x.sync_read();
			se = cl_lanes_sum<CL>(y->se);
			mass = cl_lanes_sum<CL>(y->a);
			members = cl_lanes_sum<CL>(y->b);
		}
	}
	if (f >= 0 && f < V) {
		t = f;
	} else if (REJECT && draw) {
		// the nucleus by rejection (sample.h): x_k at u_k on every id with
		// mass, the first kept whose mass ranked before is below the target
		cut c = { 0, 0 };
		unsigned long long target = (unsigned long long)((double)a.top_p * (double)mass);
		target = target ? target : 1;
		cut_sums cs = fused ? all_cs : cut_scan<CL, CACHED>(r, c, sh, x);
		const float *ui = u + (size_t)i * SAMPLE_DRAWS;
		unsigned long long want[SAMPLE_DRAWS], all = cs.mass;
#pragma unroll
		for (int k = 0; k < SAMPLE_DRAWS; k++)
			want[k] = want_of(ui[k], cs.mass);
		int xa[SAMPLE_DRAWS];
		unsigned xb[SAMPLE_DRAWS];
		draw_members<CL, CACHED>(r, cs, want, s0, xat, xpb, xa, xb, x);
		unsigned long long before[SAMPLE_DRAWS] = {};
		for (int j = r.lo; j < r.hi; j++) {
			float p = prob<CACHED>(r, j);
			if (!has_mass(p))
				continue;
			unsigned pb = fbits(p);
			unsigned long long q = q_of(p);
#pragma unroll
			for (int k = 0; k < SAMPLE_DRAWS; k++)
				if (pb > xb[k] || (pb == xb[k] && s0 + j < xa[k]))
					before[k] += q;
		}
		cluster_sum_draws<CL>(before, fused ? &se : nullptr, sh, x);
		int kept = -1;
#pragma unroll
		for (int k = SAMPLE_DRAWS - 1; k >= 0; k--)
			if (before[k] < target)
				kept = k;
		if (kept >= 0) {
			int t0 = xa[0];
#pragma unroll
			for (int k = 1; k < SAMPLE_DRAWS; k++)
				t0 = kept == k ? xa[k] : t0;
			if (threadIdx.x == 0 && t0 >= s0 && t0 < s0 + Vs)
				pick = t0;
		} else {
			const int xl = xa[SAMPLE_DRAWS - 1];
			const unsigned long long wl = want[SAMPLE_DRAWS - 1];
			// the nucleus, and the last draw's place among the rejected mass
			// put on it
			unsigned long long left;
			unsigned tau = radix_select<CL, CACHED>(r, c, 0, target, true, false, &left, hist,
							       comb, sel);
			unsigned long long qt = q_of(__uint_as_float(tau)), m = (left + qt - 1) / qt;
			c = cut{ tau, m ? m : 1 };
			cs = cut_scan<CL, CACHED>(r, c, sh, x);
			unsigned long long below = 0;
			if (s0 + r.hi <= xl) {
				below = cs.mine;
			} else if (s0 + r.lo < xl) {
				unsigned long long rank = cs.base;
				for (int j = r.lo; j < r.hi && s0 + j < xl; j++) {
					float p = prob<CACHED>(r, j);
					if (in_cut(p, &rank, c))
						below += q_of(p);
				}
			}
			below = cluster_sum_u64<CL>(below, sh, x);
			walk_to<CACHED>(r, c, cs, reject_want(wl - below, all - cs.mass, cs.mass), s0,
					&pick, &pbits);
		}
		__syncthreads();
		t = pick;
	} else if (!REJECT && draw) {
		cut c = { 0, 0 };
		cut_sums cs = { 0, 0, 0, mass };
		bool scanned = false;
		if (a.top_k > 0 && (unsigned long long)a.top_k < members) {
			unsigned long long left;
			unsigned tau = radix_select<CL, CACHED>(r, c, 0, (unsigned long long)a.top_k, false,
							       false, &left, hist, comb, sel);
			c = cut{ tau, left };
			cs = cut_scan<CL, CACHED>(r, c, sh, x);
			scanned = true;
		}
		if (a.top_p < 1) {
			unsigned long long left;
			unsigned long long target =
				(unsigned long long)((double)a.top_p * (double)cs.mass);
			target = target ? target : 1;
			unsigned tau = radix_select<CL, CACHED>(r, c, cs.base, target, true, built, &left,
							       hist, comb, sel);
			unsigned long long qt = q_of(__uint_as_float(tau)), m = (left + qt - 1) / qt;
			c = cut{ tau, m ? m : 1 };
			scanned = false;
		}
		if (!scanned)
			cs = cut_scan<CL, CACHED>(r, c, sh, x);
		walk_to<CACHED>(r, c, cs, want_of(u[(size_t)i * SAMPLE_DRAWS], cs.mass), s0, &pick,
				&pbits);
		__syncthreads();
		t = pick;
	}
	// the token's block writes it: the drawing one, else the first
	if (draw ? t >= 0 : rk == 0) {
		if (threadIdx.x == 0) {
			tok[i] = t;
			lp[i] = (float)((double)l[t] - ((double)mxall + log(se)));
		}
		feed_next(feed, i, t);
	}
	cl_sync<CL>(); /* no block leaves while another may read its slots */
}

// Blocks a sequence takes: the fewest (a power of two, at most 8) whose
// slices hold at most SLICE ids, with n clusters on at most sms blocks;
// LMPIPE_SAMPLE_CLUSTER caps it (1: a block a sequence; 16 allowed).  A
// block's time is mostly the fixed cost of its passes and barriers, not
// its ids, and a cluster adds its own barriers: on the H200 (top-p 0.95,
// one sequence) V = 10000 took 23.6 us on one block and 22.3 on two,
// V = 50257 65.0 on one, 43.1 on two and 31.2 on eight.
enum { SLICE = 6144 };

static int cluster_for(int n, int V, int sms)
{
	static int cap = -1;
	if (cap < 0) {
		const char *e = getenv("LMPIPE_SAMPLE_CLUSTER");
		int c = e && *e ? atoi(e) : 8;
		cap = c >= 16 ? 16 : c >= 8 ? 8 : c >= 4 ? 4 : c >= 2 ? 2 : 1;
	}
	int cl = 1;
	while (cl < cap && (V + cl - 1) / cl > SLICE && (long)n * cl * 2 <= sms)
		cl *= 2;
	return cl;
}

template <int NT, int CL, bool REJECT>
static int launch_kern(bool cached, int n, size_t smem, void *stream, int32_t *tok, float *lp,
		       const float *logits, const int32_t *row, const float *u,
		       const int32_t *forced, sample_feed fd, int V, int span, sample_args a)
{
	auto kern = cached ? sample_kernel<NT, CL, true, REJECT> : sample_kernel<NT, CL, false, REJECT>;
	static int raised;
	if (!raised) {
		// both variants: the first call may be either (clusters over 8
		// blocks need the non-portable size on each)
		if (cudaFuncSetAttribute(sample_kernel<NT, CL, true, REJECT>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, CACHE_BYTES) !=
		    cudaSuccess)
			return -1;
		if (CL > 8 && (cudaFuncSetAttribute(sample_kernel<NT, CL, true, REJECT>,
						    cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
				       cudaSuccess ||
			       cudaFuncSetAttribute(sample_kernel<NT, CL, false, REJECT>,
						    cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
				       cudaSuccess))
			return -1;
		raised = 1;
	}
	cudaLaunchAttribute at[2];
	int na = 0;
	if (CL > 1) {
		at[na].id = cudaLaunchAttributeClusterDimension;
		at[na].val.clusterDim.x = CL;
		at[na].val.clusterDim.y = 1;
		at[na].val.clusterDim.z = 1;
		na++;
	}
	if (pdl_on()) {
		at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[na].val.programmaticStreamSerializationAllowed = 1;
		na++;
	}
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = dim3((unsigned)(n * CL));
	cfg.blockDim = dim3(NT);
	cfg.dynamicSmemBytes = cached ? smem : 0;
	cfg.stream = (cudaStream_t)stream;
	cfg.attrs = at;
	cfg.numAttrs = na;
	return cudaLaunchKernelEx(&cfg, kern, tok, lp, logits, row, u, forced, fd, V, span, a) ==
			       cudaSuccess
		       ? 0
		       : -1;
}

// launch_kern for each block size, cluster size and way of drawing a
// nucleus the sampler takes, chosen at run time:
// [by rejection][threads 256, 512, 1024][cluster 1, 2, 4, 8, 16].
using launch_fn = int (*)(bool, int, size_t, void *, int32_t *, float *, const float *,
			  const int32_t *, const float *, const int32_t *, sample_feed, int, int,
			  sample_args);
#define LAUNCH_ROW(NT, R)                                                                      \
	{ launch_kern<NT, 1, R>, launch_kern<NT, 2, R>, launch_kern<NT, 4, R>,                 \
	  launch_kern<NT, 8, R>, launch_kern<NT, 16, R> }
static const launch_fn LAUNCH[2][3][5] = {
	{ LAUNCH_ROW(256, false), LAUNCH_ROW(512, false), LAUNCH_ROW(1024, false) },
	{ LAUNCH_ROW(256, true), LAUNCH_ROW(512, true), LAUNCH_ROW(1024, true) },
};
#undef LAUNCH_ROW

// log2 of a power of two up to 16
static int log2_of(int x)
{
	int k = 0;
	while ((1 << k) < x)
		k++;
	return k;
}

}  // namespace

extern "C" int sample_rows_cuda(int32_t *tok, float *lp, const float *logits, const int32_t *row,
				const float *u, const int32_t *forced, const sample_feed *feed,
				int n, int V, sample_args a, void *stream)
{
	if (n <= 0)
		return 0;
	sample_feed fd = feed ? *feed : sample_feed{ NULL, NULL, NULL, NULL, 0 };
	static int sms, nt_env = -1;
	if (!sms) {
		int dev = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
			return -1;
	}
	if (nt_env < 0) {
		const char *e = getenv("LMPIPE_SAMPLE_THREADS");
		int v = e && *e ? atoi(e) : 0;
		nt_env = v == 256 || v == 512 || v == 1024 ? v : 0;
	}
	int cl = cluster_for(n, V, sms);
	int reject = sample_rejects(n, a);
	int span = ((V + cl - 1) / cl + 31) / 32 * 32;
	// the probabilities of a slice in shared memory when they fit beside the rest
	size_t bytes = (size_t)span * sizeof(float);
	bool cache = bytes <= CACHE_BYTES;
	int nt = nt_env ? nt_env : (long)n * cl < sms ? THREADS_FEW : THREADS;
	return LAUNCH[reject][log2_of(nt / THREADS)][log2_of(cl)](cache, n, bytes, stream, tok, lp,
								   logits, row, u, forced, fd, V,
								   span, a);
}
