/* attn_ref.h: attention in double precision, straight from the definition
 * (softmax(scale q k^T + mask) v and its gradients), the yardstick for the
 * CPU twin and the CUDA kernels in the tests.  Layout [B, H, T, D] as in
 * kernels/attention.h.  Also small helpers the attention tests share. */
#ifndef LMPIPE_ATTN_REF_H
#define LMPIPE_ATTN_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Forward of one (batch, head) slice; p (T x T scratch) gets the
 * probabilities.  Masked entries have p = 0. */
static inline void ref_fwd_slice(const double *q, const double *k, const double *v, double *o,
				 double *lse, double *p, int T, int D, int causal, double scale)
{
	for (int i = 0; i < T; i++) {
		int n = causal ? i + 1 : T;
		double m = -INFINITY, sum = 0;
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int d = 0; d < D; d++)
				s += q[(size_t)i * D + d] * k[(size_t)j * D + d];
			p[(size_t)i * T + j] = s * scale;
			if (p[(size_t)i * T + j] > m)
				m = p[(size_t)i * T + j];
		}
		for (int j = 0; j < T; j++) {
			double e = j < n ? exp(p[(size_t)i * T + j] - m) : 0;
			p[(size_t)i * T + j] = e;
			sum += e;
		}
		for (int d = 0; d < D; d++) {
			double acc = 0;
			for (int j = 0; j < n; j++)
				acc += p[(size_t)i * T + j] * v[(size_t)j * D + d];
			o[(size_t)i * D + d] = acc / sum;
		}
		for (int j = 0; j < n; j++)
			p[(size_t)i * T + j] /= sum;
		lse[i] = m + log(sum);
	}
}

/* Forward over [B, H, T, D]; lse may be NULL. */
static inline void ref_fwd(const double *q, const double *k, const double *v, double *o,
			   double *lse, int B, int H, int T, int D, int causal, double scale)
{
	double *p = malloc((size_t)T * T * sizeof *p);
	double *l = malloc((size_t)T * sizeof *l);
	for (int bh = 0; bh < B * H; bh++) {
		size_t off = (size_t)bh * T * D;
		ref_fwd_slice(q + off, k + off, v + off, o + off, l, p, T, D, causal, scale);
		for (int i = 0; lse && i < T; i++)
			lse[(size_t)bh * T + i] = l[i];
	}
	free(p);
	free(l);
}

/* Analytic gradients of sum(o * dout): dP = dout v^T, dS = P (dP - rowsum(P dP)),
 * dq = scale dS k, dk = scale dS^T q, dv = P^T dout. */
static inline void ref_bwd(const double *q, const double *k, const double *v, const double *dout,
			   double *dq, double *dk, double *dv, int B, int H, int T, int D,
			   int causal, double scale)
{
	double *p = malloc((size_t)T * T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
	double *o = malloc((size_t)T * D * sizeof *o), *l = malloc((size_t)T * sizeof *l);
	for (int bh = 0; bh < B * H; bh++) {
		size_t off = (size_t)bh * T * D;
		const double *qs = q + off, *ks = k + off, *vs = v + off, *dos = dout + off;
		double *dqs = dq + off, *dks = dk + off, *dvs = dv + off;
		ref_fwd_slice(qs, ks, vs, o, l, p, T, D, causal, scale);
		for (size_t x = 0; x < (size_t)T * D; x++)
			dqs[x] = dks[x] = dvs[x] = 0;
		for (int i = 0; i < T; i++) {
			double rs = 0;
			for (int j = 0; j < T; j++) {
				double a = 0;
				for (int d = 0; d < D; d++)
					a += dos[(size_t)i * D + d] * vs[(size_t)j * D + d];
				dp[j] = a;
				rs += p[(size_t)i * T + j] * a;
			}
			for (int j = 0; j < T; j++) {
				double pij = p[(size_t)i * T + j], ds = pij * (dp[j] - rs) * scale;
				for (int d = 0; d < D; d++) {
					dqs[(size_t)i * D + d] += ds * ks[(size_t)j * D + d];
					dks[(size_t)j * D + d] += ds * qs[(size_t)i * D + d];
					dvs[(size_t)j * D + d] += pij * dos[(size_t)i * D + d];
				}
			}
		}
	}
	free(p);
	free(dp);
	free(o);
	free(l);
}

/* A deterministic uniform draw in [-1, 1) (splitmix64). */
static inline double ref_rand(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

/* Error of got against ref over n values: the largest absolute error, and
 * the relative norm |got - ref| / |ref|.  NaN in got makes both infinite. */
typedef struct ref_err {
	double max_abs, rel;
} ref_err;

static inline ref_err ref_compare_f(const float *got, const double *ref, size_t n)
{
	ref_err e = {0, 0};
	double num = 0, den = 0;
	for (size_t x = 0; x < n; x++) {
		double d = fabs((double)got[x] - ref[x]);
		if (!(d == d) || isinf(d)) {
			e.max_abs = e.rel = INFINITY;
			return e;
		}
		if (d > e.max_abs)
			e.max_abs = d;
		num += d * d;
		den += ref[x] * ref[x];
	}
	e.rel = den > 0 ? sqrt(num / den) : sqrt(num);
	return e;
}

#endif
