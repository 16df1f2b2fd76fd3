// gemm_ref.cuh: a plain CUDA matrix product that stands in for cuBLAS and
// cuBLASLt when LMPIPE_MATMUL_REF=1 is set (gemm_ref_on), so that
// compute-sanitizer's racecheck sees only lmpipe's own kernels: it reports
// shared-memory hazards inside cuBLASLt's Hopper kernels (nvjet_sm90_*),
// which lmpipe can neither change nor check (tests/gpu/sanitize.sh sets it
// for racecheck; memcheck runs the real products).  One thread an output,
// no shared memory, fp32 accumulation in a fixed order: slow, simple and
// the same bits run to run.
#ifndef LMPIPE_GEMM_REF_CUH
#define LMPIPE_GEMM_REF_CUH

#include <cuda_runtime.h>

namespace ops {

// 1 when LMPIPE_MATMUL_REF is set to anything but 0 (read once).
int gemm_ref_on();

// For each of count products (operands strided by sa, sb, sc elements),
// column-major as cuBLAS has them: D = alpha op(A) op(B) + beta C, op(A)
// m x k (A stored k x m when ta), op(B) k x n (B stored n x k when tb);
// A and B bf16; C and D fp32 when f32, else bf16; C is not read when beta
// is 0, and may be D.  0, or -1 if the launch failed.
int gemm_ref(int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda,
	     long long sa, const void *B, int ldb, long long sb, float beta, const void *C,
	     void *D, int ldc, long long sc, int count, int f32, cudaStream_t st);

}  // namespace ops

#endif
