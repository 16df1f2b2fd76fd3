/* test_muon.c: the CUDA Muon op (backend.h muon_step: bf16 Newton-Schulz,
 * matrices of one shape batched) against the CPU op (fp32), through the op
 * table: several shapes (square, wide, tall, the ts model's q/k/v/o,
 * gate/up and down), several matrices of a shape at scattered offsets, a
 * clip factor on the device; then three steps from tests/data/
 * muon_ref.safetensors against torch.optim.Muon's bf16 and fp32 results.
 * Errors are relative in the 2-norm, of the parameters' change (not of the
 * parameters, which would hide the update), within bf16 tolerance.  The
 * momentum buffer is fp32 on both and must agree to float rounding.  Run by
 * `make test-gpu` on a GPU machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../muon_ref.h"
#include "gpu_harness.h"
#include "model/backend.h"

/* bf16 Newton-Schulz against fp32: torch's own bf16 is 1-2 % off its fp32. */
static const double TOL_BF16 = 4e-2, TOL_BUF = 1e-6, TOL_ACT = 5e-3;
enum { GAP = 5 };

static lm_backend *cpu, *gpu;
static uint64_t seed = 20261202;

static void *up(lm_backend *be, const void *h, size_t bytes)
{
	void *d = be->alloc(be, bytes);
	be->upload(be, d, h, bytes);
	return d;
}

static void *down(lm_backend *be, const void *d, size_t bytes)
{
	void *h = malloc(bytes);
	be->download(be, h, d, bytes);
	return h;
}

