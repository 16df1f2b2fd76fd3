/* test_ops_grad.c: every op's backward pass against central finite
 * differences of its forward pass, on small shapes.  The objective is
 * sum(out * R) for a fixed random R, summed in double; the backward pass
 * gets dout = R.  Also checks forward values against direct formulas.  The
 * model variants' ops too: QK-norm's per-head RMSNorm, the squared ReLU,
 * the cross-entropy with soft-capping and z-loss, GQA's split and merge. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/attention.h"
#include "kernels/attn_blas.h"
#include "kernels/embedding.h"
#include "kernels/gqa.h"
#include "kernels/headnorm.h"
#include "kernels/logit_variants.h"
#include "kernels/matmul.h"
#include "kernels/permute.h"
#include "kernels/relu2.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/xent.h"

enum { N = 6, C = 8, IN = 5, OUT = 7, F = 4, B = 2, H = 2, T = 5, D = 4, V = 9 };
static const double FD_EPS = 1e-2, FD_TOL = 2e-3;

static unsigned long long seed = 12345;
static float frand(void)
{
	seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((seed >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}
static void fill(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = frand(); }
static double dotd(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* The op under test: run the forward pass and return sum(out * R). */
typedef double (*objective)(void);

/* Largest |fd - g| over the elements of x, relative to max |g| (>= 1e-3). */
static double fd_error(float *x, const float *g, size_t n, objective f)
{
	double worst = 0, scale = 1e-3;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs(g[i]));
	for (size_t i = 0; i < n; i++) {
		float keep = x[i];
		x[i] = keep + (float)FD_EPS;
		double up = f();
		x[i] = keep - (float)FD_EPS;
		double dn = f();
		x[i] = keep;
		worst = fmax(worst, fabs((up - dn) / (2 * FD_EPS) - g[i]));
	}
	return worst / scale;
}

#define CHECK(name, x, g, n, f) do { \
	double err_ = fd_error(x, g, n, f); \
	ok(err_ < FD_TOL, "%s: finite differences (rel err %.2g)", name, err_); \
} while (0)

/* rmsnorm */
static float rn_x[N * C], rn_w[C], rn_y[N * C], rn_r[N], rn_R[N * C];
static double rn_obj(void)
{
	rmsnorm_fwd_cpu(rn_y, rn_r, rn_x, rn_w, N, C, RMSNORM_EPS);
	return dotd(rn_y, rn_R, N * C);
}
static void test_rmsnorm(void)
{
	float dx[N * C], dw[C];
	fill(rn_x, N * C); fill(rn_w, C); fill(rn_R, N * C);
	rn_obj();
	double ss = 0;
	for (int c = 0; c < C; c++)
		ss += (double)rn_x[c] * rn_x[c];
	near(rn_y[1], rn_x[1] * rn_w[1] / sqrt(ss / C + RMSNORM_EPS), 1e-6, "rmsnorm: forward value");
	for (int i = 0; i < N * C; i++) dx[i] = 1.0f;
	for (int i = 0; i < C; i++) dw[i] = 2.0f;
	rmsnorm_bwd_cpu(dx, dw, rn_R, rn_x, rn_w, rn_r, N, C);
	for (int i = 0; i < N * C; i++) dx[i] -= 1.0f;
	for (int i = 0; i < C; i++) dw[i] -= 2.0f;
	CHECK("rmsnorm dx (accumulated)", rn_x, dx, N * C, rn_obj);
	CHECK("rmsnorm dw (accumulated)", rn_w, dw, C, rn_obj);
}

