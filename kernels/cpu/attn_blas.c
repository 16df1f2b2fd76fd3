/* attn_blas.c: attention on sgemm, one slice per OpenMP thread, each sgemm
 * single-threaded (see attn_blas.h and blas_single.h). */
#pragma GCC optimize("no-trapping-math") /* so that vexpf vectorizes (vexp.h) */

#include "kernels/attn_blas.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "blas_single.h"
#include "kernels/attention.h"
#include "vexp.h"

static int check_shape(int B, int H, int T, int D)
{
	if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
		return ATTN_ESHAPE;
	if ((double)B * H * T * D * sizeof(float) > (double)PTRDIFF_MAX ||
	    (double)T * T * sizeof(float) > (double)PTRDIFF_MAX / 2)
		return ATTN_ESHAPE;
	return ATTN_OK;
}

/* Causal attention skips the blocks above the diagonal: rows and columns
 * go in blocks of BLK, and row block i only meets key blocks 0..i. */
enum { BLK = 64, SCRATCH_MATS = 2 /* T x T: probabilities and their gradient */ };

static int min_int(int a, int b) { return a < b ? a : b; }

/* Keys that the rows of the block starting at i0 can see. */
static int keys_of(int i0, int T, int causal) { return causal ? min_int(i0 + BLK, T) : T; }

/* s = scale * q k^T, then rows turned into probabilities p = exp(s - lse),
 * zero above the diagonal up to the end of the row's block (the part that
 * the column-block products read).  With lse_out the log-sum-exp is
 * computed and stored; otherwise lse_in is used. */
static void probs(const float *q, const float *k, float *s, int T, int D, int causal,
		  float scale, float *lse_out, const float *lse_in)
{
	for (int i0 = 0; i0 < T; i0 += BLK)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, min_int(BLK, T - i0),
			    keys_of(i0, T, causal), D, scale, q + (size_t)i0 * D, D, k, D,
			    0.0f, s + (size_t)i0 * T, T);
	for (int i = 0; i < T; i++) {
		float *r = s + (size_t)i * T;
		int n = causal ? i + 1 : T, end = keys_of(i / BLK * BLK, T, causal);
		if (lse_out) {
			float mx = -INFINITY, sum = 0;
#pragma omp simd reduction(max : mx)
			for (int j = 0; j < n; j++)
				mx = r[j] > mx ? r[j] : mx;
#pragma omp simd reduction(+ : sum)
			for (int j = 0; j < n; j++)
				sum += r[j] = vexpf(r[j] - mx);
			lse_out[i] = mx + logf(sum);
			float inv = 1.0f / sum;
			for (int j = 0; j < n; j++)
				r[j] *= inv;
		} else {
			float l = lse_in[i];
#pragma omp simd
			for (int j = 0; j < n; j++)
				r[j] = vexpf(r[j] - l);
		}
		for (int j = n; j < end; j++)
			r[j] = 0;
	}
}

typedef struct args {
	const float *q, *k, *v, *o, *dout, *lse_in;
	float *out, *lse, *dq, *dk, *dv;
	int T, D, causal;
	float scale;
} args;

/* c[rows of the block at i0] = a[block rows, visible keys] . b[visible keys] */
static void rows_times(const float *a, const float *b, float *c, int i0, int T, int D,
		       int causal)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, min_int(BLK, T - i0), D,
		    keys_of(i0, T, causal), 1.0f, a + (size_t)i0 * T, T, b, D, 0.0f,
		    c + (size_t)i0 * D, D);
}

/* c[keys of the block at j0] = a[rows that see them, block]^T . b[those rows] */
static void cols_times(const float *a, const float *b, float *c, int j0, int T, int D,
		       int causal)
{
	int r0 = causal ? j0 : 0;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, min_int(BLK, T - j0), D, T - r0,
		    1.0f, a + (size_t)r0 * T + j0, T, b + (size_t)r0 * D, D, 0.0f,
		    c + (size_t)j0 * D, D);
}

