// adamw.cu: CUDA twin of the AdamW step, the gradient's sum of squares and
// the clip factor (see kernels/adamw.h).  The sum of squares is in double,
// in two fixed-order stages (per-block partials, then one block), so it is
// the same run to run.  The step reads the clip factor from device memory
// and can write the new weights' bf16 compute copy.
#include <math.h>

#include "kernels/adamw.h"
#include "ops_cuda.cuh"

using namespace ops;

namespace {

enum { RED_THREADS = 256 };

// A block's share of the sum of squares: 16-byte loads, two of them in
// flight a thread, into two double sums.  4-byte loads one at a time kept
// too few bytes in flight: on gpt2s's 124 M gradients (an H100, one call)
// the pass took 0.302 ms (2.15 TB/s), now 0.216 ms (3.0 TB/s).  The order
// of the sums depends on n, g's alignment and the grid alone.
__device__ __forceinline__ void sq4(double &s, float4 a)
{
	s = fma((double)a.x, (double)a.x, s);
	s = fma((double)a.y, (double)a.y, s);
	s = fma((double)a.z, (double)a.z, s);
	s = fma((double)a.w, (double)a.w, s);
}

__global__ void sumsq_partial(double *part, const float *__restrict__ g, size_t n)
{
	__shared__ double sh[RED_THREADS];
	double s = 0, s1 = 0;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	const size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t tail = 0;
	if (!((uintptr_t)g & 15)) {
		const float4 *g4 = reinterpret_cast<const float4 *>(g);
		const size_t n4 = n / 4;
		size_t i = i0;
		for (; i + stride < n4; i += 2 * stride) {
			const float4 a = g4[i], b = g4[i + stride];
			sq4(s, a);
			sq4(s1, b);
		}
		if (i < n4)
			sq4(s, g4[i]);
		tail = n4 * 4;
	}
	for (size_t i = tail + i0; i < n; i += stride)
		s = fma((double)g[i], (double)g[i], s);
	s = block_sum(s + s1, sh);
	if (threadIdx.x == 0)
		part[blockIdx.x] = s;
}

__global__ void sumsq_final(double *out, const double *part, int np)
{
	__shared__ double sh[RED_THREADS];
	double s = 0;
	for (int i = threadIdx.x; i < np; i += blockDim.x)
		s += part[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		*out = s;
}

__global__ void clip_kernel(float *scale, const double *sumsq, double max_norm)
{
	double norm = sqrt(*sumsq);
	*scale = (float)(max_norm <= 0 || !(norm > max_norm) ? 1.0 : max_norm / (norm + ADAMW_CLIP_EPS));
}

// The step's constants from dev (adamw.h) when given, computed as the
// host computes them (no contraction into fused multiply-adds), so that
// the two give the same bits.
struct step_consts {
	float step, rbc2, decay;
};

__device__ __forceinline__ step_consts consts(float step, float rbc2, float decay,
					      const double *dev, float wd)
{
	if (dev) {
		float lr = (float)dev[ADAMW_DEV_LR];
		step = (float)__ddiv_rn((double)lr, dev[ADAMW_DEV_BC1]);
		rbc2 = (float)__ddiv_rn(1.0, __dsqrt_rn(dev[ADAMW_DEV_BC2]));
		decay = __fsub_rn(1.0f, __fmul_rn(lr, wd));
	}
	return { step, rbc2, decay };
}

// One element's step, shared by both kernels so that they give the same
// bits; p becomes the new weight.
__device__ __forceinline__ void elem(float &p, float g, float &m, float &v, float s, float b1,
				     float b2, float eps, step_consts c)
{
	float gi = g * s;
	float mi = b1 * m + (1.0f - b1) * gi;
	float vi = b2 * v + (1.0f - b2) * gi * gi;
	m = mi;
	v = vi;
	p = p * c.decay - c.step * mi / (sqrtf(vi) * c.rbc2 + eps);
}

__global__ void step_kernel(float *p, const float *g, float *m, float *v, bf16 *p_act, size_t n,
			    float b1, float b2, float eps, float step, float rbc2, float decay,
			    const float *grad_scale, const double *dev, float wd)
{
	float s = *grad_scale;
	step_consts c = consts(step, rbc2, decay, dev, wd);
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float pi = p[i], mi = m[i], vi = v[i];
		elem(pi, g[i], mi, vi, s, b1, b2, eps, c);
		m[i] = mi;
		v[i] = vi;
		p[i] = pi;
		if (p_act)
			p_act[i] = to_bf16(pi);
	}
}

// adamw_multi: the segments by value; a block takes CHUNK elements of
// their concatenation, in 16-byte vectors where a piece is aligned.
enum { CHUNK = BLOCK * 4 * 4 };

struct seg_table {
	size_t off[ADAMW_SEGS_MAX], start[ADAMW_SEGS_MAX + 1];  // start: prefix of the lengths
	unsigned long long decay;                            // bit i: segment i decays
	int n;
};

__device__ __forceinline__ void elem_at(size_t i, float *p, const float *g, float *m, float *v,
					bf16 *p_act, float s, float b1, float b2, float eps,
					step_consts c)
{
	float pi = p[i], mi = m[i], vi = v[i];
	elem(pi, g[i], mi, vi, s, b1, b2, eps, c);
	m[i] = mi;
	v[i] = vi;
	p[i] = pi;
	if (p_act)
		p_act[i] = to_bf16(pi);
}

__global__ void __launch_bounds__(BLOCK) multi_kernel(float *p, const float *g, float *m, float *v,
						      bf16 *p_act, const __grid_constant__ seg_table t,
						      float b1, float b2, float eps, float step,
						      float rbc2, float decay, const float *grad_scale,
						      const double *dev, float wd)
{
	float s = *grad_scale;
	// no decay: 1 - lr * 0, which is 1 exactly, from the host or from dev
	step_consts cd = consts(step, rbc2, decay, dev, wd), cn = cd;
	cn.decay = 1.0f;
	size_t v0 = (size_t)blockIdx.x * CHUNK, v1 = v0 + CHUNK;
	if (v1 > t.start[t.n])
		v1 = t.start[t.n];
	int k = 0;
	while (t.start[k + 1] <= v0)
		k++;
	for (; v0 < v1; k++) {
		size_t e = t.start[k + 1] < v1 ? t.start[k + 1] : v1;
		step_consts c = (t.decay >> k) & 1 ? cd : cn;
		size_t a = t.off[k] + (v0 - t.start[k]), b = a + (e - v0);
		size_t a4 = (a + 3) & ~(size_t)3, b4 = b & ~(size_t)3;
		if (a4 > b4)
			a4 = b4 = b;
		for (size_t i = a + threadIdx.x; i < a4; i += BLOCK)
			elem_at(i, p, g, m, v, p_act, s, b1, b2, eps, c);
		for (size_t i = b4 + threadIdx.x; i < b; i += BLOCK)
			elem_at(i, p, g, m, v, p_act, s, b1, b2, eps, c);
		for (size_t i = a4 + 4 * threadIdx.x; i < b4; i += 4 * BLOCK) {
			float4 pp = *(float4 *)(p + i), mm = *(float4 *)(m + i), vv = *(float4 *)(v + i);
			float4 gg = *(const float4 *)(g + i);
			elem(pp.x, gg.x, mm.x, vv.x, s, b1, b2, eps, c);
			elem(pp.y, gg.y, mm.y, vv.y, s, b1, b2, eps, c);
			elem(pp.z, gg.z, mm.z, vv.z, s, b1, b2, eps, c);
			elem(pp.w, gg.w, mm.w, vv.w, s, b1, b2, eps, c);
			*(float4 *)(m + i) = mm;
			*(float4 *)(v + i) = vv;
			*(float4 *)(p + i) = pp;
			if (p_act) {
				__nv_bfloat162 lo = __floats2bfloat162_rn(pp.x, pp.y);
				__nv_bfloat162 hi = __floats2bfloat162_rn(pp.z, pp.w);
				uint2 u = { *(uint32_t *)&lo, *(uint32_t *)&hi };
				*(uint2 *)(p_act + i) = u;
			}
		}
		v0 = e;
	}
}

// The host's constants (adamw_step_cuda's) when there is no dev.
void host_consts(const adamw_hparams *h, float *step, float *rbc2, float *decay)
{
	*step = *rbc2 = *decay = 0;
	if (!h->dev) {
		double dv[ADAMW_DEV_N];
		adamw_dev_values(dv, h->lr, h->beta1, h->beta2, h->t);
		*step = (float)(h->lr / dv[ADAMW_DEV_BC1]);
		*rbc2 = (float)(1.0 / sqrt(dv[ADAMW_DEV_BC2]));
		*decay = 1.0f - h->lr * h->weight_decay;
	}
}

}  // namespace