/* matmul */
static float mm_x[N * IN], mm_w[OUT * IN], mm_y[N * OUT], mm_R[N * OUT];
static double mm_obj(void)
{
	matmul_fwd_cpu(mm_y, mm_x, mm_w, N, IN, OUT, 0);
	return dotd(mm_y, mm_R, N * OUT);
}
static void test_matmul(void)
{
	float dx[N * IN] = { 0 }, dw[OUT * IN] = { 0 };
	fill(mm_x, N * IN); fill(mm_w, OUT * IN); fill(mm_R, N * OUT);
	mm_obj();
	double want = 0;
	for (int i = 0; i < IN; i++)
		want += (double)mm_x[2 * IN + i] * mm_w[3 * IN + i];
	near(mm_y[2 * OUT + 3], want, 1e-5, "matmul: forward value is x . W^T");
	float keep = mm_y[0];
	matmul_fwd_cpu(mm_y, mm_x, mm_w, N, IN, OUT, 1);
	near(mm_y[0], 2 * keep, 1e-5, "matmul: accumulate adds");
	matmul_bwd_cpu(dx, dw, mm_R, mm_x, mm_w, N, IN, OUT, 0);
	CHECK("matmul dinp", mm_x, dx, N * IN, mm_obj);
	CHECK("matmul dW", mm_w, dw, OUT * IN, mm_obj);
}

/* rope */
static float rp_x[B * H * T * D], rp_y[B * H * T * D], rp_R[B * H * T * D], rp_cs[T * D];
static double rp_obj(void)
{
	memcpy(rp_y, rp_x, sizeof rp_y);
	rope_fwd_cpu(rp_y, rp_cs, B, H, T, D);
	return dotd(rp_y, rp_R, B * H * T * D);
}
static void test_rope(void)
{
	float dx[B * H * T * D];
	fill(rp_x, B * H * T * D); fill(rp_R, B * H * T * D);
	rope_table(rp_cs, NULL, T, D, ROPE_THETA_DEFAULT);
	rp_obj();
	/* head (0,0), t = 3, pair i = 1: angle 3 * theta^(-2/4) */
	double a = 3 * pow(ROPE_THETA_DEFAULT, -0.5);
	const float *x = rp_x + 3 * D;
	near(rp_y[3 * D + 1], x[1] * cos(a) - x[3] * sin(a), 1e-6, "rope: rotate-half pairing");
	near(rp_y[0], rp_x[0], 0, "rope: position 0 unchanged");
	memcpy(dx, rp_R, sizeof dx);
	rope_bwd_cpu(dx, rp_cs, B, H, T, D);
	CHECK("rope dx", rp_x, dx, B * H * T * D, rp_obj);
}

/* swiglu */
static float sg_h[N * 2 * F], sg_y[N * F], sg_R[N * F];
static double sg_obj(void)
{
	swiglu_fwd_cpu(sg_y, sg_h, N, F);
	return dotd(sg_y, sg_R, N * F);
}
static void test_swiglu(void)
{
	float dh[N * 2 * F];
	fill(sg_h, N * 2 * F); fill(sg_R, N * F);
	sg_obj();
	double g = sg_h[2 * F + 1], u = sg_h[2 * F + F + 1];
	near(sg_y[F + 1], g / (1 + exp(-g)) * u, 1e-6, "swiglu: silu(gate) * up");
	swiglu_bwd_cpu(dh, sg_R, sg_h, N, F);
	CHECK("swiglu dh", sg_h, dh, N * 2 * F, sg_obj);
}

/* cross-entropy */
static float xe_z[N * V], xe_loss[N], xe_lse[N], xe_R[N];
static int32_t xe_t[N] = { 0, 3, 8, -1, 5, 2 };
static double xe_obj(void)
{
	xent_fwd_cpu(xe_loss, xe_lse, xe_z, xe_t, N, V);
	return dotd(xe_loss, xe_R, N);
}
static void test_xent(void)
{
	float dz[N * V];
	fill(xe_z, N * V); fill(xe_R, N);
	xe_obj();
	double s = 0;
	for (int v = 0; v < V; v++)
		s += exp(xe_z[V + v]);
	near(xe_loss[1], log(s) - xe_z[V + 3], 1e-5, "xent: -log softmax of the target");
	is_int(xe_loss[3] == 0.0f, 1, "xent: negative target ignored");
	xent_bwd_cpu(dz, xe_z, xe_lse, xe_t, xe_R, N, V);
	CHECK("xent dlogits", xe_z, dz, N * V, xe_obj);
	float big[V], l1, lse1;
	int32_t t1 = 2;
	for (int v = 0; v < V; v++)
		big[v] = 1000.0f * xe_z[v];
	xent_fwd_cpu(&l1, &lse1, big, &t1, 1, V);
	ok(isfinite(l1) && l1 >= 0, "xent: stable at logits x1000 (%g)", l1);
	memcpy(dz, xe_z, sizeof dz);
	xent_bwd_cpu(dz, dz, xe_lse, xe_t, xe_R, N, V);
	float dz2[N * V];
	xent_bwd_cpu(dz2, xe_z, xe_lse, xe_t, xe_R, N, V);
	ok(!memcmp(dz, dz2, sizeof dz), "xent: backward in place");
}

