/* test_muon.c: the CPU Muon step (kernels/muon.h): Newton-Schulz makes a
 * matrix nearly orthogonal (and one step alone does not, so the check can
 * fail); steps equal torch.optim.Muon's in fp32 (tests/data/
 * muon_ref.safetensors, made by tests/gen/muon_ref.py with the bf16 cast
 * patched to fp32) within 1e-5 relative, several steps, every shape, both
 * scalings, also batched at scattered offsets; the clip factor scales the
 * gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../muon_ref.h"
#include "../tap.h"
#include "base/rng_stream.h"
#include "kernels/muon.h"

static const double REF_TOL = 1e-5;
static const double SV_LO = 0.6, SV_HI = 1.25; /* the quintic's band after 5 steps */
enum { POWER_ITERS = 500 };

/* The eigenvalue of largest magnitude of the symmetric m x m matrix a
 * minus shift times the identity, plus shift: power iteration from a fixed
 * start, the Rayleigh quotient of the unit iterate. */
static double top_eig(const double *a, int m, double shift)
{
	double *v = malloc(m * sizeof *v), *w = malloc(m * sizeof *w), lam = 0;
	for (int i = 0; i < m; i++)
		v[i] = 1.0 / sqrt((double)m) + 0.001 * i;
	for (int it = 0; it < POWER_ITERS; it++) {
		double vv = 0;
		for (int i = 0; i < m; i++)
			vv += v[i] * v[i];
		for (int i = 0; i < m; i++)
			v[i] /= sqrt(vv);
		lam = 0;
		for (int i = 0; i < m; i++) {
			double s = -shift * v[i];
			for (int j = 0; j < m; j++)
				s += a[(size_t)i * m + j] * v[j];
			w[i] = s;
			lam += v[i] * s;
		}
		memcpy(v, w, m * sizeof *v);
	}
	free(v);
	free(w);
	return lam + shift;
}

/* Singular values of o (rows x cols) lie in [lo, hi]: the eigenvalues of
 * the smaller Gram matrix, squared bounds. */
static void sv_range(const float *o, int rows, int cols, double *lo, double *hi)
{
	int tr = rows > cols, m = tr ? cols : rows, k = tr ? rows : cols;
	double *g = calloc((size_t)m * m, sizeof *g);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < m; j++) {
			double s = 0;
			for (int t = 0; t < k; t++) {
				double a = tr ? o[(size_t)t * cols + i] : o[(size_t)i * cols + t];
				double b = tr ? o[(size_t)t * cols + j] : o[(size_t)j * cols + t];
				s += a * b;
			}
			g[(size_t)i * m + j] = s;
		}
	double top = top_eig(g, m, 0);
	double bottom = top_eig(g, m, top * 1.01);
	*hi = sqrt(top);
	*lo = sqrt(bottom > 0 ? bottom : 0);
	free(g);
}

static void orthogonality(void)
{
	static const int shapes[][2] = { { 32, 96 }, { 96, 32 }, { 48, 128 } };
	lm_rng r;
	rng_seed(&r, 7);
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		float *g = malloc(n * sizeof *g), *o = malloc(n * sizeof *o);
		float *ws = malloc(muon_workspace_cpu(1, rows, cols) * sizeof *ws);
		for (size_t i = 0; i < n; i++)
			g[i] = (float)rng_normal(&r) * 3.0f;
		double lo, hi;
		muon_ns_cpu(o, g, rows, cols, MUON_NS_STEPS, ws);
		sv_range(o, rows, cols, &lo, &hi);
		ok(lo >= SV_LO && hi <= SV_HI, "%dx%d: singular values of NS5(G) in [%.3f, %.3f] "
		   "(band [%.2f, %.2f])", rows, cols, lo, hi, SV_LO, SV_HI);
		muon_ns_cpu(o, g, rows, cols, 1, ws);
		sv_range(o, rows, cols, &lo, &hi);
		ok(!(lo >= SV_LO && hi <= SV_HI), "%dx%d: one step alone is not in the band "
		   "([%.3f, %.3f]): the check can fail", rows, cols, lo, hi);
		free(g);
		free(o);
		free(ws);
	}
}

static float *load(const st_file *f, const char *shape, const char *what, size_t n)
{
	char name[128];
	snprintf(name, sizeof name, "%s.%s", shape, what);
	float *x = malloc(n * sizeof *x);
	if (st_f32(f, name, x, n)) {
		ok(0, "the reference file holds %s", name);
		free(x);
		return NULL;
	}
	return x;
}

/* Every shape and scaling: K steps at offset 0 (count 1) and, batched, two
 * copies of the matrix at scattered offsets (count 2); the gradients
 * doubled and clip factor 0.5 in the batched run. */
