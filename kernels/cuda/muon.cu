// muon.cu: CUDA twin of the Muon step (see kernels/muon.h).  Per shape, all
// count matrices at once: a prep kernel (clip factor, momentum, Nesterov,
// bf16, transposed so that X is the wide way, per-block sums of squares in
// a fixed order), a scale kernel (X / max(|X|_F, eps), as torch divides the
// bf16 tensor by its bf16 norm), ns_steps x three strided-batched bf16
// products with fp32 accumulation, and the update kernel (decay,
// adjusted step, fp32 master and bf16 compute copy).  Nothing waits for
// the host.
//
// The shapes' steps are small products (512 x 512 and the like) that leave
// most of the GPU idle, so each call goes to the next of MUON_LANES
// streams of its own (each with its own cuBLAS handle: a handle's
// workspace serves one stream at a time), after the caller's stream
// (fork event), and muon_join_cuda makes the caller's stream wait for
// every lane used since the last join.  In a recorded graph the lanes are
// parallel branches.  LMPIPE_MUON_LANES=0 runs every step on the caller's
// stream, in order.
//
// The products go through cuBLASLt, whose addend C need not be its output
// D: B = c A A + b A and Y = B X + a X then read A and X where they are,
// instead of copying them into B and Y first (two copies per step and
// shape).  A shape's three plans (layouts and the heuristic's first
// algorithm, split-K reduced in the workspace rather than in place, so
// that the bits are the same every run) are made on its first step.
// Where cuBLASLt offers no algorithm, cuBLAS with the copies does it.
//
// A tall matrix (rows > cols) is Newton-Schulz'd as X = u^T.  With
// cuBLASLt, X stays where prep puts u, untransposed: row-major u is
// column-major X (m x k, ld m), and the plan's products read it that way
// (A = X X^T as gemm(N, T); Y = B X + a X as gemm(N, N)), so prep and the
// update pass over u in order instead of writing and reading it a column
// apart.
//
// A set may hold a shape and its transpose (muon.h's n_tr: gate/up's
// 1344 x 512 and down's 512 x 1344 in ts), one batch of the same m x k X.
// Its layout is the one most of its matrices have untransposed (column-
// major X for tall ones, X^T for wide ones, with cuBLASLt; X^T always
// without); the others are flipped by prep and the update through 32 x 32
// tiles in shared memory, so that both passes stay coalesced.
//
// Row-major X [m, k] is column-major X^T (k x m, ld k):
//   A = X X^T      -> A (m x m) = (X^T)^T X^T:      gemm(T, N, m, m, k)
//   B = c A A + bB -> B = A first, then             gemm(N, N, m, m, m)
//   Y = B X + a Y  -> Y^T = X^T B^T = X^T B (B symmetric), Y = X first:
//                                                    gemm(N, N, k, m, m)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <math.h>

#include "gemm_ref.cuh"
#include "kernels/muon.h"
#include "ops_cuda.cuh"

using namespace ops;

enum { MUON_LANES = 8, MUON_LANES_DEFAULT = 4, LT_WORKSPACE = 8 << 20, MAX_PLANS = 16 };

struct muon_lane {
	cublasHandle_t h;
	cudaStream_t st;
	cudaEvent_t done;
	void *lt_ws;           /* cuBLASLt's workspace on this stream (LT_WORKSPACE) */
	int used;              /* since the last join */
};

// One product of a Newton-Schulz step: its description, the layouts of A,
// B and C (= D's), the algorithm.
struct lt_prod {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, c;
	cublasLtMatmulAlgo_t algo;
};

// A shape's three products (ok 0: cuBLASLt had no algorithm for one).
struct lt_plan {
	int m, k, tr, count, ok;
	lt_prod p[3];
};

struct muon_cuda {
	cublasHandle_t h;      /* on st, without lanes */
	cudaStream_t st;       /* the caller's */
	int n_lanes, next;
	cudaEvent_t fork;
	muon_lane lane[MUON_LANES];
	cublasLtHandle_t lt;   /* NULL: cuBLAS only */
	void *lt_ws;           /* the workspace on st */
	lt_plan plan[MAX_PLANS];
	int n_plans;
};

