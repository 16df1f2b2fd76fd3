// gemm_ref.cu: the plain matrix product of gemm_ref.cuh (the cuBLAS stand-in
// for racecheck runs).
#include "gemm_ref.cuh"
#include "ops_cuda.cuh"

namespace ops {

namespace {

enum { TX = 32, TY = 8, GRID_Y_MAX = 65535 };

__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(bf16 *p, float v) { *p = to_bf16(v); }

template <typename T>
__global__ void gemm_ref_kernel(int ta, int tb, int m, int n, int k, float alpha, const bf16 *A,
				int lda, long long sa, const bf16 *B, int ldb, long long sb,
				float beta, const T *C, T *D, int ldc, long long sc)
{
	long long z = blockIdx.z;
	A += z * sa;
	B += z * sb;
	D += z * sc;
	if (C)
		C += z * sc;
	int i = blockIdx.x * TX + threadIdx.x;
	if (i >= m)
		return;
	for (int j = blockIdx.y * TY + threadIdx.y; j < n; j += gridDim.y * TY) {
		float acc = 0.0f;
		for (int l = 0; l < k; l++) {
			float a = ld(ta ? A + l + (size_t)i * lda : A + i + (size_t)l * lda);
			float b = ld(tb ? B + j + (size_t)l * ldb : B + l + (size_t)j * ldb);
			acc = fmaf(a, b, acc);
		}
		size_t o = i + (size_t)j * ldc;
		float v = alpha * acc;
		if (beta != 0.0f)
			v += beta * ld(C + o);
		st(D + o, v);
	}
}

}  // namespace

int gemm_ref_on()
{
	static int on = -1;
	if (on < 0) {
		const char *v = getenv("LMPIPE_MATMUL_REF");
		on = v && *v && *v != '0';
	}
	return on;
}

int gemm_ref(int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda,
	     long long sa, const void *B, int ldb, long long sb, float beta, const void *C,
	     void *D, int ldc, long long sc, int count, int f32, cudaStream_t s)
{
	if (m < 1 || n < 1 || count < 1)
		return 0;
	unsigned gy = (unsigned)((n + TY - 1) / TY);
	dim3 grid((unsigned)((m + TX - 1) / TX), gy < GRID_Y_MAX ? gy : GRID_Y_MAX, (unsigned)count);
	dim3 block(TX, TY);
	const void *c = beta != 0.0f ? C : nullptr;
	if (f32)
		gemm_ref_kernel<float><<<grid, block, 0, s>>>(
			ta, tb, m, n, k, alpha, (const bf16 *)A, lda, sa, (const bf16 *)B, ldb, sb,
			beta, (const float *)c, (float *)D, ldc, sc);
	else
		gemm_ref_kernel<bf16><<<grid, block, 0, s>>>(
			ta, tb, m, n, k, alpha, (const bf16 *)A, lda, sa, (const bf16 *)B, ldb, sb,
			beta, (const bf16 *)c, (bf16 *)D, ldc, sc);
	return launched();
}

}  // namespace ops
