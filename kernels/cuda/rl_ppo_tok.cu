// rl_ppo_tok.cu: CUDA twin of rl-update's PPO loss op (see
// kernels/rl_ppo_tok.h): the value head a warp a token; one block a row
// writes the tokens' weights and gradients and the row's partial
// statistics, added in row order by one thread a statistic; the head's
// gradient as partial sums over chunks of RL_PPO_CHUNK tokens, added in
// chunk order (the same bits run to run); the hidden states' gradient
// elementwise.
#include "kernels/rl_ppo_tok.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { ROW_THREADS = 256, VALUE_WARPS = 8, GRAD_COLS = 128 };

__device__ double warp_sum_d(double x)
{
	for (int o = WARP / 2; o > 0; o /= 2)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

// values[i] = b + w . h_i, a warp a token (targets not NULL: 0 where the
// token does not count).
__global__ void value_kernel(float *values, const bf16 *hidden, const float *head,
			     const int32_t *targets, int N, int C)
{
	int i = blockIdx.x * VALUE_WARPS + threadIdx.x / WARP, lane = threadIdx.x % WARP;
	if (i >= N)
		return;
	if (targets && targets[i] < 0) {
		if (lane == 0)
			values[i] = 0.0f;
		return;
	}
	const bf16 *x = hidden + (size_t)i * C;
	double s = 0;
	for (int j = lane; j < C; j += WARP)
		s += (double)head[j] * (double)ld(x + j);
	s = warp_sum_d(s);
	if (lane == 0)
		values[i] = (float)(s + head[C]);
}

__device__ double value_loss(float v, float old_v, float ret, float clip, double *dv)
{
	double diff = (double)v - old_v;
	double dc = diff < -clip ? -clip : diff > clip ? clip : diff;
	double vc = old_v + dc;
	double e1 = (double)v - ret, e2 = vc - ret;
	if (e1 * e1 >= e2 * e2) {
		*dv = e1;
		return 0.5 * e1 * e1;
	}
	*dv = (diff > -clip && diff < clip) ? e2 : 0.0;
	return 0.5 * e2 * e2;
}

// Row b: dvalue holds the values on entry and their gradients on exit.
__global__ void row_kernel(float *w, float *dent, float *dvalue, double *ws, const float *ce,
			   const int32_t *targets, const float *ent, const float *old,
			   const float *adv, const float *old_v, const float *ret,
			   const double *row_scale, int T, rl_ppo_tok_args a)
{
	__shared__ double sh[ROW_THREADS];
	int b = blockIdx.x;
	size_t o = (size_t)b * T;
	double part[RL_PPO_N] = { 0 }, scale = row_scale[b];
	for (int t = threadIdx.x; t < T; t += blockDim.x) {
		size_t i = o + t;
		if (targets[i] < 0) {
			w[i] = dent[i] = dvalue[i] = 0.0f;
			continue;
		}
		float lp = ce[i] == 0.0f ? 0.0f : -ce[i], v = dvalue[i];
		double A = adv[i], ratio = exp((double)lp - (double)old[i]);
		double rc = ratio < 1.0 - a.clip_low ? 1.0 - a.clip_low
			  : ratio > 1.0 + a.clip_high ? 1.0 + a.clip_high : ratio;
		double un = ratio * A, cl = rc * A;
		int clipped = cl < un;
		float pg = (float)-(clipped ? cl : un), dpg = clipped ? 0.0f : (float)(-A * ratio);
		double dv, vf = value_loss(v, old_v[i], ret[i], a.vf_clip, &dv);
		double vu = (double)v - ret[i];
		part[RL_PPO_LOSS] += pg + a.vf_coef * vf - a.ent_coef * ent[i];
		w[i] = -(float)(scale * dpg);
		dvalue[i] = (float)(scale * a.vf_coef * dv);
		dent[i] = (float)(-scale * a.ent_coef);
		part[RL_PPO_PG] += pg;
		part[RL_PPO_VF] += vf;
		part[RL_PPO_ENT] += ent[i];
		part[RL_PPO_CLIPPED] += clipped;
		part[RL_PPO_VF_CLIPPED] += 0.5 * vu * vu < vf;
		part[RL_PPO_RATIO] += ratio;
		part[RL_PPO_TOKENS] += 1.0;
		part[RL_PPO_LOGP] += lp;
	}
	part[RL_PPO_LOSS] *= scale;
	for (int k = 0; k < RL_PPO_N; k++) {
		double s = block_sum(part[k], sh);
		if (threadIdx.x == 0)
			ws[(size_t)b * RL_PPO_N + k] = s;
		__syncthreads();
	}
}

__global__ void sum_rows(double *stats, const double *ws, int rows)
{
	int k = threadIdx.x;
	if (k >= RL_PPO_N)
		return;
	double s = stats[k];
	for (int b = 0; b < rows; b++)
		s += ws[(size_t)b * RL_PPO_N + k];
	stats[k] = s;
}

// part[c, j] = the sum over chunk c's counted tokens of dvalue_i h_ij (j <
// C) or of dvalue_i (j = C).
__global__ void head_grad_part(float *part, const float *dvalue, const bf16 *hidden,
			       const int32_t *targets, int N, int C)
{
	int j = blockIdx.x * GRAD_COLS + threadIdx.x, c = blockIdx.y;
	if (j > C)
		return;
	int lo = c * RL_PPO_CHUNK, hi = lo + RL_PPO_CHUNK < N ? lo + RL_PPO_CHUNK : N;
	float s = 0.0f;
	for (int i = lo; i < hi; i++)
		if (targets[i] >= 0)
			s += dvalue[i] * (j < C ? ld(hidden + (size_t)i * C + j) : 1.0f);
	part[(size_t)c * (C + 1) + j] = s;
}

__global__ void head_grad_sum(float *hgrad, const float *part, int chunks, int C)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j > C)
		return;
	float s = 0.0f;
	for (int c = 0; c < chunks; c++)
		s += part[(size_t)c * (C + 1) + j];
	hgrad[j] += s;
}