namespace {

// Blocks per matrix of the prep kernel: enough warps in flight for the
// largest shapes' passes over the fp32 gradient and momentum.
enum { NORM_BLOCKS = 128, RED_THREADS = 256, TILE = 32 };

// A set: count matrices, the first count - n_tr of rows x cols, the rest
// cols x rows; m x k their X; lay 1 when X is held column-major (a tall
// matrix's own layout), 0 when as row-major X (a wide one's).
struct dims {
	int rows, cols, m, k, tr, n_tr, lay;
	size_t n;
};

dims shape(int rows, int cols)
{
	dims d;
	d.rows = rows;
	d.cols = cols;
	d.tr = rows > cols;
	d.m = d.tr ? cols : rows;
	d.k = d.tr ? rows : cols;
	d.n = (size_t)rows * cols;
	d.n_tr = 0;
	d.lay = 0;
	return d;
}

// Matrix i of the set: r x c as stored (row-major), and whether X holds
// it transposed (flip).
struct mat {
	int r, c, flip, other;
};

__device__ __forceinline__ mat mat_of(const dims &d, int i)
{
	mat q;
	q.other = i >= (int)gridDim.y - d.n_tr;
	q.r = q.other ? d.cols : d.rows;
	q.c = q.other ? d.rows : d.cols;
	q.flip = (q.r > q.c) != d.lay;
	return q;
}

// The workspace: X, Y (count m x k each), A, B (count m x m), then the
// partial sums of squares (count x NORM_BLOCKS floats).
struct wsp {
	bf16 *x, *y, *a, *b;
	float *part;
};

size_t align(size_t b)
{
	return (b + 255) / 256 * 256;
}

wsp layout(void *ws, int count, const dims &d)
{
	wsp w;
	char *p = (char *)ws;
	size_t xb = align((size_t)count * d.m * d.k * sizeof(bf16));
	size_t ab = align((size_t)count * d.m * d.m * sizeof(bf16));
	w.x = (bf16 *)p;
	w.y = (bf16 *)(p + xb);
	w.a = (bf16 *)(p + 2 * xb);
	w.b = (bf16 *)(p + 2 * xb + ab);
	w.part = (float *)(p + 2 * xb + 2 * ab);
	return w;
}

__device__ __forceinline__ float lerp(float a, float b, float w)
{
	return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

// One element's momentum from its gradient g (b updated in place) and its
// bf16 update direction.
__device__ __forceinline__ bf16 prep_val(float g, float &b, float s, float w, float mu,
					 int nesterov)
{
	float gj = g * s;
	b = lerp(b, gj, w);
	return to_bf16(nesterov ? lerp(gj, b, mu) : b);
}

__device__ __forceinline__ bf16 prep_one(const float *g, float *buf, size_t k, float s, float w,
					 float mu, int nesterov)
{
	float bj = buf[k];
	bf16 u = prep_val(g[k], bj, s, w, mu, nesterov);
	buf[k] = bj;
	return u;
}

// A flipped matrix's walk over r x c in TILE x TILE tiles: this thread's
// column in a tile (tx), its first row (ty) and row step (dy); tiles of
// the matrix (nt) and across a row of them (tc).  Tile t starts at row
// t / tc * TILE, column t % tc * TILE.
struct tiles {
	int tx, ty, dy, tc, nt;
};

__device__ __forceinline__ tiles tiles_of(int r, int c)
{
	tiles w;
	w.tx = threadIdx.x % TILE;
	w.ty = threadIdx.x / TILE;
	w.dy = blockDim.x / TILE;
	w.tc = (c + TILE - 1) / TILE;
	w.nt = w.tc * ((r + TILE - 1) / TILE);
	return w;
}

// Four bf16 as one 8-byte store or load (the set's X: matrices of n, n a
// multiple of 4, so 8-byte aligned).
__device__ __forceinline__ void store4(bf16 *x, bf16 a, bf16 b, bf16 c, bf16 d)
{
	__nv_bfloat162 lo = __halves2bfloat162(a, b), hi = __halves2bfloat162(c, d);
	uint2 v;
	v.x = *(unsigned *)&lo;
	v.y = *(unsigned *)&hi;
	*(uint2 *)x = v;
}

__device__ __forceinline__ float4 load4(const bf16 *x)
{
	uint2 v = *(const uint2 *)x;
	__nv_bfloat162 lo = *(__nv_bfloat162 *)&v.x, hi = *(__nv_bfloat162 *)&v.y;
	return make_float4(__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi));
}

__global__ void prep_kernel(bf16 *x, float *part, const float *g, float *buf, const size_t *offs,
			    dims d, float mu, int nesterov, const float *grad_scale, const double *dev)
{
	__shared__ double sh[RED_THREADS];
	__shared__ float tile[TILE][TILE + 1];
	int i = blockIdx.y;
	mat q = mat_of(d, i);
	size_t o = offs[i];
	if (dev)
		mu = (float)dev[MUON_DEV_MOMENTUM];
	float s = *grad_scale, w = __fsub_rn(1.0f, mu);
	bf16 *xi = x + (size_t)i * d.n;
	double ss = 0;
	if (q.flip) { // tiles: read along u's rows, write along X's
		tiles tw = tiles_of(q.r, q.c);
		for (int t = blockIdx.x; t < tw.nt; t += gridDim.x) {
			int r0 = t / tw.tc * TILE, c0 = t % tw.tc * TILE, tx = tw.tx;
			for (int y = tw.ty; y < TILE; y += tw.dy) {
				int row = r0 + y, col = c0 + tx;
				float uf = 0;
				if (row < q.r && col < q.c) {
					bf16 u = prep_one(g, buf, o + (size_t)row * q.c + col, s, w, mu,
							  nesterov);
					uf = __bfloat162float(u);
					ss += (double)uf * uf;
				}
				tile[y][tx] = uf;
			}
			__syncthreads();
			for (int y = tw.ty; y < TILE; y += tw.dy) {
				int row = r0 + tx, col = c0 + y;
				if (row < q.r && col < q.c)
					xi[(size_t)col * q.r + row] = to_bf16(tile[tx][y]);
			}
			__syncthreads();
		}
	} else if (o % 4 == 0 && d.n % 4 == 0) { // four elements a thread, 16-byte accesses
		const float4 *g4 = (const float4 *)(g + o);
		float4 *b4 = (float4 *)(buf + o);
		for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < d.n / 4;
		     j += (size_t)gridDim.x * blockDim.x) {
			float4 gv = g4[j], bv = b4[j];
			float ge[4] = { gv.x, gv.y, gv.z, gv.w }, be[4] = { bv.x, bv.y, bv.z, bv.w };
			bf16 u[4];
			for (int e = 0; e < 4; e++) {
				u[e] = prep_val(ge[e], be[e], s, w, mu, nesterov);
				float uf = __bfloat162float(u[e]);
				ss += (double)uf * uf;
			}
			b4[j] = make_float4(be[0], be[1], be[2], be[3]);
			store4(xi + 4 * j, u[0], u[1], u[2], u[3]);
		}
	} else {
		for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < d.n;
		     j += (size_t)gridDim.x * blockDim.x) {
			bf16 u = prep_one(g, buf, o + j, s, w, mu, nesterov);
			xi[j] = u;
			float uf = __bfloat162float(u);
			ss += (double)uf * uf;
		}
	}
	ss = block_sum(ss, sh);
	if (threadIdx.x == 0)
		part[i * NORM_BLOCKS + blockIdx.x] = (float)ss;
}

