/* attention.c: the plain C reference twin of the attention op (see
 * attention.h): float32 forward saving the log-sum-exp, and the backward
 * pass that recomputes the probabilities from it.  One (batch, head) pair
 * per OpenMP iteration; each keeps one row of scores in scratch memory. */
#include "kernels/attention.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

const char *attn_strerror(int code)
{
	switch (code) {
	case ATTN_OK: return "success";
	case ATTN_EHEADDIM: return "head dimension not supported by this backend";
	case ATTN_ESHAPE: return "bad shape (B, H, T and D must be positive and not too large)";
	case ATTN_EDEVICE: return "CUDA error";
	case ATTN_ENOMEM: return "out of memory";
	case ATTN_ENOCUDA: return "built without CUDA";
	case ATTN_EALIGN: return "CUDA tensor pointer is NULL or not 16-byte aligned";
	default: return "unknown attention error";
	}
}

/* 0 when B, H, T, D are positive and every index fits in a size_t. */
static int check_shape(int B, int H, int T, int D)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return ATTN_ESHAPE;
	double n = (double)B * H * T * D;
	if (n * sizeof(float) > (double)PTRDIFF_MAX)
		return ATTN_ESHAPE;
	return ATTN_OK;
}

static float dot(const float *a, const float *b, int n)
{
	float s = 0;
	for (int d = 0; d < n; d++)
		s += a[d] * b[d];
	return s;
}

/* Scores of query row qi against keys 0..n-1 into s; returns their max. */
static float scores(const float *qi, const float *k, float *s, int n, int D, float scale)
{
	float m = -INFINITY;
	for (int j = 0; j < n; j++) {
		s[j] = scale * dot(qi, k + (size_t)j * D, D);
		if (s[j] > m)
			m = s[j];
	}
	return m;
}

/* One (batch, head) slice: T rows of D. */
static void fwd_slice(const float *q, const float *k, const float *v, float *o, float *lse,
		      int T, int D, int causal, float scale, float *s)
{
	for (int i = 0; i < T; i++) {
		int n = causal ? i + 1 : T;
		float *oi = o + (size_t)i * D;
		float m = scores(q + (size_t)i * D, k, s, n, D, scale);
		float sum = 0;
		for (int j = 0; j < n; j++) {
			s[j] = expf(s[j] - m);
			sum += s[j];
		}
		for (int d = 0; d < D; d++)
			oi[d] = 0;
		for (int j = 0; j < n; j++) {
			const float *vj = v + (size_t)j * D;
			float p = s[j] / sum;
			for (int d = 0; d < D; d++)
				oi[d] += p * vj[d];
		}
		lse[i] = m + logf(sum);
	}
}

int attn_fwd_cpu(const float *q, const float *k, const float *v, float *o, float *lse,
		 int B, int H, int T, int D, int causal, float scale)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	int nomem = 0;
#pragma omp parallel reduction(| : nomem)
	{
		float *s = malloc((size_t)T * sizeof *s);
		if (!s)
			nomem = 1;
#pragma omp for schedule(dynamic)
		for (int bh = 0; bh < B * H; bh++) {
			size_t off = (size_t)bh * T * D;
			if (s)
				fwd_slice(q + off, k + off, v + off, o + off, lse + (size_t)bh * T,
					  T, D, causal, scale, s);
		}
		free(s);
	}
	return nomem ? ATTN_ENOMEM : ATTN_OK;
}

/* Backward of one (batch, head) slice.  With p = exp(s - lse),
 * dp_j = dout_i . v_j and delta_i = dout_i . o_i:
 *   ds_j = p_j (dp_j - delta_i),  dq_i = scale sum_j ds_j k_j,
 *   dk_j += scale ds_j q_i,       dv_j += p_j dout_i. */
static void bwd_slice(const float *q, const float *k, const float *v, const float *o,
		      const float *dout, const float *lse, float *dq, float *dk, float *dv,
		      int T, int D, int causal, float scale, float *s)
{
	for (size_t x = 0; x < (size_t)T * D; x++)
		dk[x] = dv[x] = 0;
	for (int i = 0; i < T; i++) {
		int n = causal ? i + 1 : T;
		const float *qi = q + (size_t)i * D, *doi = dout + (size_t)i * D;
		float *dqi = dq + (size_t)i * D;
		float delta = dot(doi, o + (size_t)i * D, D);
		scores(qi, k, s, n, D, scale);
		for (int d = 0; d < D; d++)
			dqi[d] = 0;
		for (int j = 0; j < n; j++) {
			const float *kj = k + (size_t)j * D;
			float *dkj = dk + (size_t)j * D, *dvj = dv + (size_t)j * D;
			float p = expf(s[j] - lse[i]);
			float ds = p * (dot(doi, v + (size_t)j * D, D) - delta) * scale;
			for (int d = 0; d < D; d++) {
				dqi[d] += ds * kj[d];
				dkj[d] += ds * qi[d];
				dvj[d] += p * doi[d];
			}
		}
	}
}

int attn_bwd_cpu(const float *q, const float *k, const float *v, const float *o,
		 const float *dout, const float *lse, float *dq, float *dk, float *dv,
		 int B, int H, int T, int D, int causal, float scale)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	int nomem = 0;
#pragma omp parallel reduction(| : nomem)
	{
		float *s = malloc((size_t)T * sizeof *s);
		if (!s)
			nomem = 1;
#pragma omp for schedule(dynamic)
		for (int bh = 0; bh < B * H; bh++) {
			size_t off = (size_t)bh * T * D;
			if (s)
				bwd_slice(q + off, k + off, v + off, o + off, dout + off,
					  lse + (size_t)bh * T, dq + off, dk + off, dv + off,
					  T, D, causal, scale, s);
		}
		free(s);
	}
	return nomem ? ATTN_ENOMEM : ATTN_OK;
}
