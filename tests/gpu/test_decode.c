/* test_decode.c: generation on CUDA.  The cache ops (decode_qkv,
 * attn_decode, rows_gather, rows_scatter) and the fusions (norm_matmul_fwd,
 * glu_matmul_fwd) against the CPU backend's ops; the
 * device sampler against its C twin (kernels/sample.h) and, by a
 * chi-square test, against the distribution gen/sampler.h defines; then
 * the whole CUDA decoder against the CPU model: its greedy tokens are the
 * CPU's argmax wherever the CPU's top two logits are not within bf16
 * rounding of each other, its log-probs equal a teacher-forced CPU pass
 * within bf16 tolerance, and recorded steps (CUDA graphs) give the same
 * tokens as unrecorded ones.  Run by `make test-gpu` on a GPU machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../fake_tok.h"
#include "backend_pair.h"
#include "gen/generate.h"
#include "gen/model_decode.h"
#include "gen/model_decode_internal.h"
#include "gen/sampler.h"
#include "kernels/rope.h"
#include "kernels/matmul.h"
#include "kernels/sample.h"
#include "model/model.h"

/* Whether n act values at a and b on the GPU are the same bytes. */
static int same_bytes(const void *a, const void *b, size_t n)
{
	size_t bytes = n * lm_dtype_size(gpu.be->act);
	unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
	gpu.be->download(gpu.be, ha, a, bytes);
	gpu.be->download(gpu.be, hb, b, bytes);
	int same = gpu.be->sync(gpu.be, NULL) == 0 && !memcmp(ha, hb, bytes);
	free(ha), free(hb);
	return same;
}

static void test_cache_ops(int N, int S, int H, int Hkv, int D, int n_ctx)
{
	char what[128];
	size_t row = (size_t)(H + 2 * Hkv) * D, cache = (size_t)S * Hkv * n_ctx * D;
	float *qkv = rnd((size_t)N * row, 1), *cs = malloc((size_t)n_ctx * D * sizeof *cs);
	float *kc0 = rnd(cache, 1), *vc0 = rnd(cache, 1);
	int32_t *pos = malloc(N * sizeof *pos), *slot = malloc(N * sizeof *slot);
	for (int i = 0; i < N; i++) {
		slot[i] = i % S;
		pos[i] = i ? (int32_t)((i * 37 + 5) % n_ctx) : 0; /* a first position too */
	}
	rope_table(cs, NULL, n_ctx, D, 10000.0);
	BOTH(qkv, qkv, (size_t)N * row, 1);
	BOTH(cs, cs, (size_t)n_ctx * D, 0);
	BOTH(kc, kc0, cache, 1);
	BOTH(vc, vc0, cache, 1);
	OUT(q, (size_t)N * H * D, 1);
	OUT(o, (size_t)N * H * D, 1);
	int32_t *posc = cpu.be->alloc(cpu.be, N * sizeof *pos), *posg = gpu.be->alloc(gpu.be, N * sizeof *pos);
	int32_t *slc = cpu.be->alloc(cpu.be, N * sizeof *pos), *slg = gpu.be->alloc(gpu.be, N * sizeof *pos);
	cpu.be->upload(cpu.be, posc, pos, N * sizeof *pos);
	gpu.be->upload(gpu.be, posg, pos, N * sizeof *pos);
	cpu.be->upload(cpu.be, slc, slot, N * sizeof *pos);
	gpu.be->upload(gpu.be, slg, slot, N * sizeof *pos);
	decode_shape s = { N, H, Hkv, D, n_ctx };
	float scale = 1.0f / sqrtf((float)D);
	/* one token per slot stores before all attend: distinct (slot, pos) */
	cpu.be->decode_qkv(cpu.be, qc, kcc, vcc, qkvc, csc, posc, slc, s);
	gpu.be->decode_qkv(gpu.be, qg, kcg, vcg, qkvg, csg, posg, slg, s);
	cpu.be->attn_decode(cpu.be, oc, qc, kcc, vcc, posc, slc, s, scale);
	gpu.be->attn_decode(gpu.be, og, qg, kcg, vcg, posg, slg, s, scale);
	snprintf(what, sizeof what, "decode N=%d S=%d H=%d Hkv=%d D=%d ctx=%d", N, S, H, Hkv, D, n_ctx);
	/* the two as one pass (every token in a slot of its own, as in a
	 * decoding step) on fresh caches: the same bytes as the two ops */
	if (S >= N && gpu.be->attn_decode_qkv) {
		void *kf = put(&gpu, kc0, cache, 1), *vf = put(&gpu, vc0, cache, 1);
		void *of = put(&gpu, NULL, (size_t)N * H * D, 1);
		int rc = gpu.be->attn_decode_qkv(gpu.be, of, kf, vf, qkvg, csg, posg, slg, s, scale);
		const char *off = getenv("LMPIPE_NO_QKV_ATTN");
		int takes = (D == 32 || D == 64 || D == 128) && !(off && *off && *off != '0');
		ok(takes ? rc == 0 && same_bytes(of, og, (size_t)N * H * D) && same_bytes(kf, kcg, cache) &&
				   same_bytes(vf, vcg, cache)
			 : rc == -1,
		   "%s: q/k/v store and attention in one pass %s", what,
		   takes ? "the same bytes of output and caches as the two ops"
			 : "declined (head dimension not 32, 64 or 128, or LMPIPE_NO_QKV_ATTN)");
	}
	char w2[160];
	snprintf(w2, sizeof w2, "%s: rotated q", what);
	compare(w2, qg, qc, (size_t)N * H * D, 1, TOL_ACT);
	snprintf(w2, sizeof w2, "%s: key cache", what);
	compare(w2, kcg, kcc, cache, 1, TOL_ACT);
	snprintf(w2, sizeof w2, "%s: value cache", what);
	compare(w2, vcg, vcc, cache, 1, TOL_ACT);
	snprintf(w2, sizeof w2, "%s: attention over the cache", what);
	compare(w2, og, oc, (size_t)N * H * D, 1, TOL_ACT);
	/* the row moves around the head: rows of 97 values one by one, of
	 * 1000 in 16-byte pieces */
	int C = H * D, n = N < S ? N : S;
	int32_t *idx = malloc(N * sizeof *idx);
	for (int j = 0; j < n; j++)
		idx[j] = (int32_t)(N - 1 - j);
	cpu.be->upload(cpu.be, posc, idx, n * sizeof *idx);
	gpu.be->upload(gpu.be, posg, idx, n * sizeof *idx);
	float *x = rnd((size_t)N * C, 1);
	BOTH(x, x, (size_t)N * C, 0);
	OUT(xl, (size_t)N * C, 0);
	cpu.be->rows_gather(cpu.be, xlc, xc, posc, n, C);
	gpu.be->rows_gather(gpu.be, xlg, xg, posg, n, C);
	snprintf(w2, sizeof w2, "%s: rows gathered", what);
	compare(w2, xlg, xlc, (size_t)n * C, 0, 0);
	free(x);
	for (int V = 97; V <= 1000; V += 903) {
		float *lg = rnd((size_t)N * V, 3);
		BOTH(lg, lg, (size_t)N * V, 1);
		OUT(rows, (size_t)S * V, 0);
		cpu.be->rows_scatter(cpu.be, rowsc, lgc, slc, n, V);
		gpu.be->rows_scatter(gpu.be, rowsg, lgg, slg, n, V);
		snprintf(w2, sizeof w2, "%s: rows of %d scattered", what, V);
		compare(w2, rowsg, rowsc, (size_t)n * V, 0, 1e-6); /* the rows written: slots 0..n-1 */
		free(lg);
	}
	cpu.be->release(cpu.be, posc), gpu.be->release(gpu.be, posg);
	cpu.be->release(cpu.be, slc), gpu.be->release(gpu.be, slg);
	release_all(&cpu);
	release_all(&gpu);
	free(qkv), free(cs), free(kc0), free(vc0), free(pos), free(slot), free(idx);
}

