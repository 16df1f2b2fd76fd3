// attention_fwd.cuh: the per-row pieces of the attention forward that its
// kernels share (attention_fwd_ws.cu, variants/attention_fwd_fa2.cu): causal and tail
// masking of a score fragment, one online-softmax step, and the store of
// the normalised output rows with their log-sum-exp.  Fragments have the mma.sync C layout per
// warp (mma.cuh): thread (g, t) holds rows g and g + 8, columns 8i + 2t
// and 8i + 2t + 1.
#ifndef LMPIPE_ATTENTION_FWD_CUH
#define LMPIPE_ATTENTION_FWD_CUH

#include "mma.cuh"

#include <math.h>

namespace attn {

constexpr float LOG2E = 1.4426950408889634f;

// Scores of keys past T, or (causal) after the row, become -inf.  s is
// this warp's 16 x BC tile at key k0, first row wrow.
template <int BC>
__device__ __forceinline__ void mask_tile(float (&s)[BC / 8][4], int k0, int wrow, int g, int t,
					  int T, int causal)
{
	if (k0 + BC <= T && !(causal && k0 + BC - 1 > wrow))
		return;
#pragma unroll
	for (int nt = 0; nt < BC / 8; nt++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int key = k0 + nt * 8 + 2 * t + (e & 1);
			int row = wrow + g + (e >> 1) * 8;
			if (key >= T || (causal && key > row))
				s[nt][e] = -INFINITY;
		}
}

// One online-softmax step for this thread's two rows: raise the running
// max mx, turn s into exp2(s sl2 - max sl2), rescale the running sum, and
// return in alpha the factor the output accumulators must be scaled by.
// sum stays this thread's partial sum (the quad's four partials are added
// in store_rows).
template <int BC>
__device__ __forceinline__ void softmax_rows(float (&s)[BC / 8][4], float (&mx)[2],
					     float (&sum)[2], float (&alpha)[2], float sl2)
{
#pragma unroll
	for (int r = 0; r < 2; r++) {
		float m = mx[r];
#pragma unroll
		for (int nt = 0; nt < BC / 8; nt++)
			m = fmaxf(m, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
		m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
		m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
		// A row with no key yet keeps max -inf: offset 0 keeps exp2 at 0.
		float ms = m == -INFINITY ? 0.f : m * sl2;
		alpha[r] = exp2_ftz(mx[r] * sl2 - ms);
		mx[r] = m;
		float ls = 0;
#pragma unroll
		for (int nt = 0; nt < BC / 8; nt++) {
			s[nt][2 * r] = exp2_ftz(fmaf(s[nt][2 * r], sl2, -ms));
			s[nt][2 * r + 1] = exp2_ftz(fmaf(s[nt][2 * r + 1], sl2, -ms));
			ls += s[nt][2 * r] + s[nt][2 * r + 1];
		}
		sum[r] = sum[r] * alpha[r] + ls;
	}
}

// Scale this thread's two output rows by alpha.
template <int D>
__device__ __forceinline__ void rescale_rows(float (&acc)[D / 8][4], const float (&alpha)[2])
{
#pragma unroll
	for (int dt = 0; dt < D / 8; dt++) {
		acc[dt][0] *= alpha[0];
		acc[dt][1] *= alpha[0];
		acc[dt][2] *= alpha[1];
		acc[dt][3] *= alpha[1];
	}
}

// softmax_rows, then the rescale of the output accumulators.
template <int BC, int D>
__device__ __forceinline__ void online_softmax(float (&s)[BC / 8][4], float (&acc)[D / 8][4],
					       float (&mx)[2], float (&sum)[2], float sl2)
{
	float alpha[2];
	softmax_rows<BC>(s, mx, sum, alpha, sl2);
	rescale_rows<D>(acc, alpha);
}

// Normalise and store this thread's two output rows and their lse (lse
// points at this head's T values; o at its first row, rows ld elements
// apart).
template <int D>
__device__ __forceinline__ void store_rows(bf16 *o, float *lse, float (&acc)[D / 8][4],
					   const float (&mx)[2], float (&sum)[2], int wrow, int g,
					   int t, int T, float scale, size_t ld = D)
{
#pragma unroll
	for (int r = 0; r < 2; r++) {
		sum[r] += __shfl_xor_sync(0xffffffff, sum[r], 1);
		sum[r] += __shfl_xor_sync(0xffffffff, sum[r], 2);
		int row = wrow + g + r * 8;
		if (row >= T)
			continue;
		float inv = 1.f / sum[r];
		bf16 *orow = o + (size_t)row * ld;
#pragma unroll
		for (int dt = 0; dt < D / 8; dt++)
			*reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) =
				pack_bf16(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
		if (t == 0)
			lse[row] = mx[r] * scale + logf(sum[r]);
	}
}

}  // namespace attn

#endif