/* embedding */
static float em_tab[V * C], em_y[N * C], em_R[N * C];
static int32_t em_ids[N] = { 1, 4, 1, 0, 8, 4 };
static double em_obj(void)
{
	embedding_fwd_cpu(em_y, em_ids, em_tab, N, C);
	return dotd(em_y, em_R, N * C);
}
static void test_embedding(void)
{
	float dt[V * C] = { 0 };
	fill(em_tab, V * C); fill(em_R, N * C);
	em_obj();
	ok(!memcmp(em_y + 4 * C, em_tab + 8 * C, C * sizeof(float)), "embedding: row lookup");
	embedding_bwd_cpu(dt, em_ids, em_R, N, C);
	CHECK("embedding dtable (repeated ids)", em_tab, dt, V * C, em_obj);
}

/* permutes: split then merge is the identity, and the layout is right */
static void test_permute(void)
{
	enum { NQ = B * T * 3 * H * D, NO = B * H * T * D };
	float qkv[NQ], q[NO], k[NO], v[NO], back[NQ], y[NO], o2[NO];
	fill(qkv, NQ);
	qkv_split_cpu(q, k, v, qkv, B, T, H, D);
	/* b=1, t=2, h=1, d=3 of k: qkv[((1*T+2)*3 + 1)*H*D + 1*D + 3] */
	near(k[((1 * H + 1) * T + 2) * D + 3], qkv[((1 * T + 2) * 3 + 1) * H * D + D + 3], 0,
	     "qkv_split: [B,T,3,H,D] -> [B,H,T,D]");
	qkv_merge_cpu(back, q, k, v, B, T, H, D);
	ok(!memcmp(back, qkv, sizeof qkv), "qkv_merge inverts qkv_split");
	heads_merge_cpu(y, q, B, T, H, D);
	heads_split_cpu(o2, y, B, T, H, D);
	ok(!memcmp(o2, q, sizeof o2), "heads_split inverts heads_merge");
}