/* The decoder's fusions (RMSNorm into a product, SwiGLU into one) on CUDA
 * against the CPU's two ops; N <= 16 takes the few-row kernels, more rows
 * and sizes that are not multiples of 8 the composed path. */
static void test_fused(int N, int C, int OUTD)
{
	char what[128];
	float *x = rnd((size_t)N * C, 2), *g = rnd(C, 1), *w = rnd((size_t)OUTD * C, 0.2f);
	float *h = rnd((size_t)N * 2 * C, 2), *add = rnd((size_t)N * OUTD, 1);
	BOTH(x, x, (size_t)N * C, 0);
	BOTH(g, g, C, 0);
	BOTH(w, w, (size_t)OUTD * C, 1);
	BOTH(h, h, (size_t)N * 2 * C, 1);
	BOTH(add, add, (size_t)N * OUTD, 0);
	OUT(xn, (size_t)N * C, 1);
	OUT(rs, N, 0);
	OUT(sw, (size_t)N * C, 1);
	OUT(sg, (size_t)N * (OUTD / 2 + 1), 1);
	OUT(o1, (size_t)N * OUTD, 1);
	OUT(o2, (size_t)N * OUTD, 0);
	cpu.be->rmsnorm_fwd(cpu.be, xnc, rsc, xc, gc, N, C, 1e-5f);
	cpu.be->matmul_fwd(cpu.be, o1c, NULL, xnc, wc, N, C, OUTD);
	gpu.be->norm_matmul_fwd(gpu.be, o1g, xg, gg, wg, N, C, OUTD, 1e-5f);
	snprintf(what, sizeof what, "RMSNorm into the product %dx%dx%d", N, C, OUTD);
	compare(what, o1g, o1c, (size_t)N * OUTD, 1, TOL_ACT);
	cpu.be->swiglu_fwd(cpu.be, swc, hc, N, C);
	cpu.be->matmul_fwd(cpu.be, o2c, addc, swc, wc, N, C, OUTD);
	gpu.be->glu_matmul_fwd(gpu.be, o2g, addg, hg, wg, N, C, OUTD);
	snprintf(what, sizeof what, "SwiGLU into the product %dx%dx%d, onto the addend", N, C, OUTD);
	compare(what, o2g, o2c, (size_t)N * OUTD, 0, TOL_F32);
	/* RMSNorm, the product and SwiGLU in one: W's rows as gate, then up */
	int F = OUTD / 2;
	if (OUTD % 2 == 0 && gpu.be->norm_glu_fwd) {
		cpu.be->swiglu_fwd(cpu.be, sgc, o1c, N, F);
		int ran = gpu.be->norm_glu_fwd(gpu.be, sgg, xg, gg, wg, N, C, F, 1e-5f) == 0;
		int want = N > MATMUL_SMALL_N && N <= MATMUL_ROWS_N && C % 16 == 0;
		snprintf(what, sizeof what, "RMSNorm, product and SwiGLU %dx%dx%d", N, C, F);
		if (ran)
			compare(what, sgg, sgc, (size_t)N * F, 1, TOL_ACT);
		else
			ok(!want, "%s: not run (%s)", what, want ? "it should have" : "not its shapes");
	}
	(void)xng, (void)rsg, (void)swg, (void)sgg; /* the CPU side's intermediates only */
	release_all(&cpu);
	release_all(&gpu);
	free(x), free(g), free(w), free(h), free(add);
}

/* A feed's ids, positions (from i * 3) and rows after the sampler chose
 * tok: the tokens (0 for -1), one position on, the table's rows. */
static int feed_ok(const int32_t *tok, const int32_t *ids, const int32_t *pos, const float *x,
		   const float *table, int n, int C)
{
	for (int i = 0; i < n; i++) {
		int32_t t = tok[i] < 0 ? 0 : tok[i];
		if (ids[i] != t || pos[i] != i * 3 + 1 ||
		    memcmp(x + (size_t)i * C, table + (size_t)t * C, (size_t)C * sizeof *x))
			return 0;
	}
	return 1;
}

/* The device sampler on n rows of random logits (scale mag, some ties,
 * some -inf) against the C twin with the same draws, each feeding its
 * choice on (kernels/sample.h's sample_feed). */