// X / max(|X|_F, eps), the norm from prep's partial sums (a warp's, in a
// fixed order), eight elements a thread where n allows.
__global__ void scale_kernel(bf16 *x, const float *part, size_t n)
{
	__shared__ float norm;
	int i = blockIdx.y;
	if (threadIdx.x < WARP) {
		float ss = 0;
		for (int b = threadIdx.x; b < NORM_BLOCKS; b += WARP)
			ss += part[i * NORM_BLOCKS + b];
		ss = warp_sum(ss);
		if (threadIdx.x == 0)
			norm = fmaxf(__bfloat162float(to_bf16(sqrtf(ss))), MUON_EPS);
	}
	__syncthreads();
	float nv = norm;
	bf16 *xi = x + (size_t)i * n;
	size_t j0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, dj = (size_t)gridDim.x * blockDim.x;
	if (n % 8 == 0)
		for (size_t j = j0; j < n / 8; j += dj) {
			uint4 v = ((uint4 *)xi)[j];
			__nv_bfloat162 *h2 = (__nv_bfloat162 *)&v;
			for (int e = 0; e < 4; e++)
				h2[e] = __halves2bfloat162(to_bf16(__low2float(h2[e]) / nv),
							   to_bf16(__high2float(h2[e]) / nv));
			((uint4 *)xi)[j] = v;
		}
	else
		for (size_t j = j0; j < n; j += dj)
			xi[j] = to_bf16(__bfloat162float(xi[j]) / nv);
}

