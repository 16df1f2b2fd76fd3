/* test_attention.c: the CPU attention twin against attention in double
 * precision (tests/attn_ref.h), whose gradients are in turn checked by
 * central finite differences; then the CS336 FlashAttention inputs. */
#include <math.h>
#include <stdlib.h>

#include "../attn_ref.h"
#include "../st_read.h"
#include "../tap.h"
#include "kernels/attention.h"

enum { CS_B = 4, CS_T = 128, CS_D = 64 };
static const double FP32_TOL = 2e-5;  /* float32 twin vs double, max abs */
static const double FD_EPS = 1e-6;    /* finite-difference step */
static const double FD_TOL = 1e-7;    /* finite differences vs analytic, max abs */

typedef struct bufs {
	size_t n, nl;
	double *q, *k, *v, *dout, *o, *lse, *dq, *dk, *dv;
	float *fq, *fk, *fv, *fdout, *fo, *flse, *fdq, *fdk, *fdv;
} bufs;

static void bufs_init(bufs *b, int B, int H, int T, int D)
{
	b->n = (size_t)B * H * T * D;
	b->nl = (size_t)B * H * T;
	double **dd[] = {&b->q, &b->k, &b->v, &b->dout, &b->o, &b->dq, &b->dk, &b->dv};
	float **ff[] = {&b->fq, &b->fk, &b->fv, &b->fdout, &b->fo, &b->fdq, &b->fdk, &b->fdv};
	for (size_t i = 0; i < sizeof dd / sizeof *dd; i++) {
		*dd[i] = calloc(b->n, sizeof(double));
		*ff[i] = calloc(b->n, sizeof(float));
	}
	b->lse = calloc(b->nl, sizeof(double));
	b->flse = calloc(b->nl, sizeof(float));
}

static void bufs_free(bufs *b)
{
	double *dd[] = {b->q, b->k, b->v, b->dout, b->o, b->dq, b->dk, b->dv, b->lse};
	float *ff[] = {b->fq, b->fk, b->fv, b->fdout, b->fo, b->fdq, b->fdk, b->fdv, b->flse};
	for (size_t i = 0; i < sizeof dd / sizeof *dd; i++) {
		free(dd[i]);
		free(ff[i]);
	}
}

/* Random float inputs (q scaled up so the softmax is far from uniform),
 * copied exactly into the double arrays. */
static void fill_random(bufs *b, uint64_t seed)
{
	double *dd[] = {b->q, b->k, b->v, b->dout};
	float *ff[] = {b->fq, b->fk, b->fv, b->fdout};
	double mag[] = {3, 1, 1, 1};
	for (int t = 0; t < 4; t++)
		for (size_t x = 0; x < b->n; x++) {
			ff[t][x] = (float)(mag[t] * ref_rand(&seed));
			dd[t][x] = ff[t][x];
		}
}

static int check(const char *what, const float *got, const double *ref, size_t n, double tol)
{
	ref_err e = ref_compare_f(got, ref, n);
	if (!ok(e.max_abs <= tol, "%s: max abs %.3g rel %.3g (tol %.3g)", what, e.max_abs, e.rel, tol))
		return 0;
	return 1;
}

/* The twin's forward and backward against the double reference. */
static void twin_vs_ref(bufs *b, int B, int H, int T, int D, int causal, const char *tag)
{
	double scale = 1 / sqrt(D);
	char name[128];
	ref_fwd(b->q, b->k, b->v, b->o, b->lse, B, H, T, D, causal, scale);
	ref_bwd(b->q, b->k, b->v, b->dout, b->dq, b->dk, b->dv, B, H, T, D, causal, scale);
	is_int(attn_fwd_cpu(b->fq, b->fk, b->fv, b->fo, b->flse, B, H, T, D, causal, (float)scale),
	       0, "%s fwd returns 0", tag);
	snprintf(name, sizeof name, "%s o", tag);
	check(name, b->fo, b->o, b->n, FP32_TOL);
	snprintf(name, sizeof name, "%s lse", tag);
	check(name, b->flse, b->lse, b->nl, FP32_TOL);
	is_int(attn_bwd_cpu(b->fq, b->fk, b->fv, b->fo, b->fdout, b->flse, b->fdq, b->fdk, b->fdv,
			    B, H, T, D, causal, (float)scale), 0, "%s bwd returns 0", tag);
	snprintf(name, sizeof name, "%s dq", tag);
	check(name, b->fdq, b->dq, b->n, FP32_TOL);
	snprintf(name, sizeof name, "%s dk", tag);
	check(name, b->fdk, b->dk, b->n, FP32_TOL);
	snprintf(name, sizeof name, "%s dv", tag);
	check(name, b->fdv, b->dv, b->n, FP32_TOL);
}

/* sum(o * dout) in double. */
static double loss(bufs *b, int B, int H, int T, int D, int causal, double scale)
{
	double s = 0;
	ref_fwd(b->q, b->k, b->v, b->o, NULL, B, H, T, D, causal, scale);
	for (size_t x = 0; x < b->n; x++)
		s += b->o[x] * b->dout[x];
	return s;
}