/* QK-norm: rows of D with gains of D */
enum { HR = 7 };
static float hn_x[HR * D], hn_w[D], hn_y[HR * D], hn_r[HR], hn_R[HR * D];
static double hn_obj(void)
{
	headnorm_fwd_cpu(hn_y, hn_r, hn_x, hn_w, HR, D, 1e-3f);
	return dotd(hn_y, hn_R, HR * D);
}
static void test_headnorm(void)
{
	float dx[HR * D], dw[D];
	fill(hn_x, HR * D); fill(hn_w, D); fill(hn_R, HR * D);
	hn_obj();
	double ss = 0;
	for (int d = 0; d < D; d++)
		ss += (double)hn_x[2 * D + d] * hn_x[2 * D + d];
	near(hn_y[2 * D + 1], hn_x[2 * D + 1] * hn_w[1] / sqrt(ss / D + 1e-3), 1e-6,
	     "headnorm: forward value");
	for (int i = 0; i < D; i++) dw[i] = 2.0f;
	memcpy(dx, hn_R, sizeof dx);
	headnorm_bwd_cpu(dx, dw, dx, hn_x, hn_w, hn_r, HR, D); /* in place over dy */
	for (int i = 0; i < D; i++) dw[i] -= 2.0f;
	CHECK("headnorm dx (in place)", hn_x, dx, HR * D, hn_obj);
	CHECK("headnorm dw (accumulated)", hn_w, dw, D, hn_obj);
	/* the decoding form, on the fused projection, is the same arithmetic */
	enum { NT = 3, HQ = 4, HK = 2, W = (HQ + 2 * HK) * D };
	float qkv[NT * W], wq[D], wk[D], ref[NT * W], r;
	fill(qkv, NT * W); fill(wq, D); fill(wk, D);
	memcpy(ref, qkv, sizeof ref);
	qkv_headnorm_cpu(qkv, wq, wk, NT, HQ, HK, D, 1e-3f);
	for (int i = 0; i < NT; i++)
		for (int j = 0; j < HQ + HK; j++)
			headnorm_fwd_cpu(ref + i * W + j * D, &r, ref + i * W + j * D, j < HQ ? wq : wk, 1,
					 D, 1e-3f);
	ok(!memcmp(qkv, ref, sizeof qkv), "qkv_headnorm: q heads with wq, k heads with wk, v untouched");
}

/* the squared ReLU */
static float r2_h[N * F], r2_y[N * F], r2_R[N * F];
static double r2_obj(void)
{
	relu2_fwd_cpu(r2_y, r2_h, N * F);
	return dotd(r2_y, r2_R, N * F);
}
static void test_relu2(void)
{
	float dh[N * F];
	fill(r2_h, N * F); fill(r2_R, N * F);
	r2_h[0] = -0.5f, r2_h[1] = 0.5f;
	r2_obj();
	ok(r2_y[0] == 0 && r2_y[1] == 0.25f, "relu2: max(h, 0)^2");
	relu2_bwd_cpu(dh, r2_R, r2_h, N * F);
	CHECK("relu2 dh", r2_h, dh, N * F, r2_obj);
}

/* cross-entropy of soft-capped logits with the z-loss: the objective is
 * sum_n R[n] (CE_n + z lse_n^2) of y = cap tanh(z / cap) */
static const float XV_CAP = 2.0f, XV_Z = 0.3f;
static float xv_z[N * V], xv_y[N * V], xv_loss[N], xv_lse[N], xv_R[N];
static double xv_obj(void)
{
	memcpy(xv_y, xv_z, sizeof xv_y);
	softcap_fwd_cpu(xv_y, N * V, XV_CAP);
	xent_fwd_cpu(xv_loss, xv_lse, xv_y, xe_t, N, V);
	double s = 0;
	for (int n = 0; n < N; n++)
		s += xv_R[n] * (xv_loss[n] + (xe_t[n] < 0 ? 0 : XV_Z * (double)xv_lse[n] * xv_lse[n]));
	return s;
}
static void test_logit_variants(void)
{
	float dz[N * V], ex[N * V];
	fill(xv_z, N * V); fill(xv_R, N);
	for (int i = 0; i < N * V; i++)
		xv_z[i] *= 3;
	xv_obj();
	near(xv_y[5], XV_CAP * tanh(xv_z[5] / XV_CAP), 1e-6, "softcap: cap tanh(z / cap)");
	logit_bwd_cpu(dz, xv_y, xv_lse, xe_t, xv_R, NULL, N, V, XV_Z, XV_CAP);
	CHECK("cross-entropy with softcap and z-loss: dlogits", xv_z, dz, N * V, xv_obj);
	/* extra, a gradient w.r.t. the capped logits, goes through the cap */
	float d0[N * V];
	memset(ex, 0, sizeof ex);
	ex[7] = 1.0f;
	logit_bwd_cpu(d0, xv_y, xv_lse, xe_t, xv_R, ex, N, V, XV_Z, XV_CAP);
	float r = xv_y[7] / XV_CAP;
	near(d0[7] - dz[7], 1.0f - r * r, 1e-6, "logit_bwd: extra gradient times the cap's derivative");
}

