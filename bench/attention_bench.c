/* attention_bench.c: validate, then time the CUDA attention kernels.
 *
 *   attention_bench D T CAUSAL [B H]
 *
 * Built with -DATTN_VARIANTS and linked with libattn_variants.a (make
 * attention-variants; bench/attention.sh VARIANT=...), it runs the kernel
 * variant that the environment's ATTN_VARIANT names (wgmma or mma,
 * kernels/cuda/variants/attention_variants.h) instead of the default;
 * otherwise ATTN_DETERMINISTIC=1 times the deterministic backward
 * (attn_bwd_det_cuda, lm-train --deterministic) instead of the default.
 *
 * Draws random bf16 inputs of [B, H, T, D] (default B = 16384 / T,
 * H = 2048 / D: 16K tokens, model width 2048), runs forward and backward
 * once and checks SAMPLES query rows and key rows of several heads
 * against double precision (forward: o and lse of the row; backward: dq of
 * the row, dk and dv of the key, computed from the validated lse and o),
 * then times each pass with CUDA events (WARMUP runs, then the median of
 * RUNS) and prints one JSON line.
 *
 * ATTN_PACKED=1 (causal, the default build) then times lm-train's path
 * instead: attn_qkv_fwd_cuda and attn_qkv_bwd_cuda on the same q, k, v
 * packed as qkv[B, T, 3, H, D], o and dout as [B, T, H, D], with a RoPE
 * table of cosines 1 and sines 0 (the rotations cost what real ones do
 * and leave the values as they are), so that their outputs must match
 * the validated kernels' (max |difference| / max |value| within TOL_PACK
 * per tensor; "valid" says so); qkv is restored before each backward,
 * untimed, since the backward overwrites it.  FLOPs: forward 4 B H T^2 D, backward
 * 2.5 times that (its five matrix products against the forward's two),
 * both halved when causal.  Exit 1 when validation fails. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#ifdef ATTN_VARIANTS
#include "kernels/cuda/variants/attention_variants.h"
#endif

enum { WARMUP = 3, RUNS = 21, SAMPLES = 6, TOKENS = 16384, WIDTH = 2048 };
static const double TOL_MAX = 4e-2;  /* per sampled row: max |err| / max |ref| */
static const double TOL_LSE = 1e-3;  /* lse: absolute */

static uint16_t f2bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static double bf(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static float rnd(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (float)((double)(z >> 11) / 9007199254740992.0 * 2 - 1);
}

#define CK(x) do { if ((x) != cudaSuccess) { fprintf(stderr, "attention_bench: %s: %s\n", #x, \
	cudaGetErrorString(cudaGetLastError())); exit(1); } } while (0)

typedef struct prob {
	int B, H, T, D, causal;
	float scale;
	uint16_t *h[9];  /* host copies: q k v dout o dq dk dv, [8] unused */
	float *lse;
} prob;

static double dotbf(const uint16_t *a, const uint16_t *b, int D)
{
	double s = 0;
	for (int d = 0; d < D; d++)
		s += bf(a[d]) * bf(b[d]);
	return s;
}

/* Largest error over largest reference value, for one vector. */
static double verr(const uint16_t *got, const double *ref, int D)
{
	double e = 0, m = 0;
	for (int d = 0; d < D; d++) {
		double x = fabs(bf(got[d]) - ref[d]);
		e = x > e || x != x ? x : e;
		m = fmax(m, fabs(ref[d]));
	}
	return m > 0 ? e / m : e;
}

/* Check sampled rows of one head; returns the worst error seen in o, dq,
 * dk, dv, and raises *lse_err to the worst absolute lse error. */