/* Central differences of sum(o * dout) for every input against both the
 * analytic double gradients and the twin's float gradients. */
static void finite_differences(int causal)
{
	enum { B = 1, H = 2, T = 7, D = 5 };
	bufs b;
	double scale = 1 / sqrt(D), worst_ref = 0, worst_twin = 0;
	bufs_init(&b, B, H, T, D);
	fill_random(&b, 42 + causal);
	ref_bwd(b.q, b.k, b.v, b.dout, b.dq, b.dk, b.dv, B, H, T, D, causal, scale);
	attn_fwd_cpu(b.fq, b.fk, b.fv, b.fo, b.flse, B, H, T, D, causal, (float)scale);
	attn_bwd_cpu(b.fq, b.fk, b.fv, b.fo, b.fdout, b.flse, b.fdq, b.fdk, b.fdv,
		     B, H, T, D, causal, (float)scale);
	double *in[] = {b.q, b.k, b.v}, *an[] = {b.dq, b.dk, b.dv};
	float *tw[] = {b.fdq, b.fdk, b.fdv};
	for (int t = 0; t < 3; t++)
		for (size_t x = 0; x < b.n; x++) {
			double keep = in[t][x];
			in[t][x] = keep + FD_EPS;
			double up = loss(&b, B, H, T, D, causal, scale);
			in[t][x] = keep - FD_EPS;
			double down = loss(&b, B, H, T, D, causal, scale);
			in[t][x] = keep;
			double g = (up - down) / (2 * FD_EPS);
			worst_ref = fmax(worst_ref, fabs(g - an[t][x]));
			worst_twin = fmax(worst_twin, fabs(g - tw[t][x]));
		}
	ok(worst_ref <= FD_TOL, "%s: analytic double gradients match finite differences (%.3g)",
	   causal ? "causal" : "full", worst_ref);
	ok(worst_twin <= FP32_TOL, "%s: twin gradients match finite differences (%.3g)",
	   causal ? "causal" : "full", worst_twin);
	bufs_free(&b);
}

static void cs336_inputs(void)
{
	const char *dir = tap_data_dir();
	char path[4096];
	st_file f;
	if (!dir) {
		ok(1, "# SKIP CS336 inputs: LMPIPE_DATA not set or absent");
		return;
	}
	snprintf(path, sizeof path, "%s/cs336-a2/safetensors/inputs-fixtures_and_attention_inputs.safetensors", dir);
	if (!ok(st_open(&f, path) == 0, "read %s", path))
		return;
	bufs b;
	bufs_init(&b, CS_B, 1, CS_T, CS_D);
	const char *names[] = {"attn_q", "attn_k", "attn_v", "attn_do"};
	float *ff[] = {b.fq, b.fk, b.fv, b.fdout};
	double *dd[] = {b.q, b.k, b.v, b.dout};
	int got = 0;
	for (int t = 0; t < 4; t++) {
		got += st_f32(&f, names[t], ff[t], b.n) == 0;
		for (size_t x = 0; x < b.n; x++)
			dd[t][x] = ff[t][x];
	}
	if (is_int(got, 4, "CS336 q, k, v, do are 4x128x64 float32")) {
		twin_vs_ref(&b, CS_B, 1, CS_T, CS_D, 0, "CS336 full");
		twin_vs_ref(&b, CS_B, 1, CS_T, CS_D, 1, "CS336 causal");
	}
	bufs_free(&b);
	st_close(&f);
}

int main(void)
{
	static const int shapes[][4] = {
		{2, 3, 1, 8}, {1, 2, 17, 16}, {2, 2, 33, 64}, {1, 1, 100, 128}, {1, 2, 64, 3},
	};
	float x = 1;
	is_int(attn_fwd_cpu(&x, &x, &x, &x, &x, 1, 1, 0, 1, 0, 1), ATTN_ESHAPE, "T=0 is a shape error");
	is_int(attn_bwd_cpu(&x, &x, &x, &x, &x, &x, &x, &x, &x, 1, 1, 1, 0, 1, 1), ATTN_ESHAPE,
	       "D=0 is a shape error");
	ok(strlen(attn_strerror(ATTN_EHEADDIM)) > 0 && strcmp(attn_strerror(ATTN_EHEADDIM),
	   attn_strerror(ATTN_ESHAPE)), "error codes have distinct messages");

	finite_differences(0);
	finite_differences(1);
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
		for (int causal = 0; causal < 2; causal++) {
			const int *sh = shapes[s];
			char tag[96];
			bufs b;
			snprintf(tag, sizeof tag, "B%d H%d T%d D%d %s", sh[0], sh[1], sh[2], sh[3],
				 causal ? "causal" : "full");
			bufs_init(&b, sh[0], sh[1], sh[2], sh[3]);
			fill_random(&b, 7 + s * 2 + causal);
			twin_vs_ref(&b, sh[0], sh[1], sh[2], sh[3], causal, tag);
			bufs_free(&b);
		}
	cs336_inputs();
	return done_testing();
}