extern "C" int sumsq_cuda(double *out, const float *g, size_t n, double *partials, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	unsigned blocks = grid_for(n, RED_THREADS);
	if (blocks > SUMSQ_CUDA_PARTIALS)
		blocks = SUMSQ_CUDA_PARTIALS;
	sumsq_partial<<<blocks, RED_THREADS, 0, st>>>(partials, g, n);
	sumsq_final<<<1, RED_THREADS, 0, st>>>(out, partials, (int)blocks);
	return launched();
}

extern "C" int clip_scale_cuda(float *scale, const double *sumsq, double max_norm, void *stream)
{
	clip_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(scale, sumsq, max_norm);
	return launched();
}

extern "C" int adamw_step_cuda(float *p, const float *g, float *m, float *v, uint16_t *p_act,
			       size_t n, const adamw_hparams *h, const float *grad_scale, void *stream)
{
	float step, rbc2, decay;
	host_consts(h, &step, &rbc2, &decay);
	step_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(
		p, g, m, v, (bf16 *)p_act, n, h->beta1, h->beta2, h->eps, step, rbc2, decay, grad_scale,
		h->dev, h->weight_decay);
	return launched();
}

extern "C" int adamw_multi_cuda(float *p, const float *g, float *m, float *v, uint16_t *p_act,
				const adamw_seg *segs, int n_segs, const adamw_hparams *h,
				const float *grad_scale, void *stream)
{
	float step, rbc2, decay;
	host_consts(h, &step, &rbc2, &decay);
	for (int s0 = 0; s0 < n_segs; s0 += ADAMW_SEGS_MAX) {
		seg_table t = {};
		t.n = n_segs - s0 < ADAMW_SEGS_MAX ? n_segs - s0 : ADAMW_SEGS_MAX;
		for (int i = 0; i < t.n; i++) {
			t.off[i] = segs[s0 + i].off;
			t.start[i + 1] = t.start[i] + segs[s0 + i].n;
			t.decay |= (unsigned long long)(segs[s0 + i].decay != 0) << i;
		}
		size_t chunks = (t.start[t.n] + CHUNK - 1) / CHUNK;
		if (!chunks)
			continue;
		multi_kernel<<<(unsigned)chunks, BLOCK, 0, (cudaStream_t)stream>>>(
			p, g, m, v, (bf16 *)p_act, t, h->beta1, h->beta2, h->eps, step, rbc2, decay,
			grad_scale, h->dev, h->weight_decay);
		if (launched())
			return -1;
	}
	return 0;
}