static double check_head(const prob *p, size_t bh, uint64_t *st, double *lse_err)
{
	int T = p->T, D = p->D;
	size_t off = bh * T * D;
	const uint16_t *q = p->h[0] + off, *k = p->h[1] + off, *v = p->h[2] + off,
		       *dout = p->h[3] + off, *o = p->h[4] + off;
	const float *lse = p->lse + bh * T;
	double worst = 0, *acc = malloc(2 * D * sizeof *acc), *acc2 = acc + D;
	double *pr = malloc(T * sizeof *pr);
	for (int s = 0; s < SAMPLES; s++) {
		int i = s == 0 ? T - 1 : (int)((rnd(st) + 1) / 2 * T) % T;
		int n = p->causal ? i + 1 : T;
		double m = -INFINITY, sum = 0, delta = 0;
		for (int j = 0; j < n; j++) {
			pr[j] = p->scale * dotbf(q + (size_t)i * D, k + (size_t)j * D, D);
			m = fmax(m, pr[j]);
		}
		for (int j = 0; j < n; j++)
			sum += pr[j] = exp(pr[j] - m);
		memset(acc, 0, D * sizeof *acc);
		for (int j = 0; j < n; j++)
			for (int d = 0; d < D; d++)
				acc[d] += pr[j] / sum * bf(v[(size_t)j * D + d]);
		worst = fmax(worst, verr(o + (size_t)i * D, acc, D));
		*lse_err = fmax(*lse_err, fabs(lse[i] - (m + log(sum))));
		for (int d = 0; d < D; d++)
			delta += acc[d] * bf(dout[(size_t)i * D + d]);
		memset(acc2, 0, D * sizeof *acc2);  /* dq_i */
		for (int j = 0; j < n; j++) {
			double ds = pr[j] / sum * (dotbf(dout + (size_t)i * D, v + (size_t)j * D, D) - delta);
			for (int d = 0; d < D; d++)
				acc2[d] += p->scale * ds * bf(k[(size_t)j * D + d]);
		}
		worst = fmax(worst, verr(p->h[5] + off + (size_t)i * D, acc2, D));
		/* dk_j, dv_j for key j = i, over the queries that see it, from
		 * the kernel's lse and o (checked above on samples). */
		int j = i;
		memset(acc, 0, 2 * D * sizeof *acc);
		for (int r = p->causal ? j : 0; r < T; r++) {
			double pj = exp(p->scale * dotbf(q + (size_t)r * D, k + (size_t)j * D, D) - lse[r]);
			double dl = dotbf(dout + (size_t)r * D, o + (size_t)r * D, D);
			double ds = pj * (dotbf(dout + (size_t)r * D, v + (size_t)j * D, D) - dl);
			for (int d = 0; d < D; d++) {
				acc[d] += p->scale * ds * bf(q[(size_t)r * D + d]);
				acc[D + d] += pj * bf(dout[(size_t)r * D + d]);
			}
		}
		worst = fmax(worst, verr(p->h[6] + off + (size_t)j * D, acc, D));
		worst = fmax(worst, verr(p->h[7] + off + (size_t)j * D, acc + D, D));
	}
	free(acc);
	free(pr);
	return worst;
}

/* The kernels to time: the default ones, or a variant's. */
static const char *impl = "lmpipe";
#ifdef ATTN_VARIANTS
static int variant = ATTN_VARIANT_DEFAULT;

static void pick_variant(void)
{
	static const struct { const char *name; int v; } names[] = {
		{ "wgmma", ATTN_VARIANT_WGMMA }, { "mma", ATTN_VARIANT_MMA },
	};
	static char label[32];
	const char *want = getenv("ATTN_VARIANT");
	if (!want || !*want)
		return;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(want, names[i].name)) {
			variant = names[i].v;
			snprintf(label, sizeof label, "lmpipe-%s", want);
			impl = label;
			return;
		}
	fprintf(stderr, "attention_bench: ATTN_VARIANT=%s: not wgmma or mma\n", want);
	exit(2);
}

#define FWD(...) attn_fwd_cuda_variant(variant, __VA_ARGS__)
#define BWD(...) attn_bwd_cuda_variant(variant, __VA_ARGS__)
#define BWD_WS(...) attn_bwd_cuda_workspace(__VA_ARGS__)
#else
static int det;  /* ATTN_DETERMINISTIC=1: the backward of --deterministic */

static void pick_variant(void)
{
	const char *want = getenv("ATTN_DETERMINISTIC");
	det = want && !strcmp(want, "1");
	if (det)
		impl = "lmpipe-det";
}

#define FWD(...) attn_fwd_cuda(__VA_ARGS__)
#define BWD(...) (det ? attn_bwd_det_cuda : attn_bwd_cuda)(__VA_ARGS__)
#define BWD_WS(...) (det ? attn_bwd_det_cuda_workspace : attn_bwd_cuda_workspace)(__VA_ARGS__)
#endif

static int cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

#ifndef ATTN_VARIANTS
static const double TOL_PACK = 1e-2; /* packed against unpacked, per tensor */

/* [B, H, T, D] element of (b, h, t, d) -> its place in a [B, T, ..., H, D]
 * row of `parts` parts (part `part`). */
static size_t bthd(const prob *p, size_t i, int parts, int part)
{
	size_t d = i % p->D, t = i / p->D % p->T, h = i / p->D / p->T % p->H,
	       b = i / p->D / p->T / p->H;
	return (((b * p->T + t) * parts + part) * p->H + h) * p->D + d;
}

/* max |a - ref| / max |ref| over n values, a in the packed layout. */
static double perr(const prob *p, const uint16_t *got, const uint16_t *ref, size_t n, int parts,
		   int part)
{
	double e = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		double x = fabs(bf(got[bthd(p, i, parts, part)]) - bf(ref[i]));
		e = x > e || x != x ? x : e;
		m = fmax(m, fabs(bf(ref[i])));
	}
	return m > 0 ? e / m : e;
}