static void twin_once(int n, int V, sample_args a, float mag)
{
	float *l = malloc((size_t)n * V * sizeof *l), *u = malloc((size_t)n * SAMPLE_DRAWS * sizeof *u);
	int32_t *row = malloc(n * sizeof *row), *forced = malloc(n * sizeof *forced);
	int32_t *tc = malloc(n * sizeof *tc), *tg = malloc(n * sizeof *tg);
	float *lc = malloc(n * sizeof *lc), *lgp = malloc(n * sizeof *lgp);
	for (size_t i = 0; i < (size_t)n * V; i++)
		l[i] = i % 13 == 0 ? 0.5f : i % 29 == 0 ? -INFINITY : mag * gpu_rand(&seed);
	for (int i = 0; i < n; i++) {
		row[i] = i;
		for (int k = 0; k < SAMPLE_DRAWS; k++)
			u[i * SAMPLE_DRAWS + k] = 0.5f * (gpu_rand(&seed) + 1);
		forced[i] = i % 17 == 3 ? (i * 7) % V : -1;
	}
	enum { FC = 24 };
	float *table = malloc((size_t)V * FC * sizeof *table), *xc = malloc((size_t)n * FC * sizeof *xc);
	float *xg = malloc((size_t)n * FC * sizeof *xg);
	int32_t *ic = malloc(n * sizeof *ic), *pc = malloc(n * sizeof *pc), *ig = malloc(n * sizeof *ig);
	int32_t *pg = malloc(n * sizeof *pg);
	for (size_t i = 0; i < (size_t)V * FC; i++)
		table[i] = gpu_rand(&seed);
	for (int i = 0; i < n; i++)
		pc[i] = i * 3;
	sample_feed fc = { ic, pc, xc, table, FC };
	sample_rows_cpu(tc, lc, l, row, u, forced, &fc, n, V, a);
	lm_backend *be = gpu.be;
	float *dtab = be->alloc(be, (size_t)V * FC * sizeof *table);
	float *dx = be->alloc(be, (size_t)n * FC * sizeof *xg);
	int32_t *dids = be->alloc(be, n * sizeof *ig), *dpos = be->alloc(be, n * sizeof *pg);
	for (int i = 0; i < n; i++)
		pg[i] = i * 3;
	be->upload(be, dtab, table, (size_t)V * FC * sizeof *table);
	be->upload(be, dpos, pg, n * sizeof *pg);
	sample_feed fg = { dids, dpos, dx, dtab, FC };
	float *dl = be->alloc(be, (size_t)n * V * sizeof *l);
	float *du = be->alloc(be, (size_t)n * SAMPLE_DRAWS * sizeof *u);
	int32_t *drow = be->alloc(be, n * sizeof *row), *df = be->alloc(be, n * sizeof *row);
	int32_t *dt = be->alloc(be, n * sizeof *row);
	float *dlp = be->alloc(be, n * sizeof *lc);
	be->upload(be, dl, l, (size_t)n * V * sizeof *l);
	be->upload(be, du, u, (size_t)n * SAMPLE_DRAWS * sizeof *u);
	be->upload(be, drow, row, n * sizeof *row);
	be->upload(be, df, forced, n * sizeof *row);
	be->sample(be, dt, dlp, dl, drow, du, df, &fg, n, V, a);
	be->download(be, tg, dt, n * sizeof *tg);
	be->download(be, lgp, dlp, n * sizeof *lgp);
	be->download(be, ig, dids, n * sizeof *ig);
	be->download(be, pg, dpos, n * sizeof *pg);
	be->download(be, xg, dx, (size_t)n * FC * sizeof *xg);
	lm_err e;
	int rc = be->sync(be, &e);
	int differ = 0, bad = 0;
	double lpd = 0;
	for (int i = 0; i < n; i++) {
		differ += tc[i] != tg[i];
		bad += tg[i] < 0 || tg[i] >= V || (a.limit && tg[i] >= a.limit && forced[i] < 0);
		if (tc[i] == tg[i] && fabs(lc[i] - lgp[i]) > lpd)
			lpd = fabs(lc[i] - lgp[i]);
	}
	ok(!rc && !bad && differ <= n / 100 && lpd <= 1e-4,
	   "sampler V=%d T=%.2f k=%d p=%.2f limit=%d, %d rows%s: %d of %d tokens differ from the C "
	   "twin (<= 1%%), log-probs within %.2g%s%s", V, a.temperature, a.top_k, a.top_p, a.limit,
	   n, sample_rejects(n, a) ? " by rejection" : "", differ, n, lpd, rc ? ": " : "",
	   rc ? e.msg : "");
	ok(!rc && feed_ok(tc, ic, pc, xc, table, n, FC) && feed_ok(tg, ig, pg, xg, table, n, FC),
	   "sampler V=%d: both feed their tokens on (ids, positions, embedded rows)", V);
	be->release(be, dl), be->release(be, du), be->release(be, drow), be->release(be, df);
	be->release(be, dt), be->release(be, dlp), be->release(be, dtab), be->release(be, dx);
	be->release(be, dids), be->release(be, dpos);
	free(l), free(u), free(row), free(forced), free(tc), free(tg), free(lc), free(lgp);
	free(table), free(xc), free(xg), free(ic), free(pc), free(ig), free(pg);
}

/* twin_once by each way a nucleus can be drawn (sample.h): selection and
 * rejection, whichever sample_rejects() would choose. */
static void test_sampler_twin(int n, int V, sample_args a, float mag)
{
	if (a.top_p < 1 && a.top_k <= 0) {
		a.way = SAMPLE_WAY_SELECT;
		twin_once(n, V, a, mag);
		a.way = SAMPLE_WAY_REJECT;
	}
	twin_once(n, V, a, mag);
}

/* Bad rows: NaN, +inf, all -inf give -1; greedy ties go to the lowest id.
 * At V = 10000 a row of a few is a cluster of blocks, each a slice of the
 * ids: the bad value and the ties lie in different slices. */
static void test_sampler_edges(int V)
{
	enum { R = 4 };
	float *l = malloc((size_t)R * V * sizeof *l);
	for (int i = 0; i < R * V; i++)
		l[i] = (float)(i % 7);
	l[0 * V + V * 10 / 64] = NAN;
	l[1 * V + V * 20 / 64] = INFINITY;
	for (int j = 0; j < V; j++)
		l[2 * V + j] = -INFINITY;
	int t1 = V * 9 / 64, t2 = V * 40 / 64;
	for (int j = 0; j < V; j++)
		l[3 * V + j] = j == t1 || j == t2 ? 5.0f : 1.0f;
	int32_t row[R] = { 0, 1, 2, 3 }, tok[R];
	float u[R * SAMPLE_DRAWS], lp[R];
	for (int k = 0; k < R * SAMPLE_DRAWS; k++)
		u[k] = 0.5f;
	size_t bytes = (size_t)R * V * sizeof *l;
	lm_backend *be = gpu.be;
	float *dl = be->alloc(be, bytes), *du = be->alloc(be, sizeof u), *dlp = be->alloc(be, sizeof lp);
	int32_t *dr = be->alloc(be, sizeof row), *dt = be->alloc(be, sizeof tok);
	be->upload(be, dl, l, bytes);
	be->upload(be, du, u, sizeof u);
	be->upload(be, dr, row, sizeof row);
	/* greedy on the kernel without rejection, then the rejection kernel
	 * greedy, drawing (and the selection drawing), and at a temperature
	 * whose reciprocal overflows (greedy again) */
	const sample_args as[] = { { 0, 0, 1, 0, SAMPLE_WAY_AUTO }, { 0, 0, 0.5f, 0, SAMPLE_WAY_REJECT },
				   { 1, 0, 0.5f, 0, SAMPLE_WAY_REJECT }, { 1, 0, 0.5f, 0, SAMPLE_WAY_SELECT },
				   { 1e-40f, 0, 0.5f, 0, SAMPLE_WAY_REJECT } };
	for (int k = 0; k < 5; k++) {
		int drawn = k == 2 || k == 3;
		be->sample(be, dt, dlp, dl, dr, du, NULL, NULL, R, V, as[k]);
		be->download(be, tok, dt, sizeof tok);
		lm_err e;
		int rc = be->sync(be, &e);
		int32_t want[R];
		float wlp[R];
		sample_rows_cpu(want, wlp, l, row, u, NULL, NULL, R, V, as[k]);
		ok(!rc && tok[0] == -1 && tok[1] == -1 && tok[2] == -1 && tok[3] == want[3] &&
			   (drawn || tok[3] == t1),
		   "sampler V=%d T %g top-p %g%s: NaN, +inf and all -inf rows give no token; %s (%d %d "
		   "%d %d, twin %d)%s%s", V, as[k].temperature, as[k].top_p,
		   sample_rejects(R, as[k]) ? " by rejection" : "",
		   drawn ? "the draw is the twin's" : "greedy ties go to the lowest id", tok[0], tok[1],
		   tok[2], tok[3], want[3], rc ? ": " : "", rc ? e.msg : "");
	}
	be->release(be, dl), be->release(be, du), be->release(be, dlp), be->release(be, dr);
	be->release(be, dt);
	free(l);
}

/* Chi-square of many device draws from one row against sample_support's
 * probabilities: the statistic over df cells must stay below df + 6
 * sqrt(2 df) (far in the tail of the chi-square law; a wrong cut or a
 * biased draw goes far past it at this many draws).  per > 0: the draws
 * in calls of per rows, else all in one call; way: SAMPLE_WAY_*. */
