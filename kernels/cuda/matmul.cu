// matmul.cu: the CUDA linear layer (see kernels/matmul.h) through cuBLASLt:
// bf16 operands, fp32 accumulation; the forward product's output is bf16,
// or fp32 with an fp32 addend added in the epilogue (C != D), or bf16 with a
// bf16 addend; the weight
// gradient accumulates into fp32 (beta = 1).
//
// Row-major [N, IN] . [OUT, IN]^T is, in cuBLAS's column-major terms,
// out^T (OUT x N) = W^T (A: IN x OUT, transposed) . inp^T (B: IN x N).  A
// plan (descriptors, layouts, the algorithm) is made once per distinct
// product and kept.  The algorithm is the fastest, timed on the product's
// own operands, of the heuristic's first candidates (what torch.compile's
// max-autotune does for its matmuls; LMPIPE_MATMUL_AUTOTUNE=N times N
// of them instead of eight) for the first product of each class of
// products that differ only in a row count rounding up to the same power
// of two; a later
// product of a class already timed takes the heuristic's first, untimed:
// rl-update's and lm-sample's row counts change from one micro-batch or
// prompt chunk to the next, and timing eight candidates for every one of
// them cost more than the products (rl-update's forward/backward took
// 2.2 s instead of about 0.7 s for 2048 rollouts).
// LMPIPE_MATMUL_AUTOTUNE=0 or
// matmul_cuda_set_autotune(0) takes the heuristic's first, which does not
// depend on timing noise.  Deterministic (the flag matmul_cuda_follow binds,
// read at each product): the heuristic's first, never timed, and it may
// choose split-K only with its partial sums reduced in the workspace by a
// separate pass, never in place in the output, whose order of additions
// depends on scheduling.
#include <cublasLt.h>
#include <string.h>

#include "gemm_ref.cuh"
#include "kernels/matmul.h"
#include "ops_cuda.cuh"

namespace {

enum { WORKSPACE = 32 << 20, MAX_PLANS = 64, MAX_TUNED = 64, CANDIDATES = 8, MAX_CANDIDATES = 64,
       TUNE_RUNS = 3 };

struct key {
	int ta, tb, m, n, k, lda, ldb, ldc, cf32, beta, det, sm;  // sm: the SM count target
	int cand;                 // the heuristic's candidate forced (-1: chosen as usual)
};

struct plan {
	key k;
	int valid;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, c;
	cublasLtMatmulAlgo_t algo;
};

// A class of products (class_of) whose first was timed.
struct tuned {
	key k;
	int valid;
};

}  // namespace

struct matmul_cuda {
	cublasLtHandle_t h;
	cudaStream_t st;
	void *ws;
	plan plans[MAX_PLANS];
	int evict;                 // the slot a new plan takes when all are used
	tuned tunes[MAX_TUNED];
	int evict_tuned;
	int autotune;              // time this many of the heuristic's candidates for each new
	                           // plan (0 or 1: take its first)
	const int *det;            // the deterministic flag (NULL: off)
	int sm_target;             // multiprocessors new plans are sized for (0: all)
	int force;                 // the candidate new plans take (-1: timed or first)
	cublasLtMatmulAlgo_t last; // the algorithm of the last product
};