/* |(a - p0) - (b - p0)| / |b - p0| over the matrices at offs. */
static double change_rel(const float *a, const float *b, const float *p0, const size_t *offs,
			 int count, size_t n)
{
	double d = 0, r = 0;
	for (int i = 0; i < count; i++)
		for (size_t j = 0; j < n; j++) {
			size_t k = offs[i] + j;
			double ca = (double)a[k] - p0[k], cb = (double)b[k] - p0[k];
			d += (ca - cb) * (ca - cb);
			r += cb * cb;
		}
	return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* One step of count rows x cols matrices on both backends, the last n_tr
 * of them cols x rows (the CPU's mixed set equals its calls per shape,
 * tests/unit/test_muon.c). */
static void test_set(int rows, int cols, int count, int n_tr, muon_scale scale)
{
	size_t n = (size_t)rows * cols, total = GAP + (size_t)count * (n + GAP);
	size_t *offs = malloc(count * sizeof *offs);
	for (int i = 0; i < count; i++)
		offs[i] = GAP + (size_t)i * (n + GAP);
	float *p = malloc(total * sizeof *p), *g = malloc(total * sizeof *g);
	float *b = malloc(total * sizeof *b);
	for (size_t i = 0; i < total; i++) {
		p[i] = 0.05f * gpu_rand(&seed);
		g[i] = gpu_rand(&seed);
		b[i] = 0.5f * gpu_rand(&seed);
	}
	float scale_h = 0.7f;
	muon_hparams h = { .lr = 0.02f, .momentum = 0.95f, .weight_decay = 0.1f, .nesterov = 1,
			   .ns_steps = MUON_NS_STEPS, .scale = scale };
	lm_backend *be[2] = { cpu, gpu };
	float *res_p[2], *res_b[2];
	float *act = NULL;
	for (int s = 0; s < 2; s++) {
		lm_backend *x = be[s];
		float *dp = up(x, p, total * sizeof *p), *dg = up(x, g, total * sizeof *g);
		float *db = up(x, b, total * sizeof *b), *dsc = up(x, &scale_h, sizeof scale_h);
		size_t *doffs = up(x, offs, count * sizeof *offs);
		void *ws = x->alloc(x, x->muon_workspace(x, count, rows, cols));
		void *pa = s ? x->alloc(x, total * lm_dtype_size(x->act)) : NULL;
		if (pa) /* the compute copy of the weights before the step: the gaps keep it */
			x->to_act(x, pa, dp, total);
		x->muon_step(x, dp, dg, db, pa, doffs, count, n_tr, rows, cols, &h, dsc, ws);
		lm_err e;
		if (x->sync(x, &e)) {
			ok(0, "%s Muon %dx%d x%d (%d transposed) runs: %s", x->name, rows, cols, count,
			   n_tr, e.msg);
			return;
		}
		res_p[s] = down(x, dp, total * sizeof *p);
		res_b[s] = down(x, db, total * sizeof *b);
		if (pa) {
			uint16_t *hb = down(x, pa, total * sizeof(uint16_t));
			act = malloc(total * sizeof *act);
			for (size_t i = 0; i < total; i++)
				act[i] = bf2f(hb[i]);
			free(hb);
			x->release(x, pa);
		}
		x->release(x, dp), x->release(x, dg), x->release(x, db), x->release(x, dsc);
		x->release(x, doffs), x->release(x, ws);
	}
	const char *sn = scale == MUON_SCALE_ORIGINAL ? "original" : "match_rms_adamw";
	double dp = change_rel(res_p[1], res_p[0], p, offs, count, n);
	ok(dp <= TOL_BF16, "Muon %dx%d x%d (%d transposed) %s: parameter change rel %.3g (tol %.3g)",
	   rows, cols, count, n_tr, sn, dp, TOL_BF16);
	gpu_err eb = gpu_compare(res_b[1], res_b[0], total);
	ok(eb.rel <= TOL_BUF, "Muon %dx%d x%d: momentum buffers rel %.3g", rows, cols, count, eb.rel);
	gpu_err ea = gpu_compare(act, res_p[1], total);
	int gaps = 1;
	for (int i = 0; i < count; i++)
		gaps &= res_p[1][offs[i] - 1] == p[offs[i] - 1];
	gaps &= res_p[1][total - 1] == p[total - 1];
	ok(ea.rel <= TOL_ACT && gaps, "Muon %dx%d x%d (%d transposed): the bf16 compute copy (rel "
	   "%.3g), the gaps between matrices untouched", rows, cols, count, n_tr, ea.rel);
	free(offs), free(p), free(g), free(b), free(act);
	for (int s = 0; s < 2; s++)
		free(res_p[s]), free(res_b[s]);
}

/* Three steps of the CUDA op from the reference file's p0 and gradients,
 * against torch's bf16 and (patched) fp32 results. */
static void against_reference(void)
{
	const char *root = getenv("LMPIPE_ROOT");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", MUON_REF_FILE);
	st_file f;
	if (st_open(&f, path)) {
		ok(0, "%s is readable (made by tests/gen/muon_ref.py)", path);
		return;
	}
	int steps = (int)muon_ref_meta(&f, "steps");
	float one = 1.0f;
	float *dsc = up(gpu, &one, sizeof one);
	for (int s = 0; s < MUON_REF_SHAPES; s++) {
		int rows = muon_ref_shapes[s].rows, cols = muon_ref_shapes[s].cols;
		size_t n = (size_t)rows * cols, off0 = 0;
		char name[128];
		float *p0 = malloc(n * sizeof *p0), *x = malloc(n * sizeof *x);
		snprintf(name, sizeof name, "%s.p0", muon_ref_shapes[s].name);
		if (st_f32(&f, name, p0, n)) {
			ok(0, "the reference file holds %s", name);
			continue;
		}
		for (int fn = 0; fn < MUON_REF_FNS; fn++) {
			muon_hparams h = muon_ref_hparams(&f, fn);
			float *dp = up(gpu, p0, n * sizeof *p0), *db = gpu->alloc(gpu, n * sizeof *p0);
			float *dg = gpu->alloc(gpu, n * sizeof *p0);
			size_t *doffs = up(gpu, &off0, sizeof off0);
			void *ws = gpu->alloc(gpu, gpu->muon_workspace(gpu, 1, rows, cols));
			gpu->zero(gpu, db, n * sizeof *p0);
			double w16 = 0, w32 = 0;
			for (int k = 1; k <= steps; k++) {
				snprintf(name, sizeof name, "%s.g%d", muon_ref_shapes[s].name, k);
				if (st_f32(&f, name, x, n))
					break;
				gpu->upload(gpu, dg, x, n * sizeof *x);
				gpu->muon_step(gpu, dp, dg, db, NULL, doffs, 1, 0, rows, cols, &h, dsc, ws);
				float *got = down(gpu, dp, n * sizeof *x);
				for (int prec = 0; prec < 2; prec++) {
					snprintf(name, sizeof name, "%s.%s.%s.p%d", muon_ref_shapes[s].name,
						 muon_ref_fns[fn].name, prec ? "fp32" : "bf16", k);
					if (st_f32(&f, name, x, n))
						continue;
					double r = change_rel(got, x, p0, &off0, 1, n);
					if (prec)
						w32 = fmax(w32, r);
					else
						w16 = fmax(w16, r);
				}
				free(got);
			}
			lm_err e;
			int bad = gpu->sync(gpu, &e);
			ok(!bad && w16 <= TOL_BF16 && w32 <= TOL_BF16, "%s %s: %d CUDA steps against torch's "
			   "bf16 %.3g and fp32 %.3g (tol %.3g)%s%s", muon_ref_shapes[s].name,
			   muon_ref_fns[fn].name, steps, w16, w32, TOL_BF16, bad ? ": " : "", bad ? e.msg : "");
			gpu->release(gpu, dp), gpu->release(gpu, db), gpu->release(gpu, dg);
			gpu->release(gpu, doffs), gpu->release(gpu, ws);
		}
		free(p0), free(x);
	}
	gpu->release(gpu, dsc);
	st_close(&f);
}

int main(void)
{
	gpu_require_device();
	lm_err e;
	cpu = backend_open("cpu", &e);
	gpu = backend_open("cuda", &e);
	if (!gpu) {
		ok(0, "the CUDA backend opens: %s", e.msg);
		return done_testing();
	}
	test_set(64, 64, 4, 0, MUON_SCALE_ORIGINAL);
	test_set(48, 128, 3, 0, MUON_SCALE_MATCH_RMS_ADAMW);
	test_set(192, 64, 2, 0, MUON_SCALE_ORIGINAL);
	test_set(37, 53, 1, 0, MUON_SCALE_ORIGINAL);
	test_set(512, 512, 16, 0, MUON_SCALE_ORIGINAL);   /* ts: q, k, v, o of 4 layers */
	test_set(1344, 512, 8, 0, MUON_SCALE_ORIGINAL);   /* ts: gate, up */
	test_set(512, 1344, 4, 0, MUON_SCALE_MATCH_RMS_ADAMW); /* ts: down */
	/* a shape and its transpose in one set: X laid out as most of them
	 * want, the others flipped through tiles (edges not a multiple of 32) */
	test_set(1344, 512, 12, 4, MUON_SCALE_ORIGINAL);  /* ts merged: down flipped */
	test_set(1344, 512, 12, 4, MUON_SCALE_MATCH_RMS_ADAMW);
	test_set(128, 48, 5, 3, MUON_SCALE_ORIGINAL);     /* the tall ones flipped */
	test_set(37, 70, 3, 1, MUON_SCALE_ORIGINAL);
	test_set(70, 37, 3, 2, MUON_SCALE_MATCH_RMS_ADAMW);
	against_reference();
	cpu->close(cpu);
	gpu->close(gpu);
	return done_testing();
}