static void test_sampler_chi2(int V, sample_params sp, int draws, int per, int way)
{
	float *l = malloc((size_t)V * sizeof *l);
	for (int j = 0; j < V; j++)
		l[j] = 3.0f * gpu_rand(&seed) + (j % 50 == 0 ? 4.0f : 0.0f);
	sample_work w;
	lm_err e;
	uint32_t *ids = malloc(V * sizeof *ids), nsup = 0;
	double *probs = malloc(V * sizeof *probs);
	sample_work_init(&w, (uint32_t)V, &e);
	sample_support(l, &sp, &w, ids, probs, &nsup, &e);
	int32_t *row = calloc(draws, sizeof *row), *tok = malloc(draws * sizeof *tok);
	float *u = malloc((size_t)draws * SAMPLE_DRAWS * sizeof *u);
	lm_rng r;
	rng_seed(&r, 99);
	for (int i = 0; i < draws * SAMPLE_DRAWS; i++)
		u[i] = (float)rng_uniform(&r);
	lm_backend *be = gpu.be;
	float *dl = be->alloc(be, (size_t)V * sizeof *l);
	float *du = be->alloc(be, (size_t)draws * SAMPLE_DRAWS * sizeof *u);
	int32_t *dr = be->alloc(be, draws * sizeof *row), *dt = be->alloc(be, draws * sizeof *tok);
	float *dlp = be->alloc(be, draws * sizeof(float));
	be->upload(be, dl, l, (size_t)V * sizeof *l);
	be->upload(be, du, u, (size_t)draws * SAMPLE_DRAWS * sizeof *u);
	be->upload(be, dr, row, draws * sizeof *row);
	sample_args a = { (float)sp.temperature, (int)sp.top_k, (float)sp.top_p, 0, way };
	if (per <= 0)
		per = draws;
	for (int k = 0; k < draws; k += per)
		be->sample(be, dt + k, dlp + k, dl, dr + k, du + (size_t)k * SAMPLE_DRAWS, NULL, NULL,
			   draws - k < per ? draws - k : per, V, a);
	be->download(be, tok, dt, draws * sizeof *tok);
	double *cnt = calloc(V, sizeof *cnt), *pr = calloc(V, sizeof *pr);
	for (uint32_t i = 0; i < nsup; i++)
		pr[ids[i]] = probs[i];
	long outside = 0;
	for (int i = 0; i < draws; i++) {
		if (tok[i] < 0 || tok[i] >= V || pr[tok[i]] == 0)
			outside++;
		else
			cnt[tok[i]]++;
	}
	/* cells: every support token expected >= 5 times; the rest pooled */
	double chi = 0, pool_e = 0, pool_o = 0;
	int df = -1;
	for (int j = 0; j < V; j++) {
		double ex = pr[j] * draws;
		if (pr[j] == 0)
			continue;
		if (ex >= 5) {
			chi += (cnt[j] - ex) * (cnt[j] - ex) / ex;
			df++;
		} else {
			pool_e += ex;
			pool_o += cnt[j];
		}
	}
	if (pool_e > 0) {
		chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
		df++;
	}
	double bound = df + 6 * sqrt(2.0 * (df > 0 ? df : 1));
	ok(outside == 0 && df > 0 && chi <= bound,
	   "sampler chi-square V=%d T=%.2f k=%u p=%.2f, %d draws (%d a call%s) over %u tokens: %.1f "
	   "on %d df (bound %.1f), %ld outside the support", V, sp.temperature, sp.top_k, sp.top_p,
	   draws, per, sample_rejects(per, a) ? ", by rejection" : "", nsup, chi, df, bound, outside);
	be->release(be, dl), be->release(be, du), be->release(be, dr), be->release(be, dt);
	be->release(be, dlp);
	sample_work_free(&w);
	free(l), free(ids), free(probs), free(row), free(tok), free(u), free(cnt), free(pr);
}

/* --- the whole decoder --- */

enum { DV = 300, DCTX = 160, EOT = 299, NP = 5, NEW = 24 };

static bpe_tokenizer tok;

static void make_tokenizer(void) { fake_tokenizer(&tok, DV, EOT); }

typedef struct res {
	uint32_t ids[NEW];
	double lp[NEW];
	size_t n;
} res;

typedef struct run_state {
	uint32_t prompts[NP][DCTX];
	size_t plen[NP], next;
	res out[NP * 4];
} run_state;

static int r_next(void *user, gen_prompt *p, lm_err *e)
{
	run_state *s = user;
	if (s->next == NP)
		return 0;
	size_t i = s->next++;
	*p = (gen_prompt){ s->prompts[i], s->plen[i], "", 0, i, NULL };
	return 1;
}

static int r_done(void *user, const gen_sample *g, lm_err *e)
{
	run_state *s = user;
	res *r = &s->out[g->prompt->index * 4 + g->index];
	r->n = g->n;
	memcpy(r->ids, g->ids, g->n * sizeof *g->ids);
	memcpy(r->lp, g->logprobs, g->n * sizeof *g->logprobs);
	return 0;
}

/* Calls of the last decode() that ran rounds ahead. */
static long ahead_runs;

/* graphs: 0 unrecorded, 1 recorded, 2 recorded without rounds ahead. */
static int decode(model *m, run_state *s, const gen_config *c, uint32_t slots, int graphs,
		  lm_err *e)
{
	model_decoder md;
	s->next = 0;
	memset(s->out, 0, sizeof s->out);
	if (model_decoder_init(&md, m, slots, DCTX, e) < 0)
		return -1;
	md.no_graphs = !graphs;
	if (graphs == 2) {
		md.dec.choose_ahead = NULL;
		md.dec.max_ahead = 0;
	}
	gen_io io = { s, r_next, NULL, r_done, NULL };
	int rc = generate(&md.dec, c, &io, &tok, e);
	ahead_runs = md.ahead_runs;
	model_decoder_free(&md);
	return rc;
}

/* max |a - b| over n values, and max |b|. */
static void diff_of(const float *a, const float *b, size_t n, double *worst, double *scale)
{
	*worst = *scale = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		*worst = d > *worst || d != d ? d : *worst;
		*scale = fabs(b[i]) > *scale ? fabs(b[i]) : *scale;
	}
}

/* The same tokens fed to decoders a and b, then both synchronised: 0, or -1. */
static int feed_both(model_decoder *a, model_decoder *b, uint32_t S, const uint32_t *slot,
		     const uint32_t *const *ids, const uint32_t *n_tok, lm_err *e)
{
	if (a->dec.feed(a, S, slot, ids, n_tok, NULL, e) < 0 ||
	    b->dec.feed(b, S, slot, ids, n_tok, NULL, e) < 0)
		return -1;
	return gpu.be->sync(gpu.be, e);
}

/* max |a - b| and max |b| over the two decoders' logits rows (n values,
 * through the host buffers ra and rb), taken into *worst and *scale. */
static void rows_diff(model_decoder *a, model_decoder *b, float *ra, float *rb, size_t n, double *worst,
		      double *scale)
{
	gpu.be->download(gpu.be, ra, a->rows, n * sizeof *ra);
	gpu.be->download(gpu.be, rb, b->rows, n * sizeof *rb);
	double w, sc;
	diff_of(ra, rb, n, &w, &sc);
	*worst = w > *worst || w != w ? w : *worst;
	*scale = sc > *scale ? sc : *scale;
}