// A decayed, stepped master weight.
__device__ __forceinline__ float stepped(float p, float decay, float step, float u)
{
	return p * decay - step * u;
}

// One element's decayed, stepped master weight and its bf16 copy.
__device__ __forceinline__ void apply_one(float *p, bf16 *p_act, size_t k, float decay, float step,
					  float u)
{
	float pj = stepped(p[k], decay, step, u);
	p[k] = pj;
	if (p_act)
		p_act[k] = to_bf16(pj);
}

// decay and step from dev (muon.h) when given, as the host computes them
// (no fused multiply-adds), for the same bits; step and adjust are a
// rows x cols matrix's, step_tr and adjust_tr a cols x rows one's.
__global__ void apply_kernel(float *p, bf16 *p_act, const bf16 *x, const size_t *offs, dims d,
			     float decay, float step, float step_tr, const double *dev, float wd,
			     double adjust, double adjust_tr)
{
	__shared__ float tile[TILE][TILE + 1];
	int i = blockIdx.y;
	mat q = mat_of(d, i);
	if (q.other) {
		step = step_tr;
		adjust = adjust_tr;
	}
	if (dev) {
		float lr = (float)dev[MUON_DEV_LR];
		decay = __fsub_rn(1.0f, __fmul_rn(lr, wd));
		step = (float)__dmul_rn((double)lr, adjust);
	}
	size_t o = offs[i];
	const bf16 *xi = x + (size_t)i * d.n;
	if (q.flip) { // tiles: read along X's rows, write along the matrix's
		tiles tw = tiles_of(q.r, q.c);
		for (int t = blockIdx.x; t < tw.nt; t += gridDim.x) {
			int r0 = t / tw.tc * TILE, c0 = t % tw.tc * TILE, tx = tw.tx;
			for (int y = tw.ty; y < TILE; y += tw.dy) {
				int row = r0 + tx, col = c0 + y;
				tile[tx][y] = row < q.r && col < q.c
						      ? __bfloat162float(xi[(size_t)col * q.r + row])
						      : 0.0f;
			}
			__syncthreads();
			for (int y = tw.ty; y < TILE; y += tw.dy) {
				int row = r0 + y, col = c0 + tx;
				if (row < q.r && col < q.c)
					apply_one(p, p_act, o + (size_t)row * q.c + col, decay, step,
						  tile[y][tx]);
			}
			__syncthreads();
		}
	} else if (o % 4 == 0 && d.n % 4 == 0) { // four elements a thread, 16-byte accesses
		float4 *p4 = (float4 *)(p + o);
		for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < d.n / 4;
		     j += (size_t)gridDim.x * blockDim.x) {
			float4 pv = p4[j], uv = load4(xi + 4 * j);
			pv.x = stepped(pv.x, decay, step, uv.x);
			pv.y = stepped(pv.y, decay, step, uv.y);
			pv.z = stepped(pv.z, decay, step, uv.z);
			pv.w = stepped(pv.w, decay, step, uv.w);
			p4[j] = pv;
			if (p_act)
				store4(p_act + o + 4 * j, to_bf16(pv.x), to_bf16(pv.y), to_bf16(pv.z),
				       to_bf16(pv.w));
		}
	} else {
		for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < d.n;
		     j += (size_t)gridDim.x * blockDim.x)
			apply_one(p, p_act, o + j, decay, step, __bfloat162float(xi[j]));
	}
}