namespace {

void destroy_plan(plan *p)
{
	if (p->a)
		cublasLtMatrixLayoutDestroy(p->a);
	if (p->b)
		cublasLtMatrixLayoutDestroy(p->b);
	if (p->c)
		cublasLtMatrixLayoutDestroy(p->c);
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
	memset(p, 0, sizeof *p);
}

// The operands a candidate is timed on: A, B and C of the product itself
// (read only), D the product's output unless D is also its accumulated
// input (beta != 0 and C == D), then a scratch buffer, so that timing
// leaves every result as one run would.
struct tune_args {
	const void *A, *B, *C;
	void *D;
	float beta;
};

// The index of the fastest of the heuristic's candidates on this product
// (the time of TUNE_RUNS runs after one to warm up); 0 when timing cannot
// be had (a stream being captured into a graph, no memory).
int fastest(matmul_cuda *mc, plan *p, const cublasLtMatmulHeuristicResult_t *cand, int got,
	    const tune_args *t)
{
	cudaStreamCaptureStatus cs;
	if (!t || cudaStreamIsCapturing(mc->st, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
		return 0;
	void *scratch = nullptr, *D = t->D;
	const void *C = t->C;
	if (t->beta != 0.0f && t->C == t->D) {
		size_t bytes = (size_t)p->k.ldc * p->k.n * (p->k.cf32 ? 4 : 2);
		if (cudaMalloc(&scratch, bytes) != cudaSuccess) {
			cudaGetLastError();
			return 0;
		}
		C = D = scratch;
	}
	cudaEvent_t e0, e1;
	int best = 0;
	float best_ms = 1e30f, alpha = 1.0f;
	if (cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess) {
		for (int i = 0; i < got; i++) {
			int bad = 0;
			for (int r = 0; r <= TUNE_RUNS && !bad; r++) {
				if (r == 1)
					cudaEventRecord(e0, mc->st);
				bad = cublasLtMatmul(mc->h, p->desc, &alpha, t->A, p->a, t->B, p->b, &t->beta, C,
						     p->c, D, p->c, &cand[i].algo, mc->ws, WORKSPACE,
						     mc->st) != CUBLAS_STATUS_SUCCESS;
			}
			cudaEventRecord(e1, mc->st);
			float ms = 0;
			if (bad || cudaEventSynchronize(e1) != cudaSuccess ||
			    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
				continue;
			if (ms < best_ms) {
				best_ms = ms;
				best = i;
			}
		}
		cudaEventDestroy(e0);
		cudaEventDestroy(e1);
	}
	cudaGetLastError();
	if (scratch)
		cudaFree(scratch);
	return best;
}

// Rounded up to a power of two.
int pow2_at_least(int x)
{
	int p = 1;
	while (p < x && p < (1 << 30))
		p <<= 1;
	return p;
}

// The class of a product: its key with the row count N of the layer
// rounded up to a power of two (k of the weight gradient's product, n of
// the others'); the weight's sizes stay exact, so that two layers are
// never one class.
key class_of(const key &k)
{
	key c = k;
	if (!k.ta && k.tb)
		c.k = pow2_at_least(k.k);
	else
		c.n = pow2_at_least(k.n);
	return c;
}

int class_timed(matmul_cuda *mc, const key &c)
{
	for (int i = 0; i < MAX_TUNED; i++)
		if (mc->tunes[i].valid && !memcmp(&mc->tunes[i].k, &c, sizeof c))
			return 1;
	return 0;
}

void keep_timed(matmul_cuda *mc, const key &c)
{
	tuned *t = nullptr;
	for (int i = 0; i < MAX_TUNED && !t; i++)
		if (!mc->tunes[i].valid)
			t = &mc->tunes[i];
	if (!t) {
		t = &mc->tunes[mc->evict_tuned];
		mc->evict_tuned = (mc->evict_tuned + 1) % MAX_TUNED;
	}
	t->k = c;
	t->valid = 1;
}

// The plan of a product: found, or made in a free slot, or (all used: a
// training run has far fewer shapes, a test of many shapes may not) in
// the slots taken in turn.
plan *get_plan(matmul_cuda *mc, const key &k, const tune_args *tune)
{
	plan *p = nullptr;
	for (int i = 0; i < MAX_PLANS; i++) {
		if (mc->plans[i].valid && !memcmp(&mc->plans[i].k, &k, sizeof k))
			return &mc->plans[i];
		if (!p && !mc->plans[i].valid)
			p = &mc->plans[i];
	}
	if (!p) {
		p = &mc->plans[mc->evict];
		mc->evict = (mc->evict + 1) % MAX_PLANS;
	}
	destroy_plan(p);
	p->k = k;
	cublasOperation_t ta = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	cudaDataType_t ct = k.cf32 ? CUDA_R_32F : CUDA_R_16BF;
	cublasLtMatmulPreference_t pref = nullptr;
	size_t wsb = WORKSPACE;
	int got = 0;
	if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
	    cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, k.ta ? k.k : k.m, k.ta ? k.m : k.k, k.lda) ||
	    cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, k.tb ? k.n : k.k, k.tb ? k.k : k.n, k.ldb) ||
	    cublasLtMatrixLayoutCreate(&p->c, ct, k.m, k.n, k.ldc) ||
	    cublasLtMatmulPreferenceCreate(&pref)) {
		destroy_plan(p);
		return nullptr;
	}
	cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
					     sizeof wsb);
	if (k.sm > 0) {
		const int32_t sms = k.sm;
		cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms,
					       sizeof sms);
	}
	if (k.det) {
		uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
				   CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
		cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
						     &schemes, sizeof schemes);
	}
	key c = class_of(k);
	int tuning = mc->autotune > 1 && !k.det && !class_timed(mc, c) && k.cand < 0;
	cublasLtMatmulHeuristicResult_t cand[MAX_CANDIDATES];
	cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(mc->h, p->desc, p->a, p->b, p->c, p->c, pref,
							  k.cand >= 0 ? k.cand + 1 : tuning ? mc->autotune : 1,
							  cand, &got);
	cublasLtMatmulPreferenceDestroy(pref);
	if (s != CUBLAS_STATUS_SUCCESS || got < 1 || k.cand >= got) {
		destroy_plan(p);
		return nullptr;
	}
	p->algo = cand[k.cand >= 0 ? k.cand : 0].algo;
	p->valid = 1;
	if (got > 1 && k.cand < 0) {
		cudaStreamCaptureStatus cs;
		int timed = tune && cudaStreamIsCapturing(mc->st, &cs) == cudaSuccess &&
			    cs == cudaStreamCaptureStatusNone;
		p->algo = cand[fastest(mc, p, cand, got, tune)].algo;
		if (timed)
			keep_timed(mc, c);
	}
	return p;
}