/* max |a - b| and max |b| over the two decoders' key and value caches,
 * as fp32. */
static void caches_diff(model_decoder *a, model_decoder *b, size_t n, double *worst, double *scale)
{
	*worst = *scale = 0;
	for (int k = 0; k < 2; k++) {
		float *ca = get(&gpu, k ? a->vc : a->kc, n, 1), *cb = get(&gpu, k ? b->vc : b->kc, n, 1);
		double w, sc;
		diff_of(ca, cb, n, &w, &sc);
		*worst = w > *worst || w != w ? w : *worst;
		*scale = sc > *scale ? sc : *scale;
		free(ca);
		free(cb);
	}
}

/* The decoding step as one kernel (be->decode_step) against the same
 * step op by op, on random weights of cfg: a prompt of a few tokens, then
 * `steps` steps of one token each.  The two sum their products in
 * different orders, so every step's logits and, at the end, both caches
 * must agree within bf16 rounding of their scale. */
static void test_step_kernel(model_config cfg, int steps)
{
	enum { S = 1 };
	char what[160];
	snprintf(what, sizeof what, "step kernel: d=%d H=%d Hkv=%d L=%d d_ff=%d V=%d", cfg.d_model,
		 cfg.n_heads, cfg.n_kv_heads ? cfg.n_kv_heads : cfg.n_heads, cfg.n_layers, cfg.d_ff,
		 cfg.vocab);
	lm_err e;
	model mg;
	lm_rng r;
	rng_seed(&r, 11);
	if (model_init(&mg, &cfg, gpu.be, 1, DCTX, &e) || model_init_weights(&mg, &r, &e) < 0) {
		ok(0, "%s: model: %s", what, e.msg);
		return;
	}
	model_params_changed(&mg);
	model_decoder a, b;
	if (model_decoder_init(&a, &mg, S, DCTX, &e) < 0 || model_decoder_init(&b, &mg, S, DCTX, &e) < 0) {
		ok(0, "%s: decoders: %s", what, e.msg);
		model_free(&mg);
		return;
	}
	int had = a.step != NULL;
	free(b.step); /* b: the ops */
	b.step = NULL;
	a.no_graphs = b.no_graphs = 1;
	size_t V = (size_t)cfg.vocab, rows = (size_t)S * V;
	float *ra = malloc(rows * sizeof *ra), *rb = malloc(rows * sizeof *rb);
	uint32_t slot[S], n_tok[S], buf[S][DCTX];
	const uint32_t *ids[S];
	int rc = 0;
	double worst = 0, scale = 0;
	for (int t = -1; t < steps && rc == 0; t++) {
		for (uint32_t i = 0; i < S; i++) {
			slot[i] = i;
			n_tok[i] = t < 0 ? 1 + (i * 29 + 3) % 40 : 1; /* prompts, then single tokens */
			for (uint32_t k = 0; k < n_tok[i]; k++)
				buf[i][k] = (uint32_t)((i * 53 + k * 17 + (t + 1) * 7) % V);
			ids[i] = buf[i];
		}
		rc = feed_both(&a, &b, S, slot, ids, n_tok, &e);
		if (rc == 0 && t >= 0)
			rows_diff(&a, &b, ra, rb, rows, &worst, &scale);
	}
	double cworst = 0, cscale = 0;
	if (rc == 0)
		caches_diff(&a, &b, (size_t)cfg.n_layers * S * model_decoder_cache_stride(&a), &cworst,
			    &cscale);
	ok(rc == 0 && had && a.step, "%s: the kernel applies and runs%s%s", what, rc ? ": " : "",
	   rc ? e.msg : "");
	ok(rc == 0 && worst <= 0.02 * scale, "%s: %d steps' logits equal the ops' within %.3g (of %.3g, "
	   "<= 2 %%)", what, steps, worst, scale);
	ok(rc == 0 && cworst <= 0.02 * cscale, "%s: the key and value caches equal the ops' within %.3g "
	   "(of %.3g, <= 2 %%)", what, cworst, cscale);
	free(ra);
	free(rb);
	model_decoder_free(&a);
	model_decoder_free(&b);
	model_free(&mg);
}

/* The prefill of whole prompts through training's attention
 * (model_decode.h's prefill_flash) against the cache ops
 * (prefill_flash = 0), on random weights of cfg: S prompts of T tokens
 * (mixed: T, T - 7 and T - 14 in turn) in one feed, then `steps` steps of
 * one token each.  The two sum in different orders: the prompts' logits,
 * every step's, and at the end both caches must agree within bf16
 * rounding of their scale.  flash: whether the flash path must apply to
 * cfg (else neither decoder may take it). */
static void test_prefill_flash(model_config cfg, int S, int T, int mixed, int steps, int flash)
{
	char what[160];
	snprintf(what, sizeof what, "prefill flash: d=%d H=%d Hkv=%d%s, %d prompts of %d%s",
		 cfg.d_model, cfg.n_heads, cfg.n_kv_heads ? cfg.n_kv_heads : cfg.n_heads,
		 cfg.qk_norm ? " qk-norm" : "", S, T, mixed ? ", -7, -14" : "");
	lm_err e;
	model mg;
	lm_rng r;
	rng_seed(&r, 13);
	if (model_init(&mg, &cfg, gpu.be, 1, DCTX, &e) || model_init_weights(&mg, &r, &e) < 0) {
		ok(0, "%s: model: %s", what, e.msg);
		return;
	}
	model_params_changed(&mg);
	model_decoder a, b;
	if (model_decoder_init(&a, &mg, (uint32_t)S, DCTX, &e) < 0 ||
	    model_decoder_init(&b, &mg, (uint32_t)S, DCTX, &e) < 0) {
		ok(0, "%s: decoders: %s", what, e.msg);
		model_free(&mg);
		return;
	}
	b.prefill_flash = 0;
	a.no_graphs = b.no_graphs = 1;
	size_t V = (size_t)cfg.vocab, rows = (size_t)S * V;
	float *ra = malloc(rows * sizeof *ra), *rb = malloc(rows * sizeof *rb);
	uint32_t *slot = malloc(S * sizeof *slot), *n_tok = malloc(S * sizeof *n_tok);
	uint32_t *buf = malloc((size_t)S * T * sizeof *buf);
	const uint32_t **ids = malloc(S * sizeof *ids);
	int rc = 0;
	double worst = 0, scale = 0;
	for (int t = -1; t < steps && rc == 0; t++) {
		for (int i = 0; i < S; i++) {
			slot[i] = (uint32_t)i;
			/* the prompts, then single tokens */
			n_tok[i] = t >= 0 ? 1 : (uint32_t)(T - (mixed ? 7 * (i % 3) : 0));
			for (uint32_t k = 0; k < n_tok[i]; k++)
				buf[(size_t)i * T + k] = (uint32_t)((i * 53 + k * 17 + (t + 1) * 7) % V);
			ids[i] = buf + (size_t)i * T;
		}
		rc = feed_both(&a, &b, (uint32_t)S, slot, ids, n_tok, &e);
		if (rc == 0)
			rows_diff(&a, &b, ra, rb, rows, &worst, &scale);
	}
	double cworst = 0, cscale = 0;
	if (rc == 0)
		caches_diff(&a, &b, (size_t)cfg.n_layers * S * model_decoder_cache_stride(&a), &cworst,
			    &cscale);
	/* the chunks: the prompts by length, a new chunk where the next
	 * prompt would not fit whole */
	long want = 0;
	for (int len = 0, N = 0; flash && len <= T; len++)
		for (int i = 0; i < S; i++)
			if (T - (mixed ? 7 * (i % 3) : 0) == len) {
				want += N > 0 && N + len > MODEL_DECODE_CHUNK;
				N = N > 0 && N + len > MODEL_DECODE_CHUNK ? len : N + len;
			}
	want += flash && S > 0;
	ok(rc == 0 && a.flash_chunks == want && b.flash_chunks == 0,
	   "%s: %ld chunks through the flash path (want %ld, and 0 with it off)%s%s", what,
	   a.flash_chunks, want, rc ? ": " : "", rc ? e.msg : "");
	ok(rc == 0 && worst <= 0.02 * scale, "%s: the prompts' and %d steps' logits equal the cache "
	   "ops' within %.3g (of %.3g, <= 2 %%)", what, steps, worst, scale);
	ok(rc == 0 && cworst <= 0.02 * cscale, "%s: the key and value caches equal the cache ops' "
	   "within %.3g (of %.3g, <= 2 %%)", what, cworst, cscale);
	free(ra), free(rb), free(slot), free(n_tok), free(buf), free(ids);
	model_decoder_free(&a);
	model_decoder_free(&b);
	model_free(&mg);
}