// C = alpha op(A) op(B) + beta C for each of count matrices, bf16, fp32
// accumulation.
int gemm(cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, float alpha, const bf16 *a,
	 int lda, long long sa, const bf16 *b, int ldb, long long sb, float beta, bf16 *c, int ldc,
	 long long sc, int count)
{
	if (gemm_ref_on()) { // the racecheck runs' stand-in (gemm_ref.cuh)
		cudaStream_t st;
		if (cublasGetStream(h, &st) != CUBLAS_STATUS_SUCCESS)
			return -1;
		return gemm_ref(ta == CUBLAS_OP_T, 0, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, c,
				ldc, sc, count, 0, st);
	}
	cublasStatus_t r = cublasGemmStridedBatchedEx(
		h, ta, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, lda, sa, b, CUDA_R_16BF, ldb,
		sb, &beta, c, CUDA_R_16BF, ldc, sc, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return r == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

void prod_free(lt_prod *q)
{
	if (q->a)
		cublasLtMatrixLayoutDestroy(q->a);
	if (q->b)
		cublasLtMatrixLayoutDestroy(q->b);
	if (q->c)
		cublasLtMatrixLayoutDestroy(q->c);
	if (q->op)
		cublasLtMatmulDescDestroy(q->op);
}

// count column-major bf16 matrices of rows x cols, one after another.
int lt_layout(cublasLtMatrixLayout_t *l, int rows, int cols, int count)
{
	long long stride = (long long)rows * cols;
	return cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, rows, cols, rows) != CUBLAS_STATUS_SUCCESS ||
	       cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
						sizeof count) != CUBLAS_STATUS_SUCCESS ||
	       cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
						&stride, sizeof stride) != CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta C (column-major), A stored ar x ac and
// transposed when ta, B br x bc and transposed when tb; 0, or -1 without
// an algorithm.
int prod_make(cublasLtHandle_t lt, lt_prod *q, int ta, int ar, int ac, int tb, int br, int bc,
	      int count)
{
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasLtMatmulPreference_t pref = nullptr;
	size_t wsb = LT_WORKSPACE;
	uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
			   CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
	int rows = ta ? ac : ar, cols = tb ? br : bc;
	if (cublasLtMatmulDescCreate(&q->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatmulDescSetAttribute(q->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) !=
		    CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatmulDescSetAttribute(q->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) !=
		    CUBLAS_STATUS_SUCCESS ||
	    lt_layout(&q->a, ar, ac, count) || lt_layout(&q->b, br, bc, count) ||
	    lt_layout(&q->c, rows, cols, count) ||
	    cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
		return -1;
	cublasLtMatmulHeuristicResult_t res;
	int got = 0;
	cublasStatus_t s =
		cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
						     sizeof wsb);
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatmulPreferenceSetAttribute(
			pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes);
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatmulAlgoGetHeuristic(lt, q->op, q->a, q->b, q->c, q->c, pref, 1, &res,
						   &got);
	cublasLtMatmulPreferenceDestroy(pref);
	if (s != CUBLAS_STATUS_SUCCESS || got < 1)
		return -1;
	q->algo = res.algo;
	return 0;
}

// The plan of count m x k matrices X, held as column-major X^T (k x m)
// or, when tr, as column-major X (m x k): made on first use; NULL where
// there is none (no cuBLASLt, no room, no algorithm).
lt_plan *plan_for(muon_cuda *mc, int m, int k, int tr, int count)
{
	if (!mc->lt)
		return NULL;
	for (int i = 0; i < mc->n_plans; i++) {
		lt_plan *p = &mc->plan[i];
		if (p->m == m && p->k == k && p->tr == tr && p->count == count)
			return p->ok ? p : NULL;
	}
	if (mc->n_plans == MAX_PLANS)
		return NULL;
	lt_plan *p = &mc->plan[mc->n_plans++];
	p->m = m;
	p->k = k;
	p->tr = tr;
	p->count = count;
	if (tr) // A = X X^T; B = c A A + b A; Y = B X + a X
		p->ok = !prod_make(mc->lt, &p->p[0], 0, m, k, 1, m, k, count) &&
			!prod_make(mc->lt, &p->p[1], 0, m, m, 0, m, m, count) &&
			!prod_make(mc->lt, &p->p[2], 0, m, m, 0, m, k, count);
	else // A = X X^T = (X^T)^T X^T; B = c A A + b A; Y^T = X^T B + a X^T
		p->ok = !prod_make(mc->lt, &p->p[0], 1, k, m, 0, k, m, count) &&
			!prod_make(mc->lt, &p->p[1], 0, m, m, 0, m, m, count) &&
			!prod_make(mc->lt, &p->p[2], 0, k, m, 0, m, m, count);
	return p->ok ? p : NULL;
}

int lt_run(muon_cuda *mc, const lt_prod *q, float alpha, const bf16 *a, const bf16 *b, float beta,
	   const bf16 *c, bf16 *d, void *ws, cudaStream_t st)
{
	return cublasLtMatmul(mc->lt, q->op, &alpha, a, q->a, b, q->b, &beta, c, q->c, d, q->c,
			      &q->algo, ws, LT_WORKSPACE, st) == CUBLAS_STATUS_SUCCESS
		       ? 0
		       : -1;
}

}  // namespace