/* ATTN_PACKED=1: time attn_qkv_fwd_cuda / attn_qkv_bwd_cuda on p's inputs
 * and compare their outputs with the unpacked kernels' (p->h[4..7], lse).
 * Sets *fms, *bms; returns the worst relative difference. */
static double packed(const prob *p, float *fms, float *bms)
{
	size_t n = (size_t)p->B * p->H * p->T * p->D, nl = (size_t)p->B * p->H * p->T;
	uint16_t *hq = malloc(3 * n * 2), *hy = malloc(n * 2), *hd = malloc(n * 2), *dqkv, *dsave,
		 *dy, *ddy;
	float *hcs = malloc((size_t)p->T * p->D * sizeof *hcs), *dcs, *dlse, *hl = malloc(nl * 4);
	for (size_t i = 0; i < n; i++) {
		for (int j = 0; j < 3; j++)
			hq[bthd(p, i, 3, j)] = p->h[j][i];
		hd[bthd(p, i, 1, 0)] = p->h[3][i];
	}
	for (size_t i = 0; i < (size_t)p->T * p->D / 2; i++)
		hcs[2 * i] = 1, hcs[2 * i + 1] = 0;
	void *ws;
	CK(cudaMalloc((void **)&dqkv, 3 * n * 2));
	CK(cudaMalloc((void **)&dsave, 3 * n * 2));
	CK(cudaMalloc((void **)&dy, n * 2));
	CK(cudaMalloc((void **)&ddy, n * 2));
	CK(cudaMalloc((void **)&dcs, (size_t)p->T * p->D * sizeof *dcs));
	CK(cudaMalloc((void **)&dlse, nl * 4));
	CK(cudaMalloc(&ws, BWD_WS(p->B, p->H, p->T, p->D)));
	CK(cudaMemcpy(dsave, hq, 3 * n * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(ddy, hd, n * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dcs, hcs, (size_t)p->T * p->D * sizeof *dcs, cudaMemcpyHostToDevice));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	float tf[RUNS], tb[RUNS];
	for (int r = 0; r < WARMUP + RUNS; r++) {
		CK(cudaMemcpy(dqkv, dsave, 3 * n * 2, cudaMemcpyDeviceToDevice));
		CK(cudaEventRecord(e0, 0));
		int rc = attn_qkv_fwd_cuda(dqkv, NULL, dy, dlse, p->B, p->H, p->T, p->D, p->scale, NULL);
		CK(cudaEventRecord(e1, 0));
		CK(cudaEventSynchronize(e1));
		if (rc) {
			fprintf(stderr, "attention_bench: packed forward: %s\n", attn_strerror(rc));
			exit(1);
		}
		if (r >= WARMUP)
			CK(cudaEventElapsedTime(&tf[r - WARMUP], e0, e1));
		CK(cudaEventRecord(e0, 0));
		rc = attn_qkv_bwd_cuda(dqkv, dcs, dy, ddy, dlse, p->B, p->H, p->T, p->D, p->scale, det,
				       ws, NULL);
		CK(cudaEventRecord(e1, 0));
		CK(cudaEventSynchronize(e1));
		if (rc) {
			fprintf(stderr, "attention_bench: packed backward: %s\n", attn_strerror(rc));
			exit(1);
		}
		if (r >= WARMUP)
			CK(cudaEventElapsedTime(&tb[r - WARMUP], e0, e1));
	}
	CK(cudaMemcpy(hq, dqkv, 3 * n * 2, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hy, dy, n * 2, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hl, dlse, nl * 4, cudaMemcpyDeviceToHost));
	double worst = perr(p, hy, p->h[4], n, 1, 0);
	for (int j = 0; j < 3; j++)
		worst = fmax(worst, perr(p, hq, p->h[5 + j], n, 3, j));
	for (size_t i = 0; i < nl; i++)
		worst = fmax(worst, fabs(hl[i] - p->lse[i]) > TOL_LSE ? 1 : 0);
	qsort(tf, RUNS, sizeof *tf, cmp);
	qsort(tb, RUNS, sizeof *tb, cmp);
	*fms = tf[RUNS / 2], *bms = tb[RUNS / 2];
	free(hq), free(hy), free(hd), free(hcs), free(hl);
	cudaFree(dqkv), cudaFree(dsave), cudaFree(dy), cudaFree(ddy), cudaFree(dcs), cudaFree(dlse);
	cudaFree(ws);
	return worst;
}
#endif

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: attention_bench D T CAUSAL [B H]\n");
		return 2;
	}
	pick_variant();
	prob p = {0};
	p.D = atoi(argv[1]), p.T = atoi(argv[2]), p.causal = atoi(argv[3]);
	p.B = argc == 6 ? atoi(argv[4]) : (TOKENS / p.T > 0 ? TOKENS / p.T : 1);
	p.H = argc == 6 ? atoi(argv[5]) : WIDTH / (p.D > 0 ? p.D : 1);
	p.scale = 1 / sqrtf((float)p.D);
	size_t n = (size_t)p.B * p.H * p.T * p.D, nl = (size_t)p.B * p.H * p.T;
	uint16_t *d[8];
	float *dlse;
	void *ws;
	uint64_t st = 12345;
	for (int i = 0; i < 8; i++) {
		p.h[i] = malloc(n * 2);
		CK(cudaMalloc((void **)&d[i], n * 2));
		CK(cudaMemset(d[i], 0xff, n * 2));
	}
	for (int i = 0; i < 4; i++) {
		for (size_t x = 0; x < n; x++)
			p.h[i][x] = f2bf((i == 0 ? 2 : 1) * rnd(&st));
		CK(cudaMemcpy(d[i], p.h[i], n * 2, cudaMemcpyHostToDevice));
	}
	p.lse = malloc(nl * sizeof *p.lse);
	CK(cudaMalloc((void **)&dlse, nl * sizeof *dlse));
	CK(cudaMalloc(&ws, BWD_WS(p.B, p.H, p.T, p.D)));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	float tf[RUNS], tb[RUNS];
	for (int r = 0; r < WARMUP + RUNS; r++) {
		int rc;
		CK(cudaEventRecord(e0, 0));
		rc = FWD(d[0], d[1], d[2], d[4], dlse, p.B, p.H, p.T, p.D, p.causal, p.scale, NULL);
		CK(cudaEventRecord(e1, 0));
		CK(cudaEventSynchronize(e1));
		if (rc) {
			fprintf(stderr, "attention_bench: forward: %s\n", attn_strerror(rc));
			return 1;
		}
		if (r >= WARMUP)
			CK(cudaEventElapsedTime(&tf[r - WARMUP], e0, e1));
		CK(cudaEventRecord(e0, 0));
		rc = BWD(d[0], d[1], d[2], d[4], d[3], dlse, d[5], d[6], d[7], p.B, p.H, p.T, p.D,
			 p.causal, p.scale, ws, NULL);
		CK(cudaEventRecord(e1, 0));
		CK(cudaEventSynchronize(e1));
		if (rc) {
			fprintf(stderr, "attention_bench: backward: %s\n", attn_strerror(rc));
			return 1;
		}
		if (r >= WARMUP)
			CK(cudaEventElapsedTime(&tb[r - WARMUP], e0, e1));
		if (r == 0) {  /* validate the first run's outputs */
			for (int i = 4; i < 8; i++)
				CK(cudaMemcpy(p.h[i], d[i], n * 2, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(p.lse, dlse, nl * sizeof *p.lse, cudaMemcpyDeviceToHost));
		}
	}
	double worst = 0, lse_err = 0;
	size_t heads = (size_t)p.B * p.H, pick[3] = {0, heads / 2, heads - 1};
	for (int i = 0; i < 3; i++)
		worst = fmax(worst, check_head(&p, pick[i], &st, &lse_err));
	int valid = worst <= TOL_MAX && lse_err <= TOL_LSE;
	qsort(tf, RUNS, sizeof *tf, cmp);
	qsort(tb, RUNS, sizeof *tb, cmp);
	double flops = 4.0 * p.B * p.H * (double)p.T * p.T * p.D * (p.causal ? 0.5 : 1);
	double fms = tf[RUNS / 2], bms = tb[RUNS / 2];
#ifndef ATTN_VARIANTS
	const char *pk = getenv("ATTN_PACKED");
	if (pk && !strcmp(pk, "1")) {
		if (!p.causal) {
			fprintf(stderr, "attention_bench: ATTN_PACKED=1 is causal only\n");
			return 2;
		}
		/* the unpacked kernels' timings give way to the packed ones' */
		float pf, pb;
		double diff = packed(&p, &pf, &pb);
		valid = valid && diff <= TOL_PACK;
		worst = fmax(worst, diff);
		fms = pf, bms = pb;
		impl = det ? "lmpipe-packed-det" : "lmpipe-packed";
	}
#endif
	printf("{\"impl\": \"%s\", \"d\": %d, \"T\": %d, \"B\": %d, \"H\": %d, \"causal\": %d, "
	       "\"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_tflops\": %.1f, \"bwd_tflops\": %.1f, "
	       "\"max_err\": %.3g, \"lse_err\": %.3g, \"valid\": %s}\n", impl, p.D, p.T, p.B, p.H,
	       p.causal, fms, bms, flops / fms / 1e9, 2.5 * flops / bms / 1e9, worst, lse_err,
	       valid ? "true" : "false");
	return valid ? 0 : 1;
}