/* The CUDA decoder against teacher-forced CPU passes for model cfg (a
 * variant: tag); full: also sampling, recorded steps and forks. */
static void test_decoder(model_config cfg, const char *tag, int full)
{
	lm_err e;
	model mc, mg;
	lm_rng r;
	rng_seed(&r, 7);
	if (model_init(&mc, &cfg, cpu.be, 1, DCTX, &e) || model_init(&mg, &cfg, gpu.be, 1, DCTX, &e)) {
		ok(0, "decoder models: %s", e.msg);
		return;
	}
	model_init_weights(&mc, &r, &e);
	float *p = malloc(mc.n_params * sizeof *p);
	cpu.be->download(cpu.be, p, mc.params, mc.n_params * sizeof *p);
	for (size_t i = 0; i < mc.n_params; i++)
		p[i] = bf2f(f2bf(p[i] * 1.5f));
	cpu.be->upload(cpu.be, mc.params, p, mc.n_params * sizeof *p);
	gpu.be->upload(gpu.be, mg.params, p, mc.n_params * sizeof *p);
	model_params_changed(&mc);
	model_params_changed(&mg);
	make_tokenizer();
	static run_state s, s2;
	static const size_t lens[NP] = { 1, 7, 33, 130, 12 };
	for (int i = 0; i < NP; i++) {
		s.plen[i] = lens[i];
		for (size_t t = 0; t < lens[i]; t++)
			s.prompts[i][t] = (uint32_t)((i * 41 + t * 13) % (DV - 1));
	}
	s2 = s;
	gen_config c = { .sp = { 0, 0, 1, 0 }, .seed = 3, .n_samples = 1, .max_tokens = NEW,
			 .eot = BPE_NO_TOKEN };
	/* 3 slots for 5 prompts (slots taken over), then 20 slots for 4 samples
	 * each (steps of 20 rows: kernels/cuda/matmul_rows.cu) */
	int rc = 0;
	for (int run = 0; run < 2; run++) {
		uint32_t slots = run ? 20 : 3;
		c.n_samples = run ? 4 : 1;
		s = s2;
		rc = decode(&mg, &s, &c, slots, 1, &e);
		ok(rc == 0 && ahead_runs > 0, "%s, %u slots: greedy on the CUDA decoder runs (%ld calls of %u "
		   "rounds ahead)%s%s", tag, slots, ahead_runs, (unsigned)MODEL_DECODE_AHEAD, rc ? ": " : "",
		   rc ? e.msg : "");
		/* teacher-forced CPU pass over each prompt + completion */
		int mism = 0, near = 0;
		double worst = 0;
		for (int i = 0; i < NP && rc == 0; i++) {
			int32_t seq[DCTX];
			size_t pl = s.plen[i], n = s.out[4 * i].n;
			for (size_t t = 0; t < pl; t++)
				seq[t] = (int32_t)s.prompts[i][t];
			for (size_t t = 0; t + 1 < n; t++)
				seq[pl + t] = (int32_t)s.out[4 * i].ids[t];
			if (model_forward(&mc, seq, NULL, 1, (int)(pl + n - 1), NULL, &e) < 0)
				break;
			const float *lg = model_logits(&mc);
			for (size_t t = 0; t < n; t++) {
				const float *row = lg + (pl - 1 + t) * DV;
				uint32_t a = 0, b = 1;
				for (uint32_t v = 0; v < DV; v++)
					if (row[v] > row[a])
						a = v;
				for (uint32_t v = 0; v < DV; v++)
					if (v != a && (b == a || row[v] > row[b]))
						b = v;
				double d = fabs(sample_logprob(row, DV, s.out[4 * i].ids[t]) - s.out[4 * i].lp[t]);
				worst = d > worst ? d : worst;
				if (s.out[4 * i].ids[t] != a && t < 3)
					diag("prompt %d (%zu tokens), token %zu: CUDA %u (lp %.3f), CPU argmax %u "
					     "(logit %.3f vs %.3f; lp of CUDA's %.3f)", i, pl, t, s.out[4 * i].ids[t],
					     s.out[4 * i].lp[t], a, row[a], row[s.out[4 * i].ids[t]],
					     sample_logprob(row, DV, s.out[4 * i].ids[t]));
				if (s.out[4 * i].ids[t] != a) {
					if (row[a] - row[s.out[4 * i].ids[t]] <= 0.05 * (fabs(row[a]) + 1))
						near++;
					else
						mism++;
				}
				(void)b;
			}
		}
		ok(rc == 0 && mism == 0, "%s, %u slots: CUDA greedy tokens are the CPU's argmax (%d differ "
		   "within bf16 rounding of the top logit, %d beyond)", tag, slots, near, mism);
		/* bf16 weights and activations: logits of about +-5 carry errors of a
		 * few hundredths (measured: 0.09 at worst here) */
		ok(rc == 0 && worst <= 0.15, "%s, %u slots: CUDA log-probs equal a teacher-forced CPU pass "
		   "within %.3g (<= 0.15)", tag, slots, worst);
	}
	c.n_samples = 1;
	s = s2;
	if (!full) {
		model_free(&mc);
		model_free(&mg);
		free(p);
		return;
	}
	/* sampling, recorded and unrecorded steps, forks */
	c.sp = (sample_params){ 0.9, 50, 0.95, 0 };
	c.n_samples = 3;
	static run_state s3, s4;
	s3 = s4 = s2;
	rc = decode(&mg, &s4, &c, 6, 2, &e) || decode(&mg, &s, &c, 6, 1, &e);
	long ahead = ahead_runs;
	rc = rc || decode(&mg, &s2, &c, 6, 0, &e) || decode(&mg, &s3, &c, 6, 0, &e);
	int first = -1, again = 1, same_ahead = 1;
	for (int i = 0; i < NP * 4 && rc == 0; i++) {
		if (first < 0 && (s.out[i].n != s2.out[i].n ||
				  memcmp(s.out[i].ids, s2.out[i].ids, s.out[i].n * sizeof *s.out[i].ids)))
			first = i;
		again &= s3.out[i].n == s2.out[i].n &&
			 !memcmp(s3.out[i].ids, s2.out[i].ids, s2.out[i].n * sizeof *s2.out[i].ids);
		same_ahead &= s4.out[i].n == s.out[i].n &&
			      !memcmp(s4.out[i].ids, s.out[i].ids, s.out[i].n * sizeof *s.out[i].ids) &&
			      !memcmp(s4.out[i].lp, s.out[i].lp, s.out[i].n * sizeof *s.out[i].lp);
	}
	if (first >= 0) {
		size_t t = 0;
		while (t < s.out[first].n && s.out[first].ids[t] == s2.out[first].ids[t])
			t++;
		diag("prompt %d sample %d differs at token %zu: %u (lp %.4f) recorded, %u (lp %.4f) not",
		     first / 4, first % 4, t, s.out[first].ids[t], s.out[first].lp[t],
		     s2.out[first].ids[t], s2.out[first].lp[t]);
	}
	ok(rc == 0 && again, "sampling with forks: two unrecorded runs give the same tokens%s%s",
	   rc ? ": " : "", rc ? e.msg : "");
	ok(rc == 0 && first < 0, "recorded steps (CUDA graphs) give the tokens unrecorded ones do");
	ok(rc == 0 && same_ahead && ahead > 0, "%u rounds ahead in one graph (%ld calls) give the "
	   "tokens and log-probs of one round a call", (unsigned)MODEL_DECODE_AHEAD, ahead);
	int differs = 0;
	for (int i = 0; i < NP && rc == 0; i++)
		differs += s.out[i * 4].n != s.out[i * 4 + 1].n ||
			   memcmp(s.out[i * 4].ids, s.out[i * 4 + 1].ids, s.out[i * 4].n * sizeof(uint32_t));
	ok(differs > 0, "the samples of one prompt differ from each other (%d of %d prompts)", differs, NP);
	/* top-p alone in steps of a few sequences: the nucleus by rejection
	 * (sample_rejects), recorded (eight rounds a graph) and not */
	c.sp = (sample_params){ 1, 0, 0.9, 0 };
	static run_state s5, s6;
	s5 = s6 = s2;
	rc = decode(&mg, &s5, &c, 6, 1, &e) || decode(&mg, &s6, &c, 6, 0, &e);
	int same = 1;
	for (int i = 0; i < NP * 4 && rc == 0; i++)
		same &= s5.out[i].n == s6.out[i].n &&
			!memcmp(s5.out[i].ids, s6.out[i].ids, s5.out[i].n * sizeof *s5.out[i].ids);
	ok(rc == 0 && same, "top-p alone, 6 slots (the nucleus by rejection): recorded steps give the "
	   "tokens unrecorded ones do%s%s", rc ? ": " : "", rc ? e.msg : "");
	model_free(&mc);
	model_free(&mg);
	free(p);
}