extern "C" muon_cuda *muon_cuda_new(void *stream)
{
	muon_cuda *mc = (muon_cuda *)calloc(1, sizeof *mc);
	if (!mc)
		return NULL;
	mc->st = (cudaStream_t)stream;
	if (cublasCreate(&mc->h) != CUBLAS_STATUS_SUCCESS) {
		free(mc);
		return NULL;
	}
	if (cublasSetStream(mc->h, mc->st) != CUBLAS_STATUS_SUCCESS) {
		muon_cuda_free(mc);
		return NULL;
	}
	// cuBLASLt and its workspaces: without them, cuBLAS with copies
	// (and not under LMPIPE_MATMUL_REF, whose stand-in takes the cuBLAS path)
	if (gemm_ref_on() || cublasLtCreate(&mc->lt) != CUBLAS_STATUS_SUCCESS)
		mc->lt = NULL;
	if (mc->lt && cudaMalloc(&mc->lt_ws, LT_WORKSPACE) != cudaSuccess) {
		cudaGetLastError();
		cublasLtDestroy(mc->lt);
		mc->lt = NULL;
		mc->lt_ws = NULL;
	}
	const char *v = getenv("LMPIPE_MUON_LANES");
	int want = v && *v ? atoi(v) : MUON_LANES_DEFAULT;
	want = want < 0 ? 0 : want > MUON_LANES ? MUON_LANES : want;
	if (want > 0 && cudaEventCreateWithFlags(&mc->fork, cudaEventDisableTiming) != cudaSuccess) {
		muon_cuda_free(mc);
		return NULL;
	}
	for (int i = 0; i < want; i++) {
		muon_lane *l = &mc->lane[i];
		if (cudaStreamCreateWithFlags(&l->st, cudaStreamNonBlocking) != cudaSuccess ||
		    cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming) != cudaSuccess ||
		    cublasCreate(&l->h) != CUBLAS_STATUS_SUCCESS ||
		    cublasSetStream(l->h, l->st) != CUBLAS_STATUS_SUCCESS ||
		    (mc->lt && cudaMalloc(&l->lt_ws, LT_WORKSPACE) != cudaSuccess)) {
			mc->n_lanes = i + 1;
			muon_cuda_free(mc);
			return NULL;
		}
		mc->n_lanes = i + 1;
	}
	return mc;
}

extern "C" void muon_cuda_free(muon_cuda *mc)
{
	if (!mc)
		return;
	cublasDestroy(mc->h);
	for (int i = 0; i < mc->n_lanes; i++) {
		muon_lane *l = &mc->lane[i];
		if (l->h)
			cublasDestroy(l->h);
		if (l->done)
			cudaEventDestroy(l->done);
		if (l->st)
			cudaStreamDestroy(l->st);
		if (l->lt_ws)
			cudaFree(l->lt_ws);
	}
	if (mc->fork)
		cudaEventDestroy(mc->fork);
	for (int i = 0; i < mc->n_plans; i++)
		for (int j = 0; j < 3; j++)
			prod_free(&mc->plan[i].p[j]);
	if (mc->lt_ws)
		cudaFree(mc->lt_ws);
	if (mc->lt)
		cublasLtDestroy(mc->lt);
	free(mc);
}

extern "C" int muon_join_cuda(muon_cuda *mc)
{
	int rc = 0;
	for (int i = 0; mc && i < mc->n_lanes; i++) {
		muon_lane *l = &mc->lane[i];
		if (!l->used)
			continue;
		l->used = 0;
		rc |= cudaStreamWaitEvent(mc->st, l->done, 0) != cudaSuccess;
	}
	if (mc)
		mc->next = 0;
	return rc ? -1 : 0;
}

extern "C" size_t muon_workspace_cuda(int count, int rows, int cols)
{
	dims d = shape(rows, cols);
	return 2 * align((size_t)count * d.m * d.k * sizeof(bf16)) +
	       2 * align((size_t)count * d.m * d.m * sizeof(bf16)) +
	       (size_t)count * NORM_BLOCKS * sizeof(float);
}

