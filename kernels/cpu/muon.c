/* muon.c: CPU twin of the Muon step (see muon.h): fp32 Newton-Schulz through
 * single-threaded CBLAS sgemm, one matrix per OpenMP thread. */
#include "kernels/muon.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "blas_single.h"

static const double MATCH_RMS_FACTOR = 0.2;

double muon_adjust(muon_scale s, int rows, int cols)
{
	if (s == MUON_SCALE_MATCH_RMS_ADAMW)
		return MATCH_RMS_FACTOR * sqrt((double)(rows > cols ? rows : cols));
	return rows > cols ? sqrt((double)rows / cols) : 1.0;
}

/* One matrix: X and Y of m x k, A and B of m x m (m = the shorter side),
 * then the step's u (m x k). */
static size_t ns_floats(int rows, int cols)
{
	size_t m = rows < cols ? rows : cols, k = rows < cols ? cols : rows;
	return 2 * m * k + 2 * m * m;
}

static size_t per_matrix(int rows, int cols)
{
	return ns_floats(rows, cols) + (size_t)rows * cols;
}

/* torch's lerp: a + w (b - a), computed from the nearer end. */
static inline float lerp(float a, float b, float w)
{
	return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

size_t muon_workspace_cpu(int count, int rows, int cols)
{
	return (size_t)count * per_matrix(rows, cols);
}

void muon_ns_cpu(float *out, const float *u, int rows, int cols, int steps, float *ws)
{
	int tr = rows > cols, m = tr ? cols : rows, k = tr ? rows : cols;
	size_t mk = (size_t)m * k;
	float *x = ws, *y = x + mk, *a = y + mk, *b = a + (size_t)m * m;
	blas_single();
	if (tr) {
		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++)
				x[(size_t)j * rows + i] = u[(size_t)i * cols + j];
	} else {
		memcpy(x, u, mk * sizeof *x);
	}
	double ss = 0;
	for (size_t i = 0; i < mk; i++)
		ss += (double)x[i] * x[i];
	float norm = (float)sqrt(ss);
	if (norm < MUON_EPS)
		norm = MUON_EPS;
	for (size_t i = 0; i < mk; i++)
		x[i] /= norm;
	for (int s = 0; s < steps; s++) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, m, k, 1.0f, x, k, x, k, 0.0f, a, m);
		memcpy(b, a, (size_t)m * m * sizeof *b);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, MUON_NS_C, a, m, a, m,
			    MUON_NS_B, b, m);
		memcpy(y, x, mk * sizeof *y);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, m, 1.0f, b, m, x, k,
			    MUON_NS_A, y, k);
		float *t = x;
		x = y;
		y = t;
	}
	if (tr) {
		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++)
				out[(size_t)i * cols + j] = x[(size_t)j * rows + i];
	} else {
		memcpy(out, x, mk * sizeof *out);
	}
}

void muon_step_cpu(float *p, const float *g, float *buf, const size_t *offs, int count, int n_tr,
		   int rows, int cols, const muon_hparams *h, float grad_scale, float *ws)
{
	size_t n = (size_t)rows * cols, per = per_matrix(rows, cols);
	float lr = h->dev ? (float)h->dev[MUON_DEV_LR] : h->lr;
	float mu = h->dev ? (float)h->dev[MUON_DEV_MOMENTUM] : h->momentum, w = 1.0f - mu;
	float decay = 1.0f - lr * h->weight_decay;
	float step = (float)(lr * muon_adjust(h->scale, rows, cols));
	float step_tr = (float)(lr * muon_adjust(h->scale, cols, rows));
#pragma omp parallel for schedule(dynamic, 1)
	for (int i = 0; i < count; i++) {
		float *pi = p + offs[i], *bi = buf + offs[i], *wi = ws + (size_t)i * per;
		const float *gi = g + offs[i];
		float *u = wi + ns_floats(rows, cols);
		int tr = i >= count - n_tr; /* this one is cols x rows */
		for (size_t j = 0; j < n; j++) {
			float gj = gi[j] * grad_scale;
			float bj = lerp(bi[j], gj, w);
			bi[j] = bj;
			u[j] = h->nesterov ? lerp(gj, bj, mu) : bj;
		}
		muon_ns_cpu(u, u, tr ? cols : rows, tr ? rows : cols, h->ns_steps, wi);
		float si = tr ? step_tr : step;
		for (size_t j = 0; j < n; j++)
			pi[j] = pi[j] * decay - si * u[j];
	}
}
