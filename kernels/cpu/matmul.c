/* matmul.c: CPU twin of the bias-free linear layer (see matmul.h): CBLAS
 * sgemm, row-major, split into blocks over OpenMP threads (one
 * single-threaded sgemm per thread): the forward pass and dinp by rows of
 * the batch, dW by rows of W or by columns, whichever is longer.  Each
 * element is computed by one sgemm call over the whole reduction (no
 * partial sums to add); the BLAS's edge kernels may still round blocks of
 * other sizes differently, so bit-exact results need the same thread
 * count. */
#include "kernels/matmul.h"

#include <cblas.h>
#include <omp.h>

#include "blas_single.h"

enum { ALIGN = 16 };
static const double PARALLEL_MIN_FLOP = 1 << 20;

/* Block t of nt over n items, in multiples of ALIGN. */
static void block(int n, int t, int nt, int *lo, int *hi)
{
	int per = ((n + nt - 1) / nt + ALIGN - 1) / ALIGN * ALIGN;
	*lo = t * per < n ? t * per : n;
	*hi = *lo + per < n ? *lo + per : n;
}

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
		    int N, int IN, int OUT, int accumulate)
{
	blas_single();
#pragma omp parallel if ((double)N * IN * OUT > PARALLEL_MIN_FLOP)
	{
		int lo, hi;
		block(N, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
		if (hi > lo)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, hi - lo, OUT, IN,
				    1.0f, inp + (size_t)lo * IN, IN, w, IN, accumulate ? 1.0f : 0.0f,
				    out + (size_t)lo * OUT, OUT);
	}
}

void matmul_bwd_cpu(float *dinp, float *dw, const float *dout, const float *inp,
		    const float *w, int N, int IN, int OUT, int accumulate)
{
	blas_single();
#pragma omp parallel if ((double)N * IN * OUT > PARALLEL_MIN_FLOP)
	{
		int t = omp_get_thread_num(), nt = omp_get_num_threads(), lo, hi;
		if (dinp) {
			block(N, t, nt, &lo, &hi);
			if (hi > lo)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, hi - lo, IN, OUT,
					    1.0f, dout + (size_t)lo * OUT, OUT, w, IN,
					    accumulate ? 1.0f : 0.0f, dinp + (size_t)lo * IN, IN);
		}
		if (!dw) {
			/* dinp alone */
		} else if (OUT >= IN) {
			block(OUT, t, nt, &lo, &hi);
			if (hi > lo)
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, IN, N,
					    1.0f, dout + lo, OUT, inp, IN, 1.0f, dw + (size_t)lo * IN, IN);
		} else {
			block(IN, t, nt, &lo, &hi);
			if (hi > lo)
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, hi - lo, N,
					    1.0f, dout, OUT, inp + lo, IN, 1.0f, dw + lo, IN);
		}
	}
}