extern "C" int muon_step_cuda(muon_cuda *mc, float *p, const float *g, float *buf, uint16_t *p_act,
			      const size_t *offs, int count, int n_tr, int rows, int cols,
			      const muon_hparams *h, const float *grad_scale, void *ws)
{
	if (count < 1)
		return 0;
	if (n_tr < 0 || n_tr > count || (n_tr && rows == cols))
		return -1;
	dims d = shape(rows, cols);
	d.n_tr = n_tr;
	wsp w = layout(ws, count, d);
	cudaStream_t st = mc->st;
	cublasHandle_t hb = mc->h;
	void *lt_ws = mc->lt_ws;
	muon_lane *lane = NULL;
	if (mc->n_lanes > 0) {
		lane = &mc->lane[mc->next];
		mc->next = (mc->next + 1) % mc->n_lanes;
		if (cudaEventRecord(mc->fork, mc->st) != cudaSuccess ||
		    cudaStreamWaitEvent(lane->st, mc->fork, 0) != cudaSuccess)
			return -1;
		lane->used = 1;
		st = lane->st;
		hb = lane->h;
		lt_ws = lane->lt_ws;
	}
	// X's layout: that of most of the matrices (ties: the tall ones'), with
	// cuBLASLt; cuBLAS's products need X^T
	int tall = d.tr ? count - n_tr : n_tr;
	const lt_plan *pl = plan_for(mc, d.m, d.k, 2 * tall >= count, count);
	d.lay = pl ? pl->tr : 0;
	unsigned per = grid_for(d.n), cap = GRID_MAX / count ? GRID_MAX / count : 1;
	dim3 norm_grid(NORM_BLOCKS, count), grid(per < cap ? per : cap, count);
	prep_kernel<<<norm_grid, RED_THREADS, 0, st>>>(w.x, w.part, g, buf, offs, d, h->momentum,
							h->nesterov, grad_scale, h->dev);
	scale_kernel<<<grid, BLOCK, 0, st>>>(w.x, w.part, d.n);
	if (launched())
		return -1;
	long long mk = (long long)d.m * d.k, mm = (long long)d.m * d.m;
	bf16 *x = w.x, *y = w.y;
	for (int s = 0; s < h->ns_steps && pl; s++) {
		if (lt_run(mc, &pl->p[0], 1.0f, x, x, 0.0f, w.a, w.a, lt_ws, st) ||
		    lt_run(mc, &pl->p[1], MUON_NS_C, w.a, w.a, MUON_NS_B, w.a, w.b, lt_ws, st) ||
		    lt_run(mc, &pl->p[2], 1.0f, pl->tr ? w.b : x, pl->tr ? x : w.b, MUON_NS_A, x, y,
			   lt_ws, st))
			return -1;
		bf16 *t = x;
		x = y;
		y = t;
	}
	for (int s = 0; s < h->ns_steps && !pl; s++) {
		if (gemm(hb, CUBLAS_OP_T, d.m, d.m, d.k, 1.0f, x, d.k, mk, x, d.k, mk, 0.0f, w.a, d.m, mm,
			 count) ||
		    cudaMemcpyAsync(w.b, w.a, (size_t)count * mm * sizeof(bf16),
				    cudaMemcpyDeviceToDevice, st) != cudaSuccess ||
		    gemm(hb, CUBLAS_OP_N, d.m, d.m, d.m, MUON_NS_C, w.a, d.m, mm, w.a, d.m, mm, MUON_NS_B,
			 w.b, d.m, mm, count) ||
		    cudaMemcpyAsync(y, x, (size_t)count * mk * sizeof(bf16), cudaMemcpyDeviceToDevice,
				    st) != cudaSuccess ||
		    gemm(hb, CUBLAS_OP_N, d.k, d.m, d.m, 1.0f, x, d.k, mk, w.b, d.m, mm, MUON_NS_A, y, d.k,
			 mk, count))
			return -1;
		bf16 *t = x;
		x = y;
		y = t;
	}
	double adjust = muon_adjust(h->scale, rows, cols), adjust_tr = muon_adjust(h->scale, cols, rows);
	float decay = 1.0f - h->lr * h->weight_decay;
	float step = (float)(h->lr * adjust), step_tr = (float)(h->lr * adjust_tr);
	apply_kernel<<<grid, BLOCK, 0, st>>>(p, (bf16 *)p_act, x, offs, d, decay, step, step_tr,
					     h->dev, h->weight_decay, adjust, adjust_tr);
	if (launched())
		return -1;
	return lane && cudaEventRecord(lane->done, lane->st) != cudaSuccess ? -1 : 0;
}