/* GQA: the merge is the split's adjoint (the kv heads' gradients summed
 * over each group), and the split repeats kv head j over its group */
static void test_gqa(void)
{
	enum { HQ = 4, HK = 2, G = HQ / HK, NQ = B * T * (HQ + 2 * HK) * D, NO = B * HQ * T * D };
	float qkv[NQ], q[NO], k[NO], v[NO], Rq[NO], Rk[NO], Rv[NO], g[NQ];
	fill(qkv, NQ); fill(Rq, NO); fill(Rk, NO); fill(Rv, NO);
	qkv_split_gqa_cpu(q, k, v, qkv, B, T, HQ, HK, D);
	/* b=1, t=3, h=3 (kv head 1), d=2 of v */
	near(v[((1 * HQ + 3) * T + 3) * D + 2], qkv[(1 * T + 3) * (HQ + 2 * HK) * D + (HQ + HK + 3 / G) * D + 2],
	     0, "qkv_split_gqa: head h reads kv head h / G");
	qkv_merge_gqa_cpu(g, Rq, Rk, Rv, B, T, HQ, HK, D);
	double lhs = dotd(q, Rq, NO) + dotd(k, Rk, NO) + dotd(v, Rv, NO), rhs = dotd(qkv, g, NQ);
	near(lhs, rhs, 1e-4, "qkv_merge_gqa is the adjoint of the split (<split x, R> = <x, merge R>)");
	float q1[B * H * T * D], k1[B * H * T * D], v1[B * H * T * D], q2[B * H * T * D];
	float k2[B * H * T * D], v2[B * H * T * D], x[B * T * 3 * H * D];
	fill(x, B * T * 3 * H * D);
	qkv_split_cpu(q1, k1, v1, x, B, T, H, D);
	qkv_split_gqa_cpu(q2, k2, v2, x, B, T, H, H, D);
	ok(!memcmp(q1, q2, sizeof q1) && !memcmp(k1, k2, sizeof k1) && !memcmp(v1, v2, sizeof v1),
	   "qkv_split_gqa with as many kv heads as heads is qkv_split");
}

/* attention (owned by e-flash; checked here as the model uses it) */
static float at_q[B * H * T * D], at_k[B * H * T * D], at_v[B * H * T * D];
static float at_o[B * H * T * D], at_lse[B * H * T], at_R[B * H * T * D];
static double at_obj(void)
{
	attn_fwd_cpu(at_q, at_k, at_v, at_o, at_lse, B, H, T, D, 1, 0.5f);
	return dotd(at_o, at_R, B * H * T * D);
}
static void test_attention(void)
{
	enum { NA = B * H * T * D };
	float dq[NA], dk[NA], dv[NA];
	fill(at_q, NA); fill(at_k, NA); fill(at_v, NA); fill(at_R, NA);
	at_obj();
	is_int(attn_bwd_cpu(at_q, at_k, at_v, at_o, at_R, at_lse, dq, dk, dv, B, H, T, D, 1, 0.5f),
	       0, "attention backward runs");
	CHECK("attention dq", at_q, dq, NA, at_obj);
	CHECK("attention dk", at_k, dk, NA, at_obj);
	CHECK("attention dv", at_v, dv, NA, at_obj);
}

static double maxdiff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

/* the sgemm attention the CPU backend uses, against the reference twin */