__global__ void dhidden_kernel(float *dhidden, const float *dvalue, const float *head, size_t n,
			       int C)
{
	for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
	     k += (size_t)gridDim.x * blockDim.x)
		dhidden[k] = dvalue[k / C] * head[k % C];
}

}  // namespace

extern "C" int rl_ppo_value_cuda(float *values, const void *hidden, const float *head, int N,
				 int C, void *stream)
{
	if (N <= 0)
		return 0;
	unsigned g = (unsigned)((N + VALUE_WARPS - 1) / VALUE_WARPS);
	value_kernel<<<g, VALUE_WARPS * WARP, 0, (cudaStream_t)stream>>>(
		values, (const bf16 *)hidden, head, NULL, N, C);
	return launched();
}

extern "C" int rl_ppo_tok_cuda(float *w, float *dent, float *dvalue, float *dhidden, float *hgrad,
			       double *stats, double *ws, const float *ce, const int32_t *targets,
			       const void *hidden, const float *head, const float *ent,
			       const float *old, const float *adv, const float *old_v,
			       const float *ret, const double *row_scale, int B, int T, int C,
			       rl_ppo_tok_args a, void *stream)
{
	if (B <= 0 || T <= 0)
		return 0;
	cudaStream_t st = (cudaStream_t)stream;
	const bf16 *h = (const bf16 *)hidden;
	int N = B * T, chunks = (N + RL_PPO_CHUNK - 1) / RL_PPO_CHUNK;
	float *part = (float *)(ws + (size_t)B * RL_PPO_N);
	value_kernel<<<(N + VALUE_WARPS - 1) / VALUE_WARPS, VALUE_WARPS * WARP, 0, st>>>(
		dvalue, h, head, targets, N, C);
	row_kernel<<<B, ROW_THREADS, 0, st>>>(w, dent, dvalue, ws, ce, targets, ent, old, adv, old_v,
					      ret, row_scale, T, a);
	sum_rows<<<1, WARP, 0, st>>>(stats, ws, B);
	dim3 grid((C + 1 + GRAD_COLS - 1) / GRAD_COLS, chunks);
	head_grad_part<<<grid, GRAD_COLS, 0, st>>>(part, dvalue, h, targets, N, C);
	head_grad_sum<<<(C + 1 + BLOCK - 1) / BLOCK, BLOCK, 0, st>>>(hgrad, part, chunks, C);
	size_t n = (size_t)N * C;
	dhidden_kernel<<<grid_for(n), BLOCK, 0, st>>>(dhidden, dvalue, head, n, C);
	return launched();
}