static void fwd_slice(const args *a, size_t off, size_t loff, float *s)
{
	int T = a->T, D = a->D;
	probs(a->q + off, a->k + off, s, T, D, a->causal, a->scale, a->lse + loff, NULL);
	for (int i0 = 0; i0 < T; i0 += BLK)
		rows_times(s, a->v + off, a->out + off, i0, T, D, a->causal);
}

/* dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(dO o O)) scale;
 * dQ = dS K; dK = dS^T Q. */
static void bwd_slice(const args *a, size_t off, size_t loff, float *p, float *dp)
{
	int T = a->T, D = a->D, causal = a->causal;
	const float *dO = a->dout + off, *O = a->o + off;
	probs(a->q + off, a->k + off, p, T, D, causal, a->scale, NULL, a->lse_in + loff);
	for (int i0 = 0; i0 < T; i0 += BLK)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, min_int(BLK, T - i0),
			    keys_of(i0, T, causal), D, 1.0f, dO + (size_t)i0 * D, D, a->v + off, D,
			    0.0f, dp + (size_t)i0 * T, T);
	for (int i = 0; i < T; i++) {
		float delta = 0;
		for (int d = 0; d < D; d++)
			delta += dO[(size_t)i * D + d] * O[(size_t)i * D + d];
		float *pr = p + (size_t)i * T, *dr = dp + (size_t)i * T;
		int n = causal ? i + 1 : T, end = keys_of(i / BLK * BLK, T, causal);
		for (int j = 0; j < n; j++)
			dr[j] = pr[j] * (dr[j] - delta) * a->scale;
		for (int j = n; j < end; j++)
			dr[j] = 0;
	}
	for (int i0 = 0; i0 < T; i0 += BLK) {
		rows_times(dp, a->k + off, a->dq + off, i0, T, D, causal);
		cols_times(p, dO, a->dv + off, i0, T, D, causal);
		cols_times(dp, a->q + off, a->dk + off, i0, T, D, causal);
	}
}

size_t attn_blas_workspace(int T)
{
	return (size_t)omp_get_max_threads() * SCRATCH_MATS * T * T * sizeof(float);
}

/* Each thread's scratch: its part of ws when ws is large enough for the
 * threads of this region, else its own allocation. */
static int run(const args *a, int BH, int backward, void *ws, size_t ws_bytes)
{
	int nomem = 0;
	size_t tt = (size_t)a->T * a->T;
	blas_single();
#pragma omp parallel reduction(| : nomem)
	{
		size_t per = SCRATCH_MATS * tt;
		int mine = ws && ws_bytes >= (size_t)omp_get_num_threads() * per * sizeof(float);
		float *s = mine ? (float *)ws + omp_get_thread_num() * per : malloc(per * sizeof *s);
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
		if (!mine)
			free(s);
	}
	return nomem ? ATTN_ENOMEM : ATTN_OK;
}

int attn_fwd_blas(const float *q, const float *k, const float *v, float *o, float *lse,
		  int B, int H, int T, int D, int causal, float scale, void *ws, size_t ws_bytes)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	args a = { .q = q, .k = k, .v = v, .out = o, .lse = lse, .T = T, .D = D,
		   .causal = causal, .scale = scale };
	return run(&a, B * H, 0, ws, ws_bytes);
}

int attn_bwd_blas(const float *q, const float *k, const float *v, const float *o,
		  const float *dout, const float *lse, float *dq, float *dk, float *dv,
		  int B, int H, int T, int D, int causal, float scale, void *ws, size_t ws_bytes)
{
	int rc = check_shape(B, H, T, D);
	if (rc)
		return rc;
	args a = { .q = q, .k = k, .v = v, .o = o, .dout = dout, .lse_in = lse, .dq = dq,
		   .dk = dk, .dv = dv, .T = T, .D = D, .causal = causal, .scale = scale };
	return run(&a, B * H, 1, ws, ws_bytes);
}