static void against_reference(const st_file *f)
{
	int steps = (int)muon_ref_meta(f, "steps");
	ok(steps >= 2, "the reference file has %d steps", steps);
	ok(fabs(muon_ref_meta(f, "eps") - MUON_EPS) < 1e-12 && (int)muon_ref_meta(f, "ns_steps") ==
	   MUON_NS_STEPS, "the file's eps and ns_steps are the kernel's");
	for (int s = 0; s < MUON_REF_SHAPES; s++) {
		const char *sn = muon_ref_shapes[s].name;
		int rows = muon_ref_shapes[s].rows, cols = muon_ref_shapes[s].cols;
		size_t n = (size_t)rows * cols, gap = 7, size = 2 * n + gap;
		float *p0 = load(f, sn, "p0", n);
		if (!p0)
			continue;
		for (int fn = 0; fn < MUON_REF_FNS; fn++) {
			muon_hparams h = muon_ref_hparams(f, fn);
			float *p = calloc(size, sizeof *p), *g = calloc(size, sizeof *g);
			float *buf = calloc(size, sizeof *buf), *g2 = calloc(size, sizeof *g2);
			float *p2 = calloc(size, sizeof *p2), *buf2 = calloc(size, sizeof *buf2);
			float *ws = malloc(muon_workspace_cpu(2, rows, cols) * sizeof *ws);
			size_t one[1] = { 0 }, two[2] = { gap, n + gap };
			memcpy(p, p0, n * sizeof *p);
			memcpy(p2 + gap, p0, n * sizeof *p);
			memcpy(p2 + n + gap, p0, n * sizeof *p);
			double worst = 0, worst_buf = 0, worst_batch = 0;
			for (int k = 1; k <= steps; k++) {
				char what[64];
				snprintf(what, sizeof what, "g%d", k);
				float *gk = load(f, sn, what, n);
				snprintf(what, sizeof what, "%s.fp32.p%d", muon_ref_fns[fn].name, k);
				float *pk = load(f, sn, what, n);
				snprintf(what, sizeof what, "buf%d", k);
				float *bk = load(f, sn, what, n);
				if (!gk || !pk || !bk) {
					free(gk); free(pk); free(bk);
					break;
				}
				memcpy(g, gk, n * sizeof *g);
				for (size_t i = 0; i < n; i++)
					g2[gap + i] = g2[gap + n + i] = 2 * gk[i];
				muon_step_cpu(p, g, buf, one, 1, 0, rows, cols, &h, 1.0f, ws);
				muon_step_cpu(p2, g2, buf2, two, 2, 0, rows, cols, &h, 0.5f, ws);
				double d = muon_rel(p, pk, n), db = muon_rel(buf, bk, n);
				double d2 = fmax(muon_rel(p2 + gap, pk, n), muon_rel(p2 + gap + n, pk, n));
				worst = fmax(worst, d);
				worst_buf = fmax(worst_buf, db);
				worst_batch = fmax(worst_batch, d2);
				free(gk); free(pk); free(bk);
			}
			ok(worst <= REF_TOL && worst_buf <= REF_TOL,
			   "%s %s: %d steps equal torch.optim.Muon (fp32): parameter %.2g, momentum %.2g "
			   "(tolerance %g)", sn, muon_ref_fns[fn].name, steps, worst, worst_buf, REF_TOL);
			ok(worst_batch <= REF_TOL, "%s %s: batched at scattered offsets, clip factor "
			   "0.5 on doubled gradients: %.2g", sn, muon_ref_fns[fn].name, worst_batch);
			ok(p2[0] == 0 && p2[gap - 1] == 0, "%s: the floats between matrices are untouched", sn);
			free(p); free(g); free(buf); free(g2); free(p2); free(buf2); free(ws);
		}
		free(p0);
	}
}

/* A set of a shape and its transpose (muon.h's n_tr): two 48x16 matrices
 * and one 16x48 in one call equal the two shapes' calls, bit for bit, under
 * both scales (the transposed one's adjust is its own). */
static void transposed_in_set(void)
{
	enum { R = 48, C = 16, N = R * C, GAPS = 3 };
	size_t offs[3] = { GAPS, N + 2 * GAPS, 2 * N + 3 * GAPS }, size = 3 * N + 4 * GAPS;
	float *p = calloc(size, sizeof *p), *g = calloc(size, sizeof *g), *b = calloc(size, sizeof *b);
	float *p2 = calloc(size, sizeof *p2), *b2 = calloc(size, sizeof *b2);
	float *ws = malloc(muon_workspace_cpu(3, R, C) * sizeof *ws);
	uint64_t st = 20261202;
	for (int sc = 0; sc < 2; sc++) {
		for (size_t i = 0; i < size; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			g[i] = (float)((st >> 40) / 16777216.0 - 0.5);
			p[i] = p2[i] = 0.01f * g[i];
			b[i] = b2[i] = 0.5f * g[i];
		}
		muon_hparams h = { .lr = 0.02f, .momentum = 0.95f, .weight_decay = 0.1f, .nesterov = 1,
				   .ns_steps = MUON_NS_STEPS, .scale = (muon_scale)sc };
		muon_step_cpu(p, g, b, offs, 3, 1, R, C, &h, 0.5f, ws);
		muon_step_cpu(p2, g, b2, offs, 2, 0, R, C, &h, 0.5f, ws);
		muon_step_cpu(p2, g, b2, offs + 2, 1, 0, C, R, &h, 0.5f, ws);
		ok(!memcmp(p, p2, size * sizeof *p) && !memcmp(b, b2, size * sizeof *b),
		   "48x16 x2 and 16x48 x1 in one set (%s) equal the two shapes' calls bit for bit",
		   sc ? "match_rms_adamw" : "original");
	}
	free(p); free(g); free(b); free(p2); free(b2); free(ws);
}

int main(void)
{
	near(muon_adjust(MUON_SCALE_ORIGINAL, 48, 16), sqrt(3.0), 1e-12, "original scale of 48x16: sqrt(3)");
	near(muon_adjust(MUON_SCALE_ORIGINAL, 16, 48), 1.0, 0, "original scale of 16x48: 1");
	near(muon_adjust(MUON_SCALE_MATCH_RMS_ADAMW, 16, 48), 0.2 * sqrt(48.0), 1e-12,
	     "match_rms_adamw scale of 16x48: 0.2 sqrt(48)");
	orthogonality();
	transposed_in_set();
	const char *root = getenv("LMPIPE_ROOT");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", MUON_REF_FILE);
	st_file f;
	if (st_open(&f, path)) {
		diag("%s is missing: run python3 tests/gen/muon_ref.py on a machine with torch", path);
		ok(0, "the torch.optim.Muon reference file is readable");
		return done_testing();
	}
	against_reference(&f);
	st_close(&f);
	return done_testing();
}
