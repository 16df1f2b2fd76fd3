/* matmul.c: CPU twin of the bias-free linear layer, on CBLAS sgemm (see
 * matmul.h).  Row-major throughout. */
#include "matmul.h"

#include <cblas.h>

void matmul_fwd_cpu(float *out, const float *inp, const float *w,
		    int N, int IN, int OUT, int accumulate)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OUT, IN,
		    1.0f, inp, IN, w, IN, accumulate ? 1.0f : 0.0f, out, OUT);
}

void matmul_bwd_cpu(float *dinp, float *dw, const float *dout, const float *inp,
		    const float *w, int N, int IN, int OUT, int accumulate)
{
	if (dinp)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IN, OUT,
			    1.0f, dout, OUT, w, IN, accumulate ? 1.0f : 0.0f, dinp, IN);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, N,
		    1.0f, dout, OUT, inp, IN, 1.0f, dw, IN);
}