// D (m x n, column-major) = op(A) op(B) + beta C.
int gemm(matmul_cuda *mc, int ta, int tb, int m, int n, int k, const void *A, int lda, const void *B,
	 int ldb, const void *C, void *D, int ldc, int cf32, float beta)
{
	if (ops::gemm_ref_on()) // the racecheck runs' stand-in (gemm_ref.cuh)
		return ops::gemm_ref(ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, D, ldc, 0, 1,
				     cf32, mc->st);
	int det = mc->det && *mc->det;
	key kk = { ta, tb, m, n, k, lda, ldb, ldc, cf32, beta != 0.0f, det, mc->sm_target, mc->force };
	tune_args t = { A, B, C, D, beta };
	plan *p = get_plan(mc, kk, mc->autotune > 1 && !det ? &t : nullptr);
	if (!p)
		return -1;
	float alpha = 1.0f;
	cublasStatus_t s = cublasLtMatmul(mc->h, p->desc, &alpha, A, p->a, B, p->b, &beta, C, p->c, D,
					  p->c, &p->algo, mc->ws, WORKSPACE, mc->st);
	mc->last = p->algo;
	return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

}  // namespace

extern "C" matmul_cuda *matmul_cuda_new(void *stream)
{
	matmul_cuda *mc = (matmul_cuda *)calloc(1, sizeof *mc);
	if (!mc)
		return nullptr;
	mc->force = -1;
	mc->st = (cudaStream_t)stream;
	const char *at = getenv("LMPIPE_MATMUL_AUTOTUNE");
	// unset: CANDIDATES; a number: that many (at most MAX_CANDIDATES)
	mc->autotune = at && *at ? atoi(at) : CANDIDATES;
	if (mc->autotune < 0)
		mc->autotune = 0;
	if (mc->autotune > MAX_CANDIDATES)
		mc->autotune = MAX_CANDIDATES;
	if (cublasLtCreate(&mc->h) != CUBLAS_STATUS_SUCCESS) {
		free(mc);
		return nullptr;
	}
	if (cudaMalloc(&mc->ws, WORKSPACE) != cudaSuccess) {
		cublasLtDestroy(mc->h);
		free(mc);
		return nullptr;
	}
	return mc;
}

extern "C" void matmul_cuda_set_sm_target(matmul_cuda *mc, int sms)
{
	mc->sm_target = sms > 0 ? sms : 0;
}

extern "C" void matmul_cuda_force_candidate(matmul_cuda *mc, int i)
{
	mc->force = i >= 0 ? i : -1;
}