static void test_attn_blas(int b, int h, int t, int d, int causal)
{
	size_t n = (size_t)b * h * t * d, nl = (size_t)b * h * t;
	float *x = malloc(n * 12 * sizeof *x), *l1 = malloc(nl * sizeof *l1), *l2 = malloc(nl * sizeof *l2);
	float *q = x, *k = x + n, *v = x + 2 * n, *dout = x + 3 * n, *o1 = x + 4 * n, *o2 = x + 5 * n;
	float *g1 = x + 6 * n, *g2 = x + 9 * n;
	fill(x, 4 * n);
	float sc = 1.0f / sqrtf((float)d);
	attn_fwd_cpu(q, k, v, o1, l1, b, h, t, d, causal, sc);
	size_t wsb = attn_blas_workspace(t);
	void *ws = causal ? malloc(wsb) : NULL;  /* causal: workspace; full: per call */
	attn_fwd_blas(q, k, v, o2, l2, b, h, t, d, causal, sc, ws, wsb);
	attn_bwd_cpu(q, k, v, o1, dout, l1, g1, g1 + n, g1 + 2 * n, b, h, t, d, causal, sc);
	attn_bwd_blas(q, k, v, o2, dout, l2, g2, g2 + n, g2 + 2 * n, b, h, t, d, causal, sc, ws, wsb);
	free(ws);
	double df = fmax(maxdiff(o1, o2, n), maxdiff(l1, l2, nl)), db = maxdiff(g1, g2, 3 * n);
	ok(df < 1e-5 && db < 1e-4, "attn_blas = reference, B%d H%d T%d D%d %s (fwd %.2g, bwd %.2g)",
	   b, h, t, d, causal ? "causal" : "full", df, db);
	free(x);
	free(l1);
	free(l2);
}


/* the blocked matmul: the same on 1 and 3 threads, right values */
static void test_matmul_blocks(void)
{
	enum { BN = 200, BI = 70, BO = 130 };
	static float x[BN * BI], w[BO * BI], dy[BN * BO], y1[BN * BO], y3[BN * BO];
	static float dx1[BN * BI], dx3[BN * BI], dw1[BO * BI], dw3[BO * BI], dwt1[BI * BO], dwt3[BI * BO];
	fill(x, BN * BI); fill(w, BO * BI); fill(dy, BN * BO);
	int keep = omp_get_max_threads();
	omp_set_num_threads(1);
	matmul_fwd_cpu(y1, x, w, BN, BI, BO, 0);
	matmul_bwd_cpu(dx1, dw1, dy, x, w, BN, BI, BO, 0);
	matmul_bwd_cpu(NULL, dwt1, x, dy, w, BN, BO, BI, 0);
	omp_set_num_threads(3);
	matmul_fwd_cpu(y3, x, w, BN, BI, BO, 0);
	matmul_bwd_cpu(dx3, dw3, dy, x, w, BN, BI, BO, 0);
	matmul_bwd_cpu(NULL, dwt3, x, dy, w, BN, BO, BI, 0);
	omp_set_num_threads(keep);
	double d13 = fmax(fmax(maxdiff(y1, y3, BN * BO), maxdiff(dx1, dx3, BN * BI)),
			  fmax(maxdiff(dw1, dw3, BO * BI), maxdiff(dwt1, dwt3, BI * BO)));
	ok(d13 < 1e-5, "matmul: 1 and 3 threads agree, both dW splits (%.2g)", d13);
	double e = 0;
	for (int o = 0; o < BO; o++)
		for (int i = 0; i < BI; i++) {
			double s = 0;
			for (int n = 0; n < BN; n++)
				s += (double)dy[n * BO + o] * x[n * BI + i];
			e = fmax(e, fabs(s - dw3[o * BI + i]));
			e = fmax(e, fabs(s - dwt3[i * BO + o]));
		}
	ok(e < 1e-4, "matmul: blocked dW equals dout^T x (%.2g)", e);
}

int main(void)
{
	test_matmul_blocks();
	test_attn_blas(2, 3, 17, 8, 1);
	test_attn_blas(1, 2, 33, 16, 0);
	test_attn_blas(2, 2, 64, 32, 1);
	test_attn_blas(1, 2, 200, 16, 1);
	test_attn_blas(1, 1, 130, 8, 0);
	test_rmsnorm();
	test_matmul();
	test_rope();
	test_swiglu();
	test_xent();
	test_embedding();
	test_permute();
	test_headnorm();
	test_relu2();
	test_logit_variants();
	test_gqa();
	test_attention();
	return done_testing();
}
