// rl_tok.cu: CUDA twin of rl-update's per-token losses (see
// kernels/rl_tok.h): one block a row (DPO: a pair) writes the weights and
// the row's partial statistics, reduced in a fixed order; one thread a
// statistic then adds the rows' partials in row order (the same bits run
// to run).
#include "kernels/rl_tok.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { ROW_THREADS = 256 };

__device__ float tok_logp(float ce) { return ce == 0.0f ? 0.0f : -ce; }

__global__ void pg_kernel(float *w, double *ws, const float *ce, const int32_t *targets,
			  const float *score, const double *row_w, const float *old,
			  const float *ref, const float *ent, int T, rl_tok_args a)
{
	__shared__ double sh[ROW_THREADS];
	int b = blockIdx.x;
	size_t o = (size_t)b * T;
	double part[RL_ST_N] = { 0 };
	float sc = score[b];
	double rw = row_w[b];
	for (int t = threadIdx.x; t < T; t += blockDim.x) {
		if (targets[o + t] < 0) {
			w[o + t] = 0.0f;
			continue;
		}
		float lp = tok_logp(ce[o + t]);
		double l, d;
		if (a.clip) {
			double adv = sc, ratio = exp((double)lp - (double)old[o + t]);
			double rc = ratio < 1.0 - a.clip_low ? 1.0 - a.clip_low
				  : ratio > 1.0 + a.clip_high ? 1.0 + a.clip_high : ratio;
			double un = ratio * adv, cl = rc * adv;
			int clipped = cl < un;
			l = (float)-(clipped ? cl : un);
			d = clipped ? 0.0f : (float)(-adv * ratio);
			part[RL_ST_CLIPPED] += clipped;
			part[RL_ST_RATIO] += ratio;
		} else {
			l = -sc * lp;
			d = -sc;
			part[RL_ST_RATIO] += 1.0;
		}
		if (ref) {
			double x = (double)ref[o + t] - (double)lp, k = exp(x) - x - 1.0;
			l += a.kl_beta * k;
			d += a.kl_beta * (1.0 - exp(x));
			part[RL_ST_KL] += k;
		}
		part[RL_ST_LOSS] += l * rw;
		part[RL_ST_TOKENS] += 1.0;
		part[RL_ST_LOGP] += lp;
		if (ent)
			part[RL_ST_ENT] += ent[o + t];
		w[o + t] = -(float)(d * rw);
	}
	for (int k = 0; k < RL_ST_N; k++) {
		double s = block_sum(part[k], sh);
		if (threadIdx.x == 0)
			ws[(size_t)b * RL_ST_N + k] = s;
		__syncthreads();
	}
}

// Row r's summed log-prob and counted tokens, on every thread.
__device__ double row_logp(const float *ce, const int32_t *tg, int T, double *count, double *sh)
{
	double s = 0, n = 0;
	for (int t = threadIdx.x; t < T; t += blockDim.x)
		if (tg[t] >= 0) {
			s += tok_logp(ce[t]);
			n += 1;
		}
	double r = block_sum(s, sh);
	__syncthreads();
	*count = block_sum(n, sh);
	__syncthreads();
	return r;
}

__device__ double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

__global__ void dpo_kernel(float *w, double *ws, const float *ce, const int32_t *targets,
			   const double *ref, double beta, double npairs, int T)
{
	__shared__ double sh[ROW_THREADS];
	int k = blockIdx.x;
	size_t c = (size_t)2 * k * T, r = c + (size_t)T;
	double nc, nr, lc = row_logp(ce + c, targets + c, T, &nc, sh),
	       lr = row_logp(ce + r, targets + r, T, &nr, sh);
	double margin = (lc - ref[2 * k]) - (lr - ref[2 * k + 1]), z = beta * margin;
	double sig_neg = 1.0 / (1.0 + exp(z));
	float wc = (float)(beta * sig_neg / npairs), wr = (float)(-(beta * sig_neg) / npairs);
	for (int t = threadIdx.x; t < T; t += blockDim.x) {
		w[c + t] = targets[c + t] >= 0 ? wc : 0.0f;
		w[r + t] = targets[r + t] >= 0 ? wr : 0.0f;
	}
	if (threadIdx.x == 0) {
		double *p = ws + (size_t)k * RL_ST_N;
		for (int j = 0; j < RL_ST_N; j++)
			p[j] = 0;
		p[RL_DPO_LOSS] = softplus(-z) / npairs;
		p[RL_DPO_TOKENS] = nc + nr;
		p[RL_DPO_LOGP] = lc + lr;
		p[RL_DPO_MARGIN] = margin;
		p[RL_DPO_RIGHT] = margin > 0;
		p[RL_DPO_PAIRS] = 1;
	}
}

// stats[k] += the rows' partials of statistic k, in row order.
__global__ void sum_rows(double *stats, const double *ws, int rows)
{
	int k = threadIdx.x;
	if (k >= RL_ST_N)
		return;
	double s = stats[k];
	for (int b = 0; b < rows; b++)
		s += ws[(size_t)b * RL_ST_N + k];
	stats[k] = s;
}

}  // namespace

extern "C" int rl_tok_pg_cuda(float *w, double *stats, double *ws, const float *ce,
			      const int32_t *targets, const float *score, const double *row_w,
			      const float *old, const float *ref, const float *ent, int B, int T,
			      rl_tok_args a, void *stream)
{
	if (B <= 0)
		return 0;
	cudaStream_t st = (cudaStream_t)stream;
	pg_kernel<<<B, ROW_THREADS, 0, st>>>(w, ws, ce, targets, score, row_w, old, ref, ent, T, a);
	sum_rows<<<1, WARP, 0, st>>>(stats, ws, B);
	return launched();
}

extern "C" int rl_tok_dpo_cuda(float *w, double *stats, double *ws, const float *ce,
			       const int32_t *targets, const double *ref, double beta, double npairs,
			       int B, int T, void *stream)
{
	if (B < 2)
		return 0;
	cudaStream_t st = (cudaStream_t)stream;
	dpo_kernel<<<B / 2, ROW_THREADS, 0, st>>>(w, ws, ce, targets, ref, beta, npairs, T);
	sum_rows<<<1, WARP, 0, st>>>(stats, ws, B / 2);
	return launched();
}