extern "C" void matmul_cuda_last_algo(matmul_cuda *mc, int *id, int *tile, int *stages)
{
	int v[3] = { -1, -1, -1 };
	const cublasLtMatmulAlgoConfigAttributes_t at[3] = { CUBLASLT_ALGO_CONFIG_ID,
							       CUBLASLT_ALGO_CONFIG_TILE_ID,
							       CUBLASLT_ALGO_CONFIG_STAGES_ID };
	for (int i = 0; i < 3; i++) {
		size_t got = 0;
		uint32_t u = 0;
		if (cublasLtMatmulAlgoConfigGetAttribute(&mc->last, at[i], &u, sizeof u, &got) ==
		    CUBLAS_STATUS_SUCCESS)
			v[i] = (int)u;
	}
	*id = v[0], *tile = v[1], *stages = v[2];
}

extern "C" void matmul_cuda_set_autotune(matmul_cuda *mc, int on)
{
	mc->autotune = on ? CANDIDATES : 0;
}

extern "C" void matmul_cuda_follow(matmul_cuda *mc, const int *deterministic)
{
	mc->det = deterministic;
}

extern "C" void matmul_cuda_free(matmul_cuda *mc)
{
	if (!mc)
		return;
	for (int i = 0; i < MAX_PLANS; i++)
		destroy_plan(&mc->plans[i]);
	cudaFree(mc->ws);
	cublasLtDestroy(mc->h);
	free(mc);
}

extern "C" int matmul_fwd_cuda(matmul_cuda *mc, void *out, const float *addend, const uint16_t *inp,
			       const uint16_t *w, int N, int IN, int OUT)
{
	if (matmul_small_applies(inp, w, N, IN))
		return matmul_fwd_small_cuda(out, addend, inp, w, N, IN, OUT, mc->st);
	if (matmul_rows_applies(inp, w, N, IN)) {
		if (!matmul_fwd_rows_cuda(out, addend, inp, w, N, IN, OUT, mc->st))
			return 0;
		cudaGetLastError(); // shapes it does not take (shared memory): cuBLASLt's
	}
	if (addend)
		return gemm(mc, 1, 0, OUT, N, IN, w, IN, inp, IN, addend, out, OUT, 1, 1.0f);
	return gemm(mc, 1, 0, OUT, N, IN, w, IN, inp, IN, out, out, OUT, 0, 0.0f);
}

extern "C" int matmul_fwd_add_bf16_cuda(matmul_cuda *mc, uint16_t *out, const uint16_t *addend,
					const uint16_t *inp, const uint16_t *w, int N, int IN, int OUT)
{
	return gemm(mc, 1, 0, OUT, N, IN, w, IN, inp, IN, addend, out, OUT, 0, 1.0f);
}

extern "C" int matmul_fwd_f32_cuda(matmul_cuda *mc, float *out, const uint16_t *inp,
				   const uint16_t *w, int N, int IN, int OUT)
{
	return gemm(mc, 1, 0, OUT, N, IN, w, IN, inp, IN, out, out, OUT, 1, 0.0f);
}

extern "C" int matmul_bwd_cuda(matmul_cuda *mc, uint16_t *dinp, float *dw, const uint16_t *dout,
			       const uint16_t *inp, const uint16_t *w, int N, int IN, int OUT)
{
	// dinp^T (IN x N) = W^T (A: IN x OUT) . dout^T (B: OUT x N)
	if (dinp && gemm(mc, 0, 0, IN, N, OUT, w, IN, dout, OUT, dinp, dinp, IN, 0, 0.0f))
		return -1;
	if (!dw)
		return 0;
	// dW^T (IN x OUT) += inp^T (A: IN x N) . dout (B: OUT x N, transposed)
	return gemm(mc, 0, 1, IN, OUT, N, inp, IN, dout, OUT, dw, dw, IN, 1, 1.0f);
}

extern "C" int matmul_dinp_f32_cuda(matmul_cuda *mc, float *dinp, const uint16_t *dout,
				    const uint16_t *w, int N, int IN, int OUT)
{
	return gemm(mc, 0, 0, IN, N, OUT, w, IN, dout, OUT, dinp, dinp, IN, 1, 0.0f);
}