int main(void)
{
	gpu_require_device();
	lm_err e;
	cpu.be = backend_open("cpu", &e);
	gpu.be = backend_open("cuda", &e);
	if (!gpu.be) {
		ok(0, "the CUDA backend opens: %s", e.msg);
		return done_testing();
	}
	test_cache_ops(5, 5, 4, 4, 32, 40);
	test_cache_ops(64, 64, 16, 16, 32, 300);
	/* steps of at least 512 blocks (tokens x heads): the one-pass kernels */
	test_cache_ops(128, 128, 4, 4, 32, 700); /* up to six loads of 128 positions */
	test_cache_ops(64, 64, 8, 2, 64, 129);   /* grouped at D = 64 */
	test_cache_ops(48, 48, 12, 1, 128, 300); /* one key/value head at D = 128 */
	test_cache_ops(7, 7, 8, 2, 64, 129);
	test_cache_ops(3, 3, 2, 2, 128, 1030);
	test_cache_ops(4, 4, 4, 2, 48, 50);   /* the generic kernel */
	test_cache_ops(4, 4, 8, 2, 32, 64);   /* grouped at D = 32 */
	test_cache_ops(5, 5, 8, 1, 64, 100);  /* one key/value head */
	test_cache_ops(6, 6, 8, 1, 128, 9000); /* the scores past 32 KiB of shared memory */
	test_fused(1, 512, 1536);
	test_fused(5, 1344, 512);
	test_fused(16, 512, 10000);
	test_fused(20, 512, 300);
	test_fused(3, 36, 50);
	/* 17 to 64 rows: the tensor-core kernels (matmul_rows.cu) in blocks of
	 * 16 rows, a last block of 1 or 16, a tail of features; a head's 10000
	 * features (cuBLASLt's; SwiGLU's 5000 the kernel's), C = 2048 */
	test_fused(33, 512, 1536);
	test_fused(17, 512, 2688);
	test_fused(64, 512, 10000);
	test_fused(64, 1344, 512);
	test_fused(48, 768, 2302);
	test_fused(64, 2048, 768);
	sample_args plain = { 1, 0, 1, 0, SAMPLE_WAY_AUTO }, cut = { 0.8f, 40, 0.9f, 0, SAMPLE_WAY_AUTO };
	sample_args nucleus = { 1, 0, 0.95f, 9000, SAMPLE_WAY_AUTO };
	test_sampler_twin(300, 10000, plain, 3);
	test_sampler_twin(300, 10000, cut, 3);
	test_sampler_twin(200, 10000, nucleus, 6);
	test_sampler_twin(50, 50257, nucleus, 4);
	test_sampler_twin(100, 97, (sample_args){ 0.7f, 5, 0.5f, 0, SAMPLE_WAY_AUTO }, 2);
	/* few rows: each a cluster of 2, 4 or 8 blocks (sample.cu: V above
	 * 6144, 12288, 24576), a slice of the ids each; the limit inside a
	 * slice; slices too large for shared memory (V = 500000); a block a
	 * row (V = 4099, or 64 rows of 10000 at most 2 blocks each) */
	sample_args nuc = { 1, 0, 0.95f, 0, SAMPLE_WAY_AUTO };
	test_sampler_twin(1, 10000, nuc, 6);
	test_sampler_twin(1, 10000, cut, 3);
	test_sampler_twin(3, 20000, plain, 3);
	test_sampler_twin(8, 20000, (sample_args){ 1, 0, 0.95f, 13000, SAMPLE_WAY_AUTO }, 6);
	test_sampler_twin(1, 50257, nuc, 4);
	test_sampler_twin(16, 50257, nucleus, 4);
	test_sampler_twin(3, 50257, cut, 3);
	test_sampler_twin(40, 10000, cut, 3);
	test_sampler_twin(64, 10000, nuc, 6);
	test_sampler_twin(5, 4099, (sample_args){ 1.1f, 0, 0.8f, 2500, SAMPLE_WAY_AUTO }, 3);
	test_sampler_twin(2, 500000, nucleus, 6);
	/* flat rows and low top-p, so that the rejection's fallback (the
	 * nucleus found, the last rejected draw placed on it) takes many rows;
	 * one block a row, clusters of 2 and 8, uncached slices, a limit,
	 * a forced row (the fourth) */
	for (int rep = 0; rep < 4; rep++) {
		test_sampler_twin(8, 10000, (sample_args){ 1, 0, 0.4f, 0, SAMPLE_WAY_AUTO }, 0.5f);
		test_sampler_twin(8, 50257, (sample_args){ 0.9f, 0, 0.3f, 0, SAMPLE_WAY_AUTO }, 1);
		test_sampler_twin(7, 4099, (sample_args){ 1, 0, 0.5f, 3000, SAMPLE_WAY_AUTO }, 0.3f);
		test_sampler_twin(8, 97, (sample_args){ 1, 0, 0.6f, 0, SAMPLE_WAY_AUTO }, 0.2f);
	}
	/* the fallback often at 1, 64 and 200 rows: a block a row (4099 ids),
	 * 256-thread blocks (200 rows), and 64 rows of 10000 ids */
	test_sampler_twin(1, 4099, (sample_args){ 1, 0, 0.3f, 0, SAMPLE_WAY_AUTO }, 0.3f);
	test_sampler_twin(64, 4099, (sample_args){ 1, 0, 0.5f, 0, SAMPLE_WAY_AUTO }, 0.3f);
	test_sampler_twin(200, 4099, (sample_args){ 1, 0, 0.4f, 0, SAMPLE_WAY_AUTO }, 0.3f);
	test_sampler_twin(64, 10000, (sample_args){ 1, 0, 0.4f, 0, SAMPLE_WAY_AUTO }, 0.5f);
	test_sampler_twin(2, 500000, (sample_args){ 1, 0, 0.5f, 0, SAMPLE_WAY_AUTO }, 0.5f);
	test_sampler_twin(1, 10000, (sample_args){ 1.2f, 0, 0.9f, 0, SAMPLE_WAY_AUTO }, 1);
	test_sampler_edges(64);
	test_sampler_edges(10000);
	test_sampler_edges(50257);
	/* LMPIPE_TEST_DRAWS=N (at least 1000; anything else keeps 200000):
	 * fewer draws where each costs much more (tests/gpu/sanitize.sh:
	 * racecheck took minutes a test at 200000). */
	const char *nd = getenv("LMPIPE_TEST_DRAWS");
	int draws = nd && atoi(nd) >= 1000 ? atoi(nd) : 200000;
	test_sampler_chi2(2000, (sample_params){ 1, 0, 0.9, 0 }, draws, 0, SAMPLE_WAY_AUTO);
	test_sampler_chi2(10000, (sample_params){ 0.8, 50, 0.95, 0 }, draws, 0, SAMPLE_WAY_AUTO);
	test_sampler_chi2(500, (sample_params){ 1.3, 0, 1, 0 }, draws, 0, SAMPLE_WAY_AUTO);
	/* the nucleus by rejection (kernels/sample.h): 8 and 64 rows a call as
	 * chosen, and forced where the fallback is often taken (top-p 0.5; a
	 * block a row, and a cluster of 2) */
	test_sampler_chi2(2000, (sample_params){ 1, 0, 0.9, 0 }, draws, 8, SAMPLE_WAY_AUTO);
	test_sampler_chi2(10000, (sample_params){ 1, 0, 0.95, 0 }, draws, 64, SAMPLE_WAY_AUTO);
	test_sampler_chi2(10000, (sample_params){ 0.8, 0, 0.5, 0 }, draws, 4, SAMPLE_WAY_REJECT);
	test_sampler_chi2(2000, (sample_params){ 1, 0, 0.7, 0 }, draws, 64, SAMPLE_WAY_REJECT);
	/* Weights scaled up so that the logits are peaked, as a trained
	 * model's are: greedy choices then rarely sit within rounding. */
	model_config cfg = { DV, DCTX, 128, 2, 4, 200, 10000.0, 0, MODEL_PLAIN }, v;
	test_step_kernel(cfg, 12);
	model_config sk = { 1000, DCTX, 256, 3, 4, 344, 10000.0, 0, MODEL_PLAIN }; /* D = 64 */
	test_step_kernel(sk, 5);
	sk.n_kv_heads = 2;
	test_step_kernel(sk, 4);
	sk.n_kv_heads = 1;
	test_step_kernel(sk, 4);
	sk = (model_config){ 517, DCTX, 256, 2, 2, 200, 10000.0, 0, MODEL_PLAIN }; /* D = 128 */
	test_step_kernel(sk, 4);
	sk = (model_config){ 3001, DCTX, 768, 2, 12, 2048, 10000.0, 0, MODEL_PLAIN }; /* C > 512 */
	test_step_kernel(sk, 3);
	sk = (model_config){ 10000, DCTX, 512, 4, 16, 1344, 10000.0, 0, MODEL_PLAIN }; /* ts */
	test_step_kernel(sk, 8);
	/* prefill chunks of whole prompts: the short kernels (D = 32), the
	 * flash ones (64, 128); three prompts of 100 make two chunks (two
	 * prompts, then one); grouped heads and QK-norm keep the cache ops */
	test_prefill_flash(cfg, 3, 100, 0, 4, 1);
	test_prefill_flash(cfg, 16, 16, 0, 3, 1);
	test_prefill_flash(cfg, 20, 32, 1, 3, 1); /* runs of 18, 25 and 32 tokens */
	sk = (model_config){ 1000, DCTX, 256, 3, 4, 344, 10000.0, 0, MODEL_PLAIN };
	test_prefill_flash(sk, 3, 100, 0, 4, 1);
	test_prefill_flash(sk, 5, 37, 0, 3, 1);
	test_prefill_flash(sk, 9, 40, 1, 3, 1);
	sk.n_kv_heads = 2;
	test_prefill_flash(sk, 3, 100, 0, 2, 0);
	sk = (model_config){ 517, DCTX, 256, 2, 2, 200, 10000.0, 0, MODEL_PLAIN };
	test_prefill_flash(sk, 3, 100, 0, 4, 1);
	test_prefill_flash(sk, 2, 150, 0, 2, 1);
	test_prefill_flash(sk, 7, 64, 1, 2, 1);
	v = cfg;
	v.qk_norm = 1;
	test_prefill_flash(v, 3, 100, 0, 2, 0);
	test_decoder(cfg, "plain", 1);
	v = cfg;
	v.n_kv_heads = 2;
	test_decoder(v, "gqa 4/2", 0);
	v = cfg;
	v.n_kv_heads = 1;
	v.qk_norm = 1;
	test_decoder(v, "mqa + qk-norm", 0);
	v = cfg;
	v.mlp = MODEL_MLP_RELU2;
	test_decoder(v, "relu2", 0);
	v = cfg;
	v.softcap = 10.0;
	v.norm_eps = 1e-6;
	test_decoder(v, "softcap + norm eps", 0);
	v.n_kv_heads = 2, v.qk_norm = 1, v.mlp = MODEL_MLP_RELU2, v.tie_embeddings = 1;
	test_decoder(v, "all", 1);
	cpu.be->close(cpu.be);
	gpu.be->close(gpu.be);
	return done_testing();
}
