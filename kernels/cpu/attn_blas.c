/* attn_blas.c: attention on sgemm, one slice per OpenMP thread (see
 * attn_blas.h).  OpenBLAS is switched to one thread around the parallel
 * region so that the slices, not the BLAS, use the cores. */
#include "attn_blas.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "attention.h"

static int check_shape(int B, int H, int T, int D)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return ATTN_ESHAPE;
	if ((double)B * H * T * D * sizeof(float) > (double)PTRDIFF_MAX ||
	    (double)T * T * sizeof(float) > (double)PTRDIFF_MAX / 2)
		return ATTN_ESHAPE;
	return ATTN_OK;
}

/* s = scale * q k^T, then rows turned into probabilities p = exp(s - lse)
 * (causal: zero above the diagonal).  With lse_out the log-sum-exp is
 * computed and stored; otherwise lse_in is used. */
static void probs(const float *q, const float *k, float *s, int T, int D, int causal,
		  float scale, float *lse_out, const float *lse_in)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q, D, k, D,
		    0.0f, s, T);
	for (int i = 0; i < T; i++) {
		float *r = s + (size_t)i * T;
		int n = causal ? i + 1 : T;
		float l;
		if (lse_out) {
			float mx = -INFINITY, sum = 0;
			for (int j = 0; j < n; j++)
				mx = r[j] > mx ? r[j] : mx;
			for (int j = 0; j < n; j++)
				sum += r[j] = expf(r[j] - mx);
			l = mx + logf(sum);
			lse_out[i] = l;
			float inv = 1.0f / sum;
			for (int j = 0; j < n; j++)
				r[j] *= inv;
		} else {
			l = lse_in[i];
			for (int j = 0; j < n; j++)
				r[j] = expf(r[j] - l);
		}
		for (int j = n; j < T; j++)
			r[j] = 0;
	}
}

typedef struct args {
	const float *q, *k, *v, *o, *dout, *lse_in;
	float *out, *lse, *dq, *dk, *dv;
	int T, D, causal;
	float scale;
} args;

static void fwd_slice(const args *a, size_t off, size_t loff, float *s)
{
	int T = a->T, D = a->D;
	probs(a->q + off, a->k + off, s, T, D, a->causal, a->scale, a->lse + loff, NULL);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, s, T,
		    a->v + off, D, 0.0f, a->out + off, D);
}

/* dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(dO o O)) scale;
 * dQ = dS K; dK = dS^T Q. */
static void bwd_slice(const args *a, size_t off, size_t loff, float *p, float *dp)
{
	int T = a->T, D = a->D;
	const float *dO = a->dout + off, *O = a->o + off;
	probs(a->q + off, a->k + off, p, T, D, a->causal, a->scale, NULL, a->lse_in + loff);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, p, T, dO, D,
		    0.0f, a->dv + off, D);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dO, D,
		    a->v + off, D, 0.0f, dp, T);
	for (int i = 0; i < T; i++) {
		float delta = 0;
		for (int d = 0; d < D; d++)
			delta += dO[(size_t)i * D + d] * O[(size_t)i * D + d];
		float *pr = p + (size_t)i * T, *dr = dp + (size_t)i * T;
		int n = a->causal ? i + 1 : T;
		for (int j = 0; j < n; j++)
			dr[j] = pr[j] * (dr[j] - delta) * a->scale;
		for (int j = n; j < T; j++)
			dr[j] = 0;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, dp, T,
		    a->k + off, D, 0.0f, a->dq + off, D);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, dp, T,
		    a->q + off, D, 0.0f, a->dk + off, D);
}

static int run(const args *a, int BH, int backward)
{
	int nomem = 0, saved = openblas_get_num_threads();
	size_t tt = (size_t)a->T * a->T;
	openblas_set_num_threads(1);
#pragma omp parallel reduction(| : nomem)
	{
		float *s = malloc(tt * (backward ? 2 : 1) * sizeof *s);
		if (!s)
			nomem = 1;
#pragma omp for schedule(dynamic)
		for (int bh = 0; bh < BH; bh++) {
			size_t off = (size_t)bh * a->T * a->D, loff = (size_t)bh * a->T;
			if (!s)
				continue;
			if (backward)
				bwd_slice(a, off, loff, s, s + tt);
			else
				fwd_slice(a, off, loff, s);
		}
		free(s);
	}
	openblas_set_num_threads(saved);
	return nomem ? ATTN_ENOMEM : ATTN_OK;
}

int attn_fwd_blas(const float *q, const float *k, const float *v, float *o, float *lse,
		  int B, int H, int T, int D, int causal, float scale)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	args a = { .q = q, .k = k, .v = v, .out = o, .lse = lse, .T = T, .D = D,
		   .causal = causal, .scale = scale };
	return run(&a, B * H, 0);
}

int attn_bwd_blas(const float *q, const float *k, const float *v, const float *o,
		  const float *dout, const float *lse, float *dq, float *dk, float *dv,
		  int B, int H, int T, int D, int causal, float scale)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	args a = { .q = q, .k = k, .v = v, .o = o, .dout = dout, .lse_in = lse, .dq = dq,
		   .dk = dk, .dv = dv, .T = T, .D = D, .causal = causal, .scale = scale };
	return run(&a, B * H, 1);
}
